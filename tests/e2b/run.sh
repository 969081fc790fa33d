#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# E2B's own SDK packages (pinned in package-lock.json), unmodified, against agentix.
#
#   tests/e2b/run.sh AGENTIX_SERVER [TEST_FILE…]
#
# Installs the packages when node_modules is missing or stale. One line per test (node's spec
# reporter); non-zero when any test fails; 77 (skip) without Node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

server=${1:-${AGENTIX_SERVER:-}}
[ $# -gt 0 ] && shift
if [ -z "$server" ] || [ ! -x "$server" ]; then
        echo "usage: $0 AGENTIX_SERVER [TEST_FILE…]  (an executable agentix-server)" >&2
        exit 2
fi
server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "node and npm are needed for E2B's SDK (scripts/deps.sh installs them)"
        exit 77
fi

cd "$here"
stamp=node_modules/.agentix-package-lock.json
if [ ! -d node_modules ] || ! cmp -s package-lock.json "$stamp"; then
        npm ci --no-audit --no-fund --loglevel=error
        cp package-lock.json "$stamp"
fi
[ $# -eq 0 ] && set -- test/*.test.mjs
export AGENTIX_SERVER=$server
exec node --test --test-reporter=spec "$@"
