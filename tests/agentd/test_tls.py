# SPDX-License-Identifier: MIT
"""Runtime TLS on the Docker backend ([Runtime] TLS=yes): agentd's CA (made once, key 0600,
Manager.RuntimeCA), each sandbox's runtime given a certificate for its address and serving
HTTPS/WSS only (under runc and runsc), clients that verify it (agentixctl through agentd, with
--ca-file, refused without a CA or with another one), an impostor on the sandbox's address
refused, no key in docker inspect or in a snapshot, a restarted agentd serving its TLS
sandboxes on (no new certificate), a rotated CA (new certificates at adoption), warm pool
members, and the port proxy over TLS."""

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, SANDBOX, WORK, Agentd, bundle, cleanup, docker,  # noqa: E402
                        runtimes)

STATE = {}
SERVER = os.path.join(os.environ["AGENTIX_RUNTIME_DIR"], "agentix-server")


def agentd():
    if "agentd" not in STATE:
        STATE["state_dir"] = tempfile.mkdtemp(prefix="state-", dir=WORK)
        STATE["agentd"] = Agentd("tls", config="[Runtime]\nTLS=yes\n",
                                 env_extra={"STATE_DIRECTORY": STATE["state_dir"]})
    return STATE["agentd"]


def ca_file():
    path = os.path.join(WORK, "runtime-ca.pem")
    with open(path, "w") as f:
        f.write(str(agentd().manager_property("RuntimeCA")))
    return path


def ctl(*args, sid=None, env=None):
    a = agentd()
    e = dict(a.env, **(env or {}))
    prefix = [f"--sandbox={sid}"] if sid else []
    return subprocess.run([AGENTIXCTL, *prefix, *args], env=e, capture_output=True, text=True, timeout=120)


def access(sid):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    return str(url), str(token)


def https_get(url, cafile, headers=None):
    ctx = ssl.create_default_context(cafile=cafile)
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def make_impostor_cert(ip):
    """A self-signed certificate naming the sandbox's address: what anyone can make."""
    d = tempfile.mkdtemp(prefix="impostor-", dir=WORK)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", f"/CN={ip}",
                    "-addext", f"subjectAltName=IP:{ip}"], check=True, capture_output=True)
    return cert, key


@test
def agentd_makes_its_runtime_ca_once():
    pem = str(agentd().manager_property("RuntimeCA"))
    assert pem.startswith("-----BEGIN CERTIFICATE-----") and "PRIVATE" not in pem, pem[:80]
    ca_dir = os.path.join(STATE["state_dir"], "runtime-ca")
    assert oct(os.stat(os.path.join(ca_dir, "ca.key")).st_mode & 0o777) == "0o600"
    with open(os.path.join(ca_dir, "ca.crt")) as f:
        assert f.read() == pem
    text = subprocess.run(["openssl", "x509", "-noout", "-text"], input=pem, capture_output=True, text=True,
                          check=True).stdout
    assert "CA:TRUE" in text and "prime256v1" in text and "Certificate Sign" in text, text


def check_tls_sandbox(runtime):
    path, sid = agentd().create(runtime=runtime) if runtime else agentd().create()
    sid = str(sid)
    url, token = access(sid)
    assert url.startswith("https://") and url.endswith(":8000"), url
    ip = url[len("https://"):].rsplit(":", 1)[0]
    # Through agentd (its CA from Manager.RuntimeCA), as a user would.
    r = ctl("exec", "--", "sh", "-c", "echo over-tls; env | grep -c AGENTIX_TLS || true", sid=sid)
    assert r.returncode == 0 and r.stdout.split() == ["over-tls", "0"], (r.returncode, r.stdout, r.stderr)
    # Directly, with the CA file, both transports.
    cafile = ca_file()
    for transport in ("websocket", "polling"):
        r = ctl(f"--url={url}", f"--token={token}", f"--ca-file={cafile}", f"--transport={transport}", "exec", "--",
                "echo", transport)
        assert r.returncode == 0 and r.stdout == f"{transport}\n", (transport, r.returncode, r.stdout, r.stderr)
    # No CA: refused before anything is sent.
    r = ctl(f"--url={url}", f"--token={token}", "exec", "--", "echo", "x", env={})
    assert r.returncode == 64 and "--ca-file" in r.stderr, (r.returncode, r.stderr)
    # The runtime speaks nothing but TLS on its port.
    plain = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://{ip}:8000/health"], capture_output=True,
                           text=True)
    assert plain.returncode != 0 and "ok" not in plain.stdout, (plain.returncode, plain.stdout)
    assert https_get(f"{url}/health", cafile)[0] == 200
    # Neither the key nor the certificate where docker inspect shows them.
    inspect = docker("inspect", f"agentix-{sid}").stdout
    for secret in ("PRIVATE KEY", "BEGIN CERTIFICATE", "AGENTIX_TLS_KEY"):
        assert secret not in inspect, secret
    info = json.loads(inspect)[0]
    assert "AGENTIX_TLS=1" in info["Config"]["Env"] and info["Config"]["Labels"]["org.agentix.tls"] == "1"
    assert info["HostConfig"]["Runtime"] == (runtime or "runc"), info["HostConfig"]["Runtime"]
    return sid, url, token, ip


