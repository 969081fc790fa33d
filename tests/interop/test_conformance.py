# SPDX-License-Identifier: MIT
"""The cases of the official engine.io-protocol and socket.io-protocol test suites (v4/v5),
run against `agentix-server --conformance`, over raw HTTP and raw WebSocket frames."""

import http.client
import json
import socket
import threading
import time

import websocket  # python3-websocket (websocket-client)

from harness import Server, main, test

PING_INTERVAL = 300
PING_TIMEOUT = 200
srv = None


def server():
    global srv
    if srv is None:
        srv = Server("--conformance")
    return srv


def request(method, path, body=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", server().port, timeout=timeout)
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data.decode()


def ws_connect(path, timeout=5):
    return websocket.create_connection(f"ws://127.0.0.1:{server().port}{path}", timeout=timeout)


def recv_skip_ping(ws):
    while True:
        m = ws.recv()
        if m != "2":
            return m


def ws_closed(ws, timeout=3):
    """True when the server closes the websocket within the timeout."""
    ws.settimeout(timeout)
    try:
        while True:
            op, _ = ws.recv_data(control_frame=True)
            if op == websocket.ABNF.OPCODE_CLOSE:
                return True
    except websocket.WebSocketConnectionClosedException:
        return True
    except (socket.timeout, websocket.WebSocketTimeoutException):
        return False
    except OSError:
        return True


def ws_refused(path):
    try:
        ws = ws_connect(path, timeout=3)
    except (websocket.WebSocketException, OSError):
        return True
    return ws_closed(ws)


def open_polling(base="/engine.io/"):
    status, body = request("GET", base + "?EIO=4&transport=polling")
    assert status == 200 and body.startswith("0"), (status, body)
    return json.loads(body[1:])["sid"]


# ---- Engine.IO -----------------------------------------------------------------------------

@test
def eio_polling_handshake():
    for base in ("/engine.io/", "/socket.io/"):
        status, body = request("GET", base + "?EIO=4&transport=polling")
        assert status == 200
        v = json.loads(body[1:])
        assert body[0] == "0"
        assert set(v) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
        assert v["upgrades"] == ["websocket"]
        assert (v["pingInterval"], v["pingTimeout"], v["maxPayload"]) == (PING_INTERVAL, PING_TIMEOUT, 1000000)


@test
def eio_polling_bad_query():
    for q in ("?transport=polling", "?EIO=abc&transport=polling", "?EIO=4", "?EIO=4&transport=abc"):
        assert request("GET", "/engine.io/" + q)[0] == 400, q


@test
def eio_polling_bad_method():
    assert request("POST", "/engine.io/?EIO=4&transport=polling")[0] == 400
    assert request("PUT", "/engine.io/?EIO=4&transport=polling")[0] == 400


@test
def eio_ws_handshake():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    data = ws.recv()
    v = json.loads(data[1:])
    assert data[0] == "0" and v["upgrades"] == [] and v["maxPayload"] == 1000000
    ws.close()


@test
def eio_ws_bad_query():
    for q in ("?transport=websocket", "?EIO=abc&transport=websocket", "?EIO=4", "?EIO=4&transport=abc"):
        assert ws_refused("/engine.io/" + q), q


@test
def eio_polling_text_message():
    sid = open_polling()
    assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", "4hello") == (200, "ok")
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}") == (200, "4hello")


@test
def eio_polling_several_messages():
    sid = open_polling()
    payload = "4test1\x1e4test2\x1e4test3"
    assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", payload) == (200, "ok")
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}") == (200, payload)


@test
def eio_polling_text_and_binary():
    sid = open_polling()
    payload = "4hello\x1ebAQIDBA=="
    assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", payload) == (200, "ok")
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}") == (200, payload)


@test
def eio_polling_invalid_packet_closes():
    sid = open_polling()
    assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", "abc")[0] == 400
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")[0] == 400


@test
def eio_polling_duplicate_get_closes():
    sid = open_polling()
    results = {}

    def first():
        results["a"] = request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.05)
    results["b"] = request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}&t=burst")
    t.join()
    assert results["a"] == (200, "1"), results
    assert results["b"][0] in (400, 500), results
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")[0] == 400


