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
# /etc/docker/daemon.json) as the runtime "runsc", through the checkout's agentix-runsc(8)
# (policy/runsc/agentix-runsc, copied to AGENTIX_RUNSC_WRAPPER, default
# /usr/local/libexec/agentix-runsc), with "experimental": true (docker checkpoint); the first
# change keeps the file as it was in daemon.json.before-agentix (or notes that there was none),
# which restore-config (scripts/dev-env.sh clean) puts back. restore-config leaves the copied
# wrapper: another dockerd may still run containers through it.
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
# KVM), through agentix-runsc, which gives each container its network stack: gVisor's own (which
# it can checkpoint) for a container with AGENTIX_CHECKPOINT=1 in its own network namespace, else
# the container's Docker network namespace through the host's kernel (runsc --network=host).
# Registered in daemon.json; a running dockerd reloads the runtimes on SIGHUP, but not
# "experimental" (docker checkpoint): that one takes a restart of dockerd.
wrapper=${AGENTIX_RUNSC_WRAPPER:-/usr/local/libexec/agentix-runsc}
register_runsc() {
        command -v runsc >/dev/null || return 0
        local src
        src=$(cd "$(dirname "$0")/.." && pwd)/policy/runsc/agentix-runsc
        # A new file renamed into place: a shim running the old one meanwhile reads it whole.
        if ! cmp -s "$src" "$wrapper"; then
                mkdir -p "$(dirname "$wrapper")"
                install -m 0755 "$src" "$wrapper.tmp.$$"
                mv -f "$wrapper.tmp.$$" "$wrapper"
        fi
        /usr/bin/python3 - "$config" "$before" "$wrapper" <<'PY'
import json, os, shutil, sys
path, before, wrapper = sys.argv[1:4]
try:
    with open(path) as f:
        conf = json.load(f)
except FileNotFoundError:
    conf = None
want = {"path": wrapper, "runtimeArgs": ["--platform=ptrace"]}
if (conf or {}).get("runtimes", {}).get("runsc") != want or (conf or {}).get("experimental") is not True:
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
    conf["experimental"] = True
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(conf, f, indent=2)
    os.rename(path + ".tmp", path)
PY
}

info() { curl -sf --unix-socket "$socket" http://docker/info 2>/dev/null; }
# The running dockerd has runsc through the wrapper.
runsc_known() { info | grep -qF "\"runsc\":{\"path\":\"$wrapper\""; }
experimental() { info | grep -q '"ExperimentalBuild":true'; }

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
                if command -v runsc >/dev/null; then
                        if ! runsc_known; then
                                reload
                                for _ in $(seq 40); do runsc_known && break; sleep 0.25; done
                        fi
                        experimental || echo "dockerd: running without \"experimental\": true" \
                                "(docker checkpoint, runsc); it takes a restart of dockerd" >&2
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
