# SPDX-License-Identifier: MIT
"""Engine.IO v4 / Socket.IO v5 over one WebSocket, as much as an agentix client needs: the open
packet, pings, CONNECT to /rpc with the token, and binary events carrying one msgpack map (the
ARCHITECTURE.md wire protocol). Kept to plain string and bytes work: this is the hot path."""

import json

import msgpack

NAMESPACE = "/rpc"
_EVENT_PREFIX = "451-" + NAMESPACE + ","
_PLACEHOLDER = '{"_placeholder":true,"num":0}]'


def connect_packet(token):
    return "40" + NAMESPACE + "," + json.dumps({"token": token})


def event_frames(event, payload):
    """A binary event: its text frame, then its one attachment (msgpack)."""
    return _EVENT_PREFIX + '["' + event + '",' + _PLACEHOLDER, msgpack.packb(payload, use_bin_type=True)


def parse_text(frame):
    """(kind, value) of a text frame: ("open", dict), ("ping", None), ("connected", dict),
    ("connect_error", dict), ("binary_event", event name), ("disconnect", None), ("close", None),
    or ("other", frame)."""
    eio = frame[:1]
    if eio == "2":
        return "ping", None
    if eio == "0":
        return "open", json.loads(frame[1:])
    if eio == "1":
        return "close", None
    if eio != "4":
        return "other", frame
    sio = frame[1:2]
    body = frame[2:]
    if body.startswith(NAMESPACE):
        body = body[len(NAMESPACE):]
        if body.startswith(","):
            body = body[1:]
    if sio == "5":
        # 1-[...]: one attachment; the event name is the array's first string.
        dash = body.find("-")
        start = body.find('["', dash)
        end = body.find('"', start + 2)
        return "binary_event", body[start + 2:end]
    if sio == "0":
        return "connected", json.loads(body) if body else {}
    if sio == "4":
        return "connect_error", json.loads(body) if body else {}
    if sio == "1":
        return "disconnect", None
    return "other", frame


def unpack(data):
    return msgpack.unpackb(data, raw=False)
