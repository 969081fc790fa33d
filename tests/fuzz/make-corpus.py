#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora under corpus/<target>/ (small, hand-picked valid and invalid inputs).
Run with /usr/bin/python3 (it has the msgpack module)."""
import base64
import os
import struct

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# fuzz-eio-ws: first byte odd = binary frame.
for name, frame in {
    "open": '\x000{"sid":"abc","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}',
    "ping-probe": "\x002probe",
    "pong": "\x003",
    "message": '\x00451-/rpc,["call",{"_placeholder":true,"num":0}]',
    "upgrade": "\x005",
    "noop": "\x006",
    "bad-type": "\x007x",
    "binary": b"\x01\x00\x01\x02\xff",
}.items():
    write("fuzz-eio-ws", name, frame)

# fuzz-eio-payload: polling bodies.
for name, body in {
    "one": "4hello",
    "spec-example": "4hello\x1ebAQID",
    "mixed": "2probe\x1e4" + '2["ev",1]' + "\x1eb" + base64.b64encode(bytes(range(256))).decode() + "\x1e6",
    "empty-binary": "b",
    "padding": "bAA==\x1ebAAA=\x1ebAAAA",
    "trailing-sep": "4a\x1e",
    "bad-b64": "bA=A=",
    "close": "1",
}.items():
    write("fuzz-eio-payload", name, body)

# fuzz-sio-packet: Socket.IO text packets.
PH = '{"_placeholder":true,"num":%d}'
for name, pkt in {
    "connect": "0",
    "connect-auth": '0{"token":"secret"}',
    "connect-nsp": '0/rpc,{"token":"secret"}',
    "disconnect-nsp": "1/rpc,",
    "event": '2["hello",1,{"a":[true,null,2.5]}]',
    "event-ack": '2/nsp,12["ev","x"]',
    "ack": "3/nsp,12[]",
    "connect-error": '4/rpc,{"message":"unauthorized"}',
    "connect-error-str": '4"oops"',
    "binary-event": "51-/rpc,[\"call\"," + PH % 0 + "]",
    "binary-event-2": "52-/rpc,9[\"ev\"," + PH % 1 + ',{"x":' + PH % 0 + "}]",
    "binary-ack": "61-/nsp,3[" + PH % 0 + "]",
    "bad-placeholder": "52-[\"ev\"," + PH % 0 + "," + PH % 0 + "]",
    "reserved": '2["disconnect"]',
    "big-ack": '29223372036854775808["a"]',
}.items():
    write("fuzz-sio-packet", name, pkt)


# fuzz-frame: byte 0 = max_frame / 64 - 1 (0xff: default), byte 1 = chunk size, then frames.
def frame(kind, payload):
    return struct.pack("<I", len(payload) + 1) + kind.encode() + payload


call = msgpack.packb({"call_id": "c1", "callable": "fs::read", "shape": "unary",
                      "args": ["/etc/hostname"], "kwargs": {}})
for name, data in {
    "call-result": b"\xff\x03" + frame("C", call) + frame("r", msgpack.packb({"call_id": "c1", "value": 1})),
    "stream": b"\x10\x00" + frame("i", msgpack.packb({"call_id": "c", "value": b"x" * 100})) + frame("e", b"\x81\xa7call_id\xa1c"),
    "empty-payload": b"\x01\x01" + frame("Q", b""),
    "oversized": b"\x00\x05" + frame("r", b"y" * 100),
    "bad-kind": b"\x00\x07" + frame("Z", b"\x80"),
    "zero-length": b"\x00\x00\x00\x00\x00\x00",
    "truncated": b"\x00\x02" + frame("r", b"abcdef")[:-2],
}.items():
    write("fuzz-frame", name, data)

# fuzz-envelope: msgpack maps as the client and the worker send them.
for name, obj in {
    "call": {"call_id": "abc", "callable": "sandbox::exec", "shape": "stream",
             "args": [], "kwargs": {"command": "ls"}, "deadline_ms": 5000},
    "call-in": {"call_id": "abc", "item": b"\x00\x01"},
    "resume": {"call_ids": ["a", "b"]},
    "error": {"call_id": "x", "error": {"type": "WorkerDied", "message": "m", "traceback": None,
                                        "cancelled": False, "returncode": -9}},
    "ints": {"call_id": 7, "deadline_ms": -1, "pid": 2**64 - 1},
    "long-id": {"call_id": "q" * 200},
    "nul-id": {"call_id": "a\x00b"},
}.items():
    write("fuzz-envelope", name, msgpack.packb(obj, use_bin_type=True))
write("fuzz-envelope", "two-objects", msgpack.packb({"call_id": "1"}) + msgpack.packb([1, 2]))  # refused: trailing bytes
write("fuzz-envelope", "truncated", msgpack.packb({"call_id": "abcdef"})[:-3])


# fuzz-ws-receive: bytes 0-1 max_message, 2 head_max, 3 split seed, 4 failing handler call
# (0: none), then server frames (unmasked).
def ws(opcode, payload=b"", fin=True, mask=False):
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    mbit = 0x80 if mask else 0
    if n < 126:
        h = bytes([b0, mbit | n])
    elif n < 65536:
        h = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        h = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    if mask:
        key = b"\x01\x02\x03\x04"
        return h + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return h + payload


def ws_input(frames, max_message=1000, head_max=16, seed=1, fail_at=0):
    return struct.pack(">H", max_message) + bytes([head_max, seed, fail_at]) + b"".join(frames)


for name, data in {
    "text": ws_input([ws(1, b"4hello")]),
    "binary-16": ws_input([ws(2, bytes(range(256)) * 2)]),
    "fragmented": ws_input([ws(1, b"Hel", fin=False), ws(9, b"ping"), ws(0, b"lo", fin=False), ws(10),
                            ws(0, b" world")]),
    "too-large": ws_input([ws(2, b"x" * 300), ws(1, b"next")], max_message=100, seed=7),
    "too-large-fragments": ws_input([ws(2, b"a" * 60, fin=False), ws(0, b"b" * 60), ws(1, b"")], max_message=100),
    "close": ws_input([ws(1, b"bye"), ws(8, b"\x03\xe8going away")]),
    "close-1-byte": ws_input([ws(8, b"\x03")]),
    "masked": ws_input([ws(1, b"masked", mask=True)]),
    "control-long": ws_input([ws(9, b"p" * 126)]),
    "bad-continuation": ws_input([ws(0, b"x")]),
    "handler-fails": ws_input([ws(1, b"a"), ws(9), ws(2, b"b")], fail_at=2),
    "big-64": ws_input([ws(2, b"z" * 70000)], max_message=4096, seed=3),
}.items():
    write("fuzz-ws-receive", name, data)

# fuzz-ws-handshake: byte 0 bit 0 pads the answer to around the head limit, byte 1 where.
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
for name, data in {
    "101": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Accept: " + ACCEPT + "\r\n\r\n\x81\x02hi",
    "101-lists": "HTTP/1.1 101 Switching Protocols\r\nconnection: keep-alive, upgrade\r\nUPGRADE:  WebSocket \r\n"
                 "sec-websocket-accept:" + ACCEPT + "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
    "400": "HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nBad Request",
    "wrong-accept": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Accept: HSmrc0sMlYUkAGmm5OPpG2HaGWk=\r\n\r\n",
    "incomplete": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n",
    "no-colon": "HTTP/1.1 101 Switching Protocols\r\nUpgrade websocket\r\n\r\n",
}.items():
    write("fuzz-ws-handshake", name, "\x00\x00" + data)
# The padding (16384 - 384 + 4 * (byte 0 >> 1) bytes) goes into X-Pad: a head 2 bytes short of
# the limit, and one 2 bytes over it.
PADDED = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Accept: " + ACCEPT + "\r\nX-Pad: ")
write("fuzz-ws-handshake", "padded-101-under", bytes([61 << 1 | 1, len(PADDED)]) + (PADDED + "\r\n\r\n").encode())
write("fuzz-ws-handshake", "padded-101-over", bytes([62 << 1 | 1, len(PADDED)]) + (PADDED + "\r\n\r\n").encode())

# fuzz-proxy-request: request heads for /proxy/ with the fuzz target's runtime token.
import hashlib  # noqa: E402
import hmac  # noqa: E402

PT = hmac.new(b"fuzz-runtime-token-0123456789", b"agentix-proxy:8080", hashlib.sha256).hexdigest()
for name, data in {
    "bearer": f"GET /proxy/8080/a/b?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {PT}\r\n"
              "Connection: keep-alive\r\n\r\n",
    "cookie": f"GET /proxy/8080/ HTTP/1.1\r\nCookie: a=1; agentix_proxy_8080={PT}; b=2\r\n\r\n",
    "query-get": f"GET /proxy/8080/p?agentix_token={PT}&q=7 HTTP/1.1\r\n\r\n",
    "query-post": f"POST /proxy/8080/p?q=1&agentix_token={PT} HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    "upgrade": f"GET /proxy/8080/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Authorization: Bearer {PT}\r\n\r\n",
    "no-token": "GET /proxy/8080/ HTTP/1.1\r\nHost: h\r\n\r\n",
    "bad-port": "GET /proxy/99999/ HTTP/1.1\r\n\r\n",
    "short": "GET /pro HTTP/1.1\r\n\r\n",
    "no-end": "GET /proxy/8080/ HTTP/1.1\r\nHost: h\r\n",
}.items():
    write("fuzz-proxy-request", name, data)

# fuzz-sandbox-target: E2B's routing headers and Host names (domain e2b.test), and bare Host values.
for name, data in {
    "headers": "GET /health HTTP/1.1\r\nE2b-Sandbox-Id: abc123\r\nE2b-Sandbox-Port: 49983\r\n\r\n",
    "headers-bad-port": "GET / HTTP/1.1\r\nE2b-Sandbox-Id: abc123\r\nE2b-Sandbox-Port: 0x50\r\n\r\n",
    "headers-bad-id": "GET / HTTP/1.1\r\nE2b-Sandbox-Id: ../etc\r\nE2b-Sandbox-Port: 80\r\n\r\n",
    "host": "GET / HTTP/1.1\r\nHost: 8080-abc123.e2b.test\r\n\r\n",
    "host-port": "GET / HTTP/1.1\r\nHost: 8080-abc123.E2B.test:49982\r\n\r\n",
    "host-colon-first": "GET / HTTP/1.1\r\nHost: a:1-b\r\n\r\n",
    "bare-host": "8080-abc123.e2b.test",
    "bare-colon-first": "a:1-b",
    "bare-colons": "1:2-3.e2b.test:4-5",
}.items():
    write("fuzz-sandbox-target", name, data)

# fuzz-control-body: E2B's control API bodies (create, timeout, connect).
for name, data in {
    "create": '{"templateID": "base", "timeout": 120, "metadata": {"purpose": "test"}, "envVars": {"A": "1"}}',
    "create-private": '{"templateID": "base", "network": {"allowPublicTraffic": false}}',
    "create-spoof": '{"templateID": "base", "metadata": {"agentix-e2b.public": "yes"}}',
    "create-bad-network": '{"templateID": "base", "network": {"allowPublicTraffic": "no"}}',
    "create-no-template": '{"metadata": {"a": 1}}',
    "timeout": '{"timeout": 600}',
    "timeout-negative": '{"timeout": -1}',
    "timeout-huge": '{"timeout": 99999999999999999999}',
    "connect": '{}',
    "not-object": '[1, 2]',
    "broken": '{"templateID": "ba',
}.items():
    write("fuzz-control-body", name, data)

# fuzz-jupyter-message: frames split at 0xff (a routing id whose first byte sets the cap, the
# delimiter, an empty signature, header, parent, metadata, content): what a kernel publishes.
def jupyter(msg_type, content, cap=b"\x40"):
    header = '{"msg_id": "m1", "msg_type": "%s", "session": "s", "username": "k", "version": "5.3"}' % msg_type
    frames = [cap, b"<IDS|MSG>", b"", header.encode(), b'{"msg_id": "p1"}', b"{}", content.encode()]
    return b"\xff".join(frames)


for name, (msg_type, content) in {
    "stream": ("stream", '{"name": "stdout", "text": "hello\\n"}'),
    "stream-long": ("stream", '{"name": "stderr", "text": "%s"}' % ("x" * 5000)),
    "result": ("execute_result", '{"execution_count": 3, "data": {"text/plain": "42", "text/html": "<b>42</b>"}}'),
    "display-png": ("display_data", '{"data": {"image/png": "iVBORw0KGgo=\\n", "text/plain": ["a", "b"]}}'),
    "display-json": ("display_data", '{"data": {"application/json": {"a": [1, 2]}, "x/y+json": [null]}}'),
    "error": ("error", '{"ename": "ValueError", "evalue": "%s", "traceback": ["a", "b"]}' % ("v" * 3000)),
    "input": ("execute_input", '{"execution_count": 7, "code": "1"}'),
    "status": ("status", '{"execution_state": "idle"}'),
}.items():
    write("fuzz-jupyter-message", name, jupyter(msg_type, content))
