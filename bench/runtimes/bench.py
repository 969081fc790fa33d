#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""runc against runsc (gVisor), side by side in one run, through agentd: the same sandbox
(busybox task image, the example bundle, agentd's defaults: the isolated network, the least
privileges) created and used under each runtime, alternately.

  create     CreateSandbox until the runtime answers /health (each its own sandbox)
  exec true  sandbox::exec "true", unary (python-socketio client, one call at a time)
  read 1MiB  fs::download of a 1 MiB file, one call
  dl 64MiB   fs::download of a 64 MiB file, one call

Also create-to-ready of runc, in the same rounds, on Docker's plain bridge (network=bridge, the
default before the isolated network), on a user-defined network of Docker's with no options
(made by this bench): together, what agentd's networks cost a create, and how much of it is
Docker's for any user-defined network; and with an egress list (egress=["0.0.0.0/0"]): what
setting a sandbox's own rules costs.

Prints medians and the runsc/runc ratio, then one JSON line.

  bench.py [--creates N] [--calls M]   (needs the environment of tests/agentd: AGENTD, …)"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "agentd"))
from harness import RpcClient  # noqa: E402
from agentd_env import Agentd, bundle, docker  # noqa: E402

RUNTIMES = ("runc", "runsc")
PLAIN = "agentix-bench-plain"
# The other networks a create is timed on (runc), and the create keys that put it there.
NETWORKS = {"bridge": dict(network="bridge"), "plain": dict(network=PLAIN),
            "egress": dict(egress=__import__("dbus").Array(["0.0.0.0/0"], signature="s"))}


def median_ms(xs):
    return statistics.median(xs) * 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--creates", type=int, default=10)
    p.add_argument("--calls", type=int, default=200)
    a = p.parse_args()
    bundle()
    agentd = Agentd("bench-runtimes")
    times = {r: {"create": [], "exec_true": [], "read_1mib": [], "download_64mib": []} for r in RUNTIMES}
    networks = {n: [] for n in NETWORKS}
    docker("network", "create", PLAIN)
    try:
        for i in range(a.creates):
            for r in RUNTIMES + tuple(NETWORKS):
                t0 = time.perf_counter()
                _, sid = agentd.create(runtime="runc", **NETWORKS[r]) if r in NETWORKS else agentd.create(runtime=r)
                (networks[r] if r in NETWORKS else times[r]["create"]).append(time.perf_counter() - t0)
                agentd.manager().DeleteSandbox(sid, timeout=60)
        for r in RUNTIMES:
            _, sid = agentd.create(runtime=r)
            url, token = agentd.manager().GetRuntimeAccess(sid)
            c = RpcClient(str(url), str(token), transports=["websocket"])
            try:
                c.call("sandbox::exec", command="head -c 1048576 /dev/zero | tr '\\0' 'x' | fold -w 1023 > /tmp/1m; "
                                               "head -c 67108864 /dev/urandom > /tmp/64m")
                for _ in range(a.calls):
                    t0 = time.perf_counter()
                    assert c.call("sandbox::exec", command="true")["exit_code"] == 0
                    times[r]["exec_true"].append(time.perf_counter() - t0)
                for _ in range(max(5, a.calls // 10)):
                    t0 = time.perf_counter()
                    (f,) = c.call("fs::download", ["/tmp/1m"])
                    times[r]["read_1mib"].append(time.perf_counter() - t0)
                    assert len(f["content"]) >= 1 << 20
                for _ in range(5):
                    t0 = time.perf_counter()
                    (f,) = c.call("fs::download", ["/tmp/64m"], timeout=120)
                    times[r]["download_64mib"].append(time.perf_counter() - t0)
                    assert len(f["content"]) == 64 << 20
            finally:
                c.close()
                agentd.manager().DeleteSandbox(sid, timeout=60)
    finally:
        agentd.stop()
        docker("network", "rm", PLAIN, check=False)
    print(f"{'median (ms)':22} {'runc':>10} {'runsc':>10} {'runsc/runc':>11}")
    out = {}
    for key in ("create", "exec_true", "read_1mib", "download_64mib"):
        x, y = median_ms(times["runc"][key]), median_ms(times["runsc"][key])
        out[key] = {"runc_ms": x, "runsc_ms": y, "ratio": y / x, "n": len(times["runc"][key])}
        print(f"{key:22} {x:10.2f} {y:10.2f} {y / x:11.2f}")
    x, y = median_ms(networks["bridge"]), median_ms(times["runc"]["create"])
    plain, egress = median_ms(networks["plain"]), median_ms(networks["egress"])
    out["create_by_network"] = {"bridge_ms": x, "plain_user_network_ms": plain, "isolated_ms": y,
                                "egress_ms": egress}
    print(f"create, runc: Docker's bridge {x:.2f} ms, a plain user-defined network {plain:.2f} ms "
          f"({plain - x:+.2f} ms), the isolated network {y:.2f} ms ({y - x:+.2f} ms; {y - plain:+.2f} ms against "
          f"the plain one), with an egress list {egress:.2f} ms ({egress - y:+.2f} ms against isolated)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
