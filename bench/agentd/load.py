#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd under load, beside the same work done with the docker CLI in a loop, in one run:

  burst:  N creates at once (each its own `busctl call`), until every one answered — against N
          `docker run -d …` at once, each followed by `docker port` and polling /health; twice:
          cold (no carrier yet: agentd makes its own, the CLI side `docker create`s its own inside
          the timing) and warm (both carriers there);
  live:   M sandboxes alive: agentd's RSS and open fds, and ListSandboxes latency (dbus-python,
          in-process) — against `docker ps --filter label=…` listing the same M containers;
  churn:  K create+delete cycles, P at a time — against `docker run` + /health + `docker rm -f`;
          before and after: agentd's RSS and fds, agentix containers and carriers in Docker.

Sandboxes are made with the same image, bundle, limits and port publishing either way. The
CLI side has a carrier of its own (agentd may prune its carriers at any time). When the CLI
side fails, the run stops with its error: a ratio against a peer that did not do the work
would be a lie.

  load.py IMAGE BUNDLE AGENTD_PID [--burst N] [--live M] [--churn K] [--parallel P]
  (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)

Prints a table and, last, one JSON line. Importable: tests/agentd/test_load.py runs it smaller."""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import wait_healthy  # noqa: E402

DOCKER = "/usr/bin/docker"
NAME, PATH, MANAGER = "org.agentix.Agentd1", "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def docker_names(label, scope=()):
    """Containers with the label, and every label of scope (KEY=VALUE: one agentd's, say)."""
    filters = [f for lb in (label, *scope) for f in ("--filter", f"label={lb}")]
    r = subprocess.run([DOCKER, "ps", "-a", *filters, "--format", "{{.Names}}"], capture_output=True, text=True,
                       check=True)
    return set(r.stdout.split())


class PeerFailed(Exception):
    """The docker CLI side did not do the work: no figure can be compared with it."""


class Load:
    def __init__(self, image, bundle, agentd_pid, address=None, scope=()):
        """scope: labels (KEY=VALUE) of the containers counted (and, cold, carriers removed):
        the agentd's own (tests/agentd/test_load.py: its AGENTD_INSTANCE); none: all agentix's."""
        self.image, self.bundle, self.pid = image, bundle, agentd_pid
        self.scope = tuple(scope)
        self.env = dict(os.environ)
        if address:
            self.env["DBUS_SYSTEM_BUS_ADDRESS"] = address
        self.bus = dbus.bus.BusConnection(self.env["DBUS_SYSTEM_BUS_ADDRESS"])
        self.mgr = dbus.Interface(self.bus.get_object(NAME, PATH), MANAGER)
        self.carrier = f"agentix-load-carrier-{os.getpid()}"

    # ---- agentd ------------------------------------------------------------------------------

    def create(self):
        """One CreateSandbox through busctl (a client process of its own): (id or None, error)."""
        r = subprocess.run(["busctl", "--system", "--json=short", "--timeout=300", "call", NAME, PATH, MANAGER,
                            "CreateSandbox", "a{sv}", "2", "image", "s", self.image, "bundle", "s", self.bundle],
                           capture_output=True, text=True, env=self.env)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return json.loads(r.stdout)["data"][1], None

    def delete(self, sid):
        r = subprocess.run(["busctl", "--system", "--timeout=300", "call", NAME, PATH, MANAGER, "DeleteSandbox", "s",
                            sid], capture_output=True, text=True, env=self.env)
        return r.returncode == 0

    def sandboxes(self):
        return [str(s[0]) for s in self.mgr.ListSandboxes(timeout=60)]

    def many(self, fn, items, parallel):
        with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
            return list(pool.map(fn, items))

    # ---- the docker CLI, doing the same ------------------------------------------------------

    def make_carrier(self):
        """The CLI side's own carrier: the bundle image, created (Docker fills its /nix volume)."""
        if subprocess.run([DOCKER, "container", "inspect", self.carrier], capture_output=True).returncode == 0:
            return
        r = subprocess.run([DOCKER, "create", "--name", self.carrier, "--label", "agentix-load-peer=1", self.bundle],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise PeerFailed(f"docker create of the CLI side's carrier failed: {r.stderr.strip()}")

    def remove_carriers(self):
        """No carrier on either side: the next creates are cold."""
        names = sorted(docker_names("org.agentix.carrier", self.scope)) + [self.carrier]
        subprocess.run([DOCKER, "rm", "-f", "-v", *names], capture_output=True)

    def docker_create(self, i):
        name = f"agentix-load-peer-{os.getpid()}-{i}"
        r = subprocess.run([DOCKER, "run", "-d", "--name", name, "--label", "agentix-load-peer=1", "--volumes-from",
                            self.carrier, "-p", "127.0.0.1::8000", "--pids-limit", "1024", "--memory", "2g",
                            "--cpus", "1", "-e", "AGENTIX_TOKEN=peer", "--entrypoint",
                            "/nix/runtime/bin/agentix-server", self.image], capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr.strip()
        port = subprocess.run([DOCKER, "port", name, "8000"], capture_output=True, text=True).stdout.split(":")[-1]
        if not wait_healthy(f"http://127.0.0.1:{port.strip()}", 60):
            return None, "no /health"
        return name, None

    def docker_delete(self, name):
        return subprocess.run([DOCKER, "rm", "-f", "-v", name], capture_output=True).returncode == 0

    # ---- the figures -------------------------------------------------------------------------

    def burst(self, n, peer=True, cold=False):
        """n creates at once through agentd, and through the docker CLI; cold: no carrier on
        either side at the start (the CLI side's carrier is made inside its timing)."""
        out = {"cold": cold}
        if cold:
            self.remove_carriers()
        before = docker_names("org.agentix.sandbox", self.scope)
        t0 = time.monotonic()
        made = self.many(lambda _: self.create(), range(n), n)
        out["agentd_s"] = time.monotonic() - t0
        out["agentd_failed"] = [e for s, e in made if not s]
        out["agentd_rss_kib"] = rss_kib(self.pid)
        self.many(self.delete, [s for s, _ in made if s], n)
        out["agentd_leaked"] = sorted(docker_names("org.agentix.sandbox", self.scope) - before)
        if not peer:
            return out
        if not cold:
            self.make_carrier()
        t0 = time.monotonic()
        if cold:
            self.make_carrier()
        made = self.many(self.docker_create, range(n), n)
        out["docker_s"] = time.monotonic() - t0
        out["docker_failed"] = [e for s, e in made if not s]
        self.many(self.docker_delete, [s for s, _ in made if s], n)
        if out["docker_failed"]:
            raise PeerFailed(f"{len(out['docker_failed'])} of {n} docker CLI creates failed, e.g.: "
                             f"{out['docker_failed'][0]}")
        return out

    def live(self, m, parallel, list_calls=200):
        """m sandboxes alive: agentd's RSS, fds, and how fast it lists them."""
        out = {"fds_before": fds(self.pid)}
        made = self.many(lambda _: self.create(), range(m), parallel)
        ids = [s for s, _ in made if s]
        out["failed"] = [e for s, e in made if not s]
        out["sandboxes"] = len(self.sandboxes())
        out["rss_kib"] = rss_kib(self.pid)
        out["fds"] = fds(self.pid)
        times = []
        for _ in range(list_calls):
            t0 = time.perf_counter()
            n = len(self.mgr.ListSandboxes(timeout=60))
            times.append(time.perf_counter() - t0)
        assert n >= len(ids)
        out["list_median_ms"] = statistics.median(times) * 1000
        out["list_p99_ms"] = sorted(times)[int(len(times) * 0.99) - 1] * 1000
        times = []
        for _ in range(max(5, list_calls // 20)):
            t0 = time.perf_counter()
            subprocess.run([DOCKER, "ps", "-a", "--filter", "label=org.agentix.sandbox", "--format", "{{.Names}}"],
                           capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
        out["docker_ps_median_ms"] = statistics.median(times) * 1000
        self.many(self.delete, ids, parallel)
        return out

    def churn(self, k, parallel, peer=True):
        """k create+delete cycles, parallel at a time; what agentd holds before and after."""
        def cycle(_):
            sid, err = self.create()
            return err if not sid else (None if self.delete(sid) else "delete failed")

        def peer_cycle(i):
            name, err = self.docker_create(i)
            return err if not name else (None if self.docker_delete(name) else "rm failed")

        warm = min(50, k // 10)
        errors = [e for e in self.many(cycle, range(warm), parallel) if e]  # the heap's first growth
        out = {"before": {"rss_kib": rss_kib(self.pid), "fds": fds(self.pid),
                          "containers": len(docker_names("org.agentix.sandbox", self.scope)),
                          "carriers": len(docker_names("org.agentix.carrier", self.scope))}}
        t0 = time.monotonic()
        errors += [e for e in self.many(cycle, range(k), parallel) if e]
        out["agentd_s"] = time.monotonic() - t0
        out["after"] = {"rss_kib": rss_kib(self.pid), "fds": fds(self.pid),
                        "containers": len(docker_names("org.agentix.sandbox", self.scope)),
                        "carriers": len(docker_names("org.agentix.carrier", self.scope))}
        out["errors"] = errors
        out["cycles"] = k
        if not peer:
            return out
        self.make_carrier()
        t0 = time.monotonic()
        out["docker_errors"] = [e for e in self.many(peer_cycle, range(k), parallel) if e]
        out["docker_s"] = time.monotonic() - t0
        if out["docker_errors"]:
            raise PeerFailed(f"{len(out['docker_errors'])} of {k} docker CLI cycles failed, e.g.: "
                             f"{out['docker_errors'][0]}")
        return out

    def close(self):
        subprocess.run([DOCKER, "rm", "-f", "-v", self.carrier], capture_output=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("image")
    p.add_argument("bundle")
    p.add_argument("agentd_pid", type=int)
    p.add_argument("--burst", type=int, default=50)
    p.add_argument("--live", type=int, default=100)
    p.add_argument("--churn", type=int, default=1000)
    p.add_argument("--parallel", type=int, default=10)
    a = p.parse_args()
    load = Load(a.image, a.bundle, a.agentd_pid)
    try:
        results = {"burst_cold": load.burst(a.burst, cold=True), "burst_warm": load.burst(a.burst),
                   "live": load.live(a.live, a.parallel), "churn": load.churn(a.churn, a.parallel)}
    except PeerFailed as e:
        print(f"load.py: the docker CLI side failed, no ratio printed: {e}", file=sys.stderr)
        return 2
    finally:
        load.close()
    lv, c = results["live"], results["churn"]
    print(f"{'figure':44} {'agentd':>14} {'docker CLI':>14} {'ratio':>7}")
    for key, what in (("burst_cold", "cold"), ("burst_warm", "warm")):
        b = results[key]
        print(f"{f'{a.burst} creates at once, {what}, all ready (s)':44} {b['agentd_s']:14.2f} "
              f"{b['docker_s']:14.2f} {b['agentd_s'] / b['docker_s']:7.2f}")
        print(f"{'  failed / leaked':44} {len(b['agentd_failed']):>7} / {len(b['agentd_leaked']):<4} "
              f"{len(b['docker_failed']):>14}")
    print(f"{f'list {a.live} sandboxes, median (ms)':44} {lv['list_median_ms']:14.2f} "
          f"{lv['docker_ps_median_ms']:14.2f} {lv['list_median_ms'] / lv['docker_ps_median_ms']:7.3f}")
    print(f"{f'agentd RSS with {a.live} live (MiB)':44} {lv['rss_kib'] / 1024:14.2f}")
    print(f"{f'{a.churn} create+delete, {a.parallel} at a time (s)':44} {c['agentd_s']:14.1f} {c['docker_s']:14.1f} "
          f"{c['agentd_s'] / c['docker_s']:7.2f}")
    for key in ("rss_kib", "fds", "containers", "carriers"):
        print(f"{'  ' + key + ' before -> after churn':44} {c['before'][key]:>6} -> {c['after'][key]:<6}")
    print(json.dumps(results))
    bad = any(results[k]["agentd_failed"] or results[k]["agentd_leaked"] for k in ("burst_cold", "burst_warm")) or \
        lv["failed"] or c["errors"] or lv["rss_kib"] > 12 * 1024
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
