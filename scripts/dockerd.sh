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

# gVisor (runsc, when installed) as a runtime of dockerd's, as this machine runs it: ptrace (no
# KVM), and the container's own Docker network namespace (--network=host: runsc refuses its own
# network stack here). Registered in /etc/docker/daemon.json; a running dockerd reloads it on
# SIGHUP.
register_runsc() {
        command -v runsc >/dev/null || return 0
        /usr/bin/python3 - <<'PY'
import json, os
path = "/etc/docker/daemon.json"
try:
    with open(path) as f:
        conf = json.load(f)
except FileNotFoundError:
    conf = {}
want = {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}
if conf.get("runtimes", {}).get("runsc") != want:
    conf.setdefault("runtimes", {})["runsc"] = want
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(conf, f, indent=2)
    os.rename(path + ".tmp", path)
PY
}

runsc_known() { curl -sf --unix-socket /var/run/docker.sock http://docker/info 2>/dev/null | grep -q '"runsc"'; }

case "$cmd" in
start)
        : >"$pidfile"
        register_runsc
        if answers; then
                if command -v runsc >/dev/null && ! runsc_known; then
                        kill -HUP "$(pidof dockerd)" 2>/dev/null || true
                        for _ in $(seq 40); do runsc_known && break; sleep 0.25; done
                fi
                exit 0
        fi
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
