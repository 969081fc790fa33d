#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What a Python user sees, end to end, in one run: the agentix package's RuntimeClient against
agentix-server, side by side with python-socketio's AsyncClient against the python-socketio
peer server (bench/rpc/peer, the original system's design), for

- fs::ls of a three-file directory,
- sandbox::exec of `true` (a shell builtin: /bin/sh -c true on both sides),
- sandbox::exec of `/bin/true` (a program: run directly by agentix, through the shell by the peer).

Both send the same msgpack map ({call_id, callable, shape, args, kwargs}) and time from the call
to its result. Rounds alternate the two sides for each callable; each round times CALLS calls
after a warm-up. Prints medians (p10/p90 over all calls), the ratios peer/agentix, and one JSON
line.

  user.py AGENTIX_URL PEER_URL TOKEN [ROUNDS] [CALLS]"""

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

import msgpack
import socketio

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from agentix import RuntimeClient  # noqa: E402

AGENTIX_URL, PEER_URL, TOKEN = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
CALLS = int(sys.argv[5]) if len(sys.argv) > 5 else 200
WARMUP = 20
DIR = tempfile.mkdtemp(prefix="agentix-bench-python-user-")
for name in ("a", "b", "c"):
    open(os.path.join(DIR, name), "w").close()

# name: (callable, args, kwargs)
CASES = {
    "fs::ls": ("fs::ls", [DIR], {}),
    "exec true": ("sandbox::exec", [], {"command": "true"}),
    "exec /bin/true": ("sandbox::exec", [], {"command": "/bin/true"}),
}


def check(name, result):
    if name.startswith("exec") and result.get("exit_code") != 0:
        raise RuntimeError(f"{name}: {result}")
    if name == "fs::ls" and len(result.get("entries") or []) != 3:
        raise RuntimeError(f"{name}: {result}")


async def agentix_side(name, n):
    callable_, args, kwargs = CASES[name]
    times = []
    async with RuntimeClient(AGENTIX_URL, TOKEN) as rt:
        for i in range(n + WARMUP):
            t = time.perf_counter()
            result = await rt.call(callable_, *args, **kwargs)
            if i >= WARMUP:
                times.append(time.perf_counter() - t)
            elif i == 0:
                check(name, result)
    return times


async def peer_side(name, n):
    callable_, args, kwargs = CASES[name]
    sio = socketio.AsyncClient(reconnection=False)
    results = asyncio.Queue()

    @sio.on("call:result", namespace="/rpc")
    async def on_result(data):
        results.put_nowait(data)

    @sio.on("call:error", namespace="/rpc")
    async def on_error(data):
        results.put_nowait(RuntimeError(f"{name}: call:error {msgpack.unpackb(data, raw=False)}"))

    await sio.connect(PEER_URL, namespaces=["/rpc"], auth={"token": TOKEN}, transports=["websocket"], wait_timeout=10)
    times = []
    try:
        for i in range(n + WARMUP):
            t = time.perf_counter()
            await sio.emit("call", msgpack.packb({"call_id": uuid.uuid4().hex, "callable": callable_, "shape": "unary",
                                                  "args": args, "kwargs": kwargs}, use_bin_type=True),
                           namespace="/rpc")
            got = await asyncio.wait_for(results.get(), 10)
            if isinstance(got, Exception):
                raise got
            if i >= WARMUP:
                times.append(time.perf_counter() - t)
            elif i == 0:
                check(name, msgpack.unpackb(got, raw=False)["value"])
    finally:
        await sio.disconnect()
    return times


def summary(t):
    t = sorted(t)
    q = statistics.quantiles(t, n=10)
    return {"median_us": round(statistics.median(t) * 1e6, 1), "p10_us": round(q[0] * 1e6, 1),
            "p90_us": round(q[-1] * 1e6, 1), "calls": len(t)}


def main():
    runs = {(name, side): [] for name in CASES for side in ("agentix", "peer")}
    for _ in range(ROUNDS):
        for name in CASES:
            runs[(name, "agentix")] += asyncio.run(agentix_side(name, CALLS))
            runs[(name, "peer")] += asyncio.run(peer_side(name, CALLS))
    out = {"rounds": ROUNDS, "calls_per_round": CALLS}
    print(f"what a Python user sees: {ROUNDS} rounds x {CALLS} calls per side and callable, medians in us")
    print(f"{'call':16} {'agentix (p10-p90)':>26} {'peer (p10-p90)':>28} {'peer/agentix':>13}")
    for name in CASES:
        a, p = summary(runs[(name, "agentix")]), summary(runs[(name, "peer")])
        ratio = round(p["median_us"] / a["median_us"], 2)
        out[name] = {"agentix": a, "peer": p, "peer_over_agentix": ratio}
        print(f"{name:16} {a['median_us']:9.1f} ({a['p10_us']:6.0f}-{a['p90_us']:6.0f}) "
              f"{p['median_us']:10.1f} ({p['p10_us']:6.0f}-{p['p90_us']:6.0f}) {ratio:12.2f}x")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
