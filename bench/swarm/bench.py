# SPDX-License-Identifier: MIT
"""bench/swarm/bench.py DIR IMAGE BUNDLE RUNS BURST — create-to-ready on a three-node swarm
(the swarm backend) against the docker backend on this host, one agentd, same run.

Scenarios (one JSON line each, then a table):
  first    the first swarm create of a bundle: registry lookups, the bundle put on every node
           (global job: pull + volume fill), the task image pulled, the service, /health
  seq      RUNS creates one after another, alternating docker and swarm, each deleted after
  burst    BURST creates at once on each backend (one busctl per create): wall time,
           per-create median and p99, and (swarm) how they spread over the nodes
CreateSandbox returns once the runtime answers /health: its duration is create-to-ready."""

import json
import statistics
import subprocess
import sys
import threading
import time

import dbus

NAME, PATH, MANAGER, SANDBOX = ("org.agentix.Agentd1", "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager",
                                "org.agentix.Agentd1.Sandbox")
DIR, IMAGE, BUNDLE, RUNS, BURST = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
bus = dbus.SystemBus()
manager = dbus.Interface(bus.get_object(NAME, PATH), MANAGER)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def create(backend):
    t0 = time.perf_counter()
    path, sid = manager.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE, "backend": backend},
                                                      signature="sv"), timeout=300)
    return time.perf_counter() - t0, str(path), str(sid)


def url(path):
    return str(dbus.Interface(bus.get_object(NAME, path), "org.freedesktop.DBus.Properties").Get(SANDBOX, "RuntimeUrl"))


def delete(sid):
    manager.DeleteSandbox(sid, timeout=120)


def line(**kv):
    print(json.dumps(kv), flush=True)


def burst(backend, n):
    out, threads = [None] * n, []

    def one(i):
        t0 = time.perf_counter()
        r = subprocess.run(["busctl", "--system", "--json=short", "--timeout=300", "call", NAME, PATH, MANAGER,
                            "CreateSandbox", "a{sv}", "3", "image", "s", IMAGE, "bundle", "s", BUNDLE, "backend", "s",
                            backend], capture_output=True, text=True)
        out[i] = (time.perf_counter() - t0, r)
    t0 = time.perf_counter()
    for i in range(n):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    times, nodes, failed = [], {}, []
    for dt, r in out:
        if r.returncode != 0:
            failed.append(r.stderr.strip())
            continue
        path, sid = json.loads(r.stdout)["data"]
        times.append(dt)
        host = url(path).split("//")[1].split(":")[0]
        nodes[host] = nodes.get(host, 0) + 1
    for sid in [str(s[0]) for s in manager.ListSandboxes()]:
        delete(sid)
    return wall, times, nodes, failed


def main():
    # first: the bundle is on no node yet (a fresh cluster)
    first, path, sid = create("swarm")
    line(scenario="first", backend="swarm", seconds=round(first, 3), url=url(path))
    delete(sid)
    again, path, sid = create("swarm")
    line(scenario="first", backend="swarm-again", seconds=round(again, 3), url=url(path))
    delete(sid)

    seq = {"docker": [], "swarm": []}
    for _ in range(RUNS):
        for backend in ("docker", "swarm"):
            dt, path, sid = create(backend)
            seq[backend].append(dt)
            delete(sid)
    for backend, xs in seq.items():
        line(scenario="seq", backend=backend, runs=len(xs), median=round(statistics.median(xs), 4),
             p99=round(pct(xs, 99), 4), min=round(min(xs), 4), max=round(max(xs), 4))

    bursts = {}
    for backend in ("docker", "swarm"):
        wall, times, nodes, failed = burst(backend, BURST)
        bursts[backend] = (wall, times, nodes, failed)
        line(scenario="burst", backend=backend, n=BURST, ok=len(times), failed=len(failed), wall=round(wall, 3),
             median=round(statistics.median(times), 4) if times else None,
             p99=round(pct(times, 99), 4) if times else None, nodes=nodes, errors=failed[:3])

    sd, ss = statistics.median(seq["docker"]), statistics.median(seq["swarm"])
    print()
    print(f"{'':44}{'docker':>10}{'swarm':>10}{'swarm/docker':>14}")
    print(f"{'first create of the bundle (s)':44}{'':>10}{first:>10.2f}")
    print(f"{'second create, bundle on the nodes (s)':44}{'':>10}{again:>10.2f}")
    print(f"{'create-to-ready median, sequential (s)':44}{sd:>10.3f}{ss:>10.3f}{ss / sd:>13.2f}x")
    pd, ps = pct(seq["docker"], 99), pct(seq["swarm"], 99)
    print(f"{'create-to-ready p99, sequential (s)':44}{pd:>10.3f}{ps:>10.3f}{ps / pd:>13.2f}x")
    wd, ws = bursts["docker"][0], bursts["swarm"][0]
    print(f"{f'{BURST} at once, wall (s)':44}{wd:>10.2f}{ws:>10.2f}{ws / wd:>13.2f}x")
    md = statistics.median(bursts["docker"][1]) if bursts["docker"][1] else float("nan")
    ms = statistics.median(bursts["swarm"][1]) if bursts["swarm"][1] else float("nan")
    print(f"{f'{BURST} at once, per-create median (s)':44}{md:>10.2f}{ms:>10.2f}{ms / md:>13.2f}x")
    print(f"{'swarm burst, sandboxes per node':44}{json.dumps(bursts['swarm'][2])}")


main()
