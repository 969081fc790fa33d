# SPDX-License-Identifier: MIT
"""libagentix and python-socketio see the same thing for the same calls.

The calls are listed once, in identical-calls.json: sandbox::echo of nested values with bytes,
fs::write/read/edit/upload/download/ls/grep/glob in a temporary directory, sandbox::exec
unary and stream, ArgumentError, NoSuchCallable, Cancelled (by cancel), DeadlineExceeded.
libagentix-calls (C, $LIBAGENTIX_CALLS) makes them through libagentix and prints one line of
canonical JSON per call; this file makes them with python-socketio (Debian's, in-order
delivery as in test_rpc.py) and prints the same. The lines must be equal, after normalising
only what has to differ between two runs: the temporary directory (each client gets its
own) and modification times. call_ids are not printed at all."""

import base64
import collections
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import uuid

import msgpack
import socketio

from harness import Server, in_order, main, test

TOKEN = "identical-token"
HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "identical-calls.json")
CALLS = json.load(open(TABLE))
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def c_program():
    path = os.environ.get("LIBAGENTIX_CALLS")
    assert path and os.access(path, os.X_OK), "set LIBAGENTIX_CALLS to the libagentix-calls binary"
    return path


# ---- canonical JSON ---------------------------------------------------------------------------

def to_json(v):
    """A decoded msgpack value as JSON data, bytes as {"$bytes": base64}."""
    if isinstance(v, bytes):
        return {"$bytes": base64.b64encode(v).decode()}
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return v


def from_json(v, d):
    """A table value as what to send: {"$bytes": …} → bytes, "$DIR" → d."""
    if isinstance(v, dict):
        if set(v) == {"$bytes"}:
            return base64.b64decode(v["$bytes"])
        return {k.replace("$DIR", d): from_json(x, d) for k, x in v.items()}
    if isinstance(v, list):
        return [from_json(x, d) for x in v]
    if isinstance(v, str):
        return v.replace("$DIR", d)
    return v


def normalise(v, d, key=None):
    """What must differ between two clients' runs: their directory, modification times."""
    if isinstance(v, dict):
        return {k: normalise(x, d, k) for k, x in v.items()}
    if isinstance(v, list):
        return [normalise(x, d) for x in v]
    if isinstance(v, str):
        if key == "modified_at" and ISO_TIME.match(v):
            return "<time>"
        return v.replace(d, "<DIR>")
    return v


def canonical(line):
    return json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---- python-socketio --------------------------------------------------------------------------

class PyClient:
    def __init__(self, url, transport):
        self.sio = in_order(socketio.Client(reconnection=False))
        self.events = collections.defaultdict(list)
        self.cond = threading.Condition()
        for ev in ("call:result", "call:item", "call:end", "call:error"):
            self.sio.on(ev, self._handler(ev), namespace="/rpc")
        self.sio.connect(url, namespaces=["/rpc"], auth={"token": TOKEN}, transports=[transport], wait_timeout=5)
        assert self.sio.transport() == transport, self.sio.transport()

    def _handler(self, ev):
        def on(data):
            m = msgpack.unpackb(data, raw=False)
            with self.cond:
                self.events[m["call_id"]].append((ev, m))
                self.cond.notify_all()
        return on

    def emit(self, event, payload):
        self.sio.emit(event, msgpack.packb(payload, use_bin_type=True), namespace="/rpc")

    def wait_terminal(self, call_id, until, items=None):
        """The call's events once it has ended (or has `items` items); None at `until`."""
        with self.cond:
            while True:
                evs = self.events.get(call_id, [])
                if any(ev in ("call:result", "call:end", "call:error") for ev, _ in evs):
                    return evs
                if items is not None and sum(ev == "call:item" for ev, _ in evs) >= items:
                    return None
                left = until - time.time()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def run(self, entry, d):
        call_id = uuid.uuid4().hex
        m = {"call_id": call_id, "callable": entry["callable"], "shape": entry.get("shape", "unary"),
             "args": from_json(entry.get("args", []), d), "kwargs": from_json(entry.get("kwargs", {}), d)}
        if entry.get("deadline_ms"):
            m["deadline_ms"] = entry["deadline_ms"]
        self.emit("call", m)
        if entry.get("cancel_after_ms"):
            if self.wait_terminal(call_id, time.time() + entry["cancel_after_ms"] / 1000) is None:
                self.emit("cancel", {"call_id": call_id})
        if entry.get("cancel_after_items"):
            if self.wait_terminal(call_id, time.time() + 30, items=entry["cancel_after_items"]) is None:
                self.emit("cancel", {"call_id": call_id})
        evs = self.wait_terminal(call_id, time.time() + 30)
        assert evs is not None, f"{entry['name']}: no answer"
        self.emit("ack", {"call_id": call_id})

        line = {"name": entry["name"]}
        unary = m["shape"] == "unary"
        # libagentix-calls prints "items" whenever it reads the call item by item (streams,
        # and unary calls it cancels); a unary result replaces them.
        if not unary or entry.get("cancel_after_ms") or entry.get("cancel_after_items"):
            line["items"] = [to_json(x["value"]) for ev, x in evs if ev == "call:item"]
        ev, x = evs[-1]
        if ev == "call:result":
            line.pop("items", None)
            line["result"] = to_json(x.get("value"))
        elif ev == "call:end":
            line["end"] = True
        else:
            e = x["error"]
            err = {"type": e["type"], "message": e["message"], "cancelled": bool(e.get("cancelled"))}
            if e.get("returncode") is not None:
                err["returncode"] = e["returncode"]
            if e.get("traceback") is not None:
                err["traceback"] = e["traceback"]
            line["error"] = err
        return line

    def close(self):
        self.sio.disconnect()


