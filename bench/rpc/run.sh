#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/rpc/run.sh — agentix-server vs a python-socketio peer vs `docker exec`, one run,
# one load generator. See README.md. Prints a table; writes results.json (an output, not
# committed).
#
# Environment:
#   BUILD=DIR         build directory (default <repo>/build-bench, release build)
#   QUICK=1           small counts: a smoke run in well under a minute (numbers not meaningful)
#   SKIP_DOCKER=1     do not start dockerd / measure `docker exec`
#   SKIP_PEER=1       agentix only
#   SKIP_CP=1         do not compare `agentixctl cp` with `docker cp` (needs dockerd)
#   CP_RUNS=N         rounds of the cp comparison (default 5; QUICK: 1)
#   OUT=FILE          where the JSON goes (default bench/rpc/results.json)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
# Absolute (it is bind-mounted into a container); made absolute before it exists, since a fresh
# checkout has none and it is configured below.
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
OUT=${OUT:-$HERE/results.json}
QUICK=${QUICK:-0}
PY=/usr/bin/python3 # python3-socketio & co. live here, not in the python3 first on PATH
DOCKER=/usr/bin/docker # Debian's client, same version as Debian's dockerd
TOKEN=bench-$RANDOM$RANDOM

if [ "$QUICK" = 1 ]; then
        ECHO_N=2000 ECHO_WARM=200 TP_SECONDS=2 EXEC_N=100 EXEC_WARM=10 DOCKER_N=10 DL_N=3 DL_WARM=1
        CODE_N=50 CODE_WARM=5
        CP_RUNS=${CP_RUNS:-1}
else
        ECHO_N=20000 ECHO_WARM=2000 TP_SECONDS=10 EXEC_N=1000 EXEC_WARM=50 DOCKER_N=100 DL_N=10 DL_WARM=2
        CODE_N=1000 CODE_WARM=50
        CP_RUNS=${CP_RUNS:-5}
fi

WORK=$(mktemp -d /tmp/agentix-bench-rpc.XXXXXX)
LINES=$WORK/lines.jsonl
: >"$LINES"
STARTED=()      # pids we started, stopped in reverse order
DOCKERD_PID=""
CONTAINER=""
CP_CONTAINER=""

log() { printf '[bench/rpc] %s\n' "$*" >&2; }

