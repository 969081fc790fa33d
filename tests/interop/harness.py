# SPDX-License-Identifier: MIT
"""Small shared helpers for the interop tests (run with /usr/bin/python3).

Each test file registers functions with @test and calls main(); every test gets a fresh
server when it asks for one. Output: one "ok"/"FAIL" line per test, then "N passed, N failed".
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
import uuid
import collections

import msgpack
import socketio

_tests = []


def test(fn):
    _tests.append(fn)
    return fn


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary():
    path = os.environ.get("AGENTIX_SERVER")
    if not path:
        sys.exit("set AGENTIX_SERVER to the agentix-server binary")
    return path


def health_ok(url):
    """Does the runtime server at url answer GET /health with 200?"""
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def wait_healthy(url, timeout, interval=0.005):
    """Poll GET /health until it answers 200 (True), or give up after timeout seconds (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health_ok(url):
            return True
        time.sleep(interval)
    return False


class Server:
    """An agentix-server process on a free port, stopped (and checked) at exit. host=None
    passes no --host (the server's own default)."""

    def __init__(self, *args, env=None, port=None, host="127.0.0.1"):
        self.port = port or free_port()
        self.host = host
        e = dict(os.environ)
        e.update(env or {})
        cmd = [server_binary(), "--port", str(self.port)]
        if host and "--conformance" not in args and not any(a.startswith("--host") for a in args):
            cmd += ["--host", host]
        cmd += list(args)
        self.log_path = f"/tmp/agentix-server-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=e, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.read_log()}")
            if health_ok(self.url):
                break
            if time.time() > deadline:
                raise RuntimeError("server did not come up: " + self.read_log())
            time.sleep(0.02)

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not exit on SIGTERM")
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None and rc not in (0,):
            raise AssertionError(f"server exited with {rc}: {self.read_log()[-2000:]}")


def wait_until(cond, timeout=5.0, interval=0.01, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")



def vm_rss(pid):
    """Resident set size of a process in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssWatch:
    """The largest VmRSS of a process, sampled every 50 ms on a thread until stop()."""

    def __init__(self, pid):
        self.pid, self.max, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.05):
            self.max = max(self.max, vm_rss(self.pid))

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.max

def in_order(sio):
    """python-engineio 4.3's sync client hands every message to a new thread, so under a burst a
    binary attachment can reach python-socketio before the packet it belongs to and the event
    is lost. Deliver messages on the read thread, in order (the asyncio client does)."""
    trigger = sio.eio._trigger_event

    def ordered(event, *args, **kwargs):
        if event == "message":
            kwargs["run_async"] = False
        return trigger(event, *args, **kwargs)

    sio.eio._trigger_event = ordered
    return sio


class RpcError(Exception):
    def __init__(self, error):
        super().__init__(f"{error['type']}: {error['message']}")
        self.error = error


class RpcClient:
    """A python-socketio client on /rpc that records every event per call_id."""

    def __init__(self, url, token, transports=None):
        self.sio = socketio.Client(reconnection=False)
        in_order(self.sio)
        self.events = collections.defaultdict(list)
        self.order = []
        self.cond = threading.Condition()
        for ev in ("call:result", "call:item", "call:end", "call:error"):
            self.sio.on(ev, self._handler(ev), namespace="/rpc")
        self.sio.connect(url, namespaces=["/rpc"], auth={"token": token} if token is not None else None,
                         transports=transports, wait_timeout=5)

    def _handler(self, ev):
        def on(data):
            assert isinstance(data, bytes), f"{ev} argument is not binary: {data!r}"
            m = msgpack.unpackb(data, raw=False)
            with self.cond:
                self.events[m["call_id"]].append((ev, m))
                self.order.append((ev, m["call_id"]))
                self.cond.notify_all()
        return on

    def emit(self, event, payload):
        self.sio.emit(event, msgpack.packb(payload, use_bin_type=True), namespace="/rpc")

    def start(self, callable, shape="unary", args=(), kwargs=None, call_id=None, **extra):
        call_id = call_id or uuid.uuid4().hex
        m = {"call_id": call_id, "callable": callable, "shape": shape, "args": list(args), "kwargs": kwargs or {}}
        m.update(extra)
        self.emit("call", m)
        return call_id

    def terminal(self, call_id, timeout=15):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for ev, m in self.events.get(call_id, []):
                    if ev in ("call:result", "call:end", "call:error"):
                        return ev, m
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"no terminal event for {call_id}: {self.events.get(call_id)}")
                self.cond.wait(left)

    def items(self, call_id):
        with self.cond:
            return [m["value"] for ev, m in self.events.get(call_id, []) if ev == "call:item"]

    def call(self, callable, *args, timeout=15, **kwargs):
        ev, m = self.terminal(self.start(callable, args=args, kwargs=kwargs), timeout)
        if ev == "call:error":
            raise RpcError(m["error"])
        assert ev == "call:result", ev
        return m["value"]

    def error(self, call_id, timeout=15):
        ev, m = self.terminal(call_id, timeout)
        assert ev == "call:error", (ev, m)
        return m["error"]

    def close(self):
        self.sio.disconnect()


def run_tests(tests):
    """Run each test, print ok/FAIL with its time and the closing count; the number that failed."""
    passed = failed = 0
    for fn in tests:
        t0 = time.time()
        try:
            fn()
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__} ({time.time() - t0:.2f}s)")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {fn.__name__} ({time.time() - t0:.2f}s)")
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    return failed


def main():
    only = sys.argv[1:]
    failed = run_tests([fn for fn in _tests if not only or fn.__name__ in only])
    sys.exit(1 if failed else 0)
