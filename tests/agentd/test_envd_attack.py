#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentix-server's E2B faces and its HTTP connection code, read as an attacker (issue 45, "keep
going"). Each test makes the attempt against a real agentix-server (with a token, as agentd
starts it) and checks it was denied:

- a peer without the token cannot take every connection place with idle keep-alive connections
  or heads it never finishes: at the --max-connections cap a new connection takes the place of
  the one that has waited longest for a request, and the token holder is answered;
- a head trickled a byte at a time is cut off (408) and an idle connection fed blank lines is
  closed: neither keeps its place for ever;
- the body of a request answered at its head (401) is not read for ever;
- WatchDir streams count against the sandbox's bound on watchers (64), as CreateWatcher's do;
- a header value cut off for its length stays unusable, whatever the pieces it arrives in.

Each against a bare agentix-server, and (but the slow trickle) against the runtime of a sandbox
agentd made, under runc and under runsc. Needs AGENTIX_SERVER (else AGENTIX_RUNTIME_DIR's
agentix-server) and agentd's test environment (tests/agentd/meson.build)."""

import base64
import json
import os
import re
import resource
import socket
import struct
import sys
import threading
import time

if not os.environ.get("AGENTIX_SERVER") and os.environ.get("AGENTIX_RUNTIME_DIR"):
    os.environ["AGENTIX_SERVER"] = os.path.join(os.environ["AGENTIX_RUNTIME_DIR"], "agentix-server")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import Server, main, test  # noqa: E402
import agentd_env  # noqa: E402
from agentd_env import Agentd, cleanup, docker, runtimes  # noqa: E402

# A bundle tag of this run's own: the shared test tag is rebuilt by every test run on the host,
# each with the runtime of its own build, and the attempts must meet this build's.
agentd_env.TEST_BUNDLE = "agentix-test/envd-attack-%s:0.1.0" % re.sub(r"[^a-z0-9]", "", agentd_env.INSTANCE.lower())

TOKEN = "envd-attack-token-0123456789abcdef"
# The runtime's default --max-connections (agentd passes none).
RUNTIME_MAX_CONNECTIONS = 1024


class Target:
    """Where the attempts go: a runtime's address and its token."""

    def __init__(self, host, port, token):
        self.host, self.port, self.token = host, port, token


class BareServer(Target):
    def __init__(self, *args):
        self.srv = Server(*args, env={"AGENTIX_TOKEN": TOKEN})
        super().__init__("127.0.0.1", self.srv.port, TOKEN)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.__exit__(*exc)


def server(*args):
    return BareServer(*args)


