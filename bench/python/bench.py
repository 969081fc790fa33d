#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A unary call from Python, side by side in one run against one agentix-server: the agentix
package's RuntimeClient against python-socketio's clients (the threaded Client and the asyncio
AsyncClient, both over WebSocket), each sending the same `fs::ls` of a small directory as one
msgpack attachment and waiting for its `call:result`.

Rounds alternate the three clients; each round times CALLS calls per client after a warm-up.
Prints per-client medians (with p10/p90 over all calls), the ratios, and one JSON line.

  bench.py URL TOKEN [ROUNDS] [CALLS]"""

import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

import msgpack
import socketio

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from agentix import RuntimeClient  # noqa: E402

URL, TOKEN = sys.argv[1:3]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
CALLS = int(sys.argv[4]) if len(sys.argv) > 4 else 400
WARMUP = 50
DIR = tempfile.mkdtemp(prefix="agentix-bench-python-")
for name in ("a", "b", "c"):
    open(os.path.join(DIR, name), "w").close()


def message():
    return msgpack.packb({"call_id": uuid.uuid4().hex, "callable": "fs::ls", "shape": "unary", "args": [DIR],
                          "kwargs": {}}, use_bin_type=True)


def sync_client(n):
    sio = socketio.Client(reconnection=False)
    got = threading.Event()

    @sio.on("call:result", namespace="/rpc")
    def on_result(data):
        got.set()
    sio.connect(URL, namespaces=["/rpc"], auth={"token": TOKEN}, transports=["websocket"], wait_timeout=10)
    times = []
    for i in range(n + WARMUP):
        got.clear()
        t = time.perf_counter()
        sio.emit("call", message(), namespace="/rpc")
        if not got.wait(10):
            raise RuntimeError("no result")
        if i >= WARMUP:
            times.append(time.perf_counter() - t)
    sio.disconnect()
    return times


async def async_client(n):
    sio = socketio.AsyncClient(reconnection=False)
    results = asyncio.Queue()

    @sio.on("call:result", namespace="/rpc")
    async def on_result(data):
        results.put_nowait(data)
    await sio.connect(URL, namespaces=["/rpc"], auth={"token": TOKEN}, transports=["websocket"], wait_timeout=10)
    times = []
    for i in range(n + WARMUP):
        t = time.perf_counter()
        await sio.emit("call", message(), namespace="/rpc")
        await asyncio.wait_for(results.get(), 10)
        if i >= WARMUP:
            times.append(time.perf_counter() - t)
    await sio.disconnect()
    return times


async def agentix_client(n):
    times = []
    async with RuntimeClient(URL, TOKEN) as rt:
        for i in range(n + WARMUP):
            t = time.perf_counter()
            await rt.call("fs::ls", DIR)
            if i >= WARMUP:
                times.append(time.perf_counter() - t)
    return times


def main():
    runs = {"agentix": [], "python-socketio AsyncClient": [], "python-socketio Client": []}
    for _ in range(ROUNDS):
        runs["agentix"] += asyncio.run(agentix_client(CALLS))
        runs["python-socketio AsyncClient"] += asyncio.run(async_client(CALLS))
        runs["python-socketio Client"] += sync_client(CALLS)
    out = {}
    print(f"unary fs::ls round trip, {ROUNDS} rounds x {CALLS} calls per client")
    print(f"{'client':32} {'median':>9} {'p10':>9} {'p90':>9}  (us)")
    for name, t in runs.items():
        t.sort()
        q = statistics.quantiles(t, n=10)
        out[name] = {"median_us": round(statistics.median(t) * 1e6, 1), "p10_us": round(q[0] * 1e6, 1),
                     "p90_us": round(q[-1] * 1e6, 1), "calls": len(t)}
        print(f"{name:32} {out[name]['median_us']:9.1f} {out[name]['p10_us']:9.1f} {out[name]['p90_us']:9.1f}")
    ours = out["agentix"]["median_us"]
    for name in ("python-socketio AsyncClient", "python-socketio Client"):
        out[f"speedup_vs_{name}"] = round(out[name]["median_us"] / ours, 2)
        print(f"agentix is {out[name]['median_us'] / ours:.2f}x faster than {name} (medians)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
