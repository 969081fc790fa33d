#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The peer of scenario 3d: jupyter_client's own BlockingKernelClient (Debian's
python3-jupyter-client) running `1+1` on a python3 kernel it started, COUNT times after WARMUP,
each round trip from execute() to the run's end with its result in hand (execute_interactive:
the reply and the iopub messages up to idle) — what code::run returns. Prints one JSON line in
loadgen's form (label, calls, p50_us, p90_us, p99_us, …).

    jupyter-client.py [--count N] [--warmup N] [--label NAME]"""

import argparse
import json
import statistics
import sys
import time

from jupyter_client.manager import start_new_kernel


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--label", default="jupyter-client")
    ap.add_argument("--kernel", default="python3")
    a = ap.parse_args()

    km, kc = start_new_kernel(kernel_name=a.kernel)
    try:
        lat, errors = [], 0
        for i in range(a.warmup + a.count):
            results = []

            def hook(msg):
                if msg["msg_type"] == "execute_result":
                    results.append(msg["content"]["data"]["text/plain"])
            t0 = time.perf_counter_ns()
            reply = kc.execute_interactive("1+1", output_hook=hook, timeout=30)
            t = (time.perf_counter_ns() - t0) / 1000.0
            if reply["content"]["status"] != "ok" or results != ["2"]:
                errors += 1
                print(f"run {i}: {reply['content']['status']} {results}", file=sys.stderr)
                sys.exit(1)
            if i >= a.warmup:
                lat.append(t)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    lat.sort()
    print(json.dumps({"label": a.label, "mode": "latency", "callable": "execute_interactive('1+1')",
                      "calls": len(lat), "errors": errors, "p50_us": round(percentile(lat, 50), 1),
                      "p90_us": round(percentile(lat, 90), 1), "p99_us": round(percentile(lat, 99), 1),
                      "mean_us": round(statistics.fmean(lat), 1), "min_us": round(lat[0], 1),
                      "max_us": round(lat[-1], 1)}))


if __name__ == "__main__":
    main()
