#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/js/mcp.sh — the round trip of an MCP tool call through agentix-mcp on stdio (the MCP
# SDK's Client; agentix-mcp attached with --url to a release agentix-server) against the same
# operation through @agentix/client directly, same runtime, one run: execute `true` and
# read_file of a 100-line file, MCP_BENCH_CALLS (default 400) calls each way in alternating
# blocks of 50; p50, p99 and the ratio (client/js/bench/mcp-roundtrip.test.ts).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_TARGETS="runtime/server/agentix-server runtime/server/agentix-worker"
# shellcheck source=../release-build.sh
. "$HERE/../release-build.sh"
AGENTIX_SERVER=$BUILD/runtime/server/agentix-server "$ROOT/client/js/run-tests.sh" \
        bench/mcp-roundtrip.test.ts 2>&1 | sed -n '/MCP round trips/,/^ *$/p' | grep -E 'MCP|direct'
