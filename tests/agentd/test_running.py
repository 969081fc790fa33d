#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What a running sandbox is asked for, on a private bus against a real dockerd: Pause() and
Resume() (calls wait while paused, a restarted agentd finds it paused, its TTL keeps running)
and snapshots (Snapshot(), a create from one, ListSnapshots(), DeleteSnapshot(), the owner
checks and MaxSnapshotsPerUser=, nothing left behind).

Needs: AGENTD, AGENTIXCTL, AGENTIX_RUNTIME_DIR, AGENTIX_INCLUDE_DIR, EXAMPLE_DIR, POLICY,
BUS_CONF_IN, AGENTD_BACKEND_DIR and a running dockerd."""

import json
import os
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, NAME, SANDBOX, Agentd, bundle, busctl_as, cleanup, docker,  # noqa: E402
                        ensure_users, error_name, managed_containers, remove_users, runtime_url_of)

AGENTD = None


def agentd():
    global AGENTD
    if AGENTD is None:
        AGENTD = Agentd("running")
    return AGENTD


def sandbox(path):
    return dbus.Interface(agentd().conn.get_object(NAME, path), SANDBOX)


def state(path):
    return str(dbus.Interface(agentd().conn.get_object(NAME, path), "org.freedesktop.DBus.Properties")
               .Get(SANDBOX, "State"))


def runtime(sid):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    return RpcClient(str(url), str(token))


def exec_in(sid, command):
    c = runtime(sid)
    try:
        return c.call("sandbox::exec", command=command, timeout=60)
    finally:
        c.close()


def snapshot_images():
    out = docker("images", "--filter", "label=org.agentix.snapshot.owner", "--format",
                 "{{.Repository}}:{{.Tag}}").stdout
    return set(out.split())


def agentixctl(*args, env=None):
    return subprocess.run([AGENTIXCTL, *args], env=env or agentd().env, capture_output=True, text=True, timeout=120)


# ---- pause and resume --------------------------------------------------------------------------

@test
def a_paused_sandbox_is_frozen_and_its_calls_wait_for_resume():
    path, sid = agentd().create()
    try:
        c = runtime(sid)
        try:
            assert c.call("sandbox::exec", command="echo before")["output"] == "before\n"
            sandbox(path).Pause(timeout=60)
            assert state(path) == "paused"
            assert json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]["State"]["Paused"] is True
            sandbox(path).Pause(timeout=60)  # paused already: no error
            # A call made while paused is not answered: it waits for Resume().
            cid = c.start("sandbox::exec", kwargs={"command": "echo during"})
            time.sleep(1.5)
            assert not c.events.get(cid), c.events.get(cid)
            # GetRuntimeAccess still answers (calls wait rather than fail).
            assert str(agentd().manager().GetRuntimeAccess(sid)[0]) == runtime_url_of(sid)
            # busctl resumes it.
            r = subprocess.run(["busctl", "--system", "call", NAME, path, SANDBOX, "Resume"], env=agentd().env,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            ev, m = c.terminal(cid, timeout=30)
            assert ev == "call:result" and m["value"]["output"] == "during\n", (ev, m)
            assert state(path) == "running"
            sandbox(path).Resume(timeout=60)  # running already: no error
        finally:
            c.close()
        # agentixctl pause / resume.
        r = agentixctl("pause", sid)
        assert r.returncode == 0 and state(path) == "paused", r.stderr
        r = agentixctl("status", sid)
        assert "paused" in r.stdout, r.stdout
        r = agentixctl("resume", sid)
        assert r.returncode == 0 and state(path) == "running", r.stderr
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


@test
def paused_stays_paused_across_an_agentd_restart_and_is_deleted_or_expires_as_any():
    path, sid = agentd().create()
    _, short = agentd().create(ttl=dbus.UInt64(4))
    sandbox(path).Pause(timeout=60)
    sandbox(f"/org/agentix/Agentd1/sandbox/{short}").Pause(timeout=60)
    agentd().kill_and_restart()
    assert state(path) == "paused"
    # Its TTL kept running: the short one expires while paused, and nothing of it stays.
    wait_until(lambda: f"agentix-{short}" not in managed_containers(), 20, what="the paused sandbox to expire")
    agentd().manager().DeleteSandbox(sid, timeout=60)
    assert f"agentix-{sid}" not in managed_containers()


@test
def pause_is_refused_where_it_cannot_be():
    path, sid = agentd().create()
    try:
        docker("kill", f"agentix-{sid}")
        wait_until(lambda: state(path) == "exited", 10, what="State exited")
        got, message = error_name(lambda: sandbox(path).Pause(timeout=60))
        assert got == f"{NAME}.NotRunning" and "exited" in message, (got, message)
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


# ---- ports and file watch ------------------------------------------------------------------------

# A WebSocket echo server in the standard library, for the bundle's python3 in a sandbox: the
# handshake, then each (masked) client frame's payload sent back unmasked, same opcode.
WS_ECHO = r"""
import base64, hashlib, socket, struct
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8090)); s.listen(4)
while True:
    c, _ = s.accept(); f = c.makefile("rb")
    key = [l.split(b":", 1)[1].strip() for l in iter(f.readline, b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    while True:
        h = f.read(2)
        if len(h) < 2 or h[0] & 15 == 8: break
        n = h[1] & 127
        if n == 126: n = struct.unpack(">H", f.read(2))[0]
        elif n == 127: n = struct.unpack(">Q", f.read(8))[0]
        mask = f.read(4); data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(n)))
        head = bytes([0x80 | (h[0] & 15)]) + (bytes([n]) if n < 126 else struct.pack(">BH", 126, n) if n < 65536
                                              else struct.pack(">BQ", 127, n))
        c.sendall(head + data)
    c.close()
