# SPDX-License-Identifier: MIT
"""The port proxy of agentix-server (/proxy/PORT/), against real servers on loopback: an HTTP
server in this process that echoes what it got and streams large bodies, and a WebSocket echo
server (python3-websockets). The token checks from the attacker's side (none, another port's,
the runtime's own, the proxy's on /socket.io/), what the upstream gets (path, query, headers
without the proxy's credentials), the cookie flow a browser follows, streaming both ways, a
WebSocket through it, and 502 for a port nothing listens on."""

import asyncio
import hashlib
import hmac
import http.server
import json
import os
import socket
import threading

import requests
import socketio
import websocket  # python3-websocket
import websockets.server  # python3-websockets

from harness import Server, free_port, main, test, wait_until

TOKEN = "proxy-test-token-0123456789"
BIG = 64 << 20


def port_token(port, runtime_token=TOKEN):
    return hmac.new(runtime_token.encode(), f"agentix-proxy:{port}".encode(), hashlib.sha256).hexdigest()


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/big":
            # 64 MiB, streamed in 1 MiB pieces: the proxy must pass it on, not gather it.
            self.send_response(200)
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            chunk = bytes(range(256)) * 4096
            try:
                for _ in range(BIG // len(chunk)):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a client that left mid-response (many_requests_leave_nothing_behind)
            return
        self.reply(200, json.dumps({"path": self.path, "headers": dict(self.headers.items())}).encode())

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        h = hashlib.sha256()
        while n > 0:
            data = self.rfile.read(min(n, 1 << 20))
            h.update(data)
            n -= len(data)
        self.reply(200, json.dumps({"sha256": h.hexdigest()}).encode())


class Servers:
    def __init__(self):
        self.http_port, self.ws_port = free_port(), free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.http_port), Upstream)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def echo(ws):
            async for m in ws:
                await ws.send(m)

        async def serve():
            async with websockets.server.serve(echo, "127.0.0.1", self.ws_port, max_size=None):
                ready.set()
                await asyncio.Future()

        threading.Thread(target=lambda: self.loop.run_until_complete(serve()), daemon=True).start()
        ready.wait(5)
        self.server = Server(env={"AGENTIX_TOKEN": TOKEN})

    def url(self, port, rest="/"):
        return f"{self.server.url}/proxy/{port}{rest}"


S = None


def servers():
    global S
    if S is None:
        S = Servers()
    return S


@test
def without_the_ports_token_nothing_passes():
    s = servers()
    p = s.http_port
    for headers in ({}, {"Authorization": f"Bearer {port_token(p + 1)}"},  # another port's token
                    {"Authorization": f"Bearer {TOKEN}"},                     # the runtime's own
                    {"Authorization": f"Bearer {port_token(p, 'another-runtime-token')}"},
                    {"Cookie": f"agentix_proxy_{p + 1}={port_token(p + 1)}"}):
        r = requests.get(s.url(p, "/x"), headers=headers, timeout=10)
        assert r.status_code == 401 and "token" in r.text, (headers, r.status_code, r.text)
        # What to run to get one, for a command-line user and a D-Bus user alike.
        assert "agentixctl port ID PORT" in r.text and "GetPortUrl(" in r.text, r.text
    r = requests.get(s.url(p, f"/x?agentix_token={port_token(p + 1)}"), timeout=10, allow_redirects=False)
    assert r.status_code == 401
    # The proxy's token is no runtime token: /socket.io/ refuses it.
    c = socketio.Client(reconnection=False)
    try:
        c.connect(s.server.url, namespaces=["/rpc"], auth={"token": port_token(p)}, transports=["websocket"],
                  wait_timeout=5)
        raise AssertionError("the proxy's token opened /rpc")
    except socketio.exceptions.ConnectionError:
        pass
    finally:
        c.disconnect()


@test
def the_upstream_gets_the_request_without_the_proxys_credentials():
    s = servers()
    p = s.http_port
    r = requests.get(s.url(p, "/a/b?x=1&y=2"), timeout=10,
                     headers={"Authorization": f"Bearer {port_token(p)}", "Cookie": "theirs=1", "X-Mine": "yes"})
    assert r.status_code == 200, r.text
    # One request per connection: the client is told, so it does not send another on it.
    assert r.headers.get("Connection") == "close", r.headers
    got = r.json()
    assert got["path"] == "/a/b?x=1&y=2", got
    h = {k.lower(): v for k, v in got["headers"].items()}
    assert "authorization" not in h and h["cookie"] == "theirs=1" and h["x-mine"] == "yes", h
    assert h["x-forwarded-prefix"] == f"/proxy/{p}" and h["connection"] == "close", h


