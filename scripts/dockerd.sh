#!/usr/bin/env bash
# Make sure a dockerd answers on /var/run/docker.sock (no systemd here to start one).
#
#   scripts/dockerd.sh start PIDFILE   start one unless one answers; PIDFILE gets its pid (or
#                                      stays empty when it was running already)
#   scripts/dockerd.sh stop PIDFILE    stop the one start started, if any
set -euo pipefail

cmd=${1:?start or stop}
pidfile=${2:?pid file}

answers() { curl -sf --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null 2>&1; }

case "$cmd" in
start)
        : >"$pidfile"
        answers && exit 0
        log=${pidfile%.pid}.log
        dockerd >"$log" 2>&1 &
        echo $! >"$pidfile"
        for _ in $(seq 120); do
                answers && exit 0
                kill -0 "$(cat "$pidfile")" 2>/dev/null || break
                sleep 0.25
        done
        echo "dockerd did not start; its log ($log):" >&2
        tail -20 "$log" >&2
        exit 1
        ;;
stop)
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [ -n "$pid" ] || exit 0
        kill "$pid" 2>/dev/null || exit 0
        for _ in $(seq 80); do
                kill -0 "$pid" 2>/dev/null || exit 0
                sleep 0.25
        done
        kill -9 "$pid" 2>/dev/null || true
        ;;
*)
        echo "usage: $0 start|stop PIDFILE" >&2
        exit 2
        ;;
esac
