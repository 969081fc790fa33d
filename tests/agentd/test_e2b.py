#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentix-e2b, the E2B gateway, in front of a real agentd on a private bus: its control API
and sandbox traffic as E2B's SDK (tests/e2b, the unmodified npm package) and plain HTTP use
them. Templates are pools (pools.d/base.pool); keys name users (alice and bob in the agentix
group, carol outside it), and a sandbox made with a key is that user's on agentd.

Needs what agentd_env.py needs, AGENTIX_E2B, and a running dockerd."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, NAME, SANDBOX, USERS, Agentd, bundle, busctl_as,  # noqa: E402
                        cleanup, docker, ensure_users, managed_containers, own_containers, python_data_bundle,
                        remove_python_data_carriers, remove_users, runtimes)

HERE = os.path.dirname(os.path.abspath(__file__))
GATEWAY = os.environ["AGENTIX_E2B"]
E2B_DIR = os.path.join(HERE, "..", "e2b")
STATE = {}
DOMAIN = "e2b.test"
E2B_BASE = "agentix-test/e2b-base:1"  # tests/bundle/make-task-images.sh e2b


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_key(user):
    r = subprocess.run([GATEWAY, f"--make-key={user}"], capture_output=True, text=True, check=True)
    key, name = r.stdout.split()
    assert name == user and key.startswith("e2b_") and len(key) == 44, r.stdout
    return key


