#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A working agentix from this checkout, for trying it by hand (what scripts/demo.sh starts and
# stops again): dockerd (unless one runs), a private system bus with agentd's policy, and
# agentd from the build directory on it, all left running. Prints the exports to use them:
#
#   eval "$(scripts/dev-env.sh start)"   build, start, and put agentixctl on PATH
#   agentixctl create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0
#   scripts/dev-env.sh status            what runs
#   eval "$(scripts/dev-env.sh env)"     the exports again (in another shell)
#   scripts/dev-env.sh stop              stop what start started (by pid), nothing else
#   scripts/dev-env.sh clean             stop, then remove everything agentix made on this host
#
# start also makes what the README's examples name: the task image agentix-test/busybox:1
# (a static busybox, no libc), the example bundle example-bundle:0.1.0 and the python-data bundle
# python-data:0.1.0, built from this checkout's build (a cache hit when nothing changed), so that
# the tags are always that build's. agentd reads a copy of /etc/agentix made at each start
# (agentd.conf, pools.d/*.pool, when there) in the state directory, with two pools of its own:
# E2B's templates `base` (agentix-test/e2b-base:1, busybox with E2B's account `user`, and the
# example bundle, one kept ready) and
# `code-interpreter-v1` (python-data, made on demand). agentix-e2b serves E2B's API on
# 127.0.0.1:49982 (AGENTIX_DEV_E2B_PORT) with a key for root; the exports include E2B_API_URL,
# E2B_SANDBOX_URL and E2B_API_KEY.
#
# clean removes, and says so for each: sandbox and carrier containers (with their volumes), the
# networks agentix-isolated and agentix-egress and their shards (and so the bridges agentix0,
# agentix1, agentix0-N), the firewall rules of agentix-firewall, every bundle image (label
# org.agentix.bundle), every snapshot (label org.agentix.snapshot.owner), the task images
# agentix-test/*, the bundle cache,
# dev-env's state directory, and the runsc entry scripts/dockerd.sh put in dockerd's
# daemon.json (the file as it was before is restored). It leaves Debian packages, Docker itself
# and its other images, and the build directories.
#
# Environment: AGENTIX_DEV_DIR (default /run/agentix-dev): pid files, the bus socket, logs;
# BUILD (default build; relative to the checkout, or absolute); DOCKER_HOST (unix://PATH);
# AGENTIX_CACHE_DIR (the bundle cache, default ~/.cache/agentix); AGENTIX_DOCKERD_CONFIG
# (default /etc/docker/daemon.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state=${AGENTIX_DEV_DIR:-/run/agentix-dev}
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
ctl=$build/client/agentixctl/agentixctl
bundle=example-bundle:0.1.0
e2b_port=${AGENTIX_DEV_E2B_PORT:-49982}
cache=${AGENTIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentix}

say() { echo "dev-env: $*" >&2; }