@test
def a_browser_trades_the_query_token_for_a_cookie():
    s = servers()
    p = s.http_port
    session = requests.Session()
    r = session.get(s.url(p, f"/page?agentix_token={port_token(p)}&q=7"), timeout=10, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == f"/proxy/{p}/page?q=7", r.headers
    cookie = r.headers["Set-Cookie"]
    assert f"agentix_proxy_{p}={port_token(p)}" in cookie and f"Path=/proxy/{p}/" in cookie and "HttpOnly" in cookie
    r = session.get(s.url(p, "/page?q=7"), timeout=10)
    assert r.status_code == 200 and r.json()["path"] == "/page?q=7", r.text
    h = {k.lower(): v for k, v in r.json()["headers"].items()}
    assert "cookie" not in h, h  # the proxy's own cookie stays with the proxy
    # Another port is another cookie: this one does not open it.
    r = session.get(s.url(s.ws_port, "/"), timeout=10)
    assert r.status_code == 401


@test
def bodies_stream_both_ways():
    s = servers()
    p = s.http_port
    auth = {"Authorization": f"Bearer {port_token(p)}"}
    r = requests.get(s.url(p, "/big"), headers=auth, stream=True, timeout=60)
    h, n = hashlib.sha256(), 0
    for chunk in r.iter_content(1 << 20):
        h.update(chunk)
        n += len(chunk)
    want = hashlib.sha256(bytes(range(256)) * 4096 * (BIG // (256 * 4096))).hexdigest()
    assert n == BIG and h.hexdigest() == want, n
    body = bytes(range(256)) * (32 * 1024)  # 8 MiB up
    r = requests.post(s.url(p, "/upload"), headers=auth, data=body, timeout=60)
    assert r.status_code == 200 and r.json()["sha256"] == hashlib.sha256(body).hexdigest(), r.text


@test
def a_websocket_passes_through():
    s = servers()
    p = s.ws_port
    ws = websocket.create_connection(s.url(p, "/echo").replace("http://", "ws://"),
                                     header=[f"Authorization: Bearer {port_token(p)}"], timeout=10)
    try:
        for m in ("hello", "x" * 200000):
            ws.send(m)
            assert ws.recv() == m
        ws.send_binary(bytes(range(256)))
        assert ws.recv() == bytes(range(256))
    finally:
        ws.close()


@test
def a_port_nothing_listens_on_is_502_with_one_line():
    s = servers()
    p = free_port()
    r = requests.get(s.url(p, "/"), headers={"Authorization": f"Bearer {port_token(p)}"}, timeout=10)
    assert r.status_code == 502 and r.text.count("\n") == 1 and f"port {p}" in r.text, r.text
    r = requests.get(f"{s.server.url}/proxy/0/", timeout=10)
    assert r.status_code == 404
    r = requests.get(f"{s.server.url}/proxy/99999/", timeout=10)
    assert r.status_code == 404


@test
def many_requests_leave_nothing_behind():
    """Sequential and concurrent requests: every proxied connection ends (the server's fd count
    comes back to where it was)."""
    s = servers()
    p = s.http_port
    auth = {"Authorization": f"Bearer {port_token(p)}"}
    def fds():
        return len(os.listdir(f"/proc/{s.server.proc.pid}/fd"))

    before = fds()
    for _ in range(50):
        assert requests.get(s.url(p, "/x"), headers=auth, timeout=10).status_code == 200
    threads = [threading.Thread(target=lambda: requests.get(s.url(p, "/y"), headers=auth, timeout=20))
               for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # A client that goes away mid-response.
    c = socket.create_connection(("127.0.0.1", s.server.port))
    c.sendall(f"GET /proxy/{p}/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {port_token(p)}\r\n\r\n".encode())
    c.recv(65536)
    c.close()
    wait_until(lambda: fds() <= before, 10, what=f"the server's fds back to {before} (now {fds()})")


if __name__ == "__main__":
    try:
        main()
    finally:
        if S:
            S.server.stop()
            S.httpd.shutdown()
