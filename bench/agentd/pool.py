#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Create-to-ready from a warm pool, side by side in one run with a cold create through agentd
and with `docker run` (+ polling /health until agentix-server answers), on the same task image
and bundle. Each time is measured here, in the client, around the one call (CreateSandbox over
D-Bus; `docker run` and the polling); a pooled create is timed only while its pool has a ready
sandbox (the figure is the warm path: a pool emptied faster than it refills falls back to cold
creates, which the cold column measures). Medians and p99 of N runs; a table and one JSON line.

  pool.py IMAGE BUNDLE POOL_MEMORY [RUNS]     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus; its
                                               pools.d has a pool of IMAGE, BUNDLE, POOL_MEMORY)"""

import json
import os
import statistics
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import wait_healthy  # noqa: E402

IMAGE, BUNDLE, POOL_MEMORY = sys.argv[1], sys.argv[2], int(sys.argv[3])
RUNS = int(sys.argv[4]) if len(sys.argv) > 4 else 50
DOCKER = "/usr/bin/docker"
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object("org.agentix.Agentd1", "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


def config(memory):
    return dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE, "memory": dbus.UInt64(memory)}, signature="sv")


def ready():
    return {str(n): int(r) for n, r, s in mgr.ListPools()}


def pool_of(path):
    return str(dbus.Interface(bus.get_object("org.agentix.Agentd1", path), "org.freedesktop.DBus.Properties")
               .Get("org.agentix.Agentd1.Sandbox", "Pool"))


def stats(times):
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return {"median_ms": round(statistics.median(times) * 1000, 2), "p99_ms": round(p99 * 1000, 2),
            "min_ms": round(times[0] * 1000, 2), "max_ms": round(times[-1] * 1000, 2), "runs": len(times)}


def carrier():
    out = subprocess.run([DOCKER, "ps", "-a", "--filter", "label=org.agentix.carrier", "--format", "{{.Names}}"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0]


def main():
    deadline = time.monotonic() + 120
    while not any(ready().values()):
        if time.monotonic() > deadline:
            sys.exit("the pool never filled")
        time.sleep(0.1)
    pooled, cold, docker = [], [], []
    for i in range(RUNS):
        while not any(ready().values()):
            time.sleep(0.01)
        t0 = time.perf_counter()
        path, sid = mgr.CreateSandbox(config(POOL_MEMORY), timeout=120)
        pooled.append(time.perf_counter() - t0)
        assert pool_of(path) != "", f"run {i}: {sid} was not taken from the pool"
        mgr.DeleteSandbox(sid, timeout=60)

        t0 = time.perf_counter()
        path, sid = mgr.CreateSandbox(config(POOL_MEMORY + (1 << 20)), timeout=120)  # no pool has it
        cold.append(time.perf_counter() - t0)
        assert pool_of(path) == ""
        mgr.DeleteSandbox(sid, timeout=60)

        name = f"agentix-bench-pool-{os.getpid()}-{i}"
        t0 = time.perf_counter()
        subprocess.run([DOCKER, "run", "-d", "--name", name, "--volumes-from", carrier(), "-e", "AGENTIX_TOKEN=x",
                        "-p", "127.0.0.1::8000", "--memory", str(POOL_MEMORY), "--entrypoint",
                        "/nix/runtime/bin/agentix-server", IMAGE], check=True, capture_output=True)
        port = subprocess.run([DOCKER, "port", name, "8000/tcp"], check=True, capture_output=True,
                              text=True).stdout.split()[0].rsplit(":", 1)[1]
        if not wait_healthy(f"http://127.0.0.1:{port}", 60, interval=0.002):
            sys.exit("docker run's runtime did not answer /health")
        docker.append(time.perf_counter() - t0)
        subprocess.run([DOCKER, "rm", "-f", "-v", name], check=True, capture_output=True)

    results = {"create_from_pool": stats(pooled), "create_cold_agentd": stats(cold), "docker_run": stats(docker)}
    print(f"{'':22} {'median':>9} {'p99':>9} {'min':>9} {'max':>9}")
    for k, v in results.items():
        print(f"{k:22} {v['median_ms']:9.2f} {v['p99_ms']:9.2f} {v['min_ms']:9.2f} {v['max_ms']:9.2f}  ms "
              f"({v['runs']} runs)")
    p, c, d = (results[k]["median_ms"] for k in results)
    print(f"from a pool: {c / p:.1f}x faster than a cold create through agentd, {d / p:.1f}x faster than docker run "
          f"(medians)")
    print(json.dumps(results))


main()