"""


def http_get(url, headers=None, timeout=10):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@test
def a_web_server_in_the_sandbox_is_reached_through_its_port_url():
    """python3 -m http.server from the bundle, inside the sandbox; reached from the host only
    with the port's token."""
    path, sid = agentd().create()
    try:
        exec_in(sid, "mkdir -p /srv && echo served-from-the-sandbox > /srv/index.txt && "
                     "cd /srv && (python3 -m http.server 8080 >/dev/null 2>&1 &)")
        url, token = map(str, agentd().manager().GetPortUrl(sid, dbus.UInt16(8080)))
        _, runtime_token = agentd().manager().GetRuntimeAccess(sid)
        assert url == runtime_url_of(sid) + "/proxy/8080/", url
        wait_until(lambda: http_get(url + "index.txt", {"Authorization": f"Bearer {token}"})[0] == 200, 20,
                   what="the server in the sandbox")
        status, body = http_get(url + "index.txt", {"Authorization": f"Bearer {token}"})
        assert (status, body) == (200, b"served-from-the-sandbox\n"), (status, body)
        for headers in ({}, {"Authorization": f"Bearer {runtime_token}"}):
            assert http_get(url + "index.txt", headers)[0] == 401
        # A WebSocket echo in the sandbox, through its port's URL.
        c = runtime(sid)
        try:
            assert c.call("fs::write", "/srv/ws_echo.py", WS_ECHO)["error"] is None
        finally:
            c.close()
        exec_in(sid, "(python3 /srv/ws_echo.py >/dev/null 2>&1 &)")
        ws_url, ws_token = map(str, agentd().manager().GetPortUrl(sid, dbus.UInt16(8090)))
        import websocket  # python3-websocket

        def ws_connect():
            try:
                return websocket.create_connection(ws_url.replace("http://", "ws://") + "echo", timeout=10,
                                                   header=[f"Authorization: Bearer {ws_token}"])
            except (websocket.WebSocketException, OSError):
                return None
        ws = wait_until(ws_connect, 20, what="the WebSocket echo in the sandbox")
        try:
            for m in ("through the proxy", "y" * 70000):
                ws.send(m)
                assert ws.recv() == m
        finally:
            ws.close()
        # busctl and agentixctl give the same.
        r = subprocess.run(["busctl", "--system", "--json=short", "call", NAME, "/org/agentix/Agentd1",
                            "org.agentix.Agentd1.Manager", "GetPortUrl", "sq", sid, "8080"], env=agentd().env,
                           capture_output=True, text=True)
        assert r.returncode == 0 and json.loads(r.stdout)["data"] == [url, token], r.stderr
        r = agentixctl("port", "--link", sid, "8080")
        assert r.returncode == 0 and r.stdout.strip() == f"{url}?agentix_token={token}", r.stdout
        # Nothing on another port: 502; port 0: refused.
        url2, token2 = map(str, agentd().manager().GetPortUrl(sid, dbus.UInt16(8081)))
        assert http_get(url2, {"Authorization": f"Bearer {token2}"})[0] == 502
        got, _ = error_name(lambda: agentd().manager().GetPortUrl(sid, dbus.UInt16(0)))
        assert got == f"{NAME}.InvalidConfig", got
        # agentixctl watch sees a file the server writes.
        exec_in(sid, "mkdir -p /srv/new")
        w = subprocess.Popen([AGENTIXCTL, "-s", sid, "watch", "-n", "1", "/srv/new"], env=agentd().env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            n = iter(range(1000))
            wait_until(lambda: exec_in(sid, f"touch /srv/new/f{next(n)}") and w.poll() is not None, 20,
                       what="agentixctl watch to see the change")
            out = w.stdout.read()
            assert w.returncode == 0 and out.startswith("created\t/srv/new/f") and out.count("\n") == 1, \
                (w.returncode, out, w.stderr.read())
        finally:
            w.kill()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


# ---- snapshots ----------------------------------------------------------------------------------

@test
def a_snapshot_has_the_files_and_not_the_bundle_or_the_token():
    path, sid = agentd().create(env=dbus.Dictionary({"KEPT": "yes"}, signature="ss"))
    made, images = [sid], []
    try:
        exec_in(sid, "mkdir -p /data && head -c 1048576 /dev/urandom > /data/blob && md5sum /data/blob > /data/sum"
                     " && echo written-last > /etc/marker")
        want = exec_in(sid, "cat /data/sum")["output"]
        image = str(sandbox(path).Snapshot(dbus.Dictionary({}, signature="sv"), timeout=300))
        images.append(image)
        assert image == f"agentix-snapshot/{sid}:1", image
        second = str(sandbox(path).Snapshot(dbus.Dictionary({}, signature="sv"), timeout=300))
        images.append(second)
        assert second == f"agentix-snapshot/{sid}:2", second
        assert state(path) == "running"  # paused only while the commit ran

        info = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]
        env = dict(e.split("=", 1) for e in info["Env"])
        assert env.get("AGENTIX_TOKEN", "") == "", "the runtime's token is in the image"
        labels = info["Labels"]
        assert labels["org.agentix.snapshot.owner"] == "0" and labels["org.agentix.snapshot.sandbox"] == sid
        assert labels.get("org.agentix.sandbox", "") == "", "the image would pass for a sandbox"
        # /nix is the bundle's volume: never in the image.
        r = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "ls -A /nix 2>/dev/null | wc -l",
                   check=False)
        assert r.returncode == 0 and r.stdout.strip() == "0", (r.stdout, r.stderr)

        # A create from it: the files, its own token, the same runtime.
        path2, sid2 = agentd().create(image=image)
        made.append(sid2)
        assert exec_in(sid2, "md5sum /data/blob; cat /etc/marker")["output"] == want + "written-last\n"
        _, token1 = agentd().manager().GetRuntimeAccess(sid)
        _, token2 = agentd().manager().GetRuntimeAccess(sid2)
        assert token1 != token2
        assert exec_in(sid2, "echo $KEPT")["output"] == "yes\n"  # the environment it was made with
        labels2 = json.loads(docker("inspect", f"agentix-{sid2}").stdout)[0]["Config"]["Labels"]
        assert labels2["org.agentix.sandbox"] == sid2 and labels2["org.agentix.egress"] == "*", labels2

        listed = {str(x[0]): x for x in agentd().manager().ListSnapshots()}
        assert set(images) <= set(listed), listed
        assert str(listed[image][1]) == sid and int(listed[image][2]) == 0 and int(listed[image][4]) > 1 << 20

        # In use by a sandbox: not deleted.
        got, message = error_name(lambda: agentd().manager().DeleteSnapshot(image, timeout=60))
        assert got == f"{NAME}.InUse", (got, message)
        agentd().manager().DeleteSandbox(sid2, timeout=60)
        made.remove(sid2)
        for i in images:
            agentd().manager().DeleteSnapshot(i, timeout=60)
        assert not (set(images) & snapshot_images()), snapshot_images()
        got, _ = error_name(lambda: agentd().manager().DeleteSnapshot(image, timeout=60))
        assert got == f"{NAME}.NoSuchSnapshot", got
        got, _ = error_name(lambda: agentd().manager().DeleteSnapshot(BUSYBOX, timeout=60))
        assert got == f"{NAME}.NoSuchSnapshot", got
    finally:
        for s in made:
            agentd().manager().DeleteSandbox(s, timeout=60)
        docker("rmi", "-f", *images, check=False)