running() {
        local pid
        pid=$(cat "$1" 2>/dev/null) || return 1
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

docker_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

exports() {
        echo "export PATH=\"$build/client/agentixctl:\$PATH\""
        echo "export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket"
        if [ -s "$state/e2b-keys" ]; then
                echo "export E2B_API_URL=http://127.0.0.1:$e2b_port E2B_SANDBOX_URL=http://127.0.0.1:$e2b_port" \
                     "E2B_API_KEY=$(cut -d' ' -f1 "$state/e2b-keys")"
        fi
}

# agentd's configuration: a copy of /etc/agentix's, and E2B's two templates as pools.
agentd_config() {
        rm -rf "$state/etc"
        mkdir -p "$state/etc/pools.d"
        if [ -f /etc/agentix/agentd.conf ]; then cp /etc/agentix/agentd.conf "$state/etc/agentd.conf"; else : >"$state/etc/agentd.conf"; fi
        if [ -d /etc/agentix/pools.d ]; then
                find /etc/agentix/pools.d -maxdepth 1 -name '*.pool' -exec cp {} "$state/etc/pools.d/" \;
        fi
        printf '[Pool]\nSize=1\nImage=agentix-test/e2b-base:1\nBundle=%s\n' "$bundle" >"$state/etc/pools.d/base.pool"
        printf '[Pool]\nSize=0\nImage=agentix-test/busybox:1\nBundle=python-data:0.1.0\n' \
                >"$state/etc/pools.d/code-interpreter-v1.pool"
}

# The example bundle, from this checkout's build. A rebuild of unchanged inputs is a cache hit
# that only moves the tags; a bundle of another build (the tests' sanitizer runtime, an older
# checkout) under the tag is replaced, never used without a word.
example_bundle() {
        local out id tagged
        out=$(AGENTIX_RUNTIME_DIR=$build/runtime/server AGENTIX_INCLUDE_DIR=$root/runtime/include \
                "$ctl" build --json -q examples/bundle-example) || { say "building the example bundle failed"; exit 1; }
        id=$(echo "$out" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
        tagged=$(docker image inspect --format '{{.Id}}' "$bundle")
        if [ "$id" != "$tagged" ]; then
                say "$bundle is $tagged, not the bundle of $build ($id)"
                exit 1
        fi
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
        tests/bundle/make-task-images.sh busybox e2b >&2
        example_bundle
        AGENTIX_RUNTIME_DIR=$build/runtime/server "$ctl" build -q examples/python-data >/dev/null ||
                { say "building the python-data bundle failed"; exit 1; }

        if ! running "$state/bus/dbus.pid"; then
                ./scripts/system-bus.sh start "$state/bus" >/dev/null
        fi
        if ! running "$state/agentd.pid"; then
                agentd_config
                DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket \
                AGENTD_BACKEND_DIR=$build/agentd/backends/engine \
                AGENTIX_FIREWALL=$root/policy/firewall/agentix-firewall \
                        setsid "$build/agentd/agentd" --config="$state/etc/agentd.conf" \
                        </dev/null >>"$state/agentd.log" 2>&1 &
                echo $! >"$state/agentd.pid"
                for _ in $(seq 100); do
                        DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket \
                                busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
                        running "$state/agentd.pid" || { say "agentd exited; see $state/agentd.log"; exit 1; }
                        sleep 0.05
                done
        fi
        if ! running "$state/e2b.pid"; then
                [ -s "$state/e2b-keys" ] || (umask 077 && "$build/e2b/agentix-e2b" --make-key=root >"$state/e2b-keys")
                DBUS_SYSTEM_BUS_ADDRESS=unix:path=$state/bus/system_bus_socket \
                        setsid "$build/e2b/agentix-e2b" --listen="127.0.0.1:$e2b_port" --keys="$state/e2b-keys" \
                        </dev/null >>"$state/agentix-e2b.log" 2>&1 &
                echo $! >"$state/e2b.pid"
                for _ in $(seq 100); do
                        curl -sf "http://127.0.0.1:$e2b_port/health" >/dev/null 2>&1 && break
                        running "$state/e2b.pid" || { say "agentix-e2b exited; see $state/agentix-e2b.log"; exit 1; }
                        sleep 0.05
                done
        fi
        say "dockerd, a system bus, agentd and agentix-e2b run; logs in $state; stop with: scripts/dev-env.sh stop"
        exports
}

status() {
        if running "$state/dockerd.pid"; then
                echo "dockerd: running (pid $(cat "$state/dockerd.pid"), started by dev-env)"
        elif docker_answers; then
                echo "dockerd: running (not started by dev-env: stop leaves it alone)"
        else
                echo "dockerd: not running"
        fi
        for what in bus:bus/dbus.pid agentd:agentd.pid agentix-e2b:e2b.pid; do
                if running "$state/${what#*:}"; then
                        echo "${what%%:*}: running (pid $(cat "$state/${what#*:}"))"
                else
                        echo "${what%%:*}: not running"
                fi
        done
}

stop() {
        if running "$state/e2b.pid"; then
                kill "$(cat "$state/e2b.pid")"
                for _ in $(seq 100); do running "$state/e2b.pid" || break; sleep 0.05; done
        fi
        rm -f "$state/e2b.pid"
        if running "$state/agentd.pid"; then
                kill "$(cat "$state/agentd.pid")"
                for _ in $(seq 100); do running "$state/agentd.pid" || break; sleep 0.05; done
        fi
        rm -f "$state/agentd.pid"
        ./scripts/system-bus.sh stop "$state/bus"
        for _ in $(seq 100); do running "$state/bus/dbus.pid" || break; sleep 0.05; done
        # What agentd made outlives it (a restarted agentd adopts it again): say what, and how
        # to remove it, before a dockerd dev-env started goes (and with it the containers).
        local pooled=0 sandboxes=0 pools
        if docker_answers; then
                # Every sandbox has the pool label; one made for a warm pool names it (and keeps
                # it once claimed).
                pools=$(docker ps --filter label=org.agentix.sandbox --format '{{.Label "org.agentix.pool"}}')
                if [ -n "$pools" ]; then
                        sandboxes=$(grep -c '' <<<"$pools")
                        pooled=$(grep -c . <<<"$pools" || true)
                fi
        fi
        ./scripts/dockerd.sh stop "$state/dockerd.pid"
        say "stopped what dev-env started"
        if [ "$sandboxes" -gt 0 ]; then
                say "left on this host: $(count_of "$sandboxes" sandbox sandboxes), $pooled of them made for warm" \
                    "pools (they expire, or agentd deletes them when it starts again; scripts/dev-env.sh clean" \
                    "removes them and everything else agentix made)"
        fi
}

# "1 sandbox container", "2 sandbox containers": ONE and MANY by the count N.
count_of() { # N ONE MANY
        if [ "$1" -eq 1 ]; then echo "1 $2"; else echo "$1 $3"; fi
}

# Remove each of what a docker listing names, saying how many.
remove_listed() { # ONE MANY LIST-COMMAND... -- REMOVE-COMMAND...
        local one=$1 many=$2 list=() rm=() items
        shift 2
        while [ "$1" != -- ]; do list+=("$1"); shift; done
        shift
        rm=("$@")
        items=$("${list[@]}" | sort -u)
        if [ -n "$items" ]; then
                # shellcheck disable=SC2086
                "${rm[@]}" $items >/dev/null
                say "removed $(count_of "$(echo "$items" | wc -l)" "$one" "$many")"
        fi
}

clean() {
        local temp_dockerd=no rules
        stop 2>/dev/null
        mkdir -p "$state"
        if ! docker_answers; then
                # Docker's objects go through Docker: start one for the while.
                ./scripts/dockerd.sh start "$state/clean-dockerd.pid" >&2
                temp_dockerd=yes
        fi
        remove_listed "sandbox container" "sandbox containers" docker ps -aq --filter label=org.agentix.sandbox -- docker rm -f -v
        remove_listed "carrier container" "carrier containers" docker ps -aq --filter label=org.agentix.carrier -- docker rm -f -v
        # (and their shards: agentix-isolated-1, … on agentix0-1, …)
        for net in $(docker network ls --format '{{.Name}}' | grep -E '^agentix-(isolated|egress)(-[0-9]+)?$'); do
                if docker network inspect "$net" >/dev/null 2>&1; then
                        docker network rm "$net" >/dev/null
                        say "removed the Docker network $net (and its bridge)"
                fi
        done
        rules=$({ iptables-save; ip6tables-save; } 2>/dev/null || true)
        for bridge in agentix0 agentix1; do
                if grep -q -- "AGENTIX-[A-Z]*-$bridge" <<<"$rules"; then
                        ./policy/firewall/agentix-firewall remove "$bridge"
                        say "removed agentix-firewall's rules for $bridge"
                fi
        done
        remove_listed "snapshot image" "snapshot images" docker images -q --no-trunc --filter label=org.agentix.snapshot.owner -- docker rmi -f
        remove_listed "bundle image" "bundle images" docker images -q --no-trunc --filter label=org.agentix.bundle -- docker rmi -f
        remove_listed "task image (agentix-test/*)" "task images (agentix-test/*)" \
                docker images --format '{{.Repository}}:{{.Tag}}' --filter 'reference=agentix-test/*' -- docker rmi -f
        ./scripts/dockerd.sh restore-config
        if [ "$temp_dockerd" = yes ]; then
                ./scripts/dockerd.sh stop "$state/clean-dockerd.pid"
        fi
        if [ -d "$cache" ]; then
                rm -rf "$cache"
                say "removed the bundle cache $cache"
        fi
        rm -rf "$state"
        say "agentix left nothing on this host (Debian packages, Docker and the build directories stay)"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
env) exports ;;
clean) clean ;;
*)
        echo "usage: $0 start|stop|status|env|clean" >&2
        exit 2
        ;;
esac
