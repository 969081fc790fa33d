# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by run.sh inside its docker section (private dockerd up, DOCKER_HOST set, the
# busybox image imported): `agentixctl cp` against `docker cp` for one directory tree,
# both directions, CP_RUNS rounds, every copy checked file by file (sha256).
#
# Like with like: agentix-server runs in a container made from the same busybox image, with
# the build's agentix-server/agentix-worker bind-mounted read-only and the host's /usr
# read-only for the libraries they link; docker cp copies into and out of that same
# container, so both tools write to and read from the same overlay2 root. The container
# shares the host's network namespace (--network host): run.sh's dockerd runs without a
# bridge, so that it cannot disturb another dockerd and every byte stays on loopback; there
# is no published port and so no docker-proxy in agentixctl's path (agentd's sandboxes have
# one). Should the server not come up in a container, it runs on the host and every result
# line says so ("server":"host").

CP_DIRS=16
CP_FILES_PER_DIR=64
CP_FILE_SIZE=262144 # 16 × 64 × 256 KiB = 256 MiB in 1024 files

# "sha256  ./path" per file, sorted by path: the same text on the host and in the container.
cp_manifest_local() { # dir
        (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum)
}

cp_manifest_container() { # container dir
        $DOCKER exec "$1" sh -c "cd '$2' && find . -type f | LC_ALL=C sort | xargs sha256sum"
}

cp_check() { # what got-manifest-file → 0 when it matches the source tree's
        if cmp -s "$CP_WORK/source.sha256" "$2"; then
                return 0
        fi
        log "cp: $1: the copy differs from the source: $(diff "$CP_WORK/source.sha256" "$2" | head -3 | tr '\n' ' ')"
        return 1
}

cp_sandbox_manifest() { # dir-in-sandbox out-file
        if [ "$CP_SERVER_WHERE" = container ]; then
                cp_manifest_container "$CP_CONTAINER" "$1" >"$2"
        else
                cp_manifest_local "$1" >"$2"
        fi
}

cp_line() { # label direction run microseconds verified-or-failure-text
        local load
        load=$(cut -d' ' -f1 /proc/loadavg)
        if [ "$5" = ok ]; then
                printf '{"scenario":"6-cp","label":"%s","direction":"%s","run":%s,"seconds":%s,"bytes":%s,"files":%s,"mib_per_s":%s,"verified":true,"server":"%s","load1":%s}\n' \
                        "$1" "$2" "$3" "$(awk "BEGIN {printf \"%.3f\", $4 / 1e6}")" "$CP_BYTES" "$CP_N_FILES" \
                        "$(awk "BEGIN {printf \"%.1f\", $CP_BYTES / 1048576 / ($4 / 1e6)}")" "$CP_SERVER_WHERE" "$load" >>"$LINES"
                log "6-cp/$1 $2 run $3: $(awk "BEGIN {printf \"%.3f s\", $4 / 1e6}"), verified"
        else
                printf '{"scenario":"6-cp","label":"%s","direction":"%s","run":%s,"failed":"%s","server":"%s"}\n' \
                        "$1" "$2" "$3" "$5" "$CP_SERVER_WHERE" >>"$LINES"
                log "6-cp/$1 $2 run $3 FAILED: $5"
        fi
}

# Run a copy, print its wall time in µs. Writes are flushed first so that one copy's
# writeback does not land on the next one's clock.
cp_timed() { # command…
        local t0 t1
        sync
        t0=$(date +%s%N)
        "$@" >>"$CP_WORK/cp.log" 2>&1 || return 1
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000))
}

cp_one() { # tool direction run
        local tool=$1 dir=$2 run=$3 us remote local_dir
        local ctl=("$BUILD/client/agentixctl/agentixctl" --url "http://127.0.0.1:$CP_PORT" --token "$TOKEN" -q)

        [ "$tool" = docker-cp ] && remote=/dst/$tool-$run || remote=$CP_SANDBOX_ROOT/$tool-$run
        local_dir=$CP_WORK/out/$tool-$run
        if [ "$dir" = up ]; then
                if [ "$tool" = docker-cp ]; then
                        us=$(cp_timed $DOCKER cp "$CP_TREE" "$CP_DOCKER_TARGET:$remote") || { cp_line "$tool" up "$run" 0 "docker cp failed: $(tail -1 "$CP_WORK/cp.log")"; return 0; }
                        cp_manifest_container "$CP_DOCKER_TARGET" "$remote" >"$CP_WORK/got.sha256"
                else
                        us=$(cp_timed "${ctl[@]}" cp "$CP_TREE" ":$remote") || { cp_line "$tool" up "$run" 0 "agentixctl cp failed: $(tail -1 "$CP_WORK/cp.log")"; return 0; }
                        cp_sandbox_manifest "$remote" "$CP_WORK/got.sha256"
                fi
        else
                if [ "$tool" = docker-cp ]; then
                        us=$(cp_timed $DOCKER cp "$CP_DOCKER_TARGET:$remote" "$local_dir") || { cp_line "$tool" down "$run" 0 "docker cp failed: $(tail -1 "$CP_WORK/cp.log")"; return 0; }
                else
                        us=$(cp_timed "${ctl[@]}" cp ":$remote" "$local_dir") || { cp_line "$tool" down "$run" 0 "agentixctl cp failed: $(tail -1 "$CP_WORK/cp.log")"; return 0; }
                fi
                cp_manifest_local "$local_dir" >"$CP_WORK/got.sha256"
        fi
        if cp_check "$tool $dir run $run" "$CP_WORK/got.sha256"; then
                cp_line "$tool" "$dir" "$run" "$us" ok
        else
                cp_line "$tool" "$dir" "$run" "$us" "checksum mismatch"
        fi
}

