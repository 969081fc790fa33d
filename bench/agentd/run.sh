#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/agentd/run.sh [RUNS] — agentd's create, delete and `agentixctl run -- true` against
# bare Docker (the CLI and the Engine API) on the same image and bundle.
# bench/agentd/run.sh load [--burst N] [--live M] [--churn K] [--parallel P] — agentd under load
# (load.py) against the docker CLI in a loop. See README.md.
# Configures a release build (BUILD, default build-bench), starts dockerd and a private system
# bus with agentd when they are missing, makes the busybox task image and the example bundle.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

work=$(mktemp -d /tmp/agentix-bench-agentd.XXXXXX)
agentd_pid=
cleanup() {
        [ -n "$agentd_pid" ] && kill "$agentd_pid" 2>/dev/null && wait "$agentd_pid" 2>/dev/null || true
        "$ROOT/scripts/system-bus.sh" stop "$work/bus"
        "$ROOT/scripts/dockerd.sh" stop "$work/dockerd.pid"
        rm -rf "$work"
}
trap cleanup EXIT

"$ROOT/scripts/dockerd.sh" start "$work/dockerd.pid"
DOCKER=/usr/bin/docker "$ROOT/tests/bundle/make-task-images.sh" busybox
AGENTIX_RUNTIME_DIR=$BUILD/runtime/server AGENTIX_INCLUDE_DIR=$ROOT/runtime/include \
        "$BUILD/client/agentixctl/agentixctl" build -q --cache-dir "$work/cache" "$ROOT/examples/bundle-example" >/dev/null
DBUS_SYSTEM_BUS_ADDRESS=$("$ROOT/scripts/system-bus.sh" start "$work/bus")
export DBUS_SYSTEM_BUS_ADDRESS
# As units/agentd.service runs it.
GNUTLS_NO_IMPLICIT_INIT=1 AGENTD_BACKEND_DIR="$BUILD/agentd/backends/engine" \
        AGENTIX_FIREWALL="$HERE/../../policy/firewall/agentix-firewall" "$BUILD/agentd/agentd" 2>"$work/agentd.log" &
agentd_pid=$!
for _ in $(seq 100); do
        busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
        sleep 0.05
done

if [ "${1:-}" = load ]; then
        shift
        /usr/bin/python3 "$HERE/load.py" agentix-test/busybox:1 example-bundle:0.1.0 "$agentd_pid" "$@"
        exit
fi
LD_LIBRARY_PATH=$BUILD/client/lib /usr/bin/python3 "$HERE/bench.py" "$BUILD/client/agentixctl/agentixctl" \
        agentix-test/busybox:1 example-bundle:0.1.0 "${1:-20}"
