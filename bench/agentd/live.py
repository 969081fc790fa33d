#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Hibernate and resume against bare Docker checkpoints, side by side in one run: a gVisor
(runsc) sandbox holding MIB MiB of random bytes in memory (a read-only sandbox's /tmp is a tmpfs,
which gVisor keeps in its own memory) is
hibernated with agentd's Sandbox.Hibernate() and run again with Resume() (which returns once
its runtime answers /health); beside it a bare container of the same image on the same runtime
and network stack (agentix-runsc, AGENTIX_CHECKPOINT=1), holding the same, is checkpointed with
`docker checkpoint create` and started with `docker start --checkpoint`. Each time is measured
here, around the one call; the two ways alternate run by run; after each resume the bytes'
sum is checked. Medians of RUNS runs; a table and one JSON line.

  live.py IMAGE BUNDLE [RUNS] [MIB]     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)"""

import json
import os
import statistics
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import RpcClient  # noqa: E402

IMAGE, BUNDLE = sys.argv[1], sys.argv[2]
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
MIB = int(sys.argv[4]) if len(sys.argv) > 4 else 256
DOCKER = "/usr/bin/docker"
NAME = "org.agentix.Agentd1"
FILL = f"head -c {MIB << 20} /dev/urandom > /tmp/blob && md5sum /tmp/blob"
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object(NAME, "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


def docker(*args):
    return subprocess.run([DOCKER, *args], check=True, capture_output=True, text=True).stdout.strip()


def median_ms(times):
    return round(statistics.median(times) * 1000, 1)


def exec_in(sid, command):
    url, token = mgr.GetRuntimeAccess(sid)
    rt = RpcClient(str(url), str(token))
    try:
        r = rt.call("sandbox::exec", command=command, timeout=300)
    finally:
        rt.close()
    assert r["exit_code"] == 0, r
    return r["output"]


def main():
    path, sid = mgr.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE, "runtime": "runsc",
                                                   "read_only": dbus.Boolean(True),
                                                   "memory": dbus.UInt64((MIB + 256) << 20)}, signature="sv"),
                                  timeout=120)
    sandbox = dbus.Interface(bus.get_object(NAME, path), "org.agentix.Agentd1.Sandbox")
    peer = f"agentix-bench-live-{os.getpid()}"
    times = {"hibernate_agentd": [], "docker_checkpoint": [], "resume_agentd": [], "docker_start_checkpoint": []}
    try:
        agentd_sum = exec_in(sid, FILL).split()[0]
        docker("run", "-d", "--name", peer, "--runtime=runsc", "-e", "AGENTIX_CHECKPOINT=1", "--read-only",
               "--tmpfs", "/tmp:mode=1777", "--memory",
               f"{MIB + 256}m", "--entrypoint", "/bin/sh", IMAGE, "-c", f"{FILL} > /tmp/sum; exec sleep 1000000")
        for _ in range(600):
            if subprocess.run([DOCKER, "exec", peer, "/bin/busybox", "test", "-s", "/tmp/sum"]).returncode == 0:
                break
            time.sleep(0.1)
        peer_sum = docker("exec", peer, "/bin/busybox", "cat", "/tmp/sum").split()[0]
        for i in range(RUNS):
            for way in (("agentd", "docker") if i % 2 == 0 else ("docker", "agentd")):
                if way == "agentd":
                    t0 = time.perf_counter()
                    sandbox.Hibernate(timeout=600)
                    times["hibernate_agentd"].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    sandbox.Resume(timeout=600)
                    times["resume_agentd"].append(time.perf_counter() - t0)
                    assert exec_in(sid, "md5sum /tmp/blob").split()[0] == agentd_sum
                else:
                    t0 = time.perf_counter()
                    docker("checkpoint", "create", peer, f"cp{i}")
                    times["docker_checkpoint"].append(time.perf_counter() - t0)
                    # Docker answers before it has seen the stop (NOTES.md): wait for it, untimed.
                    while docker("inspect", "--format", "{{.State.Running}}", peer) == "true":
                        time.sleep(0.02)
                    t0 = time.perf_counter()
                    for _ in range(50):  # containerd may hold the old task a moment
                        r = subprocess.run([DOCKER, "start", "--checkpoint", f"cp{i}", peer], capture_output=True,
                                           text=True)
                        if r.returncode == 0:
                            break
                        time.sleep(0.1)
                    assert r.returncode == 0, r.stderr
                    times["docker_start_checkpoint"].append(time.perf_counter() - t0)
                    docker("checkpoint", "rm", peer, f"cp{i}")
                    # (docker exec'd processes are not restored: the sum was written by init's child)
                    assert docker("exec", peer, "/bin/busybox", "md5sum", "/tmp/blob").split()[0] == peer_sum
    finally:
        subprocess.run([DOCKER, "rm", "-f", peer], capture_output=True)
        mgr.DeleteSandbox(sid, timeout=120)
    med = {k: median_ms(v) for k, v in times.items()}
    print(f"{'what':28} {'median ms':>10}   ({RUNS} runs, {MIB} MiB in memory, runsc ptrace)")
    for k, v in med.items():
        print(f"{k:28} {v:>10}")
    ratios = {
        "hibernate_vs_docker_checkpoint": round(med["hibernate_agentd"] / med["docker_checkpoint"], 2),
        "resume_vs_docker_start_checkpoint": round(med["resume_agentd"] / med["docker_start_checkpoint"], 2),
        "hibernate_seconds_per_gib": round(med["hibernate_agentd"] / 1000 / (MIB / 1024), 2),
    }
    for k, v in ratios.items():
        print(f"{k:36} {v}")
    print(json.dumps({"runs": RUNS, "mib": MIB, "median_ms": med, **ratios}))


if __name__ == "__main__":
    main()