@test
def sandboxes_serve_tls_under_every_runtime():
    assert "runc" in runtimes()
    for runtime in runtimes():
        sid, _, _, _ = check_tls_sandbox(runtime)
        agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def an_impostor_on_the_sandbox_address_is_refused():
    sid, url, token, ip = check_tls_sandbox(None)
    STATE["sandbox"] = (sid, url, token, ip)
    cert, key = make_impostor_cert(ip)
    pid = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]["State"]["Pid"]
    # An agentix-server of its own with a self-signed certificate, in the sandbox's network
    # namespace: the same address, another port.
    impostor = subprocess.Popen(["nsenter", "-n", "-t", str(pid), SERVER, f"--host={ip}", "--port=8443",
                                 f"--tls-cert={cert}", f"--tls-key={key}", "--no-seccomp"],
                                env=dict(os.environ, AGENTIX_TOKEN=token), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        cafile = ca_file()
        fake = f"https://{ip}:8443"
        wait_until(lambda: subprocess.run(["curl", "-sk", f"{fake}/health"], capture_output=True).returncode == 0,
                   10, what="the impostor")
        for transport in ("websocket", "polling"):
            r = ctl(f"--url={fake}", f"--token={token}", f"--ca-file={cafile}", f"--transport={transport}", "exec",
                    "--", "echo", "x")
            assert r.returncode == 69 and r.stdout == "", (transport, r.returncode, r.stdout, r.stderr)
            assert ("not issued by the CA" in r.stderr or "certificate" in r.stderr), r.stderr
        # Python's own TLS client says no as well; with the impostor's certificate as CA it is
        # the real runtime that is refused (its certificate is agentd's).
        try:
            https_get(f"{fake}/health", cafile)
            raise AssertionError("the impostor was accepted")
        except urllib.error.URLError as e:
            assert "CERTIFICATE_VERIFY_FAILED" in str(e), e
        r = ctl(f"--url={url}", f"--token={token}", f"--ca-file={cert}", "exec", "--", "echo", "x")
        assert r.returncode == 69, (r.returncode, r.stderr)
    finally:
        impostor.terminate()
        impostor.wait(10)


@test
def the_port_proxy_works_over_tls():
    sid, url, token, ip = STATE["sandbox"]
    r = ctl("exec", "--", "sh", "-c", "mkdir -p /srv && echo served-over-tls > /srv/index.txt && "
            "(busybox httpd -p 8080 -h /srv &)", sid=sid)
    assert r.returncode == 0, r.stderr
    port_url, port_token = map(str, agentd().manager().GetPortUrl(sid, dbus.UInt16(8080)))
    assert port_url.startswith(url + "/proxy/8080"), port_url
    cafile = ca_file()
    wait_until(lambda: https_get(port_url + "index.txt", cafile, {"Authorization": f"Bearer {port_token}"})[0] == 200,
               20, what="the server in the sandbox")
    assert https_get(port_url + "index.txt", cafile,
                     {"Authorization": f"Bearer {port_token}"}) == (200, b"served-over-tls\n")


@test
def a_snapshot_holds_no_key():
    sid, _, _, _ = STATE["sandbox"]
    a = agentd()
    path = a.manager().GetSandbox(sid)
    image = str(dbus.Interface(a.conn.get_object("org.agentix.Agentd1", path), SANDBOX)
                .Snapshot(dbus.Dictionary({}, signature="sv"), timeout=300))
    try:
        tar = os.path.join(WORK, "snapshot.tar")
        docker("save", "-o", tar, image)
        with open(tar, "rb") as f:
            data = f.read()
        # Layers are tar files inside the tar, uncompressed: a key would show as PEM text.
        assert b"PRIVATE KEY" not in data and b"BEGIN CERTIFICATE" not in data
        os.unlink(tar)
        env = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]["Env"]
        assert "AGENTIX_TLS=1" not in env, env
        # A sandbox from it gets a certificate of its own.
        _, sid2 = a.create(image=image)
        r = ctl("exec", "--", "echo", "from-snapshot", sid=str(sid2))
        assert r.returncode == 0 and r.stdout == "from-snapshot\n", (r.stdout, r.stderr)
        a.manager().DeleteSandbox(str(sid2), timeout=120)
    finally:
        a.manager().DeleteSnapshot(image, timeout=120)


