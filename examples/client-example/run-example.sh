#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs client-example against a fresh agentix-server and checks what it printed.
# Usage: run-example.sh CLIENT_EXAMPLE AGENTIX_SERVER
set -eu
example="$1"
server="$2"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out" /tmp/client-example.txt' EXIT

AGENTIX_TOKEN=example-token "$server" --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
pid=$!
i=0
until curl -fs "http://127.0.0.1:$port/health" >/dev/null; do
        i=$((i + 1))
        if [ $i -gt 500 ] || ! kill -0 $pid 2>/dev/null; then
                cat "$log" >&2
                exit 1
        fi
        sleep 0.02
done

status=0
"$example" "http://127.0.0.1:$port" example-token >"$out" 2>&1 || status=$?
cat "$out"
kill -TERM $pid
wait $pid || { echo "agentix-server exited with $?" >&2; cat "$log" >&2; exit 1; }
[ $status -eq 0 ]

for want in 'connected over websocket' 'exec: exit 3, output: hello from Linux' 'stream: tick 3' \
            'stream: exit 0' '     2	second' 'read of a missing file: file_not_found' 'echo: hi'; do
        grep -qF "$want" "$out" || { echo "missing from the output: $want" >&2; exit 1; }
done
# No server there: a typed error with a message a person can act on, and a failing exit.
if "$example" "http://127.0.0.1:1" x >"$out" 2>&1; then
        echo "connecting to a closed port succeeded?" >&2
        exit 1
fi
grep -q '^connect: cannot connect to http://127.0.0.1:1: .*(ConnectionError)$' "$out" || { cat "$out" >&2; exit 1; }
