# SPDX-License-Identifier: MIT
"""POST /runtime/hold and AGENTIX_CHECKPOINT=1 (agentix-server(8)), against the real server in a
network namespace of this test's own (it runs itself again under `unshare --net`), where
10.77.0.1 is an address other than loopback, as a sandbox's is: the hold is refused without the
token, refused (409, naming it) while a connection from 10.77.0.1 is open, and else stops
listening while keeping the port (connections refused, the port taken even for SO_REUSEADDR),
resets every other connection (plain, WebSocket, the port proxy's both sides), and ends at
SIGUSR2. With AGENTIX_CHECKPOINT=1 a connection the server ends leaves no TIME_WAIT entry in the
namespace's /proc/net/tcp; without it, the same exchange leaves one (so the check can fail)."""

import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

import websocket  # python3-websocket

from harness import Server, free_port, main, server_binary, test, wait_healthy, wait_until

TOKEN = "hold-test-token-0123456789abcdef"
OUTSIDE = "10.77.0.1"  # not loopback: the address a sandbox's peers see
NETNS_MARK = "AGENTIX_HOLD_TEST_NETNS"


def enter_own_network_namespace():
    """Run this file again in a network namespace of its own (the host's is never touched)."""
    if os.environ.get(NETNS_MARK) == "1":
        return
    if not shutil.which("unshare") or not shutil.which("ip"):
        print("SKIP: needs unshare(1) and ip(8)")
        sys.exit(77)
    for cmd in (["unshare", "--net"], ["unshare", "--user", "--map-root-user", "--net"]):
        if subprocess.run(cmd + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            env = dict(os.environ, **{NETNS_MARK: "1"})
            sys.exit(subprocess.run(cmd + [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)
    print("SKIP: cannot make a network namespace here")
    sys.exit(77)


def set_up_addresses():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # A dummy interface where the kernel has the module; else the address on lo (still not
    # loopback in /proc/net/tcp's sense: it is not in 127.0.0.0/8).
    dummy = ["ip link add d0 type dummy", f"ip addr add {OUTSIDE}/24 dev d0", "ip link set d0 up"]
    for i, c in enumerate(dummy):
        if subprocess.run(c.split(), stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["ip", "link", "del", "d0"], stderr=subprocess.DEVNULL)
            subprocess.run(["ip", "addr", "add", f"{OUTSIDE}/32", "dev", "lo"], check=True)
            break


def server(checkpoint=True):
    env = {"AGENTIX_TOKEN": TOKEN}
    if checkpoint:
        env["AGENTIX_CHECKPOINT"] = "1"
    else:
        os.environ.pop("AGENTIX_CHECKPOINT", None)
    return Server(env=env, host="0.0.0.0")


def tls_client_context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Conn:
    """One raw TCP connection (from `source`; over TLS with tls) that reads HTTP/1.1 responses."""

    def __init__(self, port, source="127.0.0.1", dest=None, tls=False):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.settimeout(5)
        self.s.bind((source, 0))
        self.s.connect((dest or source, port))
        if tls:
            self.s = tls_client_context().wrap_socket(self.s)
        self.buf = b""

    def local(self):
        return self.s.getsockname()

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("closed by the server")
        self.buf += d

    def request(self, method, path, headers=None, body=b""):
        lines = [f"{method} {path} HTTP/1.1", "Host: runtime"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        lines += [f"Content-Length: {len(body)}"]
        self.s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return self.response()

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def end(self):
        """How the server ended the connection: "reset", "eof" or "open" (nothing within 3 s)."""
        return how_it_ended(self.s)

    def reset(self):
        """Close with a reset, as agentd does: no TIME_WAIT on either side."""
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.s.close()


def how_it_ended(s, timeout=3):
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return "eof"
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        return "open"


def hold(conn, token=TOKEN):
    return conn.request("POST", "/runtime/hold", {"X-Access-Token": token} if token else None)


TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "0A": "LISTEN", "07": "CLOSE"}


def tcp_entries(port):
    """(local port, remote "addr:port" hex, state name) of this namespace's IPv4 TCP entries
    on port."""
    found = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            lport, rport = int(local.split(":")[1], 16), int(remote.split(":")[1], 16)
            if port in (lport, rport):
                found.append((lport, rport, TCP_STATES.get(state, state)))
    return found


def port_token(port):
    return hmac.new(TOKEN.encode(), f"agentix-proxy:{port}".encode(), hashlib.sha256).hexdigest()


@test
def hold_wants_the_token():
    with server() as s:
        c = Conn(s.port)
        # Refused as the other endpoints that take the token refuse a request without it.
        other = c.request("POST", "/execute")
        assert other[0] == 401, other
        for token in (None, "wrong-token-0123456789"):
            status, _, body = hold(c, token)
            assert (status, body) == (401, other[2]), (status, body)
        status, _, _ = c.request("GET", "/runtime/hold", {"X-Access-Token": TOKEN})
        assert status == 405
        status, _, _ = c.request("POST", "/runtime/other", {"X-Access-Token": TOKEN})
        assert status == 404
        # Still listening.
        status, _, _ = Conn(s.port).request("GET", "/health")
        assert status == 200
        c.reset()


def reset_socket(sock):
    """Close with a reset (no FIN, no TIME_WAIT)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@test
def hold_refused_while_a_connection_is_in_the_way():
    with server() as s:
        # A connection of someone else's in the sandbox, between addresses other than loopback
        # (a program in the sandbox and a peer outside): the hold cannot end it.
        listener = socket.socket()
        listener.bind((OUTSIDE, 0))
        listener.listen(1)
        theirs = socket.create_connection(listener.getsockname(), timeout=5, source_address=(OUTSIDE, 0))
        accepted, _ = listener.accept()
        # One to the server's own port from that address: the server's, which a hold resets.
        outside = Conn(s.port, OUTSIDE)
        assert outside.request("GET", "/health")[0] == 200
        c = Conn(s.port)
        status, _, body = hold(c)
        assert status == 409, (status, body)
        answer = json.loads(body)
        port = listener.getsockname()[1]
        mine = f"{OUTSIDE}:{port} {OUTSIDE}:{theirs.getsockname()[1]} ESTABLISHED"
        assert mine in answer["connections"], answer
        assert not any(f":{s.port} " in e for e in answer["connections"]), answer
        assert "error" in answer and len(answer["connections"]) <= 32, answer
        # Nothing changed: connections are served, new ones are taken.
        assert outside.request("GET", "/health")[0] == 200
        assert Conn(s.port).request("GET", "/health")[0] == 200
        c.reset()

        # Once it is gone (by a reset: no TIME_WAIT here either), the hold is taken, asked over a
        # connection from that address too: the asker is not in its own way, and the server's
        # other connection from there is reset.
        reset_socket(theirs)
        reset_socket(accepted)
        listener.close()
        asker = Conn(s.port, OUTSIDE)
        status, _, body = hold(asker)
        assert status == 200, (status, body)
        assert json.loads(body) == {"held": True}
        assert outside.end() == "reset", "the server's own connection was not reset"
        # A hold while held is answered the same way.
        status, _, body = hold(asker)
        assert (status, json.loads(body)) == (200, {"held": True}), body
        asker.reset()

        for address in ("127.0.0.1", OUTSIDE):
            try:
                socket.create_connection((address, s.port), timeout=2).close()
                raise AssertionError(f"{address}:{s.port} still takes connections while held")
            except ConnectionRefusedError:
                pass
        # The port stays the runtime's: nobody else may bind it, even with SO_REUSEADDR.
        for reuse in (False, True):
            for address in ("0.0.0.0", "127.0.0.1"):
                with socket.socket() as other:
                    if reuse:
                        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        other.bind((address, s.port))
                        raise AssertionError(f"bound {address}:{s.port} (SO_REUSEADDR {reuse}) while held")
                    except OSError as e:
                        assert e.errno == 98, e  # EADDRINUSE
        # No connection of the server's is left, no LISTEN either (gVisor's "waiters").
        assert wait_until(lambda: not tcp_entries(s.port), what="no TCP entry on the port"), tcp_entries(s.port)

        s.proc.send_signal(signal.SIGUSR2)
        assert wait_healthy(s.url, 5), "no answer after SIGUSR2"
        assert Conn(s.port, OUTSIDE).request("GET", "/health")[0] == 200
        assert "Listening again (SIGUSR2)" in s.read_log(), s.read_log()


class TlsServer:
    """agentix-server serving TLS only (--tls-cert, --tls-key) on 0.0.0.0, with the token."""

    def __init__(self, checkpoint=True):
        self.tmp = tempfile.TemporaryDirectory()
        cert, key = os.path.join(self.tmp.name, "cert.pem"), os.path.join(self.tmp.name, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=runtime"],
                       check=True, capture_output=True)
        env = dict(os.environ, AGENTIX_TOKEN=TOKEN)
        if checkpoint:
            env["AGENTIX_CHECKPOINT"] = "1"
        self.port = free_port()
        self.log = open(os.path.join(self.tmp.name, "log"), "wb")
        self.proc = subprocess.Popen([server_binary(), "--host", "0.0.0.0", "--port", str(self.port),
                                      f"--tls-cert={cert}", f"--tls-key={key}"],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self.healthy, timeout=10, what="the TLS server")

    def healthy(self):
        try:
            c = Conn(self.port, tls=True)
            ok = c.request("GET", "/health")[0] == 200
            c.reset()
            return ok
        except OSError:
            return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(10)
        self.log.close()
        with open(self.log.name, "rb") as f:
            log = f.read().decode(errors="replace")
        self.tmp.cleanup()
        if exc[0] is None:
            assert rc == 0, (rc, log)


class StreamingUpstream:
    """On 127.0.0.1: answers a request with a chunked head and one chunk, then holds the
    connection open (a stream in progress)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")


@test
def hold_resets_every_other_connection():
    up = StreamingUpstream()
    with server() as s:
        idle = Conn(s.port)
        assert idle.request("GET", "/health")[0] == 200
        ws = websocket.create_connection(f"ws://127.0.0.1:{s.port}/socket.io/?EIO=4&transport=websocket", timeout=5)
        assert ws.recv().startswith("0{"), "no Engine.IO open packet"
        proxied = Conn(s.port)
        proxied.s.sendall(f"GET /proxy/{up.port}/ HTTP/1.1\r\nHost: runtime\r\n"
                          f"Authorization: Bearer {port_token(up.port)}\r\n\r\n".encode())
        while b"hello" not in proxied.buf:  # the stream is under way
            proxied._fill()
        wait_until(lambda: up.conns, what="the upstream connection")
        before = [e for e in tcp_entries(s.port) if e[2] == "ESTABLISHED"]
        assert len(before) >= 6, before  # three connections, both ends of each

        asker = Conn(s.port)
        status, _, body = hold(asker)
        assert status == 200, (status, body)
        assert idle.end() == "reset"
        assert how_it_ended(ws.sock) == "reset"
        assert proxied.end() == "reset"
        assert how_it_ended(up.conns[0]) == "reset"  # the proxy's upstream side too
        # Nothing is left but the asker's connection.
        left = [e for e in tcp_entries(s.port) if e[2] != "TIME_WAIT"]
        assert sorted(left) == sorted([(s.port, asker.local()[1], "ESTABLISHED"),
                                       (asker.local()[1], s.port, "ESTABLISHED")]), left
        assert not [e for e in tcp_entries(s.port) if e[2] == "TIME_WAIT"], tcp_entries(s.port)
        asker.reset()
        s.proc.send_signal(signal.SIGUSR2)
        assert wait_healthy(s.url, 5)
    up.sock.close()


@test
def hold_over_tls():
    """The asker is known by its TLS connection's addresses; the other TLS connections are reset
    (their TCP sockets, not only their plain ends)."""
    with TlsServer() as s:
        other = Conn(s.port, tls=True)
        assert other.request("GET", "/health")[0] == 200
        asker = Conn(s.port, OUTSIDE, tls=True)
        status, _, body = hold(asker)
        assert (status, json.loads(body)) == (200, {"held": True}), (status, body)
        # Python's TLS reads a reset as an end (suppress_ragged_eofs): that it was one shows in
        # the table, where a FIN would leave this end in CLOSE_WAIT (and the server's in FIN_WAIT2).
        assert other.end() in ("eof", "reset")
        gone = other.local()[1]
        assert not [e for e in tcp_entries(s.port) if gone in e[:2]], tcp_entries(s.port)
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
            raise AssertionError("still takes connections while held")
        except ConnectionRefusedError:
            pass
        asker.reset()
        s.proc.send_signal(signal.SIGUSR2)
        wait_until(s.healthy, what="an answer after SIGUSR2")

        # Over TLS too, a connection the server ends leaves no TIME_WAIT.
        c = Conn(s.port, OUTSIDE, tls=True)
        status, headers, _ = c.request("GET", "/health", {"Connection": "close"})
        assert status == 200 and headers.get("connection") == "close"
        assert c.end() in ("eof", "reset")  # close_notify, then the reset
        c.s.close()
        time.sleep(0.2)
        assert not [e for e in tcp_entries(s.port) if e[2] == "TIME_WAIT"], tcp_entries(s.port)


class ClosingUpstream(StreamingUpstream):
    """On 127.0.0.1: answers with a whole response, then closes (the proxy's upstream ends)."""

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            c.close()


def time_waits_after_server_closes(checkpoint):
    """Requests the server ends, from 10.77.0.1; the client closes only once the server has ended
    its side (as a client that reads to the end does). The server's TIME_WAIT entries on its
    port, and what the client got."""
    with server(checkpoint) as s:
        c = Conn(s.port, OUTSIDE)
        status, headers, body = c.request("GET", "/health", {"Connection": "close"})
        assert status == 200 and headers.get("connection") == "close", headers
        assert json.loads(body)["status"] == "ok"
        ended = c.end()
        c.s.close()

        ws = websocket.create_connection(f"ws://{OUTSIDE}:{s.port}/socket.io/?EIO=4&transport=websocket", timeout=5)
        assert ws.recv().startswith("0{")
        ws.send("1")  # Engine.IO close: the server ends the session, and its WebSocket
        ws_ended = how_it_ended(ws.sock)
        ws.sock.close()

        # A WebSocket the client closes (its close frame first): lws would answer with its own
        # close frame and FIN.
        ws = websocket.create_connection(f"ws://{OUTSIDE}:{s.port}/socket.io/?EIO=4&transport=websocket", timeout=5)
        assert ws.recv().startswith("0{")
        ws.close(timeout=1)

        # The port proxy, whose upstream answers and closes.
        up = ClosingUpstream()
        p = Conn(s.port, OUTSIDE)
        status, _, body = p.request("GET", f"/proxy/{up.port}/", {"Authorization": f"Bearer {port_token(up.port)}"})
        assert (status, body) == (200, b"hello"), (status, body)
        proxy_ended = p.end()
        p.s.close()
        up.sock.close()
        time.sleep(0.2)
        waits = [e for e in tcp_entries(s.port) if e[2] == "TIME_WAIT" and e[0] == s.port]
    return waits, ended, ws_ended, proxy_ended


@test
def checkpoint_mode_leaves_no_time_wait():
    waits, ended, ws_ended, proxy_ended = time_waits_after_server_closes(True)
    assert not waits, waits
    # The whole response came, then the reset.
    assert (ended, ws_ended, proxy_ended) == ("reset", "reset", "reset"), (ended, ws_ended, proxy_ended)


@test
def without_checkpoint_mode_a_time_wait_is_left():
    waits, ended, ws_ended, proxy_ended = time_waits_after_server_closes(False)
    assert (ended, ws_ended, proxy_ended) == ("eof", "eof", "eof"), (ended, ws_ended, proxy_ended)
    # The plain connection's, the WebSocket's the server ended, the proxy's.
    assert len(waits) >= 3, waits


if __name__ == "__main__":
    enter_own_network_namespace()
    set_up_addresses()
    main()