# ---- the comparison ---------------------------------------------------------------------------

def check_expectation(entry, line):
    """Both sides agreeing is not enough: each line must be the kind of answer the table wants."""
    want = entry.get("expect", "result")
    if want == "any":
        return
    if want == "result":
        assert "result" in line, f"{entry['name']}: wanted a result, got {line}"
    elif want == "end":
        assert line.get("end") is True and line.get("items"), f"{entry['name']}: wanted items and an end, got {line}"
    else:
        assert want.startswith("error:"), want
        assert "error" in line and line["error"]["type"] == want[6:], f"{entry['name']}: wanted {want}, got {line}"
        if want == "error:Cancelled":
            assert line["error"]["cancelled"] is True, line


def compare(transport):
    with Server(env={"AGENTIX_TOKEN": TOKEN}) as s, tempfile.TemporaryDirectory(prefix="agentix-identical-") as top:
        c_dir, py_dir = os.path.join(top, "c"), os.path.join(top, "py")
        os.mkdir(c_dir)
        os.mkdir(py_dir)

        proc = subprocess.run([c_program(), s.url, TOKEN, transport, c_dir, TABLE],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"libagentix-calls exited {proc.returncode}: {proc.stderr}"
        c_lines = [canonical(normalise(json.loads(l), c_dir)) for l in proc.stdout.splitlines()]

        client = PyClient(s.url, transport)
        try:
            py_raw = [client.run(entry, py_dir) for entry in CALLS]
        finally:
            client.close()
        py_lines = [canonical(normalise(l, py_dir)) for l in py_raw]

        for entry, line in zip(CALLS, py_raw):
            check_expectation(entry, normalise(line, py_dir))
        assert len(c_lines) == len(CALLS), f"libagentix-calls printed {len(c_lines)} lines for {len(CALLS)} calls"
        diffs = [(e["name"], c, p) for e, c, p in zip(CALLS, c_lines, py_lines) if c != p]
        for name, c, p in diffs:
            print(f"--- {name}\n  libagentix:      {c}\n  python-socketio: {p}")
        assert not diffs, f"{len(diffs)} of {len(CALLS)} calls differ: {[n for n, _, _ in diffs]}"
        # The paths really were normalised (both sides used their own directory).
        assert any("<DIR>" in l for l in py_lines) and not any(top in l for l in c_lines + py_lines)
        print(f"     {transport}: {len(CALLS)} calls, identical")


@test
def identical_over_websocket():
    compare("websocket")


@test
def identical_over_polling():
    compare("polling")


if __name__ == "__main__":
    main()
