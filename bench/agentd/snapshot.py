#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Snapshots against bare Docker, side by side in one run, on the same sandbox: a sandbox with
100 MiB written (random bytes, so no layer compresses it away) is snapshotted with agentd's
Sandbox.Snapshot() and with `docker commit` of its container; then a sandbox is started from
each image, through agentd (CreateSandbox, ready when its runtime answers /health) and with
`docker run` of the committed image plus polling /health. Each time is measured here, around
the one call; the two ways alternate run by run. Medians of N runs; a table and one JSON line.

  snapshot.py IMAGE BUNDLE [RUNS]     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)"""

import json
import os
import statistics
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import RpcClient, wait_healthy  # noqa: E402

IMAGE, BUNDLE = sys.argv[1], sys.argv[2]
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
WRITTEN = 100 << 20
DOCKER = "/usr/bin/docker"
NAME = "org.agentix.Agentd1"
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object(NAME, "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


def docker(*args):
    return subprocess.run([DOCKER, *args], check=True, capture_output=True, text=True).stdout.strip()


def median_ms(times):
    return round(statistics.median(times) * 1000, 1)


def main():
    path, sid = mgr.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE}, signature="sv"), timeout=120)
    sandbox = dbus.Interface(bus.get_object(NAME, path), "org.agentix.Agentd1.Sandbox")
    url, token = mgr.GetRuntimeAccess(sid)
    rt = RpcClient(str(url), str(token))
    r = rt.call("sandbox::exec", command=f"head -c {WRITTEN} /dev/urandom > /blob && wc -c < /blob", timeout=120)
    rt.close()
    assert r["output"].strip() == str(WRITTEN), r
    carrier = docker("inspect", "--format", "{{index .HostConfig.VolumesFrom 0}}", f"agentix-{sid}")
    times = {"snapshot_agentd": [], "docker_commit": [], "create_from_snapshot_agentd": [], "docker_run_committed": []}
    try:
        for i in range(RUNS):
            for way in (("agentd", "docker") if i % 2 == 0 else ("docker", "agentd")):
                if way == "agentd":
                    t0 = time.perf_counter()
                    image = str(sandbox.Snapshot(dbus.Dictionary({}, signature="sv"), timeout=600))
                    times["snapshot_agentd"].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    _, sid2 = mgr.CreateSandbox(dbus.Dictionary({"image": image, "bundle": BUNDLE}, signature="sv"),
                                                timeout=120)
                    times["create_from_snapshot_agentd"].append(time.perf_counter() - t0)
                    mgr.DeleteSandbox(sid2, timeout=60)
                    mgr.DeleteSnapshot(image, timeout=120)
                else:
                    image = f"agentix-bench-commit:{os.getpid()}-{i}"
                    t0 = time.perf_counter()
                    docker("commit", f"agentix-{sid}", image)
                    times["docker_commit"].append(time.perf_counter() - t0)
                    name = f"agentix-bench-commit-{os.getpid()}-{i}"
                    t0 = time.perf_counter()
                    docker("run", "-d", "--name", name, "--volumes-from", carrier, "-e", "AGENTIX_TOKEN=x", "-p",
                           "127.0.0.1::8000", "--entrypoint", "/nix/runtime/bin/agentix-server", image)
                    port = docker("port", name, "8000/tcp").split()[0].rsplit(":", 1)[1]
                    if not wait_healthy(f"http://127.0.0.1:{port}", 60, interval=0.002):
                        sys.exit("docker run's runtime did not answer /health")
                    times["docker_run_committed"].append(time.perf_counter() - t0)
                    docker("rm", "-f", "-v", name)
                    docker("rmi", image)
    finally:
        mgr.DeleteSandbox(sid, timeout=60)

    results = {k: {"median_ms": median_ms(v), "min_ms": round(min(v) * 1000, 1), "max_ms": round(max(v) * 1000, 1),
                   "runs": len(v)} for k, v in times.items()}
    print(f"sandbox with {WRITTEN >> 20} MiB written; {RUNS} runs each, alternating")
    print(f"{'':28} {'median':>9} {'min':>9} {'max':>9}")
    for k, v in results.items():
        print(f"{k:28} {v['median_ms']:9.1f} {v['min_ms']:9.1f} {v['max_ms']:9.1f}  ms")
    s, c = results["snapshot_agentd"]["median_ms"], results["docker_commit"]["median_ms"]
    a, d = results["create_from_snapshot_agentd"]["median_ms"], results["docker_run_committed"]["median_ms"]
    print(f"Snapshot(): {s / c:.2f}x the time of docker commit; create from it to ready: {a / d:.2f}x the time of "
          f"docker run + /health (medians)")
    print(json.dumps(results))


main()
