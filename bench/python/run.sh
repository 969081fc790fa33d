#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/python/run.sh [ROUNDS] [CALLS] — the agentix Python package's unary round trip against
# python-socketio's clients, on one agentix-server (release build in BUILD, default
# build-bench). See bench.py.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
AGENTIX_TOKEN=$token "$BUILD/runtime/server/agentix-server" --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.05; done
/usr/bin/python3 "$HERE/bench.py" "http://127.0.0.1:$port" "$token" "${1:-5}" "${2:-400}"