@test
def a_container_from_a_plain_docker_commit_is_not_taken_for_the_sandbox():
    """docker commit keeps agentd's labels; a container run from that image is someone else's:
    its events do not touch the sandbox, and a restarted agentd neither adopts nor removes it."""
    path, sid = agentd().create()
    image, other = f"agentix-test/plain-commit:{sid}", f"plain-{sid}"
    try:
        docker("commit", f"agentix-{sid}", image)
        docker("run", "-d", "--name", other, "--entrypoint", "/bin/sleep", image, "300")
        docker("rm", "-f", other)  # its die and destroy events carry the sandbox's labels
        docker("run", "-d", "--name", other, "--entrypoint", "/bin/sleep", image, "300")
        time.sleep(1)
        assert state(path) == "running"
        agentd().kill_and_restart()
        assert sid in agentd().ids() and state(path) == "running"
        assert other in docker("ps", "--format", "{{.Names}}").stdout.split()
        assert exec_in(sid, "echo alive")["output"] == "alive\n"
    finally:
        docker("rm", "-f", other, check=False)
        agentd().manager().DeleteSandbox(sid, timeout=60)
        docker("rmi", "-f", image, check=False)


@test
def a_tag_names_the_snapshot_and_never_replaces_another_image():
    path, sid = agentd().create()
    before = json.loads(docker("image", "inspect", BUSYBOX).stdout)[0]["Id"]
    try:
        got, message = error_name(lambda: sandbox(path).Snapshot({"tag": BUSYBOX}, timeout=120))
        assert got == f"{NAME}.NotOwner" and "not a snapshot" in message, (got, message)
        assert json.loads(docker("image", "inspect", BUSYBOX).stdout)[0]["Id"] == before
        got, _ = error_name(lambda: sandbox(path).Snapshot({"colour": "blue"}, timeout=60))
        assert got == f"{NAME}.InvalidConfig", got
        got, message = error_name(lambda: sandbox(path).Snapshot({"tag": "Not A Name"}, timeout=120))
        assert got == f"{NAME}.InvalidConfig", (got, message)

        exec_in(sid, "echo one > /v")
        assert str(sandbox(path).Snapshot({"tag": "agentix-test/mine:v1"}, timeout=300)) == "agentix-test/mine:v1"
        first = json.loads(docker("image", "inspect", "agentix-test/mine:v1").stdout)[0]["Id"]
        # The owner replaces its own snapshot's name; the image it named goes.
        exec_in(sid, "echo two > /v")
        sandbox(path).Snapshot({"tag": "agentix-test/mine:v1"}, timeout=300)
        assert json.loads(docker("image", "inspect", "agentix-test/mine:v1").stdout)[0]["Id"] != first
        assert docker("image", "inspect", first, check=False).returncode != 0, "the replaced image stayed"
        # agentixctl snapshot / snapshots / rmsnapshot
        r = agentixctl("snapshot", "--tag=agentix-test/mine:v2", sid)
        assert r.returncode == 0 and r.stdout.strip() == "agentix-test/mine:v2", (r.stdout, r.stderr)
        r = agentixctl("snapshots")
        assert r.returncode == 0 and "agentix-test/mine:v1" in r.stdout and sid in r.stdout, r.stdout
        for tag in ("v1", "v2"):
            r = agentixctl("snapshot-delete", f"agentix-test/mine:{tag}")
            assert r.returncode == 0, r.stderr
        assert not {"agentix-test/mine:v1", "agentix-test/mine:v2"} & snapshot_images()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)
        docker("rmi", "-f", "agentix-test/mine:v1", "agentix-test/mine:v2", check=False)


