#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/mcp/test-inspector.sh — the MCP Inspector's command line (npm
# @modelcontextprotocol/inspector, pinned here; its standalone inspector-cli package does not
# run outside the inspector's own tree) lists agentix-mcp's tools and resource templates, as the
# README shows a user; and agentix-mcp --help lists what agentix-mcp(1) does. Builds client/js
# first. Exits 77 (skip) without Node.js.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
js=$here/../../client/js
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "no node/npm: skipped"
        exit 77
fi
for dir in "$js" "$here"; do
        if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
                (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
        fi
done
(cd "$js" && npx tsc -p tsconfig.json)
/usr/bin/python3 "$here/../check-help-man.py" "$js/dist/mcp-main.js" "$here/../../man/agentix-mcp.1"
inspect() { (cd "$here" && npx mcp-inspector --cli node "$js/dist/mcp-main.js" "$@"); }
tools=$(inspect --method tools/list)
/usr/bin/python3 - "$tools" <<'PY'
import json, sys
tools = {t["name"]: t for t in json.loads(sys.argv[1])["tools"]}
want = {"create_sandbox", "list_sandboxes", "delete_sandbox", "execute", "bash", "run_code", "read_file", "write_file",
        "edit_file", "ls", "grep", "glob", "upload_files", "download_files"}
assert set(tools) == want, sorted(tools)
for name, t in tools.items():
    assert t["inputSchema"]["type"] == "object" and t["description"], name
assert tools["execute"]["inputSchema"]["required"] == ["command"], tools["execute"]["inputSchema"]
print(f"the Inspector lists {len(tools)} tools, each with a schema and a description")
PY
templates=$(inspect --method resources/templates/list)
echo "$templates" | grep -q '"uriTemplate": "agentix://sandbox/{id}"'
echo "and the resource template agentix://sandbox/{id}"