def setup():
    if STATE:
        return STATE
    uids = ensure_users()
    a = Agentd("e2b", "[Sandboxes]\nMaxSandboxes=40\nDeleteOnStop=yes\n")
    os.makedirs(os.path.join(a.dir, "pools.d"))
    # E2B's base template: an image with E2B's account `user` beside root, whose requests are
    # for `user` unless they name another; its -root twin says DefaultUser=root.
    r = subprocess.run([os.path.join(HERE, "..", "bundle", "make-task-images.sh"), "e2b"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for rt in runtimes():
        suffix = "" if rt == "runc" else f"-{rt}"
        with open(os.path.join(a.dir, "pools.d", f"base{suffix}.pool"), "w") as f:
            f.write(f"[Pool]\nSize={1 if rt == 'runc' else 0}\nImage={E2B_BASE}\nBundle={bundle()}\nRuntime={rt}\n")
        with open(os.path.join(a.dir, "pools.d", f"base-root{suffix}.pool"), "w") as f:
            f.write(f"[Pool]\nSize=0\nImage={E2B_BASE}\nBundle={bundle()}\nRuntime={rt}\nDefaultUser=root\n")
    # E2B's code interpreter template, under each runtime: no warm members (Size=0), every
    # create is made cold from the pool's file.
    for rt in runtimes():
        name = "code-interpreter-v1" if rt == "runc" else f"code-interpreter-{rt}"
        with open(os.path.join(a.dir, "pools.d", f"{name}.pool"), "w") as f:
            f.write(f"[Pool]\nSize=0\nImage={BUSYBOX}\nBundle={python_data_bundle()}\nRuntime={rt}\n")
    a.manager().Reload()
    keys = {who: make_key(name) for who, name in USERS.items()}
    keys_file = os.path.join(a.dir, "e2b-keys")
    with open(keys_file, "w") as f:
        f.write("# the test's keys\n\n" + "".join(f"{keys[w]} {USERS[w]}\n" for w in USERS))
    os.chmod(keys_file, 0o600)
    port = free_port()
    log = open(os.path.join(a.dir, "agentix-e2b.log"), "ab")
    gw = subprocess.Popen([GATEWAY, f"--listen=127.0.0.1:{port}", f"--keys={keys_file}", f"--domain={DOMAIN}"],
                          env=a.env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http("GET", url + "/health")[0] == 200 or gw.poll() is not None, 10, what="agentix-e2b")
    assert gw.poll() is None, open(os.path.join(a.dir, "agentix-e2b.log")).read()
    STATE.update(agentd=a, keys=keys, uids=uids, url=url, gateway=gw, keys_file=keys_file,
                 log=os.path.join(a.dir, "agentix-e2b.log"))
    wait_until(lambda: {str(n): int(r) for n, r, _ in a.manager().ListPools()}.get("base") == 1, 120, 0.2,
               what="the base pool to fill")
    return STATE


def http(method, url, body=None, key=None, headers=None, raw=None, timeout=150):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("X-API-KEY", key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
            if "json" not in r.headers.get("Content-Type", ""):
                return r.status, text, dict(r.headers)
            return r.status, json.loads(text) if text else None, dict(r.headers)
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text), dict(e.headers)
        except ValueError:
            return e.code, text, dict(e.headers)
    except (ConnectionError, urllib.error.URLError, TimeoutError, socket.timeout) as e:
        return 0, str(e), {}


def api(method, path, body=None, who="alice", **kw):
    s = setup()
    return http(method, s["url"] + path, body, key=s["keys"][who] if who else None, **kw)


def owner_of(sid):
    props = dbus.Interface(setup()["agentd"].conn.get_object(NAME, setup()["agentd"].manager().GetSandbox(sid)),
                           "org.freedesktop.DBus.Properties").GetAll(SANDBOX)
    return int(props["Owner"]), props


@test
def a_create_with_a_key_is_that_users_sandbox_and_shows_in_their_list():
    s = setup()
    status, body, _ = api("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 120,
                                                     "metadata": {"purpose": "test"}, "envVars": {"GREETING": "hi"}})
    assert status == 201, (status, body)
    sid = body["sandboxID"]
    assert body["templateID"] == "base" and body["envdVersion"] and len(body["envdAccessToken"]) == 64, body
    owner, props = owner_of(sid)
    assert owner == s["uids"]["alice"], (owner, s["uids"])
    assert props["Pool"] == "base", props  # from the warm pool
    # The gateway's own labels: made through it, ports public (E2B's default).
    assert dict(props["Labels"]) == {"purpose": "test", "agentix-e2b.template": "base",
                                     "agentix-e2b.public": "yes"}, props["Labels"]
    assert abs(int(props["ExpiresAt"]) / 1e6 - (time.time() + 120)) < 30
    # alice's agentixctl lists it, bob's does not.
    r = subprocess.run(["runuser", "-u", USERS["alice"], "--", "env", f"DBUS_SYSTEM_BUS_ADDRESS={s['agentd'].address}",
                        AGENTIXCTL, "list"], capture_output=True, text=True)
    assert r.returncode == 0 and sid in r.stdout, (r.stdout, r.stderr)
    r = busctl_as("bob", s["agentd"].address, "call", NAME, "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager",
                  "ListSandboxes")
    assert sid not in r.stdout, r.stdout
    # No E2B client ever sees the runtime's token.
    url, token = map(str, s["agentd"].manager().GetRuntimeAccess(sid))
    assert token not in json.dumps(body)
    STATE["sid"] = sid


@test
def get_list_timeout_pause_resume_and_kill_through_the_api():
    sid = STATE["sid"]
    status, info, _ = api("GET", f"/sandboxes/{sid}")
    assert status == 200 and info["sandboxID"] == sid and info["state"] == "running", (status, info)
    assert info["metadata"] == {"purpose": "test"} and info["templateID"] == "base", info
    status, listed, _ = api("GET", "/v2/sandboxes?metadata=" + urllib.parse.quote("purpose=test"))
    assert status == 200 and [x["sandboxID"] for x in listed] == [sid], listed
    status, listed, _ = api("GET", "/v2/sandboxes?metadata=" + urllib.parse.quote("purpose=other"))
    assert status == 200 and listed == [], listed
    status, _, _ = api("POST", f"/sandboxes/{sid}/timeout", {"timeout": 600})
    assert status == 204
    assert abs(int(owner_of(sid)[1]["ExpiresAt"]) / 1e6 - (time.time() + 600)) < 30
    status, _, _ = api("POST", f"/sandboxes/{sid}/pause")
    assert status == 204 and owner_of(sid)[1]["State"] == "paused"
    assert api("POST", f"/sandboxes/{sid}/pause")[0] == 409
    status, listed, _ = api("GET", "/v2/sandboxes?state=paused")
    assert [x["sandboxID"] for x in listed] == [sid], listed
    status, body, _ = api("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 300})
    assert status == 201 and body["sandboxID"] == sid, (status, body)  # 201: it was resumed
    assert owner_of(sid)[1]["State"] == "running"
    status, body, _ = api("POST", f"/v2/sandboxes/{sid}/connect", {})
    assert status == 200, (status, body)


@test
def a_second_key_sees_none_of_the_first_keys_sandboxes():
    sid = STATE["sid"]
    assert api("GET", f"/sandboxes/{sid}", who="bob")[0] == 404
    assert api("GET", "/v2/sandboxes", who="bob")[1] == []
    assert api("POST", f"/sandboxes/{sid}/timeout", {"timeout": 5}, who="bob")[0] == 404
    assert api("DELETE", f"/sandboxes/{sid}", who="bob")[0] == 404
    assert api("POST", f"/v2/sandboxes/{sid}/connect", {}, who="bob")[0] == 404
    assert owner_of(sid)[1]["State"] == "running"
    # Nor can bob's traffic reach it without its access token.
    status, body, _ = http("GET", setup()["url"] + "/health", headers={"E2b-Sandbox-Id": sid,
                                                                       "E2b-Sandbox-Port": "49983"})
    assert status == 401 and body["code"] == 401, (status, body)


@test
def pages_of_the_list_follow_x_next_token():
    made = [api("POST", "/v2/sandboxes", {"templateID": "base", "metadata": {"page": "yes"}})[1]["sandboxID"]
            for _ in range(3)]
    seen, token, pages = [], None, 0
    while True:
        q = "/v2/sandboxes?limit=2&metadata=" + urllib.parse.quote("page=yes") + (f"&nextToken={token}" if token else "")
        status, items, headers = api("GET", q)
        assert status == 200 and len(items) <= 2, (status, items)
        seen += [x["sandboxID"] for x in items]
        pages += 1
        token = {k.lower(): v for k, v in headers.items()}.get("x-next-token")
        if not token:
            break
    assert sorted(seen) == sorted(made) and pages == 2, (seen, made, pages)
    for sid in made:
        assert api("DELETE", f"/sandboxes/{sid}")[0] == 204
    assert api("DELETE", f"/sandboxes/{made[0]}")[0] == 404


@test
def bad_input_gets_e2bs_error_shape_and_the_gateway_keeps_serving():
    s = setup()
    before = managed_containers()
    cases = [
        (api("POST", "/v2/sandboxes", {"templateID": "nosuch"}), 404, "nosuch"),
        (api("POST", "/v2/sandboxes", {}), 400, "templateID"),
        (api("POST", "/v2/sandboxes", raw=b"{not json"), 400, "JSON"),
        (api("POST", "/v2/sandboxes", {"templateID": "base", "metadata": {"a": 1}}), 400, "metadata"),
        (api("POST", "/v2/sandboxes", {"templateID": "base", "timeout": "long"}), 400, "timeout"),
        (api("GET", "/v2/sandboxes", who=None), 401, "API key"),
        (http("GET", s["url"] + "/v2/sandboxes", key="e2b_" + "0" * 40), 401, "API key"),
        (api("GET", "/sandboxes/NotAnId"), 404, "not found"),
        (api("GET", "/sandboxes/b0000000000000000"), 404, "not found"),
        (api("GET", "/v2/sandboxes?limit=0"), 400, "limit"),
        (api("GET", "/v2/sandboxes?state=sleeping"), 400, "state"),
        (api("POST", "/v2/sandboxes", {"templateID": "base"}, who="carol"), 403, "agentix"),
        (http("GET", s["url"] + "/health", headers={"E2b-Sandbox-Id": "b000000000000000",
                                                   "E2b-Sandbox-Port": "49983", "X-Access-Token": "x" * 64}), 502,
         "not running"),
        (http("GET", s["url"] + "/health", headers={"E2b-Sandbox-Id": "../etc", "E2b-Sandbox-Port": "49983"}), 400,
         "E2b-Sandbox-Id"),
    ]
    for (status, body, _), want, word in cases:
        assert status == want and isinstance(body, dict) and body.get("code") == want and word in body["message"], \
            (want, status, body)
    # 100 MB of JSON: refused without being kept.
    status, body, _ = api("POST", "/v2/sandboxes", raw=b"[" + b"1," * (50 << 20) + b"1]")
    assert status in (413, 0), (status, body)  # 0: the gateway closed while the body still came
    assert api("GET", "/v2/sandboxes")[0] == 200
    assert s["gateway"].poll() is None
    assert managed_containers() - before == set() or all(
        c.startswith("agentix-") for c in managed_containers() - before)
    log = open(s["log"]).read()
    assert "refused" in log and "404" in log, log[-2000:]


@test
def unmodified_e2b_sdk_drives_sandboxes_through_the_gateway_under_each_runtime():
    for rt in runtimes():
        print(f"  runtime {rt}")
        suffix = "" if rt == "runc" else f"-{rt}"
        sdk("gateway/sdk.test.mjs", f"base{suffix}", root_template=f"base-root{suffix}")


@test
def a_port_of_a_sandbox_opens_by_host_name_as_getHost_gives_it():
    s = setup()
    status, made, _ = api("POST", "/v2/sandboxes", {"templateID": "base"})
    assert status == 201, made
    sid = made["sandboxID"]
    url, token = map(str, s["agentd"].manager().GetRuntimeAccess(sid))
    c = RpcClient(url, token)
    try:
        r = c.call("sandbox::exec", command="mkdir -p /tmp/site && echo 'hello from a web app' > /tmp/site/index.txt && "
                                            "cd /tmp/site && (python3 -m http.server 8080 >/dev/null 2>&1 &) && sleep 0.5")
        assert r["exit_code"] == 0, r
    finally:
        c.close()
    host = f"8080-{sid}.{DOMAIN}"
    wait_until(lambda: http("GET", s["url"] + "/index.txt", headers={"Host": host})[0] == 200, 20, 0.2,
               what="the web app through the gateway")
    status, body, _ = http("GET", s["url"] + "/index.txt", headers={"Host": host})
    assert body == b"hello from a web app\n", body
    # No token needed for a web app's port (E2B's public URLs), but envd's port still wants one.
    assert http("GET", s["url"] + "/health", headers={"Host": f"49983-{sid}.{DOMAIN}"})[0] == 401
    assert http("GET", s["url"] + "/", headers={"Host": f"8080-b000000000000000.{DOMAIN}"})[0] == 502
    assert http("GET", s["url"] + "/", headers={"Host": f"9999-{sid}.{DOMAIN}"})[0] == 502  # nothing listens
    assert api("DELETE", f"/sandboxes/{sid}")[0] == 204


def sdk(test_file, template, key="alice", root_template=None):
    s = setup()
    env = dict(os.environ, E2B_API_URL=s["url"], E2B_SANDBOX_URL=s["url"], E2B_API_KEY=s["keys"][key],
               E2B_OTHER_API_KEY=s["keys"]["bob"], AGENTIX_E2B_TEMPLATE=template)
    if root_template:
        env["AGENTIX_E2B_ROOT_TEMPLATE"] = root_template
    r = subprocess.run([os.path.join(E2B_DIR, "run.sh"), GATEWAY, test_file], env=env, capture_output=True,
                       text=True, timeout=900)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]


@test
def unmodified_code_interpreter_sdk_through_the_gateway_under_each_runtime():
    for rt in runtimes():
        print(f"  runtime {rt}")
        sdk("gateway/code-interpreter.test.mjs", "code-interpreter-v1" if rt == "runc" else f"code-interpreter-{rt}")


@test
def a_client_that_leaves_mid_create_leaves_no_sandbox():
    s = setup()
    before = set(str(x[0]) for x in s["agentd"].manager().ListSandboxes())
    # A template with no warm member: the create takes seconds, the client is gone long before
    # (from a warm pool the answer could be out before the client closes, and then it is the
    # client's).
    body = json.dumps({"templateID": "code-interpreter-v1"}).encode()
    with socket.create_connection(("127.0.0.1", int(s["url"].rsplit(":", 1)[1]))) as c:
        c.sendall(b"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-KEY: " +
                  s["keys"]["alice"].encode() + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_until(lambda: set(str(x[0]) for x in s["agentd"].manager().ListSandboxes()) - before, 30, 0.02,
                   what="the create to start")
    # What the create made goes again once it is made, and the gateway says why.
    wait_until(lambda: set(str(x[0]) for x in s["agentd"].manager().ListSandboxes()) <= before, 150, 0.2,
               what="the sandbox nobody got to go")
    assert "its creator left before it was made" in open(s["log"]).read()


@test
def over_tls_both_ways_the_gateway_and_https_runtimes():
    """A gateway serving HTTPS (--tls-cert) in front of an agentd whose runtimes serve TLS
    ([Runtime] TLS=yes): the control API, envd's paths and a web app's port all work through
    it, the gateway verifying each runtime against agentd's CA."""
    import ssl
    import tempfile
    s = setup()
    d = tempfile.mkdtemp(prefix="e2b-tls-", dir=s["agentd"].dir)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    state = tempfile.mkdtemp(prefix="state-", dir=d)
    a = Agentd("e2b-tls", "[Runtime]\nTLS=yes\n[Sandboxes]\nDeleteOnStop=yes\n", env_extra={"STATE_DIRECTORY": state})
    gw = None
    try:
        os.makedirs(os.path.join(a.dir, "pools.d"))
        with open(os.path.join(a.dir, "pools.d", "base.pool"), "w") as f:
            f.write(f"[Pool]\nSize=0\nImage={E2B_BASE}\nBundle={bundle()}\n")
        a.manager().Reload()
        port = free_port()
        log = open(os.path.join(d, "gateway.log"), "ab")
        gw = subprocess.Popen([GATEWAY, f"--listen=127.0.0.1:{port}", f"--keys={s['keys_file']}",
                               f"--domain={DOMAIN}", f"--tls-cert={cert}", f"--tls-key={key}"],
                              env=a.env, stdout=log, stderr=subprocess.STDOUT)
        url = f"https://127.0.0.1:{port}"
        ctx = ssl.create_default_context(cafile=cert)

        def https(method, path, body=None, headers=None):
            req = urllib.request.Request(url + path, data=json.dumps(body).encode() if body is not None else None,
                                         method=method, headers={"X-API-KEY": s["keys"]["alice"],
                                                                 "Content-Type": "application/json", **(headers or {})})
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=150) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()
            except (ConnectionError, urllib.error.URLError) as e:
                return 0, str(e).encode()
        wait_until(lambda: gw.poll() is not None or https("GET", "/health")[0] == 200, 10, what="the HTTPS gateway")
        assert gw.poll() is None, open(os.path.join(d, "gateway.log")).read()
        status, body = https("POST", "/v2/sandboxes", {"templateID": "base"})
        assert status == 201, body
        made = json.loads(body)
        sid, token = made["sandboxID"], made["envdAccessToken"]
        runtime_url, _ = map(str, a.manager().GetRuntimeAccess(sid))
        assert runtime_url.startswith("https://"), runtime_url
        # envd's /health through the gateway, which reaches the runtime over TLS.
        status, _ = https("GET", "/health", headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                                                      "X-Access-Token": token})
        assert status in (200, 204), status
        # A web app's port.
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "sh", "-c",
                            "mkdir -p /tmp/site && echo tls-both-ways > /tmp/site/index.txt && cd /tmp/site && "
                            "(busybox httpd -p 8080 -h /tmp/site &)"], env=a.env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        last = []
        wait_until(lambda: last.append(https("GET", "/index.txt", headers={"Host": f"8080-{sid}.{DOMAIN}"})) or
                   last[-1][0] == 200, 20, 0.2, what="the web app through the HTTPS gateway")
        assert https("GET", "/index.txt", headers={"Host": f"8080-{sid}.{DOMAIN}"}) == (200, b"tls-both-ways\n")
        # The gateway speaks nothing but TLS.
        assert http("GET", f"http://127.0.0.1:{port}/health")[0] != 200
        assert https("DELETE", f"/sandboxes/{sid}")[0] == 204
    finally:
        if gw:
            gw.terminate()
            rc = gw.wait(10)
            assert rc == 0, (rc, open(os.path.join(d, "gateway.log")).read()[-3000:])
        assert a.stop() == 0, a.log_text()[-3000:]