@test
def eio_ws_text_and_binary():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    ws.recv()
    ws.send("4hello")
    assert recv_skip_ping(ws) == "4hello"
    ws.send_binary(bytes([1, 2, 3, 4]))
    assert recv_skip_ping(ws) == bytes([1, 2, 3, 4])
    ws.close()


@test
def eio_ws_invalid_packet_closes():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    ws.recv()
    ws.send("abc")
    assert ws_closed(ws)


@test
def eio_polling_heartbeat():
    sid = open_polling()
    for _ in range(3):
        assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}") == (200, "2")
        assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", "3") == (200, "ok")


@test
def eio_polling_ping_timeout():
    sid = open_polling()
    time.sleep((PING_INTERVAL + PING_TIMEOUT) / 1000 + 0.1)
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")[0] == 400


@test
def eio_ws_heartbeat():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    ws.recv()
    for _ in range(3):
        assert ws.recv() == "2"
        ws.send("3")
    ws.close()


@test
def eio_ws_ping_timeout():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    ws.recv()
    assert ws_closed(ws, timeout=10)  # pings unanswered: the server ends it (how soon is bench's)


@test
def eio_polling_close():
    sid = open_polling()
    results = {}

    def poll():
        results["get"] = request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.05)
    assert request("POST", f"/engine.io/?EIO=4&transport=polling&sid={sid}", "1")[0] == 200
    t.join()
    assert results["get"] == (200, "6")
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")[0] == 400


@test
def eio_ws_close():
    ws = ws_connect("/engine.io/?EIO=4&transport=websocket")
    ws.recv()
    ws.send("1")
    assert ws_closed(ws)


@test
def eio_upgrade():
    sid = open_polling()
    ws = ws_connect(f"/engine.io/?EIO=4&transport=websocket&sid={sid}")
    ws.send("2probe")
    assert ws.recv() == "3probe"
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}") == (200, "6")
    ws.send("5")
    ws.send("4hello")
    assert recv_skip_ping(ws) == "4hello"
    # HTTP with the same sid is refused after the upgrade. A second websocket is accepted and
    # closed at once, as engine.io does (the official suite's "ignores WebSocket connection
    # with same sid after upgrade": a refused handshake makes its client throw); the session
    # goes on.
    assert request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")[0] == 400
    second = ws_connect(f"/engine.io/?EIO=4&transport=websocket&sid={sid}")
    assert ws_closed(second)
    ws.send("4still")
    assert recv_skip_ping(ws) == "4still"
    ws.close()


@test
def eio_upgrade_releases_parked_poll():
    sid = open_polling()
    results = {}

    def poll():
        results["get"] = request("GET", f"/engine.io/?EIO=4&transport=polling&sid={sid}")

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.05)
    ws = ws_connect(f"/engine.io/?EIO=4&transport=websocket&sid={sid}")
    ws.send("2probe")
    assert ws.recv() == "3probe"
    t.join(2)
    assert results.get("get") == (200, "6"), results
    ws.send("5")
    ws.send("4x")
    assert recv_skip_ping(ws) == "4x"
    ws.close()


# ---- Socket.IO -----------------------------------------------------------------------------

def sio_connect(packet="40"):
    ws = ws_connect("/socket.io/?EIO=4&transport=websocket")
    ws.recv()  # Engine.IO handshake
    ws.send(packet)
    return ws


def sio_main():
    # As the official suite reads them: the CONNECT reply, then "auth", nothing between.
    ws = sio_connect()
    assert ws.recv().startswith("40")
    assert ws.recv() == '42["auth",{}]'
    return ws


@test
def sio_connect_main():
    ws = sio_connect("40")
    data = ws.recv()
    assert data.startswith("40") and set(json.loads(data[2:])) == {"sid"}
    assert ws.recv() == '42["auth",{}]'
    ws.close()


@test
def sio_connect_main_with_payload():
    ws = sio_connect('40{"token":"123"}')
    assert ws.recv().startswith("40")
    assert ws.recv() == '42["auth",{"token":"123"}]'
    ws.close()


@test
def sio_connect_custom():
    for pkt, auth in (("40/custom,", "{}"), ('40/custom,{"token":"abc"}', '{"token":"abc"}')):
        ws = sio_connect(pkt)
        data = ws.recv()
        assert data.startswith("40/custom,") and set(json.loads(data[10:])) == {"sid"}
        assert ws.recv() == '42/custom,["auth",' + auth + "]"
        ws.close()


