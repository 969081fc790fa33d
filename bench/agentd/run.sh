#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/agentd/run.sh [RUNS] — agentd's create, delete and `agentixctl run -- true` against
# bare Docker (the CLI and the Engine API) on the same image and bundle.
# bench/agentd/run.sh load [--burst N] [--live M] [--churn K] [--parallel P] — agentd under load
# (load.py) against the docker CLI in a loop.
# bench/agentd/run.sh pool [RUNS] — create-to-ready from a warm pool (pool.py) against a cold
# create through agentd and docker run. See README.md.
# bench/agentd/run.sh snapshot [RUNS] — Snapshot() and a create from it (snapshot.py) against
# docker commit and docker run of the committed image, a sandbox with 100 MiB written.
# bench/agentd/run.sh stats [N] [ROUNDS] — GetStats() of N live sandboxes (stats.py, default 250)
# against `docker stats --no-stream` of the same containers, and a scrape of /metrics with them.
# bench/agentd/run.sh live [RUNS] [MIB] — Hibernate() and Resume() of a gVisor sandbox holding MIB
# MiB in memory (live.py, default 5 runs, 256 MiB) against docker checkpoint create and docker
# start --checkpoint of a bare container on the same runtime.
# bench/agentd/run.sh density [N] [PARALLEL] — N idle sandboxes at once (density.py, default
# 2000, 8 at a time): errors, create latency, memory per sandbox by process, ListSandboxes beside
# docker ps, a sample answering exec, the mass delete and what it left.
# Configures a release build (BUILD, default build-bench), starts dockerd and a private system
# bus with agentd when they are missing, makes the busybox task image and the example bundle.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

work=$(mktemp -d /tmp/agentix-bench-agentd.XXXXXX)
agentd_pid=
carriers_before=
cleanup() {
        [ -n "$agentd_pid" ] && kill "$agentd_pid" 2>/dev/null && wait "$agentd_pid" 2>/dev/null || true
        # The carriers the bench's agentd made (agentd keeps them for its next create): the
        # host is left as the bench found it.
        if [ -n "$agentd_pid" ]; then
                docker ps -aq --no-trunc --filter label=org.agentix.carrier | grep -vxF -e "${carriers_before:-none}" |
                        xargs -r docker rm -f -v >/dev/null 2>&1 || true
        fi
        "$ROOT/scripts/system-bus.sh" stop "$work/bus"
        "$ROOT/scripts/dockerd.sh" stop "$work/dockerd.pid"
        rm -rf "$work"
}
trap cleanup EXIT

"$ROOT/scripts/dockerd.sh" start "$work/dockerd.pid"
carriers_before=$(docker ps -aq --no-trunc --filter label=org.agentix.carrier)
DOCKER=/usr/bin/docker "$ROOT/tests/bundle/make-task-images.sh" busybox
AGENTIX_RUNTIME_DIR=$BUILD/runtime/server AGENTIX_INCLUDE_DIR=$ROOT/runtime/include \
        "$BUILD/client/agentixctl/agentixctl" build -q --cache-dir "$work/cache" "$ROOT/examples/bundle-example" >/dev/null
DBUS_SYSTEM_BUS_ADDRESS=$("$ROOT/scripts/system-bus.sh" start "$work/bus")
export DBUS_SYSTEM_BUS_ADDRESS
# pool: a warm pool of 4 (512 MiB sandboxes) beside an otherwise default agentd.conf.
pool_memory=$((512 << 20))
mkdir -p "$work/etc/pools.d" "$work/state"
: >"$work/etc/agentd.conf"
if [ "${1:-}" = pool ]; then
        printf '[Pool]\nSize=4\nImage=agentix-test/busybox:1\nBundle=example-bundle:0.1.0\nMemory=512M\n' \
                >"$work/etc/pools.d/bench.pool"
fi
# stats: /metrics on a loopback port, with the per-sandbox series (what a scrape costs with them).
metrics_port=19477
if [ "${1:-}" = stats ]; then
        printf '[Sandboxes]\nDeleteOnStop=yes\n[Metrics]\nListen=127.0.0.1:%s\nPerSandbox=yes\n' "$metrics_port" \
                >"$work/etc/agentd.conf"
fi
# density: room for the N sandboxes of one user (the defaults allow 1,000 and 256 per user).
if [ "${1:-}" = density ]; then
        printf '[Sandboxes]\nMaxSandboxes=%s\nMaxSandboxesPerUser=%s\n' "${2:-2000}" "${2:-2000}" >"$work/etc/agentd.conf"
fi
# As units/agentd.service runs it.
GNUTLS_NO_IMPLICIT_INIT=1 AGENTD_BACKEND_DIR="$BUILD/agentd/backends/engine" STATE_DIRECTORY="$work/state" \
        AGENTIX_FIREWALL="$HERE/../../policy/firewall/agentix-firewall" nice -n -5 "$BUILD/agentd/agentd" \
        --config="$work/etc/agentd.conf" 2>"$work/agentd.log" &
agentd_pid=$!
for _ in $(seq 100); do
        busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
        sleep 0.05
done

if [ "${1:-}" = pool ]; then
        shift
        /usr/bin/python3 "$HERE/pool.py" agentix-test/busybox:1 example-bundle:0.1.0 "$pool_memory" "${1:-50}"
        docker ps -aq --filter label=org.agentix.pool | xargs -r docker rm -f -v >/dev/null
        exit
fi
if [ "${1:-}" = snapshot ]; then
        shift
        /usr/bin/python3 "$HERE/snapshot.py" agentix-test/busybox:1 example-bundle:0.1.0 "${1:-5}"
        exit
fi
if [ "${1:-}" = live ]; then
        shift
        /usr/bin/python3 "$HERE/live.py" agentix-test/busybox:1 example-bundle:0.1.0 "${1:-5}" "${2:-256}"
        exit
fi
if [ "${1:-}" = density ]; then
        shift
        /usr/bin/python3 "$HERE/density.py" agentix-test/busybox:1 example-bundle:0.1.0 "$agentd_pid" \
                "$BUILD/client/agentixctl/agentixctl" "${1:-2000}" --parallel "${2:-8}"
        exit
fi
if [ "${1:-}" = stats ]; then
        shift
        AGENTIX_METRICS_URL=http://127.0.0.1:$metrics_port/metrics \
                /usr/bin/python3 "$HERE/stats.py" agentix-test/busybox:1 example-bundle:0.1.0 "${1:-250}" "${2:-5}"
        exit
fi
if [ "${1:-}" = load ]; then
        shift
        /usr/bin/python3 "$HERE/load.py" agentix-test/busybox:1 example-bundle:0.1.0 "$agentd_pid" "$@"
        exit
fi
LD_LIBRARY_PATH=$BUILD/client/lib /usr/bin/python3 "$HERE/bench.py" "$BUILD/client/agentixctl/agentixctl" \
        agentix-test/busybox:1 example-bundle:0.1.0 "${1:-20}"
