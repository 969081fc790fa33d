#!/usr/bin/env bash
# The main job: build agentix, start agentix-server locally, run a command and file operations
# through it with a real Socket.IO client, show the replies, clean up.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
[ -d build ] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build

server=build/runtime/server/agentix-server
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
workdir=$(mktemp -d /tmp/agentix-demo.XXXXXX)
log="$workdir/server.log"
pid=

cleanup() {
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid"
                wait "$pid" || true
        fi
        rm -rf "$workdir"
}
trap cleanup EXIT

AGENTIX_TOKEN=$token "$server" --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
        sleep 0.05
done
echo "agentix-server (pid $pid) on port $port: $(curl -s "http://127.0.0.1:$port/health")"

/usr/bin/python3 scripts/demo-client.py "http://127.0.0.1:$port" "$token" "$workdir"

# The same server through agentixctl (built on libagentix).
export AGENTIX_URL="http://127.0.0.1:$port" AGENTIX_TOKEN="$token"
ctl=build/client/agentixctl/agentixctl
echo "--- agentixctl exec -- sh -c 'echo hi from agentixctl; exit 7'"
"$ctl" exec -- sh -c 'echo hi from agentixctl; exit 7' && rc=0 || rc=$?
echo "    (exit status $rc)"
echo "--- agentixctl cp scripts :$workdir/copied && agentixctl ls $workdir/copied"
"$ctl" -q cp scripts ":$workdir/copied"
"$ctl" ls "$workdir/copied"

kill -TERM "$pid"
wait "$pid" && echo "--- agentix-server stopped cleanly" || { echo "server exit status $?"; cat "$log"; exit 1; }
pid=
