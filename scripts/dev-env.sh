#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A working agentix from this checkout, for trying it by hand (what scripts/demo.sh starts and
# stops again): dockerd (unless one runs), a private system bus with agentd's policy, and
# agentd from the build directory on it, all left running. Prints the exports to use them:
#
#   eval "$(scripts/dev-env.sh start)"   build, start, and put agentixctl on PATH
#   agentixctl create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0
#   scripts/dev-env.sh status            what runs
#   scripts/dev-env.sh stop              stop what start started (by pid), nothing else
#
# start also makes what the README's examples name: the task image agentix-test/busybox:1
# (a static busybox, no libc) and the example bundle example-bundle:0.1.0.
# Environment: AGENTIX_DEV_DIR (default /run/agentix-dev): pid files, the bus socket, logs;
# BUILD (default build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state=${AGENTIX_DEV_DIR:-/run/agentix-dev}
build=${BUILD:-build}
ctl=$root/$build/client/agentixctl/agentixctl

say() { echo "dev-env: $*" >&2; }

running() {
        local pid
        pid=$(cat "$1" 2>/dev/null) || return 1
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

exports() {
        echo "export PATH=\"$root/$build/client/agentixctl:\$PATH\""
        echo "export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket"
}

start() {
        mkdir -p "$state"
        # Everything the build and the examples need, quietly; the log says more.
        ./scripts/deps.sh >&2
        if [ ! -f "$build/build.ninja" ]; then
                meson setup "$build" --buildtype=debugoptimized >"$state/build.log" 2>&1 ||
                        { say "meson setup failed; see $state/build.log"; exit 1; }
        fi
        ninja -C "$build" >"$state/build.log" 2>&1 || { say "the build failed; see $state/build.log"; exit 1; }

        running "$state/dockerd.pid" || ./scripts/dockerd.sh start "$state/dockerd.pid" >&2
        tests/bundle/make-task-images.sh busybox >&2
        if ! docker image inspect example-bundle:0.1.0 >/dev/null 2>&1; then
                say "building the example bundle"
                AGENTIX_RUNTIME_DIR=$build/runtime/server AGENTIX_INCLUDE_DIR=runtime/include \
                        "$ctl" build examples/bundle-example >&2
        fi

        if ! running "$state/bus/dbus.pid"; then
                ./scripts/system-bus.sh start "$state/bus" >/dev/null
        fi
        if ! running "$state/agentd.pid"; then
                DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket \
                AGENTD_BACKEND_DIR=$root/$build/agentd/backends/engine \
                AGENTIX_FIREWALL=$root/policy/firewall/agentix-firewall \
                        setsid "$root/$build/agentd/agentd" </dev/null >>"$state/agentd.log" 2>&1 &
                echo $! >"$state/agentd.pid"
                for _ in $(seq 100); do
                        DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket \
                                busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
                        running "$state/agentd.pid" || { say "agentd exited; see $state/agentd.log"; exit 1; }
                        sleep 0.05
                done
        fi
        say "dockerd, a system bus and agentd run; logs in $state; stop with: scripts/dev-env.sh stop"
        exports
}

status() {
        for what in dockerd:dockerd.pid bus:bus/dbus.pid agentd:agentd.pid; do
                if running "$state/${what#*:}"; then
                        echo "${what%%:*}: running (pid $(cat "$state/${what#*:}"))"
                else
                        echo "${what%%:*}: not started by dev-env"
                fi
        done
}

stop() {
        if running "$state/agentd.pid"; then
                kill "$(cat "$state/agentd.pid")"
                for _ in $(seq 100); do running "$state/agentd.pid" || break; sleep 0.05; done
        fi
        rm -f "$state/agentd.pid"
        ./scripts/system-bus.sh stop "$state/bus"
        for _ in $(seq 100); do running "$state/bus/dbus.pid" || break; sleep 0.05; done
        ./scripts/dockerd.sh stop "$state/dockerd.pid"
        say "stopped what dev-env started (sandboxes agentd made keep running until they expire or agentd deletes them)"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
env) exports ;;
*)
        echo "usage: $0 start|stop|status|env" >&2
        exit 2
        ;;
esac