@test
def sio_connect_unknown_namespace():
    ws = sio_connect("40/random")
    assert recv_skip_ping(ws) == '44/random,{"message":"Invalid namespace"}'
    ws.close()


@test
def sio_invalid_handshake_closes():
    ws = sio_connect("4abc")
    assert ws_closed(ws)


@test
def sio_no_handshake_closes():
    ws = ws_connect("/socket.io/?EIO=4&transport=websocket")
    ws.recv()
    # Answer pings so only the connect timeout can end it.
    ws.settimeout(10)
    closed = False
    try:
        while True:
            op, data = ws.recv_data(control_frame=True)
            if op == websocket.ABNF.OPCODE_CLOSE:
                closed = True
                break
            if data == b"2":
                ws.send("3")
    except websocket.WebSocketConnectionClosedException:
        closed = True
    except (socket.timeout, websocket.WebSocketTimeoutException):
        pass
    assert closed, "the server kept a connection that never sent the Socket.IO handshake"


@test
def sio_disconnect_main_keeps_connection():
    ws = sio_main()
    ws.send("41")
    assert ws.recv() == "2"
    ws.close()


@test
def sio_disconnect_custom():
    ws = sio_main()
    ws.send("40/custom")
    recv_skip_ping(ws)
    recv_skip_ping(ws)
    ws.send("41/custom")
    ws.send('42["message","message to main namespace"]')
    assert recv_skip_ping(ws) == '42["message-back","message to main namespace"]'
    ws.close()


@test
def sio_plain_message():
    ws = sio_main()
    ws.send('42["message",1,"2",{"3":[true]}]')
    assert recv_skip_ping(ws) == '42["message-back",1,"2",{"3":[true]}]'
    ws.close()


@test
def sio_binary_message():
    ws = sio_main()
    ws.send('452-["message",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]')
    ws.send_binary(bytes([1, 2, 3]))
    ws.send_binary(bytes([4, 5, 6]))
    assert recv_skip_ping(ws) == '452-["message-back",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]'
    assert recv_skip_ping(ws) == bytes([1, 2, 3])
    assert recv_skip_ping(ws) == bytes([4, 5, 6])
    ws.close()


@test
def sio_message_with_ack():
    ws = sio_main()
    ws.send('42456["message-with-ack",1,"2",{"3":[false]}]')
    assert recv_skip_ping(ws) == '43456[1,"2",{"3":[false]}]'
    ws.close()


@test
def sio_binary_message_with_ack():
    ws = sio_main()
    ws.send('452-789["message-with-ack",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]')
    ws.send_binary(bytes([1, 2, 3]))
    ws.send_binary(bytes([4, 5, 6]))
    assert recv_skip_ping(ws) == '462-789[{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]'
    assert recv_skip_ping(ws) == bytes([1, 2, 3])
    assert recv_skip_ping(ws) == bytes([4, 5, 6])
    ws.close()


@test
def sio_invalid_packets_close():
    for bad in ("4abc", "42{}", '42abc["message-with-ack",1,"2",{"3":[false]}]'):
        ws = sio_main()
        ws.send(bad)
        assert ws_closed(ws), bad


@test
def sio_malformed_input_does_not_disturb_others():
    # Own server with slow heartbeats: the good client is idle while the bad one is closed.
    with Server("--conformance", "--ping-interval", "20000", "--ping-timeout", "20000") as s:
        def connect():
            ws = websocket.create_connection(f"ws://127.0.0.1:{s.port}/socket.io/?EIO=4&transport=websocket", timeout=5)
            ws.recv()
            ws.send("40")
            assert ws.recv().startswith("40")
            assert ws.recv() == '42["auth",{}]'
            return ws
        good, bad = connect(), connect()
        bad.send('42{}')
        assert ws_closed(bad)
        good.send('42["message","still here"]')
        assert good.recv() == '42["message-back","still here"]'
        good.close()


@test
def listens_on_ipv6_loopback():
    try:
        s = socket.create_connection(("::1", server().port), timeout=2)
    except OSError as e:
        if e.errno in (97, 99):  # no IPv6 on this machine
            return
        raise
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert b"200 OK" in s.recv(4096)
    s.close()


if __name__ == "__main__":
    try:
        main()
    finally:
        if srv:
            srv.stop()