def connect(t, timeout=10):
    s = socket.create_connection((t.host, t.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(s):
    """(status, headers, body) of one response with a Content-Length, or None if the server
    closed the connection first."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None
            buf += d
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            d = s.recv(65536)
            if not d:
                return None
            body += d
        return int(lines[0].split(" ")[1]), headers, body[:n]
    except (ConnectionResetError, BrokenPipeError):
        return None


def closed_by_server(s, timeout):
    """Read (and drop) until the server closes s; False when it is still open after timeout."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def process_list(t):
    """POST /process.Process/List with the token on a new connection: (status, the connection,
    kept open), or (None, None) when the server would not serve it."""
    body = b"{}"
    try:
        s = connect(t)
        s.sendall(b"POST /process.Process/List HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                  b"X-Access-Token: " + t.token.encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)
        r = read_response(s)
    except OSError:
        return None, None
    if r is None:
        return None, None
    assert r[0] != 200 or "processes" in json.loads(r[2]), r
    return r[0], s


def places_for_the_token_holder(t, cap, exact=True):
    held = []
    try:
        # Half the places: keep-alive connections that asked for /health once and now idle.
        for _ in range(cap // 2):
            s = connect(t)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
            assert read_response(s)[0] == 200
            held.append(s)
        # The other half: heads begun without a token and never finished.
        for _ in range(cap - cap // 2):
            s = connect(t)
            s.sendall(b"POST /files?path=/etc/passwd HTTP/1.1\r\nHost: a\r\nX-Slow: ")
            held.append(s)
        time.sleep(1)  # all accepted by now: the cap is reached
        for i in range(10):
            status, s = process_list(t)
            assert status == 200, f"the token holder was not served at the cap (attempt {i})"
            held.append(s)  # kept: the next one needs another place
        # The places went to connections that were waiting, the longest waiting first. (When
        # filling the places took long, as in a sandbox, the rest may have timed out by now.)
        closed = [closed_by_server(s, 0.2) for s in held]
        assert sum(closed) >= 10 and closed[0], closed
        assert not exact or closed[:8] == [True] * 8, closed
    finally:
        for s in held:
            s.close()


@test
def idle_and_unfinished_connections_leave_room_for_the_token_holder():
    with server("--max-connections", "16") as t:
        places_for_the_token_holder(t, 16)


@test
def a_trickled_head_and_blank_lines_do_not_keep_a_connection():
    with server() as t:
        head = connect(t)
        head.sendall(b"GET /health HTTP/1.1\r\n")
        idle = connect(t)
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
        assert read_response(idle)[0] == 200
        stop = threading.Event()
        state = {"head": None, "idle": None}

        def trickle(name, s, piece):
            # One byte of a header every second (the head), or a blank line (the idle one):
            # never a pause long enough for a timeout that counts from the last byte.
            buf = b""
            s.settimeout(1)
            while not stop.is_set():
                try:
                    s.sendall(piece)
                except OSError:
                    state[name] = buf
                    return
                try:
                    d = s.recv(65536)
                    if not d:
                        state[name] = buf
                        return
                    buf += d
                except socket.timeout:
                    pass
                except OSError:
                    state[name] = buf
                    return

        threads = [threading.Thread(target=trickle, args=("head", head, b"X")),
                   threading.Thread(target=trickle, args=("idle", idle, b"\r\n"))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 150  # the server's request (30 s) and idle (60 s) timeouts, and room
        while time.monotonic() < deadline and (state["head"] is None or state["idle"] is None):
            time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        assert state["head"] is not None, "a head trickled a byte a second kept its connection"
        assert state["head"].startswith(b"HTTP/1.1 408 "), state["head"]
        assert state["idle"] is not None, "blank lines kept an idle connection open"
        head.close()
        idle.close()


def refused_body(t):
    s = connect(t)
    # No token: 401 at the head. The chunked body then goes on and on, about 1 MiB a second.
    s.sendall(b"POST /files?path=/tmp/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
    r = read_response(s)
    assert r and r[0] == 401, r
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"a" * 64 * 1024)
    sent = 0
    try:
        s.settimeout(5)
        while sent < 16 * 1024 * 1024:
            s.sendall(chunk)
            sent += len(chunk)
            time.sleep(0.05)
    except OSError:
        pass
    assert sent < 16 * 1024 * 1024, "the server read 16 MiB of a refused request's body"
    assert closed_by_server(s, 10)
    s.close()


@test
def a_refused_requests_body_is_not_read_for_ever():
    with server() as t:
        refused_body(t)


def envelope(msg):
    data = json.dumps(msg).encode()
    return b"\0" + struct.pack(">I", len(data)) + data


def read_envelopes(s, buf=b""):
    """The Connect envelopes of a chunked response as they come: yields (flags, json)."""
    # Skip the head, then decode chunks into a byte stream of envelopes.
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    data = b""
    while True:
        while b"\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return
            buf += d
        size_line, rest = buf.split(b"\r\n", 1)
        n = int(size_line, 16)
        while len(rest) < n + 2:
            d = s.recv(65536)
            if not d:
                return
            rest += d
        data += rest[:n]
        buf = rest[n + 2:]
        while len(data) >= 5:
            flags, length = data[0], struct.unpack(">I", data[1:5])[0]
            if len(data) < 5 + length:
                break
            yield flags, json.loads(data[5:5 + length])
            data = data[5 + length:]
        if n == 0:
            return


def watch_dir(t, path):
    """Start a WatchDir stream; (socket, its first message)."""
    s = connect(t, timeout=20)
    body = envelope({"path": path, "recursive": False})
    s.sendall(b"POST /filesystem.Filesystem/WatchDir HTTP/1.1\r\nHost: a\r\n"
              b"Content-Type: application/connect+json\r\nX-Access-Token: " + t.token.encode() +
              b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s, next(read_envelopes(s), None)


def unary(t, path, msg):
    s = connect(t, timeout=20)
    body = json.dumps(msg).encode()
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
              b"X-Access-Token: " + t.token.encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    r = read_response(s)
    s.close()
    return r[0], json.loads(r[2])


def watchers_bounded(t):
    streams = []
    try:
        for i in range(64):
            s, first = watch_dir(t, "/tmp")
            streams.append(s)
            assert first and first[0] == 0 and "start" in first[1], (i, first)
        s, first = watch_dir(t, "/tmp")
        s.close()
        assert first and first[0] == 2 and first[1].get("error", {}).get("code") == "resource_exhausted", \
            f"a 65th WatchDir stream was taken: {first}"
        status, body = unary(t, "/filesystem.Filesystem/CreateWatcher", {"path": "/tmp"})
        assert status == 429 and body["code"] == "resource_exhausted", (status, body)
        # A stream that goes gives its place back.
        streams.pop().close()
        deadline = time.monotonic() + 10
        while True:
            s, first = watch_dir(t, "/tmp")
            streams.append(s)
            if first and first[0] == 0:
                break
            assert time.monotonic() < deadline, first
            time.sleep(0.1)
    finally:
        for s in streams:
            s.close()


@test
def watch_streams_count_against_the_bound_on_watchers():
    with server() as t:
        watchers_bounded(t)


def header_pieces(t):
    s = connect(t)
    # X-Access-Token: 250 bytes of junk, then (in later packets) more junk and the token:
    # the value is not the token, and too long to be one; no piece of it may count.
    s.sendall(b"POST /process.Process/List HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX-Access-Token: " +
              b"j" * 250)
    time.sleep(0.3)
    s.sendall(b"j" * 10)
    time.sleep(0.3)
    s.sendall(t.token.encode())
    time.sleep(0.3)
    s.sendall(b"\r\n\r\n{}")
    r = read_response(s)
    s.close()
    assert r and r[0] == 401, f"a header value longer than any token was taken for its last piece: {r}"


@test
def a_header_value_too_long_stays_unusable_in_any_pieces():
    with server() as t:
        header_pieces(t)


# ---- in sandboxes --------------------------------------------------------------------------------

AGENTD = None


def agentd():
    global AGENTD
    if AGENTD is None:
        AGENTD = Agentd("envd-attack")
    return AGENTD


def delete(sid):
    """Delete a sandbox. A removal Docker is still doing (one with a thousand connections just
    closed can take long, and agentd tries again) is waited for."""
    try:
        agentd().manager().DeleteSandbox(sid, timeout=120)
    except Exception as e:
        if "already in progress" not in str(e):
            raise
    deadline = time.monotonic() + 120
    while docker("ps", "-a", "-q", "--filter", f"name=agentix-{sid}").stdout.strip():
        assert time.monotonic() < deadline, f"sandbox {sid} was not removed"
        time.sleep(1)


def in_sandbox(runtime):
    if runtime not in runtimes():
        print(f"    skipped: dockerd has no {runtime}")
        return
    # The cap's worth of connections, and some.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
    _, sid = agentd().create(runtime=runtime)
    sid = str(sid)
    try:
        url, token = agentd().manager().GetRuntimeAccess(sid)
        host, port = str(url).split("://", 1)[1].rstrip("/").rsplit(":", 1)
        t = Target(host, int(port), str(token))
        def places_for_the_token_holder_at_the_cap(t):
            places_for_the_token_holder(t, RUNTIME_MAX_CONNECTIONS, exact=False)

        failed = []
        for check in (header_pieces, refused_body, watchers_bounded, places_for_the_token_holder_at_the_cap):
            try:
                check(t)
            except AssertionError as e:
                failed.append(f"{check.__name__}: {str(e)[:300]}")
        assert not failed, f"under {runtime}:\n  " + "\n  ".join(failed)
    finally:
        # Also when something failed: a sandbox left running would be adopted by the next
        # test's agentd.
        delete(sid)
    _, sid = agentd().create(runtime=runtime, user="1000:1000")
    sid = str(sid)
    try:
        url, token = agentd().manager().GetRuntimeAccess(sid)
        host, port = str(url).split("://", 1)[1].rstrip("/").rsplit(":", 1)
        sandbox_user_bounds_every_account(Target(host, int(port), str(token)))
    finally:
        # Also when something failed: a sandbox left running would be adopted by the next
        # test's agentd.
        delete(sid)


def start_process(t, command, user=None):
    """envd Process Start of /bin/sh -c command, as user (Authorization: Basic) or the default:
    (its output, the end of its stream)."""
    s = connect(t, timeout=60)
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", command]}, "stdin": False})
    basic = b"Authorization: Basic " + base64.b64encode(user.encode() + b":") + b"\r\n" if user else b""
    s.sendall(b"POST /process.Process/Start HTTP/1.1\r\nHost: a\r\nContent-Type: application/connect+json\r\n"
              b"X-Access-Token: " + t.token.encode() + b"\r\n" + basic + b"Content-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    out, end = b"", None
    for flags, msg in read_envelopes(s):
        data = msg.get("event", {}).get("data", {})
        for k in ("stdout", "stderr"):
            if k in data:
                out += base64.b64decode(data[k])
        if flags & 2:
            end = msg
    s.close()
    return out, end


def sandbox_user_bounds_every_account(t):
    # The sandbox's `user` is what its runtime runs as: a request that names root (as E2B's
    # `user: "root"` does) cannot be root, for a command or for what an upload makes.
    out, end = start_process(t, "id -u")
    assert out.strip() == b"1000", (out, end)
    out, end = start_process(t, "id -u", user="root")
    assert out.strip() != b"0" and end and end.get("error"), (out, end)
    s = connect(t, timeout=60)
    s.sendall(b"POST /files?path=/tmp/as-root&username=root HTTP/1.1\r\nHost: a\r\n"
              b"Content-Type: application/octet-stream\r\nX-Access-Token: " + t.token.encode() +
              b"\r\nContent-Length: 2\r\n\r\nhi")
    r = read_response(s)
    s.close()
    out, _ = start_process(t, "stat -c %u /tmp/as-root 2>/dev/null || echo none")
    assert (r[0] != 200 and out.strip() == b"none") or out.strip() == b"1000", (r, out)


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
