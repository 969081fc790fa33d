#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/bundle/run.sh — agentixctl build (cold, warm), bundle size, and sandbox start from a
# bundle, side by side with the same tools apt-installed into a Debian image and started with
# `docker run`. See README.md. Configures a release build (BUILD, default build-bench) and
# starts dockerd when they are missing; makes the task images once.
#
#   bench/bundle/run.sh [RUNS]      (default 5)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_TARGETS="client/agentixctl/agentixctl runtime/server/agentix-server runtime/server/agentix-worker"
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"

pidfile=$(mktemp /tmp/agentix-bench-dockerd.XXXXXX.pid)
"$ROOT/scripts/dockerd.sh" start "$pidfile"
trap '"$ROOT/scripts/dockerd.sh" stop "$pidfile"; rm -f "$pidfile"' EXIT
DOCKER=/usr/bin/docker "$ROOT/tests/bundle/make-task-images.sh"

LD_LIBRARY_PATH=$BUILD/client/lib /usr/bin/python3 "$HERE/bench.py" \
        "$BUILD/client/agentixctl/agentixctl" "$BUILD/runtime/server" "$ROOT/runtime/include" \
        "$ROOT/examples/bundle-example" "${1:-5}"