# ---- who reaches what through the gateway (issue 45: items 1, 3, 7, 9) ----------------------------

def raw_request(url, data, timeout=30):
    """data as it is on one connection to the gateway; what came back before it closed."""
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    got = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as c:
        c.sendall(data)
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return got
            got += chunk


def serve_in(sid, port, text, env=None):
    """A web app in the sandbox (python3 -m http.server) serving index.txt = text, checked from inside,
    so that what the gateway refuses is there to be reached."""
    env = env or setup()["agentd"].env
    r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "sh", "-c",
                        f"mkdir -p /tmp/site{port} && echo {text} > /tmp/site{port}/index.txt && cd /tmp/site{port} && "
                        f"(python3 -m http.server {port} >/dev/null 2>&1 &)"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    last = []

    def inside():
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "python3", "-c",
                            "import sys, urllib.request\n"
                            f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{port}/index.txt').read().decode())"],
                           env=env, capture_output=True, text=True, timeout=60)
        last.append((r.returncode, r.stdout, r.stderr))
        return r.stdout == text + "\n"
    try:
        wait_until(inside, 60, 0.5, what=f"the web app on port {port} in {sid}")
    except AssertionError:
        ps = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "ps"], env=env, capture_output=True,
                            text=True, timeout=60)
        raise AssertionError((f"no web app on port {port} in {sid}", last[-2:], ps.stdout, ps.stderr))


