#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run the socket.io-client interop tests against an agentix-server binary.
#
#   tests/interop/node/run.sh [AGENTIX_SERVER] [TEST_FILE…]
#   tests/interop/node/run.sh --deps-only
#
# The binary comes from the first argument, else from $AGENTIX_SERVER. Installs the pinned npm
# packages (package-lock.json) when node_modules is missing or stale. Prints one line per
# test (node's spec reporter) and exits non-zero when any test fails; 77 (skip) without Node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

deps_only=false
if [ "${1:-}" = --deps-only ]; then
        deps_only=true # only install the pinned packages (tests/cockpit uses playwright-core too)
        shift
fi
server=${AGENTIX_SERVER:-}
if [ $# -gt 0 ]; then
        server=$1
        shift
fi
if [ -z "$server" ] && ! $deps_only; then
        echo "usage: $0 AGENTIX_SERVER [TEST_FILE…]  (or set \$AGENTIX_SERVER)" >&2
        exit 2
fi
if ! $deps_only && [ ! -x "$server" ]; then
        echo "$server: not an executable" >&2
        exit 2
fi
$deps_only || server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "node and npm are needed for the socket.io-client interop tests (scripts/deps.sh installs them)"
        exit 77
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
        echo "node $(node --version) is too old: the tests use node:test (Node 18 or later)" >&2
        exit 1
fi

cd "$here"
stamp=node_modules/.agentix-package-lock.json
if [ ! -d node_modules ] || ! cmp -s package-lock.json "$stamp"; then
        npm ci --no-audit --no-fund --loglevel=error
        cp package-lock.json "$stamp"
fi
if $deps_only; then
        exit 0
fi

if [ $# -eq 0 ]; then
        set -- test/*.test.js
fi
export AGENTIX_SERVER=$server
exec node --test --test-reporter=spec "$@"
