#!/usr/bin/env bash
# Make sure a dockerd answers on /var/run/docker.sock (no systemd here to start one).
#
#   scripts/dockerd.sh start PIDFILE   start one unless one answers; PIDFILE gets its pid (or
#                                      stays empty when it was running already)
#   scripts/dockerd.sh stop PIDFILE    stop the one start started, if any
#   scripts/dockerd.sh restore-config  put dockerd's daemon.json back as it was before start
#                                      first changed it (and reload a running dockerd)
#
# start registers gVisor's runsc in dockerd's daemon.json (AGENTIX_DOCKERD_CONFIG, default
# /etc/docker/daemon.json); the first change keeps the file as it was in daemon.json.before-agentix
# (or notes that there was none), which restore-config (scripts/dev-env.sh clean) puts back.
#
# For a host that keeps sandboxes (not for this script's throwaway dockerds, whose stop must take
# their containers with them): "live-restore": true in daemon.json keeps containers, and so
# sandboxes, running across a restart of dockerd; without it a dockerd restart stops them all
# (agentd logs a warning at start; agentd(8), "Restarts and crashes").
set -euo pipefail

cmd=${1:?start, stop or restore-config}
config=${AGENTIX_DOCKERD_CONFIG:-/etc/docker/daemon.json}
before=$config.before-agentix

socket=${DOCKER_HOST:-unix:///var/run/docker.sock}
socket=${socket#unix://}
answers() { curl -sf --unix-socket "$socket" http://docker/_ping >/dev/null 2>&1; }

# gVisor (runsc, when installed) as a runtime of dockerd's, as this machine runs it: ptrace (no
# KVM), and the container's own Docker network namespace (--network=host: runsc refuses its own
# network stack here). Registered in /etc/docker/daemon.json; a running dockerd reloads it on
# SIGHUP.
register_runsc() {
        command -v runsc >/dev/null || return 0
        /usr/bin/python3 - "$config" "$before" <<'PY'
import json, os, shutil, sys
path, before = sys.argv[1:3]
try:
    with open(path) as f:
        conf = json.load(f)
except FileNotFoundError:
    conf = None
want = {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}
if (conf or {}).get("runtimes", {}).get("runsc") != want:
    # The file as it was before agentix first changed it, for restore-config: a copy, or an
    # empty file saying there was none.
    if not os.path.exists(before):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if conf is None:
            open(before, "w").close()
        else:
            shutil.copy2(path, before)
    conf = conf or {}
    conf.setdefault("runtimes", {})["runsc"] = want
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(conf, f, indent=2)
    os.rename(path + ".tmp", path)
PY
}

runsc_known() { curl -sf --unix-socket "$socket" http://docker/info 2>/dev/null | grep -q '"runsc"'; }

# SIGHUP to each dockerd that reads $config (its --config-file, or the default path without one).
reload() {
        local pid args reads
        for pid in $(pidof dockerd || true); do
                args=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || continue
                reads=$(sed -n -e 's/^--config-file=//p' -e '/^--config-file$/{n;p}' <<<"$args")
                [ "${reads:-/etc/docker/daemon.json}" = "$config" ] && kill -HUP "$pid" 2>/dev/null
        done
        return 0
}

case "$cmd" in
start)
        pidfile=${2:?pid file}
        : >"$pidfile"
        register_runsc
        if answers; then
                if command -v runsc >/dev/null && ! runsc_known; then
                        reload
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
        pidfile=${2:?pid file}
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [ -n "$pid" ] || exit 0
        kill "$pid" 2>/dev/null || exit 0
        for _ in $(seq 80); do
                kill -0 "$pid" 2>/dev/null || exit 0
                sleep 0.25
        done
        kill -9 "$pid" 2>/dev/null || true
        ;;
restore-config)
        [ -e "$before" ] || exit 0
        if [ -s "$before" ]; then
                mv "$before" "$config"
                echo "dockerd: $config is as it was before agentix changed it" >&2
        else
                rm -f "$config" "$before"
                echo "dockerd: removed $config, which agentix had made" >&2
        fi
        reload
        ;;
*)
        echo "usage: $0 start|stop PIDFILE, or $0 restore-config" >&2
        exit 2
        ;;
esac
