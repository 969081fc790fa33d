#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# client/js/run-tests.sh [TEST_FILE…] — install the pinned packages (package-lock.json) when
# node_modules is missing or stale, build the package (tsc), then run vitest. AGENTIX_SERVER
# names the agentix-server binary. Exits 77 (skip) without Node.js.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "no node/npm: skipped"
        exit 77
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
npx tsc -p tsconfig.json
exec npx vitest run "$@"
