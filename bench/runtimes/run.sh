#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/runtimes/run.sh [--creates N] [--calls M] — runc against runsc (gVisor) through agentd:
# create-to-ready, exec true, a 1 MiB and a 64 MiB download (bench.py). Release build (BUILD,
# default build-bench); starts dockerd when missing and registers runsc with it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

work=$(mktemp -d /tmp/agentix-bench-runtimes.XXXXXX)
trap '"$ROOT/scripts/dockerd.sh" stop "$work/dockerd.pid"; rm -rf "$work"' EXIT
"$ROOT/scripts/dockerd.sh" start "$work/dockerd.pid"
docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' || { echo "dockerd has no runsc" >&2; exit 1; }

export AGENTD=$BUILD/agentd/agentd AGENTD_BACKEND_DIR=$BUILD/agentd/backends/engine
export AGENTIXCTL=$BUILD/client/agentixctl/agentixctl AGENTIX_RUNTIME_DIR=$BUILD/runtime/server
export AGENTIX_INCLUDE_DIR=$ROOT/runtime/include EXAMPLE_DIR=$ROOT/examples/bundle-example
export POLICY=$ROOT/policy/dbus/org.agentix.Agentd1.conf BUS_CONF_IN=$ROOT/tests/agentd/bus.conf.in
export AGENTIX_FIREWALL=$ROOT/policy/firewall/agentix-firewall GNUTLS_NO_IMPLICIT_INIT=1
/usr/bin/python3 "$HERE/bench.py" "$@"