def by_headers(sid, port, **extra):
    return {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": str(port), **extra}


def by_host(sid, port, **extra):
    return {"Host": f"{port}-{sid}.{DOMAIN}", **extra}


@test
def a_sandbox_made_without_the_gateway_is_not_reached_through_it_under_each_runtime():
    """Issue 45 item 1: a listener in a sandbox made with agentixctl is as unreachable through
    the gateway as a sandbox that does not exist, by E2b-Sandbox-Id/Port and by PORT-ID.DOMAIN,
    with or without its owner's API key (the gateway used to forge the port proxy's cookie)."""
    s = setup()
    unknown = http("GET", s["url"] + "/index.txt", headers=by_headers("b000000000000000", 8080))
    assert unknown[0] == 502, unknown
    for rt in runtimes():
        print(f"  runtime {rt}")
        r = subprocess.run(["runuser", "-u", USERS["alice"], "--", "env",
                            f"DBUS_SYSTEM_BUS_ADDRESS={s['agentd'].address}", AGENTIXCTL, "create", "--image", E2B_BASE,
                            "--bundle", bundle(), "--runtime", rt, "--ttl", "600"], capture_output=True, text=True,
                           timeout=150)
        assert r.returncode == 0, r.stderr
        sid = r.stdout.strip()
        try:
            assert owner_of(sid)[0] == s["uids"]["alice"]
            serve_in(sid, 8080, "made-with-agentixctl")
            for port in (8080, 49983, 49999):
                for headers in (by_headers(sid, port), by_host(sid, port), by_headers(sid, port, **{
                        "X-API-KEY": s["keys"]["alice"]}), by_host(sid, port, **{"X-API-KEY": s["keys"]["alice"]})):
                    got = http("GET", s["url"] + "/index.txt", headers=headers)
                    assert got[:2] == unknown[:2], (port, headers, got, unknown)
        finally:
            s["agentd"].manager().DeleteSandbox(sid, timeout=60)


@test
def a_sandbox_without_public_traffic_opens_its_ports_only_with_its_traffic_token_under_each_runtime():
    """Issue 45 item 1: network.allowPublicTraffic=false (E2B's create) closes every port of the
    sandbox but to e2b-traffic-access-token = its trafficAccessToken; another user's token or
    API key opens nothing; E2B metadata cannot set the gateway's own labels."""
    s = setup()
    for rt in runtimes():
        print(f"  runtime {rt}")
        suffix = "" if rt == "runc" else f"-{rt}"
        made = {}
        for who in ("alice", "bob"):
            status, body, _ = api("POST", "/v2/sandboxes", {"templateID": f"base{suffix}",
                                                             "network": {"allowPublicTraffic": False}}, who=who)
            assert status == 201 and len(body.get("trafficAccessToken") or "") == 64, (status, body)
            made[who] = body
        a, b = made["alice"], made["bob"]
        try:
            serve_in(a["sandboxID"], 8080, "alice-private")
            serve_in(b["sandboxID"], 8080, "bob-private")
            for way in (by_headers, by_host):
                tries = [
                    way(a["sandboxID"], 8080),
                    way(a["sandboxID"], 8080, **{"X-API-KEY": s["keys"]["alice"]}),
                    way(a["sandboxID"], 8080, **{"e2b-traffic-access-token": b["trafficAccessToken"]}),
                    way(a["sandboxID"], 8080, **{"e2b-traffic-access-token": a["trafficAccessToken"][:-1] + "x"}),
                    way(a["sandboxID"], 8080, **{"X-Access-Token": b["envdAccessToken"]}),
                    way(a["sandboxID"], 49983, **{"X-Access-Token": b["envdAccessToken"]}),
                    way(a["sandboxID"], 49999, **{"e2b-traffic-access-token": b["trafficAccessToken"]}),
                ]
                for headers in tries:
                    status, body, _ = http("GET", s["url"] + "/index.txt", headers=headers)
                    assert status == 401 and isinstance(body, dict) and body["code"] == 401, (headers, status, body)
                status, body, _ = http("GET", s["url"] + "/index.txt", headers=way(
                    a["sandboxID"], 8080, **{"e2b-traffic-access-token": a["trafficAccessToken"]}))
                assert (status, body) == (200, b"alice-private\n"), (status, body)
                status, body, _ = http("GET", s["url"] + "/index.txt", headers=way(
                    b["sandboxID"], 8080, **{"e2b-traffic-access-token": b["trafficAccessToken"]}))
                assert (status, body) == (200, b"bob-private\n"), (status, body)
                # envd's port wants the envd access token, as before.
                status, _, _ = http("GET", s["url"] + "/health", headers=way(
                    a["sandboxID"], 49983, **{"X-Access-Token": a["envdAccessToken"]}))
                assert status == 200, status
                # The runtime's own control is agentd's: neither token makes it hold still
                # (a gVisor runtime would stop listening and reset every connection).
                for port, token in ((49999, {"e2b-traffic-access-token": a["trafficAccessToken"]}),
                                    (49983, {"X-Access-Token": a["envdAccessToken"]})):
                    status, _, _ = http("POST", s["url"] + "/runtime/hold", raw=b"",
                                        headers=way(a["sandboxID"], port, **token))
                    assert status == 404, (rt, port, status)
                    status, _, _ = http("GET", s["url"] + "/health", headers=way(
                        a["sandboxID"], 49983, **{"X-Access-Token": a["envdAccessToken"]}))
                    assert status == 200, (rt, port, status)
            assert dict(owner_of(a["sandboxID"])[1]["Labels"]) == {"agentix-e2b.template": f"base{suffix}",
                                                                  "agentix-e2b.public": "no"}
            assert api("GET", f"/sandboxes/{a['sandboxID']}")[1]["metadata"] == {}
        finally:
            api("DELETE", f"/sandboxes/{a['sandboxID']}")
            api("DELETE", f"/sandboxes/{b['sandboxID']}", who="bob")
    for key in ("agentix-e2b.public", "agentix-e2b.template", "agentix-e2b.anything"):
        status, body, _ = api("POST", "/v2/sandboxes", {"templateID": "base", "metadata": {key: "yes"}})
        assert status == 400 and "gateway's own" in body["message"], (key, status, body)
    status, body, _ = api("POST", "/v2/sandboxes", {"templateID": "base", "network": {"allowPublicTraffic": "no"}})
    assert status == 400 and "allowPublicTraffic" in body["message"], (status, body)


@test
def one_keys_idle_connections_leave_another_keys_envd_calls_answered():
    """Issue 45 item 3: alice holds 600 connections to a port of her own sandbox that accepts and
    never answers; bob's envd calls to his sandbox are still answered (one cap of 512 shared by
    everyone answered them 503)."""
    s = setup()
    status, a, _ = api("POST", "/v2/sandboxes", {"templateID": "base"})
    assert status == 201, a
    status, b, _ = api("POST", "/v2/sandboxes", {"templateID": "base"}, who="bob")
    assert status == 201, b
    held = []
    try:
        r = subprocess.run([AGENTIXCTL, f"--sandbox={a['sandboxID']}", "exec", "--", "sh", "-c",
                            "(python3 -c 'import socket, time\n"
                            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                            "s.bind((\"127.0.0.1\", 8081)); s.listen(4096)\n"
                            "time.sleep(3600)' >/dev/null 2>&1 &)"], env=s["agentd"].env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        host, port = s["url"].rsplit("/", 1)[1].rsplit(":", 1)
        request = ("GET / HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: 8081\r\n\r\n" %
                   a["sandboxID"]).encode()
        for _ in range(600):
            c = socket.create_connection((host, int(port)), timeout=30)
            c.sendall(request)
            c.setblocking(False)
            held.append(c)
        import select

        answered = set()

        def refused_enough():
            readable, _, _ = select.select([c for c in held if c not in answered], [], [], 0.2)
            answered.update(readable)
            return len(answered) >= 600 - 512
        # The gateway has answered (503) what it does not hold: its places are taken.
        wait_until(refused_enough, 60, 0.1, what="the gateway to refuse what it does not hold")
        assert len(answered) < 600, "no connection was held: the test proves nothing"
        for _ in range(5):
            status, body, _ = http("GET", s["url"] + "/health", headers=by_headers(
                b["sandboxID"], 49983, **{"X-Access-Token": b["envdAccessToken"]}), timeout=60)
            assert status == 200, (status, body)
        assert s["gateway"].poll() is None
    finally:
        for c in held:
            c.close()
        api("DELETE", f"/sandboxes/{a['sandboxID']}")
        api("DELETE", f"/sandboxes/{b['sandboxID']}", who="bob")


@test
def the_gateway_forgets_a_sandbox_agentd_says_changed():
    """Issue 45 item 7: the gateway kept a sandbox's runtime until SandboxRemoved. Paused (agentd
    says State changed), its traffic is refused at once rather than sent to a frozen runtime;
    resumed, it is served again."""
    s = setup()
    status, a, _ = api("POST", "/v2/sandboxes", {"templateID": "base"})
    assert status == 201, a
    health = by_headers(a["sandboxID"], 49983, **{"X-Access-Token": a["envdAccessToken"]})
    try:
        assert http("GET", s["url"] + "/health", headers=health)[0] == 200  # known to the gateway now
        assert api("POST", f"/sandboxes/{a['sandboxID']}/pause")[0] == 204
        last = []
        wait_until(lambda: last.append(http("GET", s["url"] + "/health", headers=health, timeout=5)) or
                   last[-1][0] == 502, 30, 0.2, what="the paused sandbox's traffic refused")
        assert "paused" in last[-1][1]["message"], last[-1]
        assert api("POST", f"/sandboxes/{a['sandboxID']}/resume")[0] == 201
        wait_until(lambda: http("GET", s["url"] + "/health", headers=health, timeout=10)[0] == 200, 30, 0.2,
                   what="the resumed sandbox served again")
    finally:
        api("DELETE", f"/sandboxes/{a['sandboxID']}")


@test
def the_gateway_reconnects_to_the_bus_after_dbus_restarts():
    """Issue 45 item 7: the system bus goes away and comes back (dbus-daemon restarted, agentd
    with it, adopting its sandboxes): the gateway's sandbox route asks agentd again and serves a
    sandbox it had not looked up before."""
    from agentd_env import start_dbus_daemon
    s = setup()
    a = Agentd("e2b-bus", "[Sandboxes]\nMaxSandboxes=40\n")
    gw = None
    sid = None
    try:
        os.makedirs(os.path.join(a.dir, "pools.d"))
        with open(os.path.join(a.dir, "pools.d", "base.pool"), "w") as f:
            f.write(f"[Pool]\nSize=0\nImage={E2B_BASE}\nBundle={bundle()}\n")
        a.manager().Reload()
        ensure_users()  # (another test's teardown may have removed them since setup())
        port = free_port()
        log_path = os.path.join(a.dir, "gateway.log")
        gw = subprocess.Popen([GATEWAY, f"--listen=127.0.0.1:{port}", f"--keys={s['keys_file']}"], env=a.env,
                              stdout=open(log_path, "ab"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: gw.poll() is not None or http("GET", url + "/health")[0] == 200, 10, what="the gateway")
        status, made, _ = http("POST", url + "/v2/sandboxes", {"templateID": "base"}, key=s["keys"]["alice"])
        assert status == 201, made
        sid = made["sandboxID"]
        # The bus goes, and agentd with it (SIGKILL: its sandboxes stay); both come back.
        a.agentd.kill()
        a.agentd.wait(10)
        a.dbus_daemon.terminate()
        a.dbus_daemon.wait(10)
        a.dbus_daemon, address = start_dbus_daemon(a.dir)
        assert address == a.address
        a.start()
        wait_until(lambda: sid in a.ids(), 30, 0.2, what="agentd to adopt the sandbox")
        health = by_headers(sid, 49983, **{"X-Access-Token": made["envdAccessToken"]})
        last = []
        try:
            wait_until(lambda: last.append(http("GET", url + "/health", headers=health, timeout=10)) or
                       last[-1][0] == 200, 30, 0.5, what="the gateway to serve the sandbox after the bus restart")
        except AssertionError:
            raise AssertionError(("not served after the bus restart", last[-3:]))
        assert gw.poll() is None
    finally:
        if sid:
            try:
                a.manager().DeleteSandbox(sid, timeout=60)
            except dbus.DBusException:
                pass
        if gw:
            gw.terminate()
            rc = gw.wait(10)
            assert rc == 0, (rc, open(os.path.join(a.dir, "gateway.log")).read()[-3000:])
        a.stop()


@test
def host_names_cut_anywhere_leave_the_gateway_serving():
    """Issue 45 item 9: Host values whose colon comes before the dash (`a:1-b` handed memchr a
    negative length) and other odd cuts; no dot anywhere after the Host line, so an out-of-bounds
    read runs off the buffer under ASan. The gateway answers each and keeps serving."""
    s = setup()
    hosts = [b"a:1-b", b"1:2-3", b":-", b"-", b":", b"-:", b"a-b:", b"8080-:", b"8080-x:1-y", b"1-" * 80 + b":1",
             b"-" * 200 + b":1", b"8080-abc" + b":" * 100 + b"-", b"0-a:b-c:d-e", b"65536-abc." + DOMAIN.encode(),
             b"8080-ABC." + DOMAIN.encode(), b"8080-abc." + DOMAIN.encode() + b":-1"]
    for host in hosts:
        got = raw_request(s["url"], b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 "), (host, got)
        assert s["gateway"].poll() is None, (host, open(s["log"]).read()[-3000:])
    assert http("GET", s["url"] + "/health")[0] == 200


def teardown():
    s = STATE
    if s.get("gateway"):
        s["gateway"].terminate()
        assert s["gateway"].wait(10) == 0, open(s["log"]).read()[-3000:]
    if s.get("agentd"):
        for sid in [str(x[0]) for x in s["agentd"].manager().ListSandboxes()]:
            s["agentd"].manager().DeleteSandbox(sid, timeout=60)
        s["agentd"].stop()
    # The base pool's members this test's agentds made (others' stay: a demo's, a user's).
    for name in own_containers("org.agentix.pool=base"):
        docker("rm", "-f", "-v", name, check=False)
    remove_python_data_carriers()
    remove_users()
    cleanup()


if __name__ == "__main__":
    try:
        main()
    finally:
        teardown()
