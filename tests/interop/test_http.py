# SPDX-License-Identifier: MIT
"""HTTP/1.1 as real clients use it against agentix-server: persistent connections with
requests.Session (python-engineio's own HTTP client), and raw sockets for what libraries rarely
do: pipelining, bodies in pieces, chunked bodies, Expect: 100-continue, Connection: close,
HTTP/1.0, malformed and oversized requests, a WebSocket upgrade on a connection that served
polling requests before, a client leaving while its poll is parked."""

import json
import os
import socket
import subprocess
import time

import requests
import websocket  # python3-websocket

from harness import Server, health_ok, main, server_binary, test, wait_until

srv = None


def server():
    global srv
    if srv is None:
        srv = Server("--conformance", "--ping-interval", "20000", "--ping-timeout", "20000")
    return srv


EIO = "/engine.io/?EIO=4&transport=polling"


class Conn:
    """One raw TCP connection that reads HTTP/1.1 responses one at a time."""

    def __init__(self, timeout=5):
        self.s = socket.create_connection(("127.0.0.1", server().port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed by the server")
        self.buf += d

    def response(self):
        """(status, headers dict with lower-case names, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status = lines[0].split(" ")[:2]
        assert version == "HTTP/1.1", lines[0]
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return int(status), headers, body

    def closed_by_server(self, timeout=3):
        self.s.settimeout(timeout)
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    return True
                self.buf += d
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def get(path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


def post(path, body, extra=""):
    return f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def upgrade(path):
    return (f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode()


def handshake(c):
    c.send(get(EIO))
    st, _, body = c.response()
    assert st == 200, (st, body)
    return json.loads(body[1:])["sid"]


@test
def requests_session_reuses_one_connection():
    url = server().url
    with requests.Session() as s:
        r = s.get(url + EIO)
        assert r.status_code == 200
        sid = json.loads(r.text[1:])["sid"]
        for i in range(20):
            r = s.post(f"{url}{EIO}&sid={sid}", data=f"4msg{i}")
            assert (r.status_code, r.text) == (200, "ok")
            r = s.get(f"{url}{EIO}&sid={sid}")
            assert (r.status_code, r.text) == (200, f"4msg{i}")
        r = s.get(f"{url}/engine.io/?EIO=4&transport=nope")
        assert r.status_code == 400 and r.json() == {"code": 0, "message": "Transport unknown"}
        assert s.get(url + "/health").json()["status"] == "ok"
        pool = s.get_adapter(url).poolmanager.connection_from_url(url)
        assert pool.num_connections == 1, pool.num_connections


@test
def pipelined_requests_are_answered_in_order():
    c = Conn()
    sid = handshake(c)
    u = f"{EIO}&sid={sid}"
    c.send(post(u, b"4one") + get(u) + post(u, b"4two\x1e4three") + get(u) + get("/health") + get("/nope"))
    assert c.response()[0::2] == (200, b"ok")
    assert c.response()[0::2] == (200, b"4one")
    assert c.response()[0::2] == (200, b"ok")
    assert c.response()[0::2] == (200, b"4two\x1e4three")
    st, _, body = c.response()
    assert st == 200 and json.loads(body)["status"] == "ok"
    assert c.response()[0] == 404
    c.close()


@test
def pipelined_behind_a_parked_poll_wait_their_turn():
    # The GET parks; the POST behind it on the same connection is answered only after the GET
    # (responses keep the order of requests), which a POST on a second connection releases.
    c = Conn()
    sid = handshake(c)
    u = f"{EIO}&sid={sid}"
    c.send(get(u) + post(u, b"4late"))
    time.sleep(0.2)
    other = Conn()
    other.send(post(u, b"4wake"))
    assert other.response()[0::2] == (200, b"ok")
    assert c.response()[0::2] == (200, b"4wake")
    assert c.response()[0::2] == (200, b"ok")
    c.send(get(u))
    assert c.response()[0::2] == (200, b"4late")
    c.close()
    other.close()


@test
def body_in_pieces_and_chunked():
    c = Conn()
    sid = handshake(c)
    u = f"{EIO}&sid={sid}"
    whole = post(u, b"4split body")
    for i in range(len(whole)):  # one byte at a time, head and body
        c.send(whole[i:i + 1])
        if i % 7 == 0:
            time.sleep(0.001)
    assert c.response()[0::2] == (200, b"ok")
    c.send(get(u))
    assert c.response()[0::2] == (200, b"4split body")

    chunked = (f"POST {u} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    c.send(chunked + b"3\r\n4ch\r\n")
    time.sleep(0.05)
    c.send(b"6;ext=1\r\nunked!\r\n0\r\n\r\n")
    assert c.response()[0::2] == (200, b"ok")
    c.send(get(u))
    assert c.response()[0::2] == (200, b"4chunked!")
    c.close()


@test
def expect_100_continue():
    c = Conn()
    sid = handshake(c)
    u = f"{EIO}&sid={sid}"
    c.send(f"POST {u} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n".encode())
    assert c.response()[0] == 100
    c.send(b"4cont")
    assert c.response()[0::2] == (200, b"ok")
    c.send(get(u))
    assert c.response()[0::2] == (200, b"4cont")
    c.close()


@test
def connection_close_and_http_1_0():
    c = Conn()
    c.send(get("/health", "Connection: close\r\n"))
    st, h, _ = c.response()
    assert st == 200 and h.get("connection") == "close"
    assert c.closed_by_server()
    c.close()

    c = Conn()
    c.send(b"GET /health HTTP/1.0\r\n\r\n")
    st, h, _ = c.response()
    assert st == 200 and h.get("connection") == "close"
    assert c.closed_by_server()
    c.close()

    c = Conn()
    for _ in range(3):
        c.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        st, h, _ = c.response()
        assert st == 200 and h.get("connection") == "keep-alive"
    assert not c.closed_by_server(timeout=0.3)
    c.close()


@test
def errors_keep_the_connection_where_they_can():
    c = Conn()
    for req, status in ((get("/nope"), 404),
                        (post("/health", b"x" * 1000), 405),
                        (get("/engine.io/?EIO=5&transport=polling"), 400),
                        (post(EIO, b"40"), 400),
                        (get("/engine.io/?EIO=4&transport=websocket"), 400)):
        c.send(req)
        assert c.response()[0] == status, req
    c.send(get("/health"))
    assert c.response()[0] == 200
    c.close()


@test
def malformed_and_oversized_requests_are_answered_then_closed():
    c = Conn()
    c.send(b"THIS IS NOT HTTP\r\n\r\n")
    assert c.response()[0] == 400
    assert c.closed_by_server()
    c.close()

    c = Conn()
    c.send(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert c.response()[0] == 431
    assert c.closed_by_server()
    c.close()

    # The server is fine afterwards.
    c = Conn()
    c.send(get("/health"))
    assert c.response()[0] == 200
    c.close()


@test
def websocket_upgrade_after_polling_on_the_same_connection():
    other = Conn()
    other.send(get("/health"))
    assert other.response()[0] == 200
    # A fresh websocket session, on a connection that served a plain request before.
    other.send(upgrade("/engine.io/?EIO=4&transport=websocket"))
    head = b""
    while b"\r\n\r\n" not in head:
        head += other.s.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
    other.close()


@test
def refused_websocket_upgrades_are_answered():
    sid = handshake(Conn())
    for path, code in ((f"/engine.io/?EIO=4&transport=websocket&sid=nope", 1),
                       ("/engine.io/?EIO=4&transport=bogus", 0),
                       ("/engine.io/?EIO=3&transport=websocket", 5)):
        c = Conn()
        c.send(upgrade(path))
        st, _, body = c.response()
        assert st == 400 and json.loads(body)["code"] == code, (path, st, body)
        assert c.closed_by_server()
        c.close()
    # A second websocket for a session that has upgraded already is accepted (101) and closed
    # at once, as engine.io does; the session goes on.
    port = server().port
    ws = websocket.create_connection(f"ws://127.0.0.1:{port}/engine.io/?EIO=4&transport=websocket&sid={sid}")
    ws.send("2probe")
    assert ws.recv() == "3probe"
    ws.send("5")
    c = Conn()
    c.send(upgrade(f"/engine.io/?EIO=4&transport=websocket&sid={sid}"))
    assert c.response()[0] == 101
    assert c.closed_by_server()
    ws.send("4still")
    assert ws.recv() == "4still"
    ws.close()
    c.close()


@test
def a_client_leaving_while_parked_frees_the_poll():
    c = Conn()
    sid = handshake(c)
    u = f"{EIO}&sid={sid}"
    c.send(get(u))
    time.sleep(0.1)
    c.close()
    # Had the parked GET survived, this one would be a "duplicate poll" (400, session closed).
    d = Conn()

    def answered():
        d.send(post(u, b"4after"))
        assert d.response()[0::2] == (200, b"ok")
        return True

    time.sleep(0.1)
    assert answered()
    d.send(get(u))
    assert d.response()[0::2] == (200, b"4after")
    d.close()


@test
def many_keepalive_connections_then_all_gone():
    conns = [Conn() for _ in range(50)]
    for c in conns:
        c.send(get("/health"))
    for c in conns:
        assert c.response()[0] == 200
    for c in conns:
        c.close()
    # Still serving, and nothing left over in the server (it exits cleanly at the end).
    c = Conn()
    c.send(get("/health"))
    assert c.response()[0] == 200
    c.close()


def global_ipv4_address():
    """An address of this host that is not loopback (eth0, dockerd's bridge, …), or None."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        return line.split()[3].split("/")[0]
    return None


@test
def without_a_token_only_loopback_listens():
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTIX_TOKEN", "AGENTIX_BIND_HOST")}
    # No token and no --host: 127.0.0.1 only, said in one line.
    s = Server(host=None, env={"AGENTIX_TOKEN": ""})
    try:
        log = s.read_log()
        assert "No $AGENTIX_TOKEN: listening on 127.0.0.1 only" in log, log
        addr = global_ipv4_address()
        if addr:
            assert not health_ok(f"http://{addr}:{s.port}"), f"reachable on {addr} without a token"
    finally:
        assert s.stop() == 0, s.read_log()
    # A non-loopback address without a token is refused, in one line, before anything starts.
    for host in ("0.0.0.0", "::", addr or "192.0.2.1"):
        r = subprocess.run([server_binary(), "--host", host, "--port", "0"], env=env, capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 2, (host, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Refusing to listen on" in lines[0] and "--insecure-no-token" in lines[0], \
            r.stderr
    # Loopback is fine without a token; any address with a token or the insecure flag.
    with Server(host="127.0.0.1", env={"AGENTIX_TOKEN": ""}):
        pass
    with Server(host="0.0.0.0", env={"AGENTIX_TOKEN": "secret"}):
        pass
    with Server("--insecure-no-token", host="0.0.0.0", env={"AGENTIX_TOKEN": ""}) as s:
        assert "without $AGENTIX_TOKEN" in s.read_log(), s.read_log()


if __name__ == "__main__":
    try:
        main()
    finally:
        if srv:
            srv.stop()
