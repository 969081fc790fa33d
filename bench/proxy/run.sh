#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/proxy/run.sh [REQUESTS] [DOWNLOADS] — the port proxy of agentix-server against the same
# requests straight to the port, on the host's loopback (proxy.py local).
# bench/proxy/run.sh docker [REQUESTS] [DOWNLOADS] — in a container as agentd makes them: the
# port through the proxy against the same port published by Docker (proxy.py docker).
# Release build (BUILD, default build-bench); the docker mode starts dockerd when none runs and
# makes the busybox task image and the example bundle. See README.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

if [ "${1:-}" != docker ]; then
        exec /usr/bin/python3 "$HERE/proxy.py" local "$BUILD/runtime/server/agentix-server" "${1:-500}" "${2:-5}"
fi
shift
work=$(mktemp -d /tmp/agentix-bench-proxy.XXXXXX)
cleanup() {
        "$ROOT/scripts/dockerd.sh" stop "$work/dockerd.pid"
        rm -rf "$work"
}
trap cleanup EXIT
"$ROOT/scripts/dockerd.sh" start "$work/dockerd.pid"
DOCKER=/usr/bin/docker "$ROOT/tests/bundle/make-task-images.sh" busybox
AGENTIX_RUNTIME_DIR=$BUILD/runtime/server AGENTIX_INCLUDE_DIR=$ROOT/runtime/include \
        "$BUILD/client/agentixctl/agentixctl" build -q --cache-dir "$work/cache" "$ROOT/examples/bundle-example" >/dev/null
/usr/bin/python3 "$HERE/proxy.py" docker agentix-test/busybox:1 example-bundle:0.1.0 "${1:-500}" "${2:-5}"
