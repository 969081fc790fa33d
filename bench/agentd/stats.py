#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reading what sandboxes use, against Docker, side by side in one run on the same live
sandboxes: N sandboxes are made (default 250), then, alternating round by round,
  - Sandbox.GetStats() of every one of them over D-Bus (dbus-python, 64 calls in flight at a
    time, as many as the bus lets one connection wait for: as a monitoring loop would), timed
    around the N;
  - `docker stats --no-stream` of the same N containers, timed around the command;
each ROUNDS times (default 5). Reported: GetStats calls per second and ms per round, docker
stats' ms per round, and the ratio of the medians. The first round of GetStats asks Docker once
per sandbox (its container's init pid); later rounds read the kernel's files only: both are
shown. With AGENTIX_METRICS_URL, a scrape of agentd's /metrics (per-sandbox series on: every
sandbox's usage read for it) is timed too, each round.

  stats.py IMAGE BUNDLE [N] [ROUNDS]     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

IMAGE, BUNDLE = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 250
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
NAME = "org.agentix.Agentd1"
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object(NAME, "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


IN_FLIGHT = 64  # the bus allows a connection so many pending replies (dbus-daemon: 128 by default)


def get_stats_all(paths):
    """GetStats() of every path, IN_FLIGHT at a time; seconds until the last answer."""
    loop = GLib.MainLoop()
    todo = list(paths)
    left = [len(paths)]
    errors = []

    def send_next():
        if todo:
            bus.get_object(NAME, todo.pop(), introspect=False).GetStats(
                dbus_interface="org.agentix.Agentd1.Sandbox", reply_handler=done, error_handler=failed, timeout=120)

    def done(*_):
        left[0] -= 1
        if left[0] == 0:
            loop.quit()
        else:
            send_next()

    def failed(e):
        errors.append(e)
        done()

    t0 = time.perf_counter()
    for _ in range(min(IN_FLIGHT, len(paths))):
        send_next()
    loop.run()
    elapsed = time.perf_counter() - t0
    assert not errors, errors[:3]
    return elapsed


def docker_stats(names):
    t0 = time.perf_counter()
    out = subprocess.run(["/usr/bin/docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", *names],
                         check=True, capture_output=True, text=True).stdout
    elapsed = time.perf_counter() - t0
    assert len(out.splitlines()) == len(names), out[-500:]
    return elapsed


def scrape(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        text = r.read().decode()
    elapsed = time.perf_counter() - t0
    assert text.endswith("# EOF\n"), text[-200:]
    return elapsed, text.count("agentix_sandbox_memory_bytes{")


def make(n):
    made = []
    lock = threading.Lock()

    def one():
        path, sid = mgr.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE, "memory": dbus.UInt64(64 << 20),
                                                       "pids": dbus.UInt64(64)}, signature="sv"), timeout=300)
        with lock:
            made.append((str(path), str(sid)))

    # A few at a time: the point is N live ones, not how fast they come.
    for start in range(0, n, 8):
        threads = [threading.Thread(target=one) for _ in range(min(8, n - start))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return made


def main():
    made = make(N)
    assert len(made) == N, len(made)
    paths = [p for p, _ in made]
    names = [f"agentix-{sid}" for _, sid in made]
    ours, theirs, scrapes = [], [], []
    metrics_url = os.environ.get("AGENTIX_METRICS_URL")
    try:
        first = get_stats_all(paths)  # asks Docker for each pid once
        for i in range(ROUNDS):
            for way in (("agentd", "docker") if i % 2 == 0 else ("docker", "agentd")):
                if way == "agentd":
                    ours.append(get_stats_all(paths))
                else:
                    theirs.append(docker_stats(names))
            if metrics_url:
                elapsed, series = scrape(metrics_url)
                assert series == N, (series, N)
                scrapes.append(elapsed)
    finally:
        for _, sid in made:
            try:
                mgr.DeleteSandbox(sid, timeout=120)
            except dbus.DBusException:
                pass
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"{N} live sandboxes, {ROUNDS} rounds each way, alternating")
    print(f"{'':44} {'ms/round':>10} {'calls/s':>10}")
    print(f"{'GetStats() x N, first round (pids from Docker)':44} {first * 1000:10.1f} {N / first:10.0f}")
    print(f"{'GetStats() x N (agentd, kernel files)':44} {o * 1000:10.1f} {N / o:10.0f}")
    print(f"{'docker stats --no-stream (the same N)':44} {t * 1000:10.1f} {N / t:10.0f}")
    if scrapes:
        print(f"{'GET /metrics, per-sandbox series of all N':44} {statistics.median(scrapes) * 1000:10.1f}")
    print(f"docker stats / GetStats: {t / o:.1f}x")
    print(json.dumps({"sandboxes": N, "rounds": ROUNDS, "getstats_first_ms": round(first * 1000, 1),
                      "getstats_ms": round(o * 1000, 1), "getstats_calls_per_s": round(N / o),
                      "docker_stats_ms": round(t * 1000, 1), "ratio": round(t / o, 1),
                      **({"metrics_scrape_ms": round(statistics.median(scrapes) * 1000, 1)} if scrapes else {})}))


if __name__ == "__main__":
    main()
