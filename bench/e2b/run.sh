#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/e2b/run.sh [RUNS] — E2B's unmodified SDK through agentix-e2b, side by side in one run
# with agentix's own paths on the same sandboxes:
#   Sandbox.create("base") from a warm pool (E2B SDK → agentix-e2b → agentd) against
#   CreateSandbox {pool: base} straight to agentd over D-Bus (dbus-python): p50 and p99;
#   commands.run("true") (E2B SDK → agentix-e2b → the runtime's envd) against exec("true")
#   through @agentix/client on the same sandbox: medians and their ratio.
# A release build (BUILD, default build-bench), dockerd, a private system bus with agentd (a pool
# of 4 busybox + example-bundle sandboxes) and agentix-e2b on loopback, all stopped at the end.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"
RUNS=${1:-30}

work=$(mktemp -d /tmp/agentix-bench-e2b.XXXXXX)
agentd_pid= e2b_pid=
cleanup() {
        [ -n "$e2b_pid" ] && kill "$e2b_pid" 2>/dev/null && wait "$e2b_pid" 2>/dev/null || true
        [ -n "$agentd_pid" ] && kill "$agentd_pid" 2>/dev/null && wait "$agentd_pid" 2>/dev/null || true
        docker ps -aq --filter label=org.agentix.pool=base | xargs -r docker rm -f -v >/dev/null 2>&1 || true
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
mkdir -p "$work/etc/pools.d" "$work/state"
: >"$work/etc/agentd.conf"
printf '[Pool]\nSize=4\nImage=agentix-test/busybox:1\nBundle=example-bundle:0.1.0\nMemory=512M\n' \
        >"$work/etc/pools.d/base.pool"
GNUTLS_NO_IMPLICIT_INIT=1 AGENTD_BACKEND_DIR="$BUILD/agentd/backends/engine" STATE_DIRECTORY="$work/state" \
        AGENTIX_FIREWALL="$ROOT/policy/firewall/agentix-firewall" "$BUILD/agentd/agentd" \
        --config="$work/etc/agentd.conf" 2>"$work/agentd.log" &
agentd_pid=$!
for _ in $(seq 100); do
        busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
        sleep 0.05
done
(umask 077 && "$BUILD/e2b/agentix-e2b" --make-key=root >"$work/e2b-keys")
port=49982
"$BUILD/e2b/agentix-e2b" --listen=127.0.0.1:$port --keys="$work/e2b-keys" 2>"$work/agentix-e2b.log" &
e2b_pid=$!

# E2B's SDK (tests/e2b's pins) and @agentix/client (client/js, built).
(cd "$ROOT/tests/e2b" && { cmp -s package-lock.json node_modules/.agentix-package-lock.json ||
        { npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
          cp package-lock.json node_modules/.agentix-package-lock.json; }; })
(cd "$ROOT/client/js" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; } &&
        npx tsc -p tsconfig.json)

/usr/bin/python3 "$HERE/create.py" base "$RUNS" >"$work/create.json"
E2B_API_URL=http://127.0.0.1:$port E2B_SANDBOX_URL=http://127.0.0.1:$port \
        E2B_API_KEY=$(cut -d' ' -f1 "$work/e2b-keys") AGENTIX_ROOT=$ROOT \
        node "$HERE/bench.mjs" base "$RUNS" "$work/create.json"
