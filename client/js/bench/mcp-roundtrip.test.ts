// SPDX-License-Identifier: MIT
// The cost of MCP: a tool call's round trip through agentix-mcp on stdio (the MCP SDK's Client,
// agentix-mcp attached with --url to a real agentix-server) against the same operation through
// @agentix/client's RuntimeClient directly, on the same runtime, alternating blocks of calls.
// Run by bench/js/mcp.sh (AGENTIX_SERVER: the release agentix-server); not part of the tests.
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { expect, it } from "vitest";

import { RuntimeClient } from "../src/index.js";
import { TOKEN, startServer } from "../test/server.js";

const MAIN = fileURLToPath(new URL("../dist/mcp-main.js", import.meta.url));
const CALLS = Number(process.env.MCP_BENCH_CALLS ?? 400);
const BLOCK = 50;

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
}

it("times execute `true` and read_file through MCP stdio and directly", async () => {
  const server = await startServer();
  const direct = await RuntimeClient.connect(server.url, TOKEN);
  const transport = new StdioClientTransport({ command: process.execPath, args: [MAIN, `--url=${server.url}`, `--token=${TOKEN}`],
                                               env: process.env as Record<string, string> });
  const mcp = new Client({ name: "agentix-bench", version: "1.0.0" });
  await mcp.connect(transport);
  const file = `/tmp/agentix-mcp-bench-${process.pid}.txt`;
  await direct.fs("write", [file, Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n") + "\n"], { overwrite: true });
  const ops = {
    "execute true": {
      direct: async () => expect((await direct.exec("true")).exit_code).toBe(0),
      mcp: async () => expect(((await mcp.callTool({ name: "execute", arguments: { command: "true" } })) as CallToolResult).isError).toBeFalsy(),
    },
    "read_file (100 lines)": {
      direct: async () => expect((await direct.fs<{ content: string }>("read", [file], { offset: 0, limit: 2000 })).content).toContain("line 99"),
      mcp: async () => expect(JSON.stringify(await mcp.callTool({ name: "read_file", arguments: { path: file } }))).toContain("line 99"),
    },
  };
  const rows: string[] = [];
  for (const [name, op] of Object.entries(ops)) {
    const t = { direct: [] as number[], mcp: [] as number[] };
    for (let i = 0; i < 5; i++) { await op.direct(); await op.mcp(); } // warm up both
    for (let done = 0; done < CALLS; done += BLOCK) {
      for (const way of ["direct", "mcp"] as const) {
        for (let i = 0; i < BLOCK; i++) {
          const t0 = performance.now();
          await op[way]();
          t[way].push(performance.now() - t0);
        }
      }
    }
    const d50 = percentile(t.direct, 50), m50 = percentile(t.mcp, 50);
    rows.push(`${name.padEnd(24)} direct p50 ${d50.toFixed(3)} ms p99 ${percentile(t.direct, 99).toFixed(3)} ms   ` +
              `MCP stdio p50 ${m50.toFixed(3)} ms p99 ${percentile(t.mcp, 99).toFixed(3)} ms   ${(m50 / d50).toFixed(2)}x`);
  }
  console.log(`MCP round trips, ${CALLS} calls each way:\n${rows.join("\n")}`);
  await direct.fs("write", [file, ""], { overwrite: true });
  await mcp.close();
  direct.close();
  await server.stop();
}, 600_000);
