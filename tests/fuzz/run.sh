#!/bin/bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets (clang, ASan + UBSan) and run each for a while.
#
#   tests/fuzz/run.sh [seconds-per-target]      (default 20)
#
# Environment: FUZZ_BUILD_DIR (default <repo>/build-fuzz), FUZZ_TARGETS (space-separated
# subset), FUZZ_JOBS (targets run at once, default 1). Prints one line per target and exits
# non-zero when any target crashed, leaked, hung or failed to build. Crashing inputs are kept
# in $FUZZ_BUILD_DIR/fuzz-work/<target>/artifacts/; new corpus entries in .../corpus/.
set -u

secs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${FUZZ_JOBS:-1}
targets=(${FUZZ_TARGETS:-fuzz-eio-ws fuzz-eio-payload fuzz-sio-packet fuzz-frame fuzz-envelope fuzz-ws-receive fuzz-ws-handshake fuzz-http-conn fuzz-bundle-manifest fuzz-environment-file fuzz-proxy-request fuzz-e2b-code-item fuzz-multipart fuzz-tls-handover fuzz-sandbox-target fuzz-control-body fuzz-signature fuzz-jupyter-message})

# Where a target is built: beside the code it reads when it is not one of tests/fuzz's.
target_path() {
        case $1 in
                fuzz-signature) echo runtime/loader/$1 ;;
                fuzz-jupyter-message) echo runtime/modules/code/$1 ;;
                *) echo tests/fuzz/$1 ;;
        esac
}

# The count first: scripts/test.sh checks that a line came for every target.
echo "fuzz targets: ${#targets[@]}"

case $secs in
        ''|*[!0-9]*) echo "usage: $0 [seconds-per-target]" >&2; exit 2 ;;
esac

if [ ! -f "$build/build.ninja" ]; then
        CC=clang meson setup "$build" "$root" \
                -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
                >"$build.setup.log" 2>&1 || {
                echo "meson setup failed, see $build.setup.log" >&2
                exit 1
        }
fi
paths=()
for t in "${targets[@]}"; do
        paths+=("$(target_path "$t")")
done
ninja -C "$build" "${paths[@]}" >"$build/fuzz-build.log" 2>&1 || {
        echo "build failed, see $build/fuzz-build.log" >&2
        tail -20 "$build/fuzz-build.log" >&2
        exit 1
}

# UBSan reports are fatal (libFuzzer records them as crashes); leaks are checked by ASan.
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}

run_one() {
        local t=$1 work=$build/fuzz-work/$1 extra=()
        mkdir -p "$work/corpus" "$work/artifacts"
        [ -f "$here/$t.dict" ] && extra=(-dict="$here/$t.dict")
        [ -d "$here/corpus/$t" ] && extra+=("$here/corpus/$t")

        "$build/$(target_path "$t")" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
                -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
                "$work/corpus" "${extra[@]}" >"$work/log" 2>&1
        local rc=$?

        local runs cov corp
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
        cov=$(grep -ao 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
        corp=$(ls "$work/corpus" | wc -l)
        if [ $rc -eq 0 ]; then
                printf '%-18s ok      %ss  runs=%s cov=%s corpus=%s\n' "$t" "$secs" "${runs:-?}" "${cov:-?}" "$corp"
        else
                local art
                art=$(ls -t "$work/artifacts" 2>/dev/null | head -1)
                printf '%-18s FAILED  rc=%s artifact=%s log=%s\n' "$t" "$rc" \
                        "${art:+$work/artifacts/$art}" "$work/log"
                grep -a -m3 -E 'ERROR: |runtime error|invariant broken' "$work/log" | sed 's/^/    /'
                return 1
        fi
}

failed=0
pids=()
for t in "${targets[@]}"; do
        if [ ! -x "$build/$(target_path "$t")" ]; then
                printf '%-18s FAILED  not built\n' "$t"
                failed=1
                continue
        fi
        run_one "$t" &
        pids+=($!)
        if [ ${#pids[@]} -ge "$jobs" ]; then
                wait "${pids[0]}" || failed=1
                pids=("${pids[@]:1}")
        fi
done
for p in "${pids[@]}"; do
        wait "$p" || failed=1
done

exit $failed
