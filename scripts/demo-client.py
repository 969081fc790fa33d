#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The main job's client: a stock python-socketio client calls agentix-server's /rpc namespace
(every event argument is one binary attachment holding one msgpack map) and prints replies.
An https:// runtime is verified against the CA file AGENTIX_CA_FILE names (agentd's
Manager.RuntimeCA), and nothing else; with AGENTIX_SANDBOX=ID, its certificate must name that
sandbox (ID.sandbox.agentix) as well as the URL's address, so that another sandbox's runtime
on the same address (a swarm node's) is refused."""

import ipaddress
import json
import os
import ssl
import sys
import threading
import urllib.parse
import uuid

import msgpack
import socketio

url, token, workdir = sys.argv[1:4]
session = None
if url.startswith("https://"):
    import requests
    session = requests.Session()
    session.verify = os.environ["AGENTIX_CA_FILE"]  # polling, and (python-engineio) the WebSocket too
    sandbox = os.environ.get("AGENTIX_SANDBOX")
    if sandbox:
        import websocket  # websocket-client, which python-engineio opens its WebSocket with

        host = urllib.parse.urlsplit(url).hostname
        name = f"{sandbox}.sandbox.agentix"
        _create = websocket.create_connection

        def create_connection(ws_url, **kwargs):
            # The chain is verified against the CA as before; the names are checked here, before
            # the token goes (in Socket.IO's CONNECT), and the id is not sent as SNI.
            kwargs.setdefault("sslopt", {})["check_hostname"] = False
            ws = _create(ws_url, **kwargs)
            sans = ws.sock.getpeercert().get("subjectAltName", ())
            if ("DNS", name) not in sans or not any(
                    kind == "IP Address" and ipaddress.ip_address(value.strip()) == ipaddress.ip_address(host)
                    for kind, value in sans):
                ws.close()
                why = f"the runtime's certificate does not name {name} at {host}"
                print(why, file=sys.stderr)  # python-engineio says only "Connection error"
                raise ssl.SSLCertVerificationError(why)
            return ws
        websocket.create_connection = create_connection
sio = socketio.Client(reconnection=False, http_session=session)
# python-engineio 4.3's sync client hands each message to a new thread, which can reorder a
# binary attachment and its packet under a burst: deliver messages in order on its read thread.
_trigger = sio.eio._trigger_event
sio.eio._trigger_event = lambda event, *a, **kw: _trigger(event, *a, **dict(kw, run_async=False)
                                                           if event == "message" else kw)
replies = {}
arrived = threading.Condition()


def on_reply(event):
    def handler(data):
        m = msgpack.unpackb(data)
        with arrived:
            replies.setdefault(m["call_id"], []).append((event, m))
            arrived.notify_all()
    return handler


for event in ("call:result", "call:item", "call:end", "call:error"):
    sio.on(event, on_reply(event), namespace="/rpc")


def call(callable, shape="unary", **kwargs):
    call_id = uuid.uuid4().hex
    sio.emit("call", msgpack.packb({"call_id": call_id, "callable": callable, "shape": shape,
                                    "args": [], "kwargs": kwargs}), namespace="/rpc")
    with arrived:
        arrived.wait_for(lambda: any(e in ("call:result", "call:end", "call:error")
                                     for e, _ in replies.get(call_id, [])), timeout=30)
    sio.emit("ack", msgpack.packb({"call_id": call_id}), namespace="/rpc")
    return replies.get(call_id, [])


def show(title, events, command=None):
    print(f"--- {title}" + (f": {command}" if command else ""))
    for event, m in events:
        m = {k: v for k, v in m.items() if k != "call_id"}
        print(f"  {event}: {json.dumps(m, default=lambda b: b.decode(errors='replace'))}")


sio.connect(url, namespaces=["/rpc"], auth={"token": token}, transports=["websocket"])
command = "echo hello from $(uname -s); id -u; exit 3"
show("sandbox::exec (unary)", call("sandbox::exec", command=command), command)
command = "for i in 1 2 3; do echo tick $i; sleep 0.1; done"
show("sandbox::exec (stream)", call("sandbox::exec", shape="stream", command=command), command)
path = f"{workdir}/notes.txt"
show("fs::write", call("fs::write", path=path, content="first line\nsecond line\n"))
show("fs::edit", call("fs::edit", path=path, old="second", new="2nd"))
show("fs::read", call("fs::read", path=path))
show("fs::ls", call("fs::ls", path=workdir))
show("nosuch::fn (error)", call("nosuch::fn"))
sio.disconnect()
