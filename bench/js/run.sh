#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/js/run.sh — each deepagents file operation of AgentixSandbox (served by the runtime's
# fs module) against the same operation through deepagents' BaseSandbox shell fallback, on the
# same release agentix-server, 15 runs each, medians (client/js/test/deepagents.test.ts, which
# also checks that both give the same results).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_TARGETS="runtime/server/agentix-server runtime/server/agentix-worker"
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"
AGENTIX_SERVER=$BUILD/runtime/server/agentix-server "$ROOT/client/js/run-tests.sh" test/deepagents.test.ts 2>&1 |
        sed -n '/median of 15 runs/,/^ *$/p' | grep -E 'median|native'
