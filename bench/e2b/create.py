#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""CreateSandbox {pool: POOL} straight to agentd over D-Bus (dbus-python), timed in the client
around the one call, only while the pool has a ready sandbox (the warm path); then the sandbox
is deleted. Prints one JSON object: {median_ms, p99_ms, min_ms, max_ms, runs}.

  create.py POOL RUNS     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)"""

import json
import os
import statistics
import sys
import time

import dbus

POOL, RUNS = sys.argv[1], int(sys.argv[2])
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object("org.agentix.Agentd1", "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


def ready():
    return {str(n): int(r) for n, r, s in mgr.ListPools()}.get(POOL, 0)


times = []
while len(times) < RUNS:
    deadline = time.monotonic() + 120
    while ready() < 1:
        if time.monotonic() > deadline:
            sys.exit("the pool does not refill")
        time.sleep(0.05)
    t0 = time.perf_counter()
    path, sid = mgr.CreateSandbox(dbus.Dictionary({"pool": POOL, "ttl": dbus.UInt64(300)}, signature="sv"),
                                  timeout=120)
    times.append(time.perf_counter() - t0)
    mgr.DeleteSandbox(sid, timeout=60)
times.sort()
p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
print(json.dumps({"median_ms": round(statistics.median(times) * 1000, 2), "p99_ms": round(p99 * 1000, 2),
                  "min_ms": round(times[0] * 1000, 2), "max_ms": round(times[-1] * 1000, 2), "runs": len(times)}))