cp_wait_health() { # → 0 when agentix-server answers on CP_PORT
        local i
        for i in $(seq 100); do
                if [ "${CP_CHECK_CONTAINER:-1}" = 1 ] && [ "$($DOCKER inspect -f '{{.State.Running}}' "$CP_CONTAINER" 2>/dev/null)" != true ]; then
                        return 1
                fi
                if $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$CP_PORT/health', timeout=1).read()" 2>/dev/null; then
                        return 0
                fi
                sleep 0.1
        done
        return 1
}

cp_bench() {
        local d run tool first second
        CP_WORK=$WORK/cp
        CP_TREE=$CP_WORK/tree
        CP_N_FILES=$((CP_DIRS * CP_FILES_PER_DIR))
        CP_BYTES=$((CP_N_FILES * CP_FILE_SIZE))
        mkdir -p "$CP_TREE" "$CP_WORK/out"
        for d in $(seq -w 0 $((CP_DIRS - 1))); do
                mkdir "$CP_TREE/d$d"
                head -c $((CP_FILES_PER_DIR * CP_FILE_SIZE)) /dev/urandom |
                        split -b $CP_FILE_SIZE -d -a 2 --additional-suffix=.bin - "$CP_TREE/d$d/f"
        done
        cp_manifest_local "$CP_TREE" >"$CP_WORK/source.sha256"
        [ "$(wc -l <"$CP_WORK/source.sha256")" = "$CP_N_FILES" ] || { log "cp: the source tree is not $CP_N_FILES files"; return 1; }

        CP_PORT=$(free_port)
        CP_CONTAINER=agentix-bench-cp-$$
        CP_SERVER_WHERE=container
        CP_SANDBOX_ROOT=/dst
        $DOCKER run -d --name "$CP_CONTAINER" --network host -e AGENTIX_TOKEN="$TOKEN" \
                -v /usr:/usr:ro -v "$BUILD/runtime/server:/opt/agentix:ro" \
                --entrypoint /opt/agentix/agentix-server agentix-bench-busybox \
                --host 127.0.0.1 --port "$CP_PORT" >/dev/null || true
        if cp_wait_health; then
                CP_DOCKER_TARGET=$CP_CONTAINER
                log "cp: agentix-server in container $CP_CONTAINER on port $CP_PORT; docker cp into the same container"
        else
                log "cp: agentix-server did not come up in a container ($($DOCKER logs "$CP_CONTAINER" 2>&1 | tail -2 | tr '\n' ' ')); running it on the host"
                $DOCKER rm -f "$CP_CONTAINER" >/dev/null 2>&1
                $DOCKER run -d --network none --name "$CP_CONTAINER" agentix-bench-busybox /bin/sleep 3600 >/dev/null
                CP_DOCKER_TARGET=$CP_CONTAINER
                CP_SERVER_WHERE=host
                CP_SANDBOX_ROOT=$CP_WORK/host-dst
                mkdir -p "$CP_SANDBOX_ROOT"
                AGENTIX_TOKEN=$TOKEN "$BUILD/runtime/server/agentix-server" --host 127.0.0.1 --port "$CP_PORT" \
                        >"$WORK/agentix-cp.log" 2>&1 &
                STARTED+=("$!")
                CP_CHECK_CONTAINER=0 cp_wait_health || { log "cp: agentix-server on the host did not come up either"; return 1; }
        fi
        # docker cp's target always lives under /dst in the container.
        $DOCKER exec "$CP_DOCKER_TARGET" mkdir -p /dst

        for run in $(seq "$CP_RUNS"); do
                # Alternate who goes first, so neither always meets the other's leftovers.
                if [ $((run % 2)) = 1 ]; then first=docker-cp second=agentixctl; else first=agentixctl second=docker-cp; fi
                for tool in $first $second; do cp_one "$tool" up "$run"; done
                for tool in $first $second; do cp_one "$tool" down "$run"; done
                $DOCKER exec "$CP_DOCKER_TARGET" rm -rf "/dst/docker-cp-$run" "/dst/agentixctl-$run"
                rm -rf "$CP_WORK/out/docker-cp-$run" "$CP_WORK/out/agentixctl-$run" "$CP_WORK/host-dst/agentixctl-$run"
        done
        $DOCKER rm -f "$CP_CONTAINER" >/dev/null
        CP_CONTAINER=""
        rm -rf "$CP_WORK"
}
