#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// agentix-mcp: the MCP server (mcp.ts) on standard input and output, or on Streamable HTTP.

import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";

import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

import { DEFAULT_MAX_OUTPUT, McpState, createMcpServer } from "./mcp.js";

const HELP = `agentix-mcp [OPTIONS]

A Model Context Protocol server for agentix sandboxes: tools to create, use and delete them
through agentd. Sandboxes it creates are yours and go when it exits.

  -h --help              Show this help
     --http=PORT         Serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio; every
                         request carries "Authorization: Bearer TOKEN" ($AGENTIX_MCP_TOKEN, or
                         one made up and printed on standard error)
     --host=ADDRESS      The address --http listens on (default 127.0.0.1)
     --sandbox=ID        Attach to this sandbox of agentd's: no create, list or delete tools
     --url=URL           Attach to the runtime at URL instead (with --token)
     --token=TOKEN       The runtime's token, for --url
     --ca-file=FILE      An https:// --url: the CA its certificate must chain to
                         (default $AGENTIX_CA_FILE; through agentd: agentd's runtime CA)
     --user             Talk to agentd on the session bus (a per-user agentd)
     --max-output=BYTES  Output execute returns at most (default ${DEFAULT_MAX_OUTPUT})
`;

function usage(message: string): never {
  process.stderr.write(`agentix-mcp: ${message} (see agentix-mcp --help)\n`);
  process.exit(64);
}

function parse() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        help: { type: "boolean", short: "h" }, http: { type: "string" }, host: { type: "string" },
        sandbox: { type: "string" }, url: { type: "string" }, token: { type: "string" }, "ca-file": { type: "string" },
        user: { type: "boolean" }, "max-output": { type: "string" },
      },
      strict: true, allowPositionals: false,
    }));
  } catch (e) {
    usage((e as Error).message);
  }
  if (values.help) {
    process.stdout.write(HELP);
    process.exit(0);
  }
  const port = values.http === undefined ? undefined : Number(values.http);
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port < 65536)) usage(`invalid --http '${values.http}': expected a port`);
  if (values.sandbox && values.url) usage("--sandbox and --url exclude each other");
  if (values.url && values.token === undefined) usage("--url needs --token");
  const maxOutput = values["max-output"] === undefined ? undefined : Number(values["max-output"]);
  if (maxOutput !== undefined && !(Number.isInteger(maxOutput) && maxOutput > 0)) usage(`invalid --max-output '${values["max-output"]}'`);
  let ca: string | undefined;
  if (values["ca-file"] !== undefined) {
    try {
      ca = readFileSync(values["ca-file"], "utf8");
    } catch (e) {
      usage(`cannot read --ca-file: ${(e as Error).message}`);
    }
  }
  return { port, host: values.host ?? "127.0.0.1", options: {
    sandbox: values.sandbox, url: values.url, token: values.token, ca, sessionBus: values.user, maxOutput } };
}

function authorized(req: IncomingMessage, token: string): boolean {
  const want = new TextEncoder().encode(`Bearer ${token}`);
  const got = new TextEncoder().encode(req.headers.authorization ?? "");
  return got.length === want.length && timingSafeEqual(got, want);
}

async function serveHttp(state: McpState, host: string, port: number): Promise<void> {
  const token = process.env.AGENTIX_MCP_TOKEN || randomBytes(24).toString("hex");
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (new URL(req.url ?? "/", "http://x").pathname !== "/mcp") {
      res.writeHead(404).end("agentix-mcp serves /mcp\n");
      return;
    }
    if (!authorized(req, token)) {
      res.writeHead(401, { "WWW-Authenticate": "Bearer" }).end("a bearer token is required\n");
      return;
    }
    // Stateless: a server and transport per request over the shared state (sandboxes, runtimes).
    const mcp = createMcpServer(state);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void mcp.close();
    });
    try {
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500).end(`${(e as Error).message}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => server.listen(port, host, resolve).once("error", reject));
  const address = server.address();
  const bound = typeof address === "object" && address ? address.port : port;
  process.stderr.write(`agentix-mcp: http://${host}:${bound}/mcp\n`);
  if (!process.env.AGENTIX_MCP_TOKEN) process.stderr.write(`agentix-mcp: Authorization: Bearer ${token}\n`);
}

async function main(): Promise<void> {
  const { port, host, options } = parse();
  const state = new McpState(options);
  const stop = async () => {
    await state.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  if (port !== undefined) {
    await serveHttp(state, host, port);
    return;
  }
  const transport = new StdioServerTransport();
  transport.onclose = () => void stop();
  process.stdin.on("end", () => void stop());
  await createMcpServer(state).connect(transport);
}

main().catch((e) => {
  process.stderr.write(`agentix-mcp: ${(e as Error).message}\n`);
  process.exit(1);
});
