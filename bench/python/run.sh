#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/python/run.sh [ROUNDS] [CALLS] — the agentix Python package's unary round trip against
# python-socketio's clients, on one agentix-server (release build in BUILD, default
# build-bench). See bench.py.
# bench/python/run.sh user [ROUNDS] [CALLS] — what a Python user sees: the package against
# agentix-server beside python-socketio's AsyncClient against the python-socketio peer server
# (bench/rpc/peer), for fs::ls and exec. See user.py.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

mode=client
if [ "${1:-}" = user ]; then
        mode=user
        shift
fi

free_port() {
        /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_health() {
        for _ in $(seq 200); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.05; done
        echo "bench/python: nothing answers /health on port $1" >&2
        return 1
}

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; true' EXIT
port=$(free_port)
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
AGENTIX_TOKEN=$token "$BUILD/runtime/server/agentix-server" --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
pids+=($!)
wait_health "$port"

if [ "$mode" = client ]; then
        /usr/bin/python3 "$HERE/bench.py" "http://127.0.0.1:$port" "$token" "${1:-5}" "${2:-400}"
        exit 0
fi

if ! /usr/bin/python3 -c 'import socketio, engineio, uvicorn, msgpack, wsproto' 2>/dev/null; then
        apt-get install -y python3-socketio python3-engineio python3-uvicorn python3-msgpack python3-wsproto \
                python3-uvloop python3-httptools >/dev/null
fi
peer_port=$(free_port)
AGENTIX_TOKEN=$token /usr/bin/python3 "$HERE/../rpc/peer/server.py" --host 127.0.0.1 --port "$peer_port" >/dev/null 2>&1 &
pids+=($!)
wait_health "$peer_port"
/usr/bin/python3 "$HERE/user.py" "http://127.0.0.1:$port" "http://127.0.0.1:$peer_port" "$token" "${1:-5}" "${2:-200}"