stop_pid() {
        local pid=$1 i
        kill -0 "$pid" 2>/dev/null || return 0
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 50); do
                kill -0 "$pid" 2>/dev/null || return 0
                sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
        local rc=$? i
        set +e
        for c in $CONTAINER $CP_CONTAINER; do
                DOCKER_HOST=unix://$WORK/docker/docker.sock $DOCKER rm -f "$c" >/dev/null 2>&1
        done
        for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
                # Its children (the worker) too, should it not take them down itself.
                local kids
                kids=$(cat /proc/"${STARTED[i]}"/task/*/children 2>/dev/null || true)
                stop_pid "${STARTED[i]}"
                for k in $kids; do stop_pid "$k"; done
        done
        if [ -n "$DOCKERD_PID" ]; then
                stop_pid "$DOCKERD_PID"
                # dockerd stops the containerd it started; make sure, by its pidfile.
                if [ -f "$WORK/docker/exec/containerd/containerd.pid" ]; then
                        stop_pid "$(cat "$WORK/docker/exec/containerd/containerd.pid")"
                fi
                # dockerd leaves its network namespace mounted: unmount it, or $WORK cannot go.
                if mountpoint -q "$WORK/docker/exec/netns/default" 2>/dev/null; then
                        umount "$WORK/docker/exec/netns/default"
                fi
        fi
        if [ $rc -ne 0 ]; then
                log "failed (exit $rc); logs kept in $WORK"
        else
                rm -rf "$WORK" 2>/dev/null || log "left $WORK behind"
        fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
        $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_health() { # port pid name
        local i
        for i in $(seq 200); do
                kill -0 "$2" 2>/dev/null || { log "$3 died on start-up:"; tail -20 "$WORK/$3.log" >&2; return 1; }
                if $PY - "$1" <<'EOF' 2>/dev/null; then return 0; fi
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1).read()
EOF
                sleep 0.1
        done
        log "$3 did not answer /health"
        return 1
}

wait_port() { # port pid name
        local i
        for i in $(seq 100); do
                kill -0 "$2" 2>/dev/null || { log "$3 died on start-up:"; tail -20 "$WORK/$3.log" >&2; return 1; }
                if $PY -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1" \
                        2>/dev/null; then return 0; fi
                sleep 0.1
        done
        log "$3 did not listen on $1"
        return 1
}

# The server's RSS and that of its child processes (the worker), in KiB.
rss_kib() { # pid
        local total=0 p kb
        for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
                kb=$(awk '/^VmRSS:/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
                total=$((total + ${kb:-0}))
        done
        echo "$total"
}

# VmRSS is what the target counts; RssAnon (private) and Pss (shared pages split between the
# processes mapping them) say how much of it is really this process's.
rss_line() { # label pid phase
        local procs="" p kb anon pss
        for p in "$2" $(cat /proc/"$2"/task/*/children 2>/dev/null); do
                kb=$(awk '/^VmRSS:/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
                anon=$(awk '/^RssAnon:/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
                pss=$(awk '/^Pss:/ {print $2}' /proc/"$p"/smaps_rollup 2>/dev/null || echo 0)
                procs="$procs{\"pid\":$p,\"comm\":\"$(cat /proc/"$p"/comm)\",\"vmrss_kib\":${kb:-0},\"rssanon_kib\":${anon:-0},\"pss_kib\":${pss:-0}},"
        done
        printf '{"scenario":"rss","label":"%s","phase":"%s","rss_kib":%s,"processes":[%s]}\n' \
                "$1" "$3" "$(rss_kib "$2")" "${procs%,}" >>"$LINES"
}

# loadgen wrapper: scenario label, then loadgen options; its JSON line gets the scenario name.
measure() { # scenario label port loadgen-args…
        local scenario=$1 label=$2 port=$3 out
        shift 3
        if out=$("$BUILD/bench/rpc/loadgen" --host 127.0.0.1 --port "$port" --token "$TOKEN" --label "$label" "$@" \
                2>"$WORK/loadgen.err"); then
                printf '%s\n' "${out%\}},\"scenario\":\"$scenario\"}" >>"$LINES"
                log "$scenario/$label: $(printf '%s' "$out" | cut -c1-160)…"
        else
                local err
                err=$(tail -3 "$WORK/loadgen.err" | tr '\n"\\' '   ')
                printf '{"scenario":"%s","label":"%s","failed":"%s"}\n' "$scenario" "$label" "$err" >>"$LINES"
                log "$scenario/$label FAILED: $err"
        fi
}

# libagentix-bench wrapper: the same measurements through the C client library.
measure_lib() { # scenario label port libagentix-bench-args…
        local scenario=$1 label=$2 port=$3 out
        shift 3
        if out=$("$BUILD/bench/rpc/libagentix-bench" --url "http://127.0.0.1:$port" --token "$TOKEN" --label "$label" "$@" \
                2>"$WORK/libagentix-bench.err"); then
                printf '%s\n' "${out%\}},\"scenario\":\"$scenario\"}" >>"$LINES"
                log "$scenario/$label: $(printf '%s' "$out" | cut -c1-160)…"
        else
                local err
                err=$(tail -3 "$WORK/libagentix-bench.err" | tr '\n"\\' '   ')
                printf '{"scenario":"%s","label":"%s","failed":"%s"}\n' "$scenario" "$label" "$err" >>"$LINES"
                log "$scenario/$label FAILED: $err"
        fi
}

spawn_measure() { # scenario label loadgen-args… -- cmd…
        local scenario=$1 label=$2 out
        shift 2
        if out=$("$BUILD/bench/rpc/loadgen" --mode spawn --label "$label" "$@" 2>"$WORK/loadgen.err"); then
                printf '%s\n' "${out%\}},\"scenario\":\"$scenario\"}" >>"$LINES"
                log "$scenario/$label: $(printf '%s' "$out" | cut -c1-160)…"
        else
                local err
                err=$(tail -3 "$WORK/loadgen.err" | tr '\n"\\' '   ')
                printf '{"scenario":"%s","label":"%s","failed":"%s"}\n' "$scenario" "$label" "$err" >>"$LINES"
                log "$scenario/$label FAILED: $err"
        fi
}

# ---- build and dependencies ---------------------------------------------------------------
if [ ! -f "$BUILD/build.ninja" ]; then
        log "configuring $BUILD (release)"
        "$ROOT/scripts/deps.sh" >"$WORK/deps.log" 2>&1 || { tail "$WORK/deps.log" >&2; exit 1; }
        (cd "$ROOT" && meson setup "$BUILD" -Dbuildtype=release >"$WORK/meson.log") || { cat "$WORK/meson.log" >&2; exit 1; }
fi
TARGETS=(runtime/server/agentix-server runtime/server/agentix-worker bench/rpc/loadgen bench/rpc/pingpong
         bench/rpc/floor-server bench/rpc/libagentix-bench client/agentixctl/agentixctl)
log "building ${TARGETS[*]} in $BUILD"
ninja -C "$BUILD" "${TARGETS[@]}" >"$WORK/ninja.log" || { tail -30 "$WORK/ninja.log" >&2; exit 1; }

if [ "${SKIP_PEER:-0}" != 1 ] && ! $PY -c 'import socketio, engineio, uvicorn, msgpack, wsproto, uvloop, httptools' 2>/dev/null; then
        log "installing the peer's Debian packages"
        apt-get install -y python3-socketio python3-engineio python3-uvicorn python3-msgpack python3-wsproto \
                python3-uvloop python3-httptools >"$WORK/apt.log" 2>&1 || { tail "$WORK/apt.log" >&2; exit 1; }
fi

# ---- fixtures ------------------------------------------------------------------------------
mkdir -p "$WORK/data/empty"
head -c 67108864 /dev/urandom >"$WORK/data/big"
EMPTY=$WORK/data/empty
BIG=$WORK/data/big

# ---- servers -------------------------------------------------------------------------------
AGENTIX_PORT=$(free_port)
AGENTIX_TOKEN=$TOKEN "$BUILD/runtime/server/agentix-server" --host 127.0.0.1 --port "$AGENTIX_PORT" \
        >"$WORK/agentix.log" 2>&1 &
AGENTIX_PID=$!
STARTED+=("$AGENTIX_PID")
wait_health "$AGENTIX_PORT" "$AGENTIX_PID" agentix
log "agentix-server pid $AGENTIX_PID on port $AGENTIX_PORT"

# The echo's floor: the least a Socket.IO server on libwebsockets does for a call (floor-server.c),
# with the same load generator; "hop" sends each call through a second process and back, as
# agentix-server's go through its worker.
for kind in plain hop; do
        port=$(free_port)
        "$BUILD/bench/rpc/floor-server" --port "$port" $([ $kind = hop ] && echo --hop) >"$WORK/floor-$kind.log" 2>&1 &
        STARTED+=("$!")
        wait_port "$port" "$!" "floor-$kind"
        eval "FLOOR_${kind^^}_PORT=$port"
done
log "floor servers on ports $FLOOR_PLAIN_PORT (plain) and $FLOOR_HOP_PORT (with a hop)"

SERVERS=("agentix:$AGENTIX_PORT:$AGENTIX_PID")
if [ "${SKIP_PEER:-0}" != 1 ]; then
        PEER_PORT=$(free_port)
        AGENTIX_TOKEN=$TOKEN $PY "$HERE/peer/server.py" --host 127.0.0.1 --port "$PEER_PORT" >"$WORK/peer.log" 2>&1 &
        PEER_PID=$!
        STARTED+=("$PEER_PID")
        wait_health "$PEER_PORT" "$PEER_PID" peer
        log "python-socketio peer pid $PEER_PID on port $PEER_PORT"
        SERVERS+=("peer:$PEER_PORT:$PEER_PID")
fi

# ---- scenarios: each against every server, back to back, so both see the same machine ---
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        # Warm-up before RSS: code paths touched, worker started, allocator settled.
        measure warmup "$label" "$port" --callable sandbox::echo --arg-str hello --count 1000 --warmup 0 >/dev/null
        sleep 1
        rss_line "$label" "$pid" after-warmup
done

for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        measure 1-echo "$label" "$port" --callable sandbox::echo --arg-str hello --count $ECHO_N --warmup $ECHO_WARM
        if [ "$label" = agentix ]; then
                # Right after, the floor: same client, same call, same counts.
                measure 1-floor floor-ws-echo-hop "$FLOOR_HOP_PORT" --callable sandbox::echo --arg-str hello \
                        --count $ECHO_N --warmup $ECHO_WARM
                measure 1-floor floor-ws-echo "$FLOOR_PLAIN_PORT" --callable sandbox::echo --arg-str hello \
                        --count $ECHO_N --warmup $ECHO_WARM
                # Right after, same server, same call: what libagentix's blocking API adds.
                measure_lib 1-echo libagentix "$port" --mode latency --callable sandbox::echo --arg-str hello \
                        --count $ECHO_N --warmup $ECHO_WARM
                # The ratio moves with the machine's load: three more short pairs, alternating.
                for round in 1 2 3; do
                        measure 1-echo-pairs "agentix-$round" "$port" --callable sandbox::echo --arg-str hello \
                                --count $((ECHO_N / 4)) --warmup $((ECHO_WARM / 4))
                        measure_lib 1-echo-pairs "libagentix-$round" "$port" --mode latency --callable sandbox::echo \
                                --arg-str hello --count $((ECHO_N / 4)) --warmup $((ECHO_WARM / 4))
                        measure 1-echo-pairs "floor-$round" "$FLOOR_HOP_PORT" --callable sandbox::echo --arg-str hello \
                                --count $((ECHO_N / 4)) --warmup $((ECHO_WARM / 4))
                done
        fi
done
# For reference (the floor before issue 29): two processes bouncing one byte. On an idle VM this
# can read higher than the echo itself (a wake-up per hop), so it is no floor of it.
"$BUILD/bench/rpc/pingpong" | sed 's/}$/,"scenario":"1-pingpong"}/' >>"$LINES"
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        measure 1b-ls "$label" "$port" --callable fs::ls --arg-str "$EMPTY" --count $ECHO_N --warmup $ECHO_WARM
done
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        measure 2-throughput "$label" "$port" --mode throughput --inflight 64 --duration $TP_SECONDS \
                --callable sandbox::echo --arg-str hello
        if [ "$label" = agentix ]; then
                measure_lib 2-throughput libagentix-async "$port" --mode throughput --inflight 64 --duration $TP_SECONDS \
                        --callable sandbox::echo --arg-str hello
        fi
done
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        measure 3-exec "$label" "$port" --callable sandbox::exec --kwarg-str command=true --count $EXEC_N --warmup $EXEC_WARM
        # A program rather than a shell builtin: agentix runs it without the shell (exec-plain.h).
        measure 3b-exec-program "$label" "$port" --callable sandbox::exec --kwarg-str command=/bin/true \
                --count $EXEC_N --warmup $EXEC_WARM
done
# A persistent shell session (shell::run in one bash kept between calls) against a fresh
# `sh -c` per call (sandbox::exec): the same command, the same server.
SESSION=$("$BUILD/client/agentixctl/agentixctl" --url "http://127.0.0.1:$AGENTIX_PORT" --token "$TOKEN" \
        call shell::open '[]' | tr -d '"')
if [ -n "$SESSION" ]; then
        measure 3c-shell shell-run "$AGENTIX_PORT" --callable shell::run --arg-str "$SESSION" --arg-str true \
                --count $EXEC_N --warmup $EXEC_WARM
        measure 3c-shell exec "$AGENTIX_PORT" --callable sandbox::exec --kwarg-str command=true \
                --count $EXEC_N --warmup $EXEC_WARM
else
        log "3c-shell: shell::open failed"
fi
# A stateful code context (code::run of `1+1` on a python3 Jupyter kernel, to its result)
# against jupyter_client's own BlockingKernelClient on the same kind of kernel: what an agent
# pays per step. Both start their kernel first (the warm-up).
if "$PY" -c 'import jupyter_client, ipykernel' 2>/dev/null; then
        measure 3d-code code-run "$AGENTIX_PORT" --callable code::run --shape stream --arg-str 1+1 \
                --count $CODE_N --warmup $CODE_WARM
        if out=$("$PY" "$HERE/peer/jupyter-client.py" --count $CODE_N --warmup $CODE_WARM 2>"$WORK/jupyter.err"); then
                printf '%s\n' "${out%\}}, \"scenario\": \"3d-code\"}" >>"$LINES"
                log "3d-code/jupyter-client: $out"
        else
                log "3d-code/jupyter-client FAILED: $(tail -3 "$WORK/jupyter.err" | tr '\n' ' ')"
        fi
else
        log "3d-code: no python3-jupyter-client/ipykernel (scripts/deps.sh installs them)"
fi
# The floor of any exec on this machine: a small C process spawning /bin/true and /bin/sh -c true.
spawn_measure 3-exec spawn-true --count $EXEC_N --warmup $EXEC_WARM -- /bin/true
spawn_measure 3-exec spawn-sh-true --count $EXEC_N --warmup $EXEC_WARM -- /bin/sh -c true
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        measure 4-download "$label" "$port" --mode download --callable fs::download --arg-strlist "$BIG" \
                --expect-bytes 67108864 --count $DL_N --warmup $DL_WARM
done
for s in "${SERVERS[@]}"; do
        IFS=: read -r label port pid <<<"$s"
        rss_line "$label" "$pid" after-all
done

# ---- docker exec ---------------------------------------------------------------------------
if [ "${SKIP_DOCKER:-0}" != 1 ]; then
        if ! command -v dockerd >/dev/null || [ ! -x $DOCKER ]; then
                log "installing docker.io"
                apt-get install -y docker.io >"$WORK/apt-docker.log" 2>&1 || { tail "$WORK/apt-docker.log" >&2; exit 1; }
        fi
        if [ ! -x /bin/busybox ] || ! /bin/busybox --list >/dev/null 2>&1 || ! file -L /bin/busybox 2>/dev/null | grep -q static; then
                apt-get install -y busybox-static >"$WORK/apt-busybox.log" 2>&1 || { tail "$WORK/apt-busybox.log" >&2; exit 1; }
        fi
        D=$WORK/docker
        mkdir -p "$D/rootfs/bin"
        # A private daemon: own socket, data, exec root and pidfile; no bridge, no iptables.
        dockerd --host "unix://$D/docker.sock" --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/dockerd.pid" \
                --bridge none --iptables=false --ip6tables=false >"$D/dockerd.log" 2>&1 &
        DOCKERD_PID=$!
        export DOCKER_HOST=unix://$D/docker.sock
        for i in $(seq 100); do
                $DOCKER version >/dev/null 2>&1 && break
                kill -0 $DOCKERD_PID 2>/dev/null || { tail "$D/dockerd.log" >&2; exit 1; }
                sleep 0.2
        done
        cp /bin/busybox "$D/rootfs/bin/busybox"
        for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$D/rootfs/bin/$a"; done
        # The cp comparison runs agentix-server in this image with the host's /usr mounted on
        # /usr: the merged-/usr links make the host's loader and libraries resolve.
        mkdir -p "$D/rootfs/usr" "$D/rootfs/tmp" "$D/rootfs/dst"
        ln -s usr/lib "$D/rootfs/lib"
        ln -s usr/lib64 "$D/rootfs/lib64"
        tar -C "$D/rootfs" -c . | $DOCKER import - agentix-bench-busybox:latest >/dev/null
        CONTAINER=agentix-bench-exec-$$
        $DOCKER run -d --network none --name "$CONTAINER" agentix-bench-busybox /bin/sleep 3600 >/dev/null
        spawn_measure 3-exec docker-exec --count $DOCKER_N --warmup 5 -- $DOCKER exec "$CONTAINER" true
        $DOCKER rm -f "$CONTAINER" >/dev/null
        CONTAINER=""

        # ---- agentixctl cp vs docker cp: 256 MiB tree, both directions (cp-bench.sh) ----
        if [ "${SKIP_CP:-0}" != 1 ]; then
                . "$HERE/cp-bench.sh"
                cp_bench || log "cp comparison did not complete"
        fi
        unset DOCKER_HOST
fi

# ---- report --------------------------------------------------------------------------------
$PY "$HERE/summarize.py" "$LINES" "$OUT"
