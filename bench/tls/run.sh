#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/tls/run.sh [ROUNDS] — the runtime over TLS beside plain HTTP: two agentix-servers of the
# same release build on 127.0.0.1, one with --tls-cert/--tls-key (a P-256 certificate from a CA
# made here, as agentd's runtime CA issues them), the other plain; echo and exec round trips
# (libagentix-bench, sequential calls over WebSocket) and a 64 MiB download (agentixctl cp),
# alternated, ROUNDS times each (default 3). Prints one JSON line and a table of medians and
# ratios. See README.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"
exec /usr/bin/python3 "$HERE/bench.py" "$BUILD" "${1:-3}"
