#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentixctl build and bundle sandboxes, side by side with what a user would otherwise do: the
same tools apt-installed into a Debian image (the "hand-written" image), run with `docker run`.

Measures, in one run (medians of N runs, each figure with its spread):
  - cold build of examples/bundle-example: an empty cache every run, with the image already in
    Docker (build_cold) and without it, so that it is loaded too (build_cold_and_load); warm
    build (cache kept, image in Docker: hashing the inputs, then only the tags are set);
  - bundle image size against the hand-written image (and the Debian base under it);
  - first command: `python3 -c 'print(1)'` from the bundle overlaid on the busybox and Debian
    task images (carrier kept, `docker run --rm --volumes-from`) against `docker run --rm` of
    the hand-written image;
  - a whole sandbox: carrier created, task container started with agentix-server from the
    bundle, until /health answers; the carrier removed with it.

  bench.py AGENTIXCTL RUNTIME_DIR INCLUDE_DIR EXAMPLE_DIR [RUNS]
Prints a table and one JSON object (the last line)."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import wait_healthy  # noqa: E402

AGENTIXCTL, RUNTIME_DIR, INCLUDE_DIR, EXAMPLE = sys.argv[1:5]
RUNS = int(sys.argv[5]) if len(sys.argv) > 5 else 5
DOCKER = "/usr/bin/docker"
BUSYBOX, DEBIAN = "agentix-test/busybox:1", "agentix-test/debian:bookworm"
HANDWRITTEN = "agentix-bench/handwritten:1"
TOOLS = "bash coreutils git python3 ca-certificates"
ENV = dict(os.environ, AGENTIX_RUNTIME_DIR=RUNTIME_DIR, AGENTIX_INCLUDE_DIR=INCLUDE_DIR)


def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout


def timed(fn, runs=RUNS):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "max_s": round(max(times), 3), "runs": runs}


def build(cache, *extra):
    return json.loads(run(AGENTIXCTL, "build", "--json", "-q", "--cache-dir", cache, *extra, EXAMPLE))


def image_size(ref):
    return json.loads(run(DOCKER, "image", "inspect", ref))[0]["Size"]


def handwritten_image():
    """The image a user would write by hand: the Debian task image plus the same tools from apt."""
    if subprocess.run([DOCKER, "image", "inspect", HANDWRITTEN], capture_output=True).returncode == 0:
        return
    name = "agentix-bench-handwritten"
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True)
    run(DOCKER, "run", "--name", name, DEBIAN, "sh", "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        f"{TOOLS} >/dev/null && rm -rf /var/lib/apt/lists/*")
    run(DOCKER, "commit", name, HANDWRITTEN)
    run(DOCKER, "rm", name)


def wait_health(url, timeout=20):
    if not wait_healthy(url, timeout):
        sys.exit("agentix-server did not answer /health")


def sandbox_round_trip(bundle, image):
    carrier, box = f"agentix-bench-carrier-{os.getpid()}", f"agentix-bench-sandbox-{os.getpid()}"
    run(DOCKER, "create", "--name", carrier, bundle)
    run(DOCKER, "run", "-d", "--name", box, "--volumes-from", carrier, "-e", "AGENTIX_TOKEN=bench",
        "-p", "127.0.0.1::8000", "--entrypoint", "/nix/runtime/bin/agentix-server", image)
    port = run(DOCKER, "port", box, "8000/tcp").split()[0].rsplit(":", 1)[1]
    wait_health(f"http://127.0.0.1:{port}")
    run(DOCKER, "rm", "-f", "-v", box, carrier)


def main():
    results = {}
    # Cold: a new cache each time (and Docker already holding the image, so only the build is
    # timed, not a load of layers Docker has).
    build(tempfile.mkdtemp(prefix="agentix-bench-cache-"))
    caches = []

    def cold():
        caches.append(tempfile.mkdtemp(prefix="agentix-bench-cache-"))
        build(caches[-1])
    results["build_cold"] = timed(cold, max(3, RUNS // 2))

    # Cold from nothing: no cache and no image in Docker, so the layers are loaded too.
    def cold_and_load():
        subprocess.run([DOCKER, "rmi", "-f", "example-bundle:0.1.0", "example-bundle:latest"], capture_output=True)
        caches.append(tempfile.mkdtemp(prefix="agentix-bench-cache-"))
        assert build(caches[-1])["loaded"]
    results["build_cold_and_load"] = timed(cold_and_load, max(3, RUNS // 2))
    warm_cache = caches[-1]
    results["build_warm"] = timed(lambda: build(warm_cache))
    bundle = build(warm_cache)
    ref = f"{bundle['name']}:{bundle['version']}"
    for c in caches:
        shutil.rmtree(c, ignore_errors=True)

    handwritten_image()
    results["size_bytes"] = {"bundle": image_size(ref), "handwritten": image_size(HANDWRITTEN),
                             "debian_base": image_size(DEBIAN)}

    carrier = f"agentix-bench-carrier-cmd-{os.getpid()}"
    subprocess.run([DOCKER, "rm", "-f", carrier], capture_output=True)
    run(DOCKER, "create", "--name", carrier, ref)
    try:
        py = ["/nix/runtime/bin/python3", "-c", "print(1)"]
        for image, key in ((BUSYBOX, "first_command_bundle_busybox"), (DEBIAN, "first_command_bundle_debian")):
            results[key] = timed(lambda: run(DOCKER, "run", "--rm", "--volumes-from", carrier, "--entrypoint", py[0],
                                             image, *py[1:]))
        results["first_command_handwritten"] = timed(lambda: run(DOCKER, "run", "--rm", HANDWRITTEN, "python3", "-c",
                                                                 "print(1)"))
    finally:
        subprocess.run([DOCKER, "rm", "-f", carrier], capture_output=True)
    results["sandbox_bundle_busybox"] = timed(lambda: sandbox_round_trip(ref, BUSYBOX))

    mib = lambda b: f"{b / 1048576:.1f} MiB"
    s = results["size_bytes"]
    print(f"{'':38} {'median':>8} {'min':>8} {'max':>8}")
    for k, v in results.items():
        if k != "size_bytes":
            print(f"{k:38} {v['median_s']:8.3f} {v['min_s']:8.3f} {v['max_s']:8.3f}  s ({v['runs']} runs)")
    print(f"size: bundle {mib(s['bundle'])}, hand-written {mib(s['handwritten'])} "
          f"(Debian base {mib(s['debian_base'])}): bundle/hand-written {s['bundle'] / s['handwritten']:.2f}")
    fb, fd, fh = (results[k]["median_s"] for k in ("first_command_bundle_busybox", "first_command_bundle_debian",
                                                   "first_command_handwritten"))
    print(f"first command, bundle/hand-written: busybox {fb / fh:.2f}, debian {fd / fh:.2f}")
    print(json.dumps({"bundle": ref, "store_paths": bundle["store_paths"], "layers": bundle["layers"], **results}))


main()
