// SPDX-License-Identifier: MIT
// agentix-mcp against a real agentd on a private bus and a real dockerd (tests/agentd/
// with_agentd.py sets DBUS_SYSTEM_BUS_ADDRESS, AGENTIX_TEST_IMAGE and AGENTIX_TEST_BUNDLE),
// driven by the MCP SDK's own Client over stdio and over Streamable HTTP.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, expect, it } from "vitest";

import { SandboxGone, SandboxManager } from "../src/index.js";
import { DEFAULT_MAX_OUTPUT } from "../src/mcp.js";
import { TOKEN, startServer } from "./server.js";

const image = process.env.AGENTIX_TEST_IMAGE!;
const bundle = process.env.AGENTIX_TEST_BUNDLE!;
const MAIN = fileURLToPath(new URL("../dist/mcp-main.js", import.meta.url));
const TOOLS = ["bash", "create_sandbox", "delete_sandbox", "download_files", "edit_file", "execute", "glob", "grep",
               "list_sandboxes", "ls", "read_file", "run_code", "upload_files", "write_file"];
const manager = new SandboxManager();

function env(extra: Record<string, string> = {}): Record<string, string> {
  return { ...(process.env as Record<string, string>), ...extra };
}

async function stdioClient(args: string[] = []): Promise<{ client: Client; transport: StdioClientTransport }> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [MAIN, ...args], env: env(), stderr: "inherit" });
  const client = new Client({ name: "agentix-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

function textOf(r: CallToolResult): string {
  return r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

async function ok(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const r = await call(client, name, args);
  if (r.isError) throw new Error(`${name} failed: ${textOf(r)}`);
  return textOf(r);
}

let stdio: { client: Client; transport: StdioClientTransport };
let sandbox = "";

beforeAll(async () => {
  stdio = await stdioClient();
  sandbox = JSON.parse(await ok(stdio.client, "create_sandbox", { image, bundle, memory: 512 * 1024 * 1024 })).id;
}, 120_000);

afterAll(async () => {
  await stdio.client.close();
  manager.close();
});

it("lists its tools, each with an object schema and a description", async () => {
  const { tools } = await stdio.client.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
  for (const t of tools) {
    expect(t.inputSchema.type).toBe("object");
    expect(t.description?.length).toBeGreaterThan(10);
  }
  const exec = tools.find((t) => t.name === "execute")!;
  expect(exec.inputSchema.required).toEqual(["command"]);
});

it("writes, runs, greps, edits, reads, lists and downloads in a sandbox it created", async () => {
  await flow(stdio.client, sandbox);
});

/** What an agent does in a sandbox, each step checked. */
async function flow(c: Client, sandbox: string): Promise<void> {
  expect(await ok(c, "write_file", { sandbox_id: sandbox, path: "/work/app.py", content: "print('hello from mcp')\n" }))
    .toBe("wrote /work/app.py");
  const [output, meta] = (await call(c, "execute", { sandbox_id: sandbox, command: "python3 /work/app.py" })).content
    .map((x) => (x as { text: string }).text);
  expect(output).toBe("hello from mcp\n");
  expect(JSON.parse(meta)).toEqual({ exit_code: 0, truncated: false, timed_out: false });
  expect(JSON.parse(await ok(c, "grep", { sandbox_id: sandbox, pattern: "hello", path: "/work" })))
    .toEqual([{ path: "/work/app.py", line: 1, text: "print('hello from mcp')" }]);
  expect(await ok(c, "edit_file", { sandbox_id: sandbox, path: "/work/app.py", old_string: "hello", new_string: "greetings" }))
    .toBe("replaced 1 occurrence(s) in /work/app.py");
  expect(await ok(c, "read_file", { sandbox_id: sandbox, path: "/work/app.py" })).toContain("1\tprint('greetings from mcp')");
  const ls = JSON.parse(await ok(c, "ls", { sandbox_id: sandbox, path: "/work" }));
  expect(ls.map((e: { path: string }) => e.path)).toContain("/work/app.py");
  const glob = JSON.parse(await ok(c, "glob", { sandbox_id: sandbox, pattern: "**/*.py", path: "/work" }));
  expect(glob.matches.map((m: { path: string }) => m.path)).toContain("/work/app.py");
  const bytes = Buffer.from([0, 1, 2, 255]).toString("base64");
  expect(JSON.parse(await ok(c, "upload_files", { sandbox_id: sandbox, files: [
    { path: "/work/data.bin", base64: bytes }, { path: "/work/notes.txt", text: "notes\n" }] })))
    .toEqual([{ path: "/work/data.bin", error: null }, { path: "/work/notes.txt", error: null }]);
  expect(JSON.parse(await ok(c, "download_files", { sandbox_id: sandbox, paths: ["/work/app.py", "/work/data.bin", "/work/nope"] })))
    .toEqual([{ path: "/work/app.py", text: "print('greetings from mcp')\n" }, { path: "/work/data.bin", base64: bytes },
              { path: "/work/nope", error: "file_not_found" }]);
}

it("keeps one bash session per sandbox: state between calls, a timeout, exit and a new session", async () => {
  const first = await call(stdio.client, "bash", { sandbox_id: sandbox, command: "cd /tmp && export AGX_MCP=5" });
  expect(first.isError).toBeFalsy();
  expect(JSON.parse(textOf(first).split("\n").pop()!)).toMatchObject({ exit_code: 0 });
  const again = await ok(stdio.client, "bash", { sandbox_id: sandbox, command: "pwd; echo $AGX_MCP" });
  expect(again.startsWith("/tmp\n5\n")).toBe(true);
  expect(again).toContain('"new_session":false');
  const hung = await ok(stdio.client, "bash", { sandbox_id: sandbox, command: "sleep 60", timeout: 0.5 });
  expect(hung).toContain('"timed_out":true');
  expect(await ok(stdio.client, "bash", { sandbox_id: sandbox, command: "echo $AGX_MCP" })).toMatch(/^5\n/);
  expect(await ok(stdio.client, "bash", { sandbox_id: sandbox, command: "exit 2" })).toContain('"session_ended":true');
  const fresh = await ok(stdio.client, "bash", { sandbox_id: sandbox, command: "pwd; echo \"[$AGX_MCP]\"" });
  expect(fresh).toContain('"new_session":true');
  expect(fresh).toContain("[]");
}, 60_000);

it("lists its sandboxes as resources and as a tool", async () => {
  const { resources } = await stdio.client.listResources();
  expect(resources.map((r) => r.uri)).toContain(`agentix://sandbox/${sandbox}`);
  const read = await stdio.client.readResource({ uri: `agentix://sandbox/${sandbox}` });
  const resource = JSON.parse((read.contents[0] as { text: string }).text);
  expect(resource).toMatchObject({ id: sandbox, state: "running", image });
  expect(resource.stats.memory_current).toBeGreaterThan(0); // what it uses, while it runs
  expect(resource.stats.pids_current).toBeGreaterThanOrEqual(1);
  const list = JSON.parse(await ok(stdio.client, "list_sandboxes", {}));
  expect(list.map((s: { id: string }) => s.id)).toContain(sandbox);
});

it("answers bad calls with tool errors that name what is wrong, and keeps serving", async () => {
  const c = stdio.client;
  const unknown = await call(c, "no_such_tool", {}).catch((e: Error) => ({ isError: true, content: [{ type: "text", text: e.message }] }));
  expect(unknown.isError).toBe(true);
  expect(textOf(unknown as CallToolResult)).toContain("no_such_tool");
  const wrongType = await call(c, "execute", { sandbox_id: sandbox, command: 5 }).catch((e: Error) =>
    ({ isError: true, content: [{ type: "text", text: e.message }] }));
  expect(wrongType.isError).toBe(true);
  expect(textOf(wrongType as CallToolResult)).toContain("command");
  const noId = await call(c, "execute", { command: "true" });
  expect(noId.isError && textOf(noId)).toContain("sandbox_id is required");
  const missing = await call(c, "read_file", { sandbox_id: sandbox, path: "/work/missing.txt" });
  expect(missing.isError && textOf(missing)).toMatch(/^file_not_found: /);
  const gone = await call(c, "execute", { sandbox_id: "a000000000000000", command: "true" });
  expect(gone.isError && textOf(gone)).toMatch(/^NoSuchSandbox: /);
  const badImage = await call(c, "create_sandbox", { image: "agentix-test/no-such-image:1", bundle });
  expect(badImage.isError && textOf(badImage)).toMatch(/^ImageNotFound: /);
  expect(await ok(c, "execute", { sandbox_id: sandbox, command: "echo still here" })).toContain("still here");
});

it("truncates a 10 MiB output at the documented size", async () => {
  const r = await call(stdio.client, "execute", { sandbox_id: sandbox, command: "head -c 10485760 /dev/zero | tr '\\0' x" });
  const [output, meta] = r.content.map((x) => (x as { text: string }).text);
  expect(output.length).toBe(DEFAULT_MAX_OUTPUT);
  expect(JSON.parse(meta)).toMatchObject({ exit_code: 0, truncated: true });
}, 60_000);

it("serves 20 concurrent tool calls on one sandbox", async () => {
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    call(stdio.client, "execute", { sandbox_id: sandbox, command: `echo call ${i}` })));
  results.forEach((r, i) => expect((r.content[0] as { text: string }).text).toBe(`call ${i}\n`));
}, 60_000);

it("deletes a sandbox with delete_sandbox", async () => {
  const id = JSON.parse(await ok(stdio.client, "create_sandbox", { image, bundle })).id;
  expect(await ok(stdio.client, "delete_sandbox", { sandbox_id: id })).toBe(`deleted ${id}`);
  await expect(manager.get(id)).rejects.toBeInstanceOf(SandboxGone);
  const again = await call(stdio.client, "delete_sandbox", { sandbox_id: id });
  expect(again.isError && textOf(again)).toMatch(/^NoSuchSandbox: /);
}, 60_000);

it("leaves no sandbox behind when it is killed mid-session", async () => {
  const { client, transport } = await stdioClient();
  const id = JSON.parse(await ok(client, "create_sandbox", { image, bundle })).id;
  expect((await manager.get(id)).state).toBe("running");
  process.kill(transport.pid!, "SIGKILL");
  // Bound to the server's bus connection: agentd deletes it when the connection goes.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const gone = await manager.get(id).then(() => false, (e) => e instanceof SandboxGone);
    if (gone) break;
    if (Date.now() > deadline) throw new Error(`sandbox ${id} outlived its killed server`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await client.close().catch(() => undefined);
}, 60_000);

it("attaches to one sandbox with --sandbox: only the sandbox's tools", async () => {
  const { client } = await stdioClient([`--sandbox=${sandbox}`]);
  try {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain("create_sandbox");
    expect(await ok(client, "execute", { command: "echo attached" })).toContain("attached");
    const other = await call(client, "execute", { sandbox_id: "a000000000000000", command: "true" });
    expect(other.isError && textOf(other)).toContain(`attached to sandbox ${sandbox}`);
  } finally {
    await client.close();
  }
});

it("runs code in a stateful context with run_code, figures as images (attached to a runtime with --url)", async () => {
  // A runtime on this host: its kernels are the host's (Debian's python3-ipykernel); the same
  // code:: runs in task containers in tests/agentd/test_code.py.
  const runtime = await startServer();
  const { client } = await stdioClient([`--url=${runtime.url}`, `--token=${TOKEN}`]);
  try {
    expect((await client.listTools()).tools.map((t) => t.name)).toContain("run_code");
    expect(await ok(client, "run_code", { code: "x = 6\nprint('hi')\nx * 7" })).toBe('hi\n\n42\n{"execution_count":1,"error":null,"truncated":false}');
    const figure = await call(client, "run_code", {
      code: "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n" +
            "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=50)\nplt.plot([1, 4])\nplt.show()",
    });
    const images = figure.content.filter((c) => c.type === "image");
    expect(images.map((c) => c.type === "image" && c.mimeType)).toEqual(["image/png"]);
    const png = Buffer.from(images[0].type === "image" ? images[0].data : "", "base64");
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    const failed = await ok(client, "run_code", { code: "x / 0" });
    expect(failed).toContain("ZeroDivisionError");
    expect(failed).not.toContain("\x1b[");
    expect(failed).toContain('"error":"ZeroDivisionError"');
    const slow = await ok(client, "run_code", { code: "while True: pass", timeout: 1 });
    expect(slow).toContain("TimeoutError");
    expect(await ok(client, "run_code", { code: "x" })).toContain("6\n");
    const bad = await call(client, "run_code", { code: "1", context: "no-such-context" });
    expect(bad.isError && textOf(bad)).toContain("ContextNotFound");
  } finally {
    await client.close();
    await runtime.stop();
  }
}, 120_000);

it("serves Streamable HTTP behind a bearer token", async () => {
  const token = "test-token-0123456789";
  const child: ChildProcess = spawn(process.execPath, [MAIN, "--http=0"], { env: env({ AGENTIX_MCP_TOKEN: token }),
                                                                            stdio: ["ignore", "ignore", "pipe"] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let err = "";
      child.stderr!.on("data", (d) => {
        err += d;
        const m = /(http:\/\/\S+\/mcp)/.exec(err);
        if (m) resolve(m[1]);
      });
      child.on("exit", (code) => reject(new Error(`agentix-mcp exited with ${code}: ${err}`)));
    });
    expect((await fetch(url, { method: "POST", body: "{}" })).status).toBe(401);
    const client = new Client({ name: "agentix-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    const id = JSON.parse(await ok(client, "create_sandbox", { image, bundle })).id;
    await flow(client, id);
    expect(await ok(client, "delete_sandbox", { sandbox_id: id })).toBe(`deleted ${id}`);
    await client.close();
  } finally {
    child.kill("SIGTERM");
  }
}, 120_000);
