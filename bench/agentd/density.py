#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How many idle sandboxes one host holds through agentd, and what each costs:

  burst:   N creates, P at a time (each a busctl of its own): live count, errors (by message),
           create p50/p99 and wall time; meanwhile ListSandboxes is timed every 0.2 s from a
           client of its own (p50 and max: the bus must not stall);
  memory:  MemAvailable before and after, per sandbox; Pss and USS (private) per process kind
           (smaps_rollup): the processes inside the sandboxes' cgroups (agentix-server, its
           worker) and the host's per-sandbox ones (containerd-shim, docker-proxy), per sandbox;
           agentd's RSS;
  list:    ListSandboxes p50 (in-process) beside `docker ps --filter label=…` of the same
           containers (the named peer);
  sample:  S sandboxes, spread over the run, each answer an exec;
  delete:  all of them, P at a time: wall time, ListSandboxes max meanwhile;
  left:    containers, networks beyond those before (agentd's shards aside), veths, and the lines
           of the host's iptables-save that differ from before (counters aside; Docker's own
           rules for a shard agentd made, and keeps, are counted apart). All must be 0.

  density.py IMAGE BUNDLE AGENTD_PID AGENTIXCTL N [--parallel P] [--sample S]
  (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)

Prints a table and, last, one JSON line."""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import time

import dbus

DOCKER = "/usr/bin/docker"
# ListSandboxes every 0.2 s until a line comes on stdin; its times (s) and those of the bus
# daemon's GetId() beside it on stdout, as JSON.
WATCHER = r"""
import json, os, select, sys, time
import dbus
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object("org.agentix.Agentd1", "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")
daemon = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")
mgr.ListSandboxes(timeout=60)  # (a proxy's first call introspects)
daemon.GetId()
times, control = [], []
while not select.select([sys.stdin], [], [], 0.2)[0]:
    t = time.monotonic()
    mgr.ListSandboxes(timeout=60)
    times.append(time.monotonic() - t)
    # The control: the bus daemon's own GetId, which no work of agentd's delays.
    t = time.monotonic()
    daemon.GetId()
    control.append(time.monotonic() - t)
print(json.dumps([times, control]))
"""
NAME, PATH, MANAGER = "org.agentix.Agentd1", "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager"


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(key)


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def veths():
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return len(out.splitlines())


def networks():
    out = subprocess.run([DOCKER, "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def iptables_rules():
    """The host's rules, counters aside (what a run must leave as it found)."""
    out = ""
    for tool in ("iptables-save", "ip6tables-save"):
        r = subprocess.run([tool], capture_output=True, text=True)
        out += r.stdout
    return sorted(re.sub(r"\[\d+:\d+\]", "", line) for line in out.splitlines() if line and not line.startswith("#"))