@test
def snapshots_are_their_owners_and_counted():
    uid = ensure_users()
    bundle()
    d = Agentd("snapshot-users", config="[Sandboxes]\nMaxSnapshotsPerUser=1\n")
    made, images = [], []
    try:
        def call(who, *args):
            return busctl_as(who, d.address, "call", NAME, "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager",
                             *args)

        r = call("alice", "CreateSandbox", "a{sv}", "2", "image", "s", BUSYBOX, "bundle", "s", bundle())
        assert r.returncode == 0, r.stderr
        apath, a = json.loads(r.stdout)["data"]
        made.append(a)
        r = busctl_as("alice", d.address, "call", NAME, apath, SANDBOX, "Snapshot", "a{sv}", "0")
        assert r.returncode == 0, r.stderr
        image = json.loads(r.stdout)["data"][0]
        images.append(image)
        labels = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]["Labels"]
        assert labels["org.agentix.snapshot.owner"] == str(uid["alice"])
        # The most one user may have.
        r = busctl_as("alice", d.address, "call", NAME, apath, SANDBOX, "Snapshot", "a{sv}", "0")
        assert r.returncode != 0 and "MaxSnapshotsPerUser=" in r.stderr, r.stderr
        # Another user: not in the list, not usable, not deletable, no pause of alice's.
        r = call("bob", "ListSnapshots")
        assert r.returncode == 0 and image not in r.stdout, r.stdout
        r = call("alice", "ListSnapshots")
        assert r.returncode == 0 and image in r.stdout, r.stdout
        r = call("bob", "CreateSandbox", "a{sv}", "2", "image", "s", image, "bundle", "s", bundle())
        assert r.returncode != 0 and "snapshot of another user" in r.stderr, r.stderr
        r = call("bob", "DeleteSnapshot", "s", image)
        assert r.returncode != 0 and "another user's" in r.stderr, r.stderr
        for method in ("Pause", "Resume"):
            r = busctl_as("bob", d.address, "call", NAME, apath, SANDBOX, method)
            assert r.returncode != 0, (method, r.stdout)
        r = call("bob", "GetPortUrl", "sq", a, "8080")
        assert r.returncode != 0 and "is not yours" in r.stderr and "uid" not in r.stderr, r.stderr
        r = call("alice", "GetPortUrl", "sq", a, "8080")
        assert r.returncode == 0 and "/proxy/8080/" in r.stdout, r.stderr
        r = busctl_as("bob", d.address, "call", NAME, apath, SANDBOX, "Snapshot", "a{sv}", "0")
        assert r.returncode != 0, r.stdout
        # Outside the group: the bus says no.
        r = call("carol", "ListSnapshots")
        assert r.returncode != 0 and "Access denied" in r.stderr, r.stderr
        # Alice may use and delete her own.
        r = call("alice", "CreateSandbox", "a{sv}", "2", "image", "s", image, "bundle", "s", bundle())
        assert r.returncode == 0, r.stderr
        made.append(json.loads(r.stdout)["data"][1])
        r = call("alice", "DeleteSandbox", "s", made.pop())
        assert r.returncode == 0, r.stderr
        r = call("alice", "DeleteSnapshot", "s", image)
        assert r.returncode == 0, r.stderr
        assert image not in snapshot_images()
    finally:
        for s in made:
            try:
                d.manager().DeleteSandbox(s, timeout=60)
            except dbus.DBusException:
                pass
        docker("rmi", "-f", *images, check=False)
        d.stop()
        remove_users()


if __name__ == "__main__":
    try:
        main()
    finally:
        if AGENTD:
            AGENTD.stop()
        cleanup()