@test
def a_restarted_agentd_serves_its_tls_sandboxes_on():
    sid, url, token, _ = STATE["sandbox"]
    a = agentd()
    a.kill_and_restart()
    wait_until(lambda: sid in a.ids(), 30, what="the sandbox adopted")
    assert access(sid) == (url, token)
    r = ctl("exec", "--", "echo", "after-restart", sid=sid)
    assert r.returncode == 0 and r.stdout == "after-restart\n", (r.stdout, r.stderr)
    # Its certificate still verified: no new one was handed over.
    logs = docker("logs", f"agentix-{sid}").stderr + docker("logs", f"agentix-{sid}").stdout
    assert "certificate replaced" not in logs, logs


@test
def a_rotated_ca_gives_running_sandboxes_new_certificates():
    sid, url, _, _ = STATE["sandbox"]
    a = agentd()
    old = str(a.manager_property("RuntimeCA"))
    a.agentd.terminate()
    a.agentd.wait(20)
    shutil.rmtree(os.path.join(STATE["state_dir"], "runtime-ca"))
    a.start()
    new = str(a.manager_property("RuntimeCA"))
    assert new != old
    wait_until(lambda: sid in a.ids(), 30, what="the sandbox adopted")

    def renewed():
        logs = docker("logs", f"agentix-{sid}")
        return "certificate replaced" in logs.stdout + logs.stderr
    wait_until(renewed, 30, what="the runtime's new certificate")
    assert https_get(f"{url}/health", ca_file())[0] == 200
    r = ctl("exec", "--", "echo", "new-ca", sid=sid)
    assert r.returncode == 0 and r.stdout == "new-ca\n", (r.stdout, r.stderr)
    a.manager().DeleteSandbox(sid, timeout=120)


@test
def pool_members_serve_tls_once_claimed():
    a = agentd()
    pools = os.path.join(a.dir, "pools.d")
    os.makedirs(pools, exist_ok=True)
    with open(os.path.join(pools, "warm.pool"), "w") as f:
        f.write(f"[Pool]\nSize=1\nImage=agentix-test/busybox:1\nBundle={bundle()}\n")
    a.agentd.send_signal(1)  # SIGHUP: read the pools
    wait_until(lambda: any(str(p[0]) == "warm" and int(p[1]) >= 1 for p in a.manager().ListPools()), 60,
               what="the warm member")
    _, sid = a.manager().CreateSandbox(dbus.Dictionary({"pool": "warm"}, signature="sv"), timeout=120)
    url, _ = access(str(sid))
    assert url.startswith("https://"), url
    r = ctl("exec", "--", "echo", "claimed", sid=str(sid))
    assert r.returncode == 0 and r.stdout == "claimed\n", (r.stdout, r.stderr)
    a.manager().DeleteSandbox(str(sid), timeout=120)
    os.unlink(os.path.join(pools, "warm.pool"))
    a.agentd.send_signal(1)


@test
def agentd_stops_cleanly():
    a = STATE.pop("agentd")
    assert a.stop() == 0, a.log_text()[-3000:]


if __name__ == "__main__":
    try:
        main()
    finally:
        if "agentd" in STATE:
            STATE["agentd"].stop()
        cleanup()