def sandbox_containers():
    out = subprocess.run([DOCKER, "ps", "-aq", "--filter", "label=org.agentix.sandbox"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()


def per_process_memory(n):
    """Pss and USS by process kind, per sandbox: what lives in a sandbox's cgroup, and the host's
    processes there are one of per sandbox."""
    kinds = collections.defaultdict(lambda: [0, 0, 0])  # pss, uss, count
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/cgroup") as f:
                cgroup = f.read()
            with open(f"/proc/{pid}/smaps_rollup") as f:
                fields = dict((line.split(":")[0], int(line.split()[1])) for line in f if line.split()[-1] == "kB")
        except (OSError, ValueError, IndexError):
            continue
        if "docker" in cgroup and comm.startswith("agentix"):
            kind = f"{comm} (in sandbox)"
        elif comm in ("containerd-shim", "containerd-shim-runc-v2", "docker-proxy", "runsc-sandbox", "runsc-gofer"):
            kind = comm
        else:
            continue
        k = kinds[kind]
        k[0] += fields.get("Pss", 0) * 1024
        k[1] += (fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)) * 1024
        k[2] += 1
    return {kind: {"pss_per_sandbox": v[0] / n, "uss_per_sandbox": v[1] / n, "processes": v[2]}
            for kind, v in sorted(kinds.items())}


class Density:
    def __init__(self, image, bundle, agentd_pid, agentixctl):
        self.image, self.bundle, self.pid, self.ctl = image, bundle, agentd_pid, agentixctl
        self.env = dict(os.environ)
        self.bus = dbus.bus.BusConnection(self.env["DBUS_SYSTEM_BUS_ADDRESS"])
        self.mgr = dbus.Interface(self.bus.get_object(NAME, PATH), MANAGER)

    def create(self, _):
        t = time.monotonic()
        r = subprocess.run(["busctl", "--system", "--json=short", "--timeout=600", "call", NAME, PATH, MANAGER,
                            "CreateSandbox", "a{sv}", "2", "image", "s", self.image, "bundle", "s", self.bundle],
                           capture_output=True, text=True, env=self.env)
        took = time.monotonic() - t
        if r.returncode != 0:
            return None, r.stderr.strip(), took
        return json.loads(r.stdout)["data"][1], None, took

    def delete(self, sid):
        r = subprocess.run(["busctl", "--system", "--timeout=600", "call", NAME, PATH, MANAGER, "DeleteSandbox", "s",
                            sid], capture_output=True, text=True, env=self.env)
        return r.returncode == 0

    def during(self, fn):
        """fn() while ListSandboxes is timed every 0.2 s by a process of its own (so that this
        one's threads do not delay it): (fn's result, [ListSandboxes times, GetId times] in s)."""
        watcher = subprocess.Popen(["/usr/bin/python3", "-c", WATCHER], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, env=self.env)
        try:
            result = fn()
        finally:
            out, _ = watcher.communicate("stop\n", timeout=60)
        return result, json.loads(out)

    def exec_answers(self, sid):
        r = subprocess.run([self.ctl, f"--sandbox={sid}", "exec", "--", "sh", "-c", "echo $((6 * 7))"],
                           capture_output=True, text=True, env=self.env, timeout=120)
        return r.returncode == 0 and r.stdout.strip() == "42"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image")
    ap.add_argument("bundle")
    ap.add_argument("agentd_pid", type=int)
    ap.add_argument("agentixctl")
    ap.add_argument("n", type=int)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--sample", type=int, default=20)
    o = ap.parse_args()
    d = Density(o.image, o.bundle, o.agentd_pid, o.agentixctl)

    before = {"mem_available": meminfo("MemAvailable"), "networks": networks(), "veths": veths(),
              "iptables": iptables_rules(), "agentd_rss": rss(o.agentd_pid)}
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(o.parallel) as pool:
        results, (create_lists, create_control) = d.during(lambda: list(pool.map(d.create, range(o.n))))
    create_wall = time.monotonic() - t0
    made = [sid for sid, _, _ in results if sid]
    errors = collections.Counter(re.sub(r"[0-9a-f]{12,}|veth\w+", "…", e)[:160] for _, e, _ in results if e)
    took = [t for sid, _, t in results if sid]
    time.sleep(10)  # what the runtimes do at start settles
    live = len(d.mgr.ListSandboxes(timeout=60))
    mem_drop = before["mem_available"] - meminfo("MemAvailable")
    processes = per_process_memory(max(len(made), 1))
    agentd_rss = rss(o.agentd_pid)

    list_times = []
    for _ in range(50):
        t = time.monotonic()
        d.mgr.ListSandboxes(timeout=60)
        list_times.append(time.monotonic() - t)
    ps_times = []
    for _ in range(5):
        t = time.monotonic()
        subprocess.run([DOCKER, "ps", "--filter", "label=org.agentix.sandbox", "--format", "{{.ID}}"],
                       capture_output=True, check=True)
        ps_times.append(time.monotonic() - t)
    step = max(1, len(made) // max(o.sample, 1))
    sample = made[::step][:o.sample]
    answered = sum(d.exec_answers(sid) for sid in sample)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(o.parallel) as pool:
        deleted, (delete_lists, delete_control) = d.during(lambda: list(pool.map(d.delete, made)))
    delete_wall = time.monotonic() - t0
    time.sleep(2)
    left = {
        "containers": len(sandbox_containers()),
        "networks": sorted(n for n in networks() - before["networks"] if not n.startswith("agentix-isolated-")
                           and not n.startswith("agentix-egress-")),
        "veths": veths() - before["veths"],
    }
    # Docker keeps a few rules per bridge network, so a shard agentd made (and keeps, as it
    # keeps agentix-isolated) brings its own: those aside, nothing may differ.
    changed = set(iptables_rules()) ^ set(before["iptables"])
    shard_rules = {line for line in changed if re.search(r"\bagentix[01]-[0-9]+\b", line)}
    left["iptables_changed"] = sorted(changed - shard_rules)
    left["iptables_shard_rules"] = len(shard_rules)

    MiB = 1024 * 1024
    rows = [
        ("sandboxes asked for", o.n), ("live", live), ("create errors", sum(errors.values())),
        ("create p50 (s)", f"{statistics.median(took):.2f}" if took else "-"),
        ("create p99 (s)", f"{pct(took, 99):.2f}" if took else "-"),
        ("create wall time (s)", f"{create_wall:.1f}"),
        ("ListSandboxes during creates p50 / p99 / max (ms)",
         f"{pct(create_lists, 50) * 1e3:.1f} / {pct(create_lists, 99) * 1e3:.1f} / "
         f"{max(create_lists or [0]) * 1e3:.1f}"),
        ("  the bus daemon's GetId beside it p50 / p99 / max (ms)",
         f"{pct(create_control, 50) * 1e3:.1f} / {pct(create_control, 99) * 1e3:.1f} / "
         f"{max(create_control or [0]) * 1e3:.1f}"),
        ("MemAvailable drop per sandbox (MiB)", f"{mem_drop / max(len(made), 1) / MiB:.2f}"),
        ("agentd RSS before / after (MiB)", f"{before['agentd_rss'] / MiB:.1f} / {agentd_rss / MiB:.1f}"),
        (f"ListSandboxes of {live} p50 (ms)", f"{statistics.median(list_times) * 1e3:.2f}"),
        ("docker ps of the same p50 (ms)", f"{statistics.median(ps_times) * 1e3:.1f}"),
        ("docker ps / ListSandboxes", f"{statistics.median(ps_times) / statistics.median(list_times):.0f}x"),
        ("sample answering exec", f"{answered} of {len(sample)}"),
        ("delete wall time (s)", f"{delete_wall:.1f}"),
        ("ListSandboxes during deletes p50 / p99 / max (ms)",
         f"{pct(delete_lists, 50) * 1e3:.1f} / {pct(delete_lists, 99) * 1e3:.1f} / "
         f"{max(delete_lists or [0]) * 1e3:.1f}"),
        ("  the bus daemon's GetId beside it p50 / p99 / max (ms)",
         f"{pct(delete_control, 50) * 1e3:.1f} / {pct(delete_control, 99) * 1e3:.1f} / "
         f"{max(delete_control or [0]) * 1e3:.1f}"),
        ("deletes failed", len(deleted) - sum(deleted)),
        ("left: containers / networks / veths", f"{left['containers']} / {len(left['networks'])} / {left['veths']}"),
        ("left: iptables lines changed (beyond Docker's for new shards)",
         f"{len(left['iptables_changed'])} ({left['iptables_shard_rules']} for new shards)"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("per-process memory, per sandbox (MiB):")
    for kind, v in processes.items():
        print(f"  {kind:<36} Pss {v['pss_per_sandbox'] / MiB:6.2f}  USS {v['uss_per_sandbox'] / MiB:6.2f}"
              f"  ({v['processes']} processes)")
    for message, count in errors.most_common(5):
        print(f"error ×{count}: {message}")
    print(json.dumps({
        "n": o.n, "live": live, "errors": dict(errors), "create_p50_s": statistics.median(took) if took else None,
        "create_p99_s": pct(took, 99) if took else None, "create_wall_s": create_wall,
        "list_during_creates_ms": {"p50": pct(create_lists, 50) * 1e3, "p99": pct(create_lists, 99) * 1e3,
                                   "max": max(create_lists or [0]) * 1e3},
        "getid_during_creates_max_ms": max(create_control or [0]) * 1e3,
        "mem_available_drop_per_sandbox_mib": mem_drop / max(len(made), 1) / MiB,
        "processes": processes, "agentd_rss_mib": agentd_rss / MiB,
        "list_p50_ms": statistics.median(list_times) * 1e3, "docker_ps_p50_ms": statistics.median(ps_times) * 1e3,
        "sample_answered": answered, "sample": len(sample), "delete_wall_s": delete_wall,
        "list_during_deletes_ms": {"p50": pct(delete_lists, 50) * 1e3, "p99": pct(delete_lists, 99) * 1e3,
                                   "max": max(delete_lists or [0]) * 1e3},
        "getid_during_deletes_max_ms": max(delete_control or [0]) * 1e3, "left": left,
    }))


if __name__ == "__main__":
    main()
