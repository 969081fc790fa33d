#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/proxy/run.sh [REQUESTS] [DOWNLOADS] — the port proxy of agentix-server against the same
# requests straight to the port (proxy.py). Release build (BUILD, default build-bench).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_TARGETS="runtime/server/agentix-server runtime/server/agentix-worker"
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"
exec /usr/bin/python3 "$HERE/proxy.py" "$BUILD/runtime/server/agentix-server" "${1:-500}" "${2:-5}"
