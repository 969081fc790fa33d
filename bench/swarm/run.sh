#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/swarm/run.sh [RUNS [BURST]] — create-to-ready on a three-node Docker Swarm (the swarm
# backend) against the docker backend on this host, in one agentd, same run (bench.py says
# what each scenario measures). Makes the swarm (tests/swarm/cluster.sh: three dockerds in
# network namespaces of their own, a registry on their bridge), builds the example bundle,
# pushes it and the busybox task image, and removes it all at the end. Root. RUNS defaults to
# 20, BURST to 50.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

work=$(mktemp -d /tmp/agentix-bench-swarm.XXXXXX)
agentd_pid=
cleanup() {
        [ -n "$agentd_pid" ] && kill "$agentd_pid" 2>/dev/null && wait "$agentd_pid" 2>/dev/null || true
        "$ROOT/tests/swarm/cluster.sh" down "$work/swarm" || true
        "$ROOT/scripts/system-bus.sh" stop "$work/bus"
        "$ROOT/scripts/dockerd.sh" stop "$work/dockerd.pid"
        rm -rf "$work"
}
trap cleanup EXIT

"$ROOT/scripts/dockerd.sh" start "$work/dockerd.pid"
DOCKER=/usr/bin/docker "$ROOT/tests/bundle/make-task-images.sh" busybox
"$ROOT/tests/swarm/cluster.sh" up "$work/swarm"
AGENTIX_RUNTIME_DIR=$BUILD/runtime/server AGENTIX_INCLUDE_DIR=$ROOT/runtime/include \
        "$BUILD/client/agentixctl/agentixctl" build -q --cache-dir "$work/cache" "$ROOT/examples/bundle-example" >/dev/null
"$ROOT/tests/swarm/cluster.sh" push "$work/swarm" agentix-test/busybox:1 example-bundle:0.1.0
DBUS_SYSTEM_BUS_ADDRESS=$("$ROOT/scripts/system-bus.sh" start "$work/bus")
export DBUS_SYSTEM_BUS_ADDRESS

# Both backends in one directory, as an installed agentd has them.
mkdir -p "$work/backends" "$work/state"
ln -s "$BUILD/agentd/backends/engine/docker.so" "$BUILD/agentd/backends/swarm/swarm.so" "$work/backends/"
# Small sandboxes: on the swarm the limits are reservations too (agentd-swarm(7)).
cat >"$work/agentd.conf" <<CONF
[Sandboxes]
MaxSandboxes=200
MaxSandboxesPerUser=200

[Limits]
DefaultCPUs=0.1
DefaultMemory=256M

[Backends]
Load=docker swarm
Default=docker

[Swarm]
Host=unix://$work/swarm/node1/docker.sock
Registry=10.231.0.1:5055
CONF
GNUTLS_NO_IMPLICIT_INIT=1 AGENTD_BACKEND_DIR="$work/backends" STATE_DIRECTORY="$work/state" \
        AGENTIX_FIREWALL="$ROOT/policy/firewall/agentix-firewall" "$BUILD/agentd/agentd" \
        --config="$work/agentd.conf" 2>"$work/agentd.log" &
agentd_pid=$!
for _ in $(seq 100); do
        busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
        sleep 0.05
done
echo "# $(nproc) CPUs, $(date -u +%FT%TZ), commit $(git -C "$ROOT" rev-parse --short HEAD)"
/usr/bin/python3 "$HERE/bench.py" "$work/swarm" agentix-test/busybox:1 example-bundle:0.1.0 "${1:-20}" "${2:-50}"
