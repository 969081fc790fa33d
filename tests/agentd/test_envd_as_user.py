#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""File operations that E2B's envd faces make for a named account, attacked by that account
(issue 45, "keep going"). The account plants symbolic links in its own home to a directory and
a file only root may read (`out` -> the directory, `key` -> the file), then asks the runtime
to work through them "as" itself: an upload into the directory and over the file (/files POST),
a download of the file (/files GET), MakeDir, Remove, Move out of and into the directory, Stat
and ListDir of it. Each is refused with permission_denied (what the account itself would get)
and the directory and file are as they were: nothing new in it, nothing gone, the file's
content unchanged and not sent. The account's own uploads still work and are its own.

Against a bare agentix-server run as root (the host's uid 1000 is the account), and in sandboxes
of the e2b-base image (root and `user`, 1000) under runc and runsc. Needs AGENTIX_SERVER (else
AGENTIX_RUNTIME_DIR's agentix-server) and agentd's test environment (tests/agentd/meson.build)."""

import base64
import json
import os
import pwd
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

if not os.environ.get("AGENTIX_SERVER") and os.environ.get("AGENTIX_RUNTIME_DIR"):
    os.environ["AGENTIX_SERVER"] = os.path.join(os.environ["AGENTIX_RUNTIME_DIR"], "agentix-server")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import Server, main, test  # noqa: E402
import agentd_env  # noqa: E402
from agentd_env import Agentd, cleanup, runtimes  # noqa: E402

agentd_env.TEST_BUNDLE = "agentix-test/envd-as-user-%s:0.1.0" % re.sub(r"[^a-z0-9]", "", agentd_env.INSTANCE.lower())

TOKEN = "envd-as-user-token-0123456789abcdef"
E2B_BASE = "agentix-test/e2b-base:1"  # tests/bundle/make-task-images.sh e2b: root and `user` (1000)
SECRET = "top-secret-of-root"


# ---- HTTP ------------------------------------------------------------------------------------

def request(host, port, head, body=b""):
    """One request on a new connection: (status, body)."""
    s = socket.create_connection((host, port), timeout=60)
    s.sendall(head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        assert d, "the server closed the connection without an answer"
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        data = rest[:n]
    else:  # chunked (to its last chunk), or to the close
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        while not (chunked and (rest.startswith(b"0\r\n\r\n") or b"\r\n0\r\n\r\n" in rest)):
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                # A runtime on gVisor's stack ends a connection with a reset once everything
                # was acknowledged (agentix-server(8), AGENTIX_CHECKPOINT): the answer is whole.
                break
            if not d:
                break
            rest += d
        data = rest
    s.close()
    return int(lines[0].split(" ")[1]), data


class Target:
    def __init__(self, host, port, token, user):
        self.host, self.port, self.token, self.user = host, port, token, user

    def files(self, method, path, body=b""):
        head = (method.encode() + b" /files?path=" + path.encode() + b"&username=" + self.user.encode() +
                b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: application/octet-stream\r\n"
                b"X-Access-Token: " + self.token.encode() + b"\r\n")
        return request(self.host, self.port, head, body)

    def connect(self, method, msg):
        head = (b"POST /filesystem.Filesystem/" + method.encode() + b" HTTP/1.1\r\nHost: a\r\n"
                b"Connection: close\r\nContent-Type: application/json\r\nX-Access-Token: " + self.token.encode() +
                b"\r\nAuthorization: Basic " + base64.b64encode(self.user.encode() + b":") + b"\r\n")
        status, data = request(self.host, self.port, head, json.dumps(msg).encode())
        return status, json.loads(data)


# ---- the attempts ----------------------------------------------------------------------------

def attempts(t, home, secret_dir, as_root, as_user):
    """secret_dir: root's, 0700, holding `victim` and `key` (0600, SECRET). as_root(cmd) and
    as_user(cmd) run a shell command in the target's world and return its output."""
    as_user(f"ln -s {secret_dir} {home}/out && ln -s {secret_dir}/key {home}/key && echo mine > {home}/mine")
    before = as_root(f"ls -a {secret_dir}; cat {secret_dir}/key")
    assert SECRET in before and "victim" in before, before
    failed = []

    def check(what, ok, detail):
        if not ok:
            failed.append(f"{what}: {detail}")

    # The account's own file, for a control: it may write where it may write.
    status, body = t.files("POST", f"{home}/own.conf", b"ok")
    check("an upload to the account's own home", status == 200, (status, body))
    owner = as_root(f"stat -c %u {home}/own.conf 2>&1")
    check("what the account uploads is its own", owner.strip() == "1000", owner)

    status, body = t.files("POST", f"{home}/out/new.conf", b"planted")
    check("upload into root's directory", status == 403, (status, body))
    status, body = t.files("POST", f"{home}/key", b"overwritten")
    check("upload over root's file", status == 403, (status, body))
    status, body = t.files("GET", f"{home}/key")
    check("download of root's file", status == 403 and SECRET.encode() not in body, (status, body))
    status, body = t.connect("MakeDir", {"path": f"{home}/out/newdir"})
    check("MakeDir in root's directory", body.get("code") == "permission_denied", (status, body))
    status, body = t.connect("Remove", {"path": f"{home}/out/victim"})
    check("Remove in root's directory", body.get("code") == "permission_denied", (status, body))
    status, body = t.connect("Move", {"source": f"{home}/out/victim", "destination": f"{home}/stolen"})
    check("Move out of root's directory", body.get("code") == "permission_denied", (status, body))
    status, body = t.connect("Move", {"source": f"{home}/mine", "destination": f"{home}/out/planted"})
    check("Move into root's directory", body.get("code") == "permission_denied", (status, body))
    status, body = t.connect("Stat", {"path": f"{home}/out/victim"})
    check("Stat in root's directory", body.get("code") == "permission_denied", (status, body))
    status, body = t.connect("ListDir", {"path": f"{home}/out", "depth": 1})
    check("ListDir of root's directory", body.get("code") == "permission_denied" and "victim" not in json.dumps(body),
          (status, body))

    # A watch of root's directory through the link would say the names made and removed there.
    status, body = t.connect("CreateWatcher", {"path": f"{home}/out", "recursive": False})
    check("CreateWatcher of root's directory", body.get("code") == "permission_denied" and "watcherId" not in body,
          (status, body))

    after = as_root(f"ls -a {secret_dir}; cat {secret_dir}/key; ls -a {home}")
    check("root's directory and file as they were",
          after.split(SECRET)[0] == before.split(SECRET)[0] and SECRET in after and "overwritten" not in after and
          "stolen" not in after, (before, after))
    assert not failed, "\n  " + "\n  ".join(failed)


# ---- a bare agentix-server -------------------------------------------------------------------

@test
def a_bare_servers_file_operations_for_an_account_are_that_accounts():
    account = pwd.getpwuid(1000).pw_name
    base = tempfile.mkdtemp(prefix="envd-as-user-")
    try:
        os.chmod(base, 0o755)
        home, secret_dir = os.path.join(base, "home"), os.path.join(base, "secret")
        os.mkdir(home)
        os.chown(home, 1000, 1000)
        os.mkdir(secret_dir, 0o700)
        with open(os.path.join(secret_dir, "victim"), "w") as f:
            f.write("victim")
        with open(os.path.join(secret_dir, "key"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(secret_dir, "key"), 0o600)

        def as_root(cmd):
            return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True).stdout

        def as_user(cmd):
            return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, user=1000, group=1000,
                                  extra_groups=[], cwd="/").stdout

        with Server(env={"AGENTIX_TOKEN": TOKEN}) as srv:
            attempts(Target("127.0.0.1", srv.port, TOKEN, account), home, secret_dir, as_root, as_user)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- sandboxes -------------------------------------------------------------------------------

AGENTD = None


def agentd():
    global AGENTD
    if AGENTD is None:
        AGENTD = Agentd("envd-as-user")
    return AGENTD


def envelope(msg):
    data = json.dumps(msg).encode()
    return b"\0" + struct.pack(">I", len(data)) + data


def start_process(t, command, user):
    """envd Process Start of /bin/sh -c command as user: its output."""
    head = (b"POST /process.Process/Start HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
            b"Content-Type: application/connect+json\r\nX-Access-Token: " + t.token.encode() +
            b"\r\nAuthorization: Basic " + base64.b64encode(user.encode() + b":") + b"\r\n")
    status, data = request(t.host, t.port, head, envelope({"process": {"cmd": "/bin/sh", "args": ["-c", command]}}))
    assert status == 200, (status, data)
    # De-chunk, then read the Connect envelopes.
    stream, out = b"", b""
    while data:
        size_line, data = data.split(b"\r\n", 1)
        n = int(size_line, 16)
        stream += data[:n]
        data = data[n + 2:]
        if n == 0:
            break
    while len(stream) >= 5:
        n = struct.unpack(">I", stream[1:5])[0]
        msg = json.loads(stream[5:5 + n])
        stream = stream[5 + n:]
        d = msg.get("event", {}).get("data", {})
        for k in ("stdout", "stderr"):
            if k in d:
                out += base64.b64decode(d[k])
    return out.decode(errors="replace")


def in_sandbox(runtime):
    if runtime not in runtimes():
        print(f"    skipped: dockerd has no {runtime}")
        return
    r = subprocess.run([os.path.join(os.path.dirname(__file__), "..", "bundle", "make-task-images.sh"), "e2b"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _, sid = agentd().create(runtime=runtime, image=E2B_BASE)
    sid = str(sid)
    try:
        url, token = agentd().manager().GetRuntimeAccess(sid)
        host, port = str(url).split("://", 1)[1].rstrip("/").rsplit(":", 1)
        t = Target(host, int(port), str(token), "user")
        bb = "/bin/busybox"
        out = start_process(t, f"{bb} mkdir -p /srv/secret && {bb} chmod 700 /srv/secret && echo victim > "
                            f"/srv/secret/victim && echo {SECRET} > /srv/secret/key && {bb} chmod 600 /srv/secret/key "
                            f"&& {bb} id -u", "root")
        assert out.strip() == "0", out
        attempts(t, "/home/user", "/srv/secret",
                 lambda cmd: start_process(t, cmd.replace("stat ", f"{bb} stat "), "root"),
                 lambda cmd: start_process(t, cmd.replace("ln ", f"{bb} ln "), "user"))
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def in_a_sandbox_under_runc():
    in_sandbox("runc")


@test
def in_a_sandbox_under_runsc():
    in_sandbox("runsc")


if __name__ == "__main__":
    try:
        main()
    finally:
        if AGENTD:
            AGENTD.stop()
            agentd_env.remove_test_bundle()
        cleanup()
