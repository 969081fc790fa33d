#!/usr/bin/env bash
# Run every test: unit, worker, interop (real python-socketio and socket.io-client against a
# real agentix-server), all built with AddressSanitizer + UBSan, then each libFuzzer target
# briefly. Ends with one line "N passed, N failed, N skipped" and fails if anything failed.
#
#   scripts/test.sh                 everything
#   FUZZ_SECONDS=0 scripts/test.sh  skip the fuzzers
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh || { echo "0 passed, 1 failed"; exit 1; }

build=${TEST_BUILD_DIR:-build-test}
fuzz_seconds=${FUZZ_SECONDS:-6}
passed=0 failed=0 skipped=0

if [ ! -f "$build/build.ninja" ]; then
        # Meson's own warnings (a deprecated feature, an unknown option) are defects too.
        meson setup --fatal-meson-warnings "$build" -Dbuildtype=debug -Db_sanitize=address,undefined >/dev/null ||
                { echo "meson setup failed"; echo "0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C "$build"; then
        echo "build failed"
        echo "0 passed, 1 failed"
        exit 1
fi

# Warnings are defects: one optimized build (where GCC sees the most) with -Dwerror=true.
werror_build=${WERROR_BUILD_DIR:-build-werror}
echo "== building with -Dwerror=true (debugoptimized) in $werror_build"
if { [ -f "$werror_build/build.ninja" ] ||
     meson setup --fatal-meson-warnings "$werror_build" -Dbuildtype=debugoptimized -Dwerror=true >/dev/null; } &&
   ninja -C "$werror_build" >"$werror_build.log" 2>&1; then
        echo "werror-build ok"
        passed=$((passed + 1))
else
        grep -E "error|warning" "$werror_build.log" | head -40
        echo "werror-build FAILED (log: $werror_build.log)"
        failed=$((failed + 1))
fi

# The bundle tests need a real dockerd: start one unless one runs, and stop only that one.
dockerd_pid=$build/dockerd.pid
if ! ./scripts/dockerd.sh start "$dockerd_pid"; then
        echo "dockerd failed to start"
        echo "0 passed, 1 failed"
        exit 1
fi
# agentd's networks (isolated, egress) and their firewall rules are made by the tests' agentds:
# take them away again unless they were there before (scripts/dev-env.sh's agentd keeps them).
had_networks=no
./policy/firewall/agentix-firewall status && docker network inspect agentix-isolated >/dev/null 2>&1 &&
        had_networks=yes
cleanup() {
        if [ "$had_networks" = no ]; then
                docker network ls --format '{{.Name}}' | grep -E '^agentix-(isolated|egress)(-[0-9]+)?$' |
                        xargs -r docker network rm >/dev/null 2>&1 || true
                ./policy/firewall/agentix-firewall remove agentix0 || true
                ./policy/firewall/agentix-firewall remove agentix1 || true
        fi
        ./scripts/dockerd.sh stop "$dockerd_pid"
}
trap cleanup EXIT

# Leaks are errors; UBSan reports fail the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

log=$(mktemp /tmp/agentix-test.XXXXXX)
meson test -C "$build" --print-errorlogs --num-processes 2 2>&1 | tee "$log"
# meson repeats failures in its summary: count each test once, by its last status.
count() { grep -E '^ *[0-9]+/[0-9]+ agentix:' "$log" | awk '{print $2, $4, $5}' | sort -u | grep -cE " ($1)\$"; }
passed=$((passed + $(count 'OK|EXPECTEDFAIL')))
failed=$((failed + $(count 'FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS')))
skipped=$((skipped + $(count 'SKIP')))

if [ "$fuzz_seconds" -gt 0 ]; then
        echo "== fuzzing each parser for ${fuzz_seconds}s (clang, ASan + UBSan)"
        tests/fuzz/run.sh "$fuzz_seconds" 2>&1 | tee "$log"
        fuzz_ok=$(grep -acE '^fuzz-[a-z0-9-]+ +ok ' "$log")
        fuzz_failed=$(grep -acE '^fuzz-[a-z0-9-]+ +FAILED' "$log")
        fuzz_targets=$(sed -n 's/^fuzz targets: //p' "$log")
        passed=$((passed + fuzz_ok))
        failed=$((failed + fuzz_failed))
        # A target that printed no line of its own (a build failure prints none) failed too:
        # the closing line counts every target.
        missing=$(( ${fuzz_targets:-1} - fuzz_ok - fuzz_failed ))
        if [ "$missing" -gt 0 ]; then
                echo "fuzz: $missing of ${fuzz_targets:-?} targets reported nothing"
                failed=$((failed + missing))
        fi
fi
rm -f "$log"

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
