// SPDX-License-Identifier: MIT
// agentix as a Model Context Protocol server: tools that create, use and delete sandboxes, for
// any MCP client. createMcpServer() builds one server (the SDK's McpServer) over shared state
// (McpState: the agentd connection, the runtimes connected to), so that the Streamable HTTP
// transport can make one per request while sandboxes outlive requests. The command is
// mcp-main.ts (agentix-mcp).

import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

import { AgentdError, AgentixError, ConnectionLost, RemoteError, SandboxGone, ServerUnreachable, SessionNotFound } from "./errors.js";
import { SandboxManager, type SandboxConfig, type SandboxInfo } from "./manager.js";
import { RuntimeClient, type FileResult, type ShellSession } from "./runtime.js";

/** Bytes of a command's output execute returns; the rest is dropped and `truncated` is true. */
export const DEFAULT_MAX_OUTPUT = 256 * 1024;
/** Runtime connections kept open at once; the least recently used one goes first. */
const MAX_RUNTIMES = 64;

export interface McpOptions {
  /** Attach to this one sandbox of agentd's instead of creating sandboxes… */
  sandbox?: string;
  /** …or to this runtime (URL and token, as GetRuntimeAccess gives them). */
  url?: string;
  token?: string;
  /** An https:// url: the CA (PEM) it is verified with (default: AGENTIX_CA_FILE's). */
  ca?: string;
  /** Talk to agentd on the session bus (a per-user agentd). */
  sessionBus?: boolean;
  /** execute's output limit in bytes (default DEFAULT_MAX_OUTPUT). */
  maxOutput?: number;
}

/** What every server (one per HTTP request, or the one on stdio) shares. */
export class McpState {
  readonly created = new Set<string>();
  private readonly runtimes = new Map<string, Promise<RuntimeClient>>();
  /** The bash tool's persistent session in each sandbox. */
  private readonly shells = new Map<string, Promise<ShellSession>>();
  private managerInstance?: SandboxManager;

  constructor(readonly options: McpOptions) {}

  get attached(): boolean {
    return Boolean(this.options.sandbox || this.options.url);
  }

  manager(): SandboxManager {
    this.managerInstance ??= new SandboxManager({ bus: this.options.sessionBus ? "session" : "system" });
    return this.managerInstance;
  }

  /** The bash tool's session in a sandbox: opened on first use, and anew (restarted: true)
   * after `exit` or when asked. */
  async shell(id: string, rt: RuntimeClient, restart = false): Promise<{ session: ShellSession; fresh: boolean }> {
    let pending = this.shells.get(id);
    if (pending && restart) {
      const old = pending;
      this.shells.delete(id);
      pending = undefined;
      await old.then((s) => s.close()).catch(() => {});
    }
    if (pending) return { session: await pending, fresh: false };
    const opened = rt.openShell();
    this.shells.set(id, opened);
    opened.catch(() => this.shells.delete(id));
    return { session: await opened, fresh: true };
  }

  dropShell(id: string): void {
    this.shells.delete(id);
  }

  /** The sandbox a tool call means: its sandbox_id, or the attached one. */
  sandboxId(given: string | undefined): string {
    const attached = this.options.sandbox ?? (this.options.url ? "attached" : undefined);
    if (attached) {
      if (given && given !== attached && this.options.sandbox) {
        throw new ToolError("invalid_argument", `sandbox_id: this server is attached to sandbox ${attached}, not ${given}`);
      }
      return attached;
    }
    if (!given) throw new ToolError("invalid_argument", "sandbox_id is required (create_sandbox or list_sandboxes gives one)");
    return given;
  }

  runtime(id: string): Promise<RuntimeClient> {
    let r = this.runtimes.get(id);
    if (r) {
      this.runtimes.delete(id); // most recently used: last in the map's order
      this.runtimes.set(id, r);
    } else {
      if (this.runtimes.size >= MAX_RUNTIMES) this.forget(this.runtimes.keys().next().value!);
      r = this.options.url
        ? RuntimeClient.connect(this.options.url, this.options.token ?? "", this.options.ca ? { ca: this.options.ca } : {})
        : this.manager().connect(id);
      r.catch(() => this.runtimes.delete(id));
      this.runtimes.set(id, r);
    }
    return r;
  }

  forget(id: string): void {
    this.shells.delete(id);
    const r = this.runtimes.get(id);
    this.runtimes.delete(id);
    void r?.then((c) => c.close(), () => undefined);
  }

  /** Delete what this server created (they are bound to its bus connection anyway), close all. */
  async close(): Promise<void> {
    for (const id of this.runtimes.keys()) this.forget(id);
    if (this.managerInstance) {
      await Promise.allSettled([...this.created].map((id) => this.managerInstance!.delete(id)));
      this.managerInstance.close();
    }
  }
}

/** A failure a tool reports as an MCP tool error: its name, then what happened. */
class ToolError extends AgentixError {
  constructor(readonly code: string, message: string) {
    super(`${code}: ${message}`);
  }
}

function errorText(e: unknown): string {
  if (e instanceof AgentdError) return `${e.dbusName.split(".").pop()}: ${e.detail}`;
  if (e instanceof SandboxGone) return `NoSuchSandbox: ${e.message}`; // agentd's name for it
  if (e instanceof RemoteError) return `${e.type}: ${e.remoteMessage}`;
  if (e instanceof ToolError) return e.message;
  if (e instanceof AgentixError) return `${e.name}: ${e.message}`;
  return `Error: ${e instanceof Error ? e.message : String(e)}`;
}

/** IPython colours tracebacks with SGR sequences: not for a model. */
function stripColors(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\x1b\[[0-9;]*m/g, "");
}

function text(...parts: string[]): CallToolResult {
  return { content: parts.map((t) => ({ type: "text" as const, text: t })) };
}

function json(value: unknown): CallToolResult {
  return text(JSON.stringify(value, null, 2));
}

/** Run a tool; any failure becomes a tool error naming what failed, never a crash. A sandbox
 * whose runtime cannot be reached (deleted, say) is connected to anew next time. */
async function tool(fn: () => Promise<CallToolResult>, state?: McpState, sandboxId?: string): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (e) {
    if (state && (e instanceof ConnectionLost || e instanceof ServerUnreachable || e instanceof SandboxGone)) {
      state.forget(state.attached ? state.sandboxId(undefined) : sandboxId ?? "");
    }
    return { isError: true, content: [{ type: "text", text: errorText(e) }] };
  }
}

/** An fs:: result with an error code is a tool error: "file_not_found: …". */
function fsResult<T extends { error?: string | null; message?: string | null }>(r: T): T {
  if (r.error) throw new ToolError(r.error, r.message ?? r.error);
  return r;
}

function sandboxSummary(s: SandboxInfo) {
  return {
    id: s.id, state: s.state, image: s.image, bundle: s.bundle, backend: s.backend,
    created_at: new Date(Number(s.createdAt / 1000n)).toISOString(),
    expires_at: new Date(Number(s.expiresAt / 1000n)).toISOString(),
  };
}

/** UTF-8 text when it is text (no NUL, decodes), else base64. */
function fileContent(bytes: Uint8Array): { text: string } | { base64: string } {
  if (!bytes.includes(0)) {
    try {
      return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
    } catch {
      // not UTF-8: bytes
    }
  }
  return { base64: Buffer.from(bytes).toString("base64") };
}

const sandboxIdArg = z.string().min(1).optional()
  .describe("The sandbox (from create_sandbox or list_sandboxes); may be left out when the server is attached to one");
const absPath = (what: string) => z.string().min(1).describe(`Absolute path of the ${what} in the sandbox`);

export function createMcpServer(state: McpState): McpServer {
  const server = new McpServer({ name: "agentix", version: "0.1.0" });
  const maxOutput = state.options.maxOutput ?? DEFAULT_MAX_OUTPUT;
  /** A tool on one sandbox's runtime (connected once, kept). */
  const onSandbox = (sandboxId: string | undefined, fn: (rt: RuntimeClient) => Promise<CallToolResult>) =>
    tool(async () => fn(await state.runtime(state.sandboxId(sandboxId))), state, sandboxId);

  if (!state.attached) {
    server.registerTool("create_sandbox", {
      description: "Create an isolated sandbox (a container with its own runtime) and return its id; it is deleted when this server exits",
      inputSchema: {
        image: z.string().min(1).describe("The task image, e.g. debian:12"),
        bundle: z.string().min(1).describe("The agentix bundle image (from agentixctl build)"),
        cpus: z.number().positive().optional().describe("CPUs (agentd's default: 1)"),
        memory: z.number().int().positive().optional().describe("Memory in bytes (agentd's default: 2 GiB)"),
        pids: z.number().int().positive().optional().describe("Processes (agentd's default: 1024)"),
        ttl: z.number().int().positive().optional().describe("Seconds until agentd deletes it"),
        runtime: z.string().optional().describe("OCI runtime: runc, or runsc for gVisor"),
        network: z.string().optional().describe("isolated (the default), none, or a Docker network agentd allows"),
        egress: z.array(z.string()).optional().describe("CIDRs it may reach (and DNS); [] for no network at all"),
        env: z.record(z.string()).optional().describe("Environment variables of its commands"),
        workdir: z.string().optional().describe("Its working directory"),
      },
    }, (args) => tool(async () => {
      const config: SandboxConfig = { ...args, bindToCaller: true };
      const info = await state.manager().create(config);
      state.created.add(info.id);
      server.sendResourceListChanged();
      return json(sandboxSummary(info));
    }));

    server.registerTool("list_sandboxes", {
      description: "List your sandboxes with their state",
      inputSchema: {},
    }, () => tool(async () => json((await state.manager().list()).map(sandboxSummary))));

    server.registerTool("delete_sandbox", {
      description: "Delete a sandbox and everything in it",
      inputSchema: { sandbox_id: z.string().min(1).describe("The sandbox to delete") },
    }, ({ sandbox_id }) => tool(async () => {
      state.forget(sandbox_id);
      await state.manager().get(sandbox_id); // NoSuchSandbox for one that is not there (or not yours)
      await state.manager().delete(sandbox_id);
      state.created.delete(sandbox_id);
      server.sendResourceListChanged();
      return text(`deleted ${sandbox_id}`);
    }));

    server.registerResource("sandbox", new ResourceTemplate("agentix://sandbox/{id}", {
      list: async () => ({
        resources: (await state.manager().list()).map((s) => ({
          uri: `agentix://sandbox/${s.id}`, name: s.id, mimeType: "application/json",
          description: `${s.state}: ${s.image}`,
        })),
      }),
    }), { description: "A sandbox of yours: its state, image, bundle and times, and what it uses while it runs " +
          "(stats: CPU, memory, processes, network, block I/O)", mimeType: "application/json" },
    async (uri, { id }) => {
      const info = await state.manager().get(String(id));
      // What it uses, while it runs (a stopped sandbox uses nothing; agentd says NotRunning).
      const stats = info.state === "running" || info.state === "paused"
        ? await state.manager().stats(info.id).catch(() => undefined) : undefined;
      return {
        contents: [{ uri: uri.href, mimeType: "application/json",
                     text: JSON.stringify({ ...sandboxSummary(info), ...(stats ? { stats } : {}) }, null, 2) }],
      };
    });
  }

  server.registerTool("execute", {
    description: `Run a shell command in the sandbox; returns its output (stdout and stderr, at most ${maxOutput} bytes) and then {exit_code, truncated, timed_out}`,
    inputSchema: {
      sandbox_id: sandboxIdArg,
      command: z.string().min(1).describe("The command, run by /bin/sh -c"),
      timeout: z.number().positive().optional().describe("Seconds before it is killed (default 1800)"),
      cwd: z.string().optional().describe("Working directory"),
    },
  }, ({ sandbox_id, command, timeout, cwd }) => onSandbox(sandbox_id, async (rt) => {
    const r = await rt.exec(command, { timeout: timeout ?? 1800, cwd, max_output: maxOutput });
    return text(r.output, JSON.stringify({ exit_code: r.exit_code, truncated: r.truncated, timed_out: r.timed_out }));
  }));

  server.registerTool("bash", {
    description: "Run a command in a persistent bash session in the sandbox: the working directory, variables, " +
      "functions and background jobs stay from one call to the next (one session per sandbox). Returns the output " +
      `(stdout and stderr, at most ${maxOutput} bytes), then {exit_code, timed_out, truncated, new_session}. A command ` +
      "still running at the timeout is interrupted (Ctrl-C) and the session stays usable; `exit` ends the session " +
      "and the next call starts a new one",
    inputSchema: {
      sandbox_id: sandboxIdArg,
      command: z.string().min(1).describe("One or more lines for bash"),
      timeout: z.number().positive().optional().describe("Seconds before the command is interrupted (default 120)"),
      restart: z.boolean().optional().describe("Start a new session first (the old one and its jobs end)"),
    },
  }, ({ sandbox_id, command, timeout, restart }) => onSandbox(sandbox_id, async (rt) => {
    const id = state.sandboxId(sandbox_id);
    const run = async (again: boolean) => {
      const { session, fresh } = await state.shell(id, rt, again);
      return { r: await session.run(command, { timeout: timeout ?? 120, max_output: maxOutput }), fresh };
    };
    let result;
    try {
      result = await run(Boolean(restart));
    } catch (e) {
      // The session is gone (the runtime restarted its worker, say): one new try.
      if (!(e instanceof SessionNotFound)) throw e;
      result = await run(true);
    }
    const { r, fresh } = result;
    if (r.ended) state.dropShell(id);
    return text(r.output, JSON.stringify({ exit_code: r.exit_code, timed_out: r.timed_out, truncated: r.truncated,
                                           new_session: fresh, ...(r.ended ? { session_ended: true } : {}) }));
  }));

  server.registerTool("run_code", {
    description: "Run Python (or another language with a Jupyter kernel in the sandbox) in a stateful code context: " +
      "variables, imports and loaded data stay from one call to the next. Returns what the code printed, the value " +
      "of its last line as text, each figure or image as an image, and an exception's traceback; then " +
      "{execution_count, error, truncated}. A run still going at the timeout is interrupted and the context keeps " +
      "its state. Needs a kernel in the sandbox (a bundle with python3 and ipykernel)",
    inputSchema: {
      sandbox_id: sandboxIdArg,
      code: z.string().min(1).describe("The code to run"),
      language: z.string().min(1).optional().describe("A kernel's name or language (default python)"),
      context: z.string().min(1).optional()
        .describe("A code context's id (default: the language's default context, shared by every run_code call)"),
      timeout: z.number().positive().optional().describe("Seconds before the run is interrupted (default 300)"),
    },
  }, ({ sandbox_id, code, language, context, timeout }) => onSandbox(sandbox_id, async (rt) => {
    if (context && language) throw new ToolError("invalid_arguments", "give context or language, not both: a context has its language");
    const ex = await rt.runCode(code, { context, language, timeout: timeout ?? 300, max_output: maxOutput });
    const content: CallToolResult["content"] = [];
    let out = "";
    const flush = () => {
      if (out) content.push({ type: "text", text: out });
      out = "";
    };
    let count: number | null = null;
    for (const item of ex.items) {
      if (item.type === "stdout" || item.type === "stderr") {
        out += item.text;
      } else if (item.type === "error") {
        out += `${stripColors(item.traceback) || `${item.name}: ${item.value}`}\n`;
      } else if (item.type === "execution_count") {
        count = item.execution_count;
      } else if (item.type === "result") {
        flush();
        const images = Object.entries(item.data).filter(([m, v]) => m.startsWith("image/") && v instanceof Uint8Array);
        for (const [mimeType, bytes] of images) {
          content.push({ type: "image", data: Buffer.from(bytes as Uint8Array).toString("base64"), mimeType });
        }
        const plain = item.data["text/plain"];
        // A figure's text ("<Figure size 640x480 with 1 Axes>") says nothing its image does not.
        if (typeof plain === "string" && (item.is_main_result || images.length === 0)) content.push({ type: "text", text: plain });
      }
    }
    flush();
    content.push({ type: "text", text: JSON.stringify({ execution_count: count, error: ex.error?.name ?? null, truncated: ex.truncated }) });
    return { content };
  }));

  server.registerTool("read_file", {
    description: "Read a text file as numbered lines (cat -n style), from line offset, at most limit lines",
    inputSchema: {
      sandbox_id: sandboxIdArg, path: absPath("file"),
      offset: z.number().int().min(0).optional().describe("First line, counted from 0 (default 0)"),
      limit: z.number().int().positive().optional().describe("Lines to read (default 2000)"),
    },
  }, ({ sandbox_id, path, offset, limit }) => onSandbox(sandbox_id, async (rt) => {
    const r = fsResult(await rt.fs<{ content?: string; error?: string | null; message?: string | null }>(
      "read", [path], { offset: offset ?? 0, limit: limit ?? 2000 }));
    return text(r.content || r.message || "(empty file)");
  }));

  server.registerTool("write_file", {
    description: "Write a text file (made with its parent directories, replaced if it exists)",
    inputSchema: { sandbox_id: sandboxIdArg, path: absPath("file"), content: z.string().describe("The whole new content") },
  }, ({ sandbox_id, path, content }) => onSandbox(sandbox_id, async (rt) => {
    fsResult(await rt.fs<{ error?: string | null; message?: string | null }>("write", [path, content], { overwrite: true }));
    return text(`wrote ${path}`);
  }));

  server.registerTool("edit_file", {
    description: "Replace old_string by new_string in a file; old_string must occur exactly once unless replace_all",
    inputSchema: {
      sandbox_id: sandboxIdArg, path: absPath("file"),
      old_string: z.string().min(1).describe("The text to replace"),
      new_string: z.string().describe("What replaces it"),
      replace_all: z.boolean().optional().describe("Replace every occurrence (default false)"),
    },
  }, ({ sandbox_id, path, old_string, new_string, replace_all }) => onSandbox(sandbox_id, async (rt) => {
    const r = fsResult(await rt.fs<{ occurrences?: number; error?: string | null; message?: string | null }>(
      "edit", [path, old_string, new_string], { replace_all: replace_all ?? false }));
    return text(`replaced ${r.occurrences ?? 0} occurrence(s) in ${path}`);
  }));

  server.registerTool("ls", {
    description: "List a directory: each entry's path, whether it is a directory, size and modification time",
    inputSchema: { sandbox_id: sandboxIdArg, path: absPath("directory") },
  }, ({ sandbox_id, path }) => onSandbox(sandbox_id, async (rt) => {
    const r = fsResult(await rt.fs<{ entries?: unknown[]; error?: string | null; message?: string | null }>("ls", [path]));
    return json(r.entries ?? []);
  }));

  server.registerTool("grep", {
    description: "Search files for a literal string: each match's path, line number and line",
    inputSchema: {
      sandbox_id: sandboxIdArg,
      pattern: z.string().min(1).describe("The literal text to find"),
      path: z.string().optional().describe("Directory or file to search (default /)"),
      glob: z.string().optional().describe("Only files whose name matches this pattern, e.g. *.py"),
    },
  }, ({ sandbox_id, pattern, path, glob }) => onSandbox(sandbox_id, async (rt) => {
    const r = fsResult(await rt.fs<{ matches?: unknown[]; error?: string | null; message?: string | null }>(
      "grep", [pattern], { path: path ?? "/", glob }));
    return json(r.matches ?? []);
  }));

  server.registerTool("glob", {
    description: "Find files and directories whose path matches a pattern (*, **, ?, [..], {a,b})",
    inputSchema: {
      sandbox_id: sandboxIdArg,
      pattern: z.string().min(1).describe("The pattern, relative to path, e.g. **/*.py"),
      path: z.string().optional().describe("Where to look (default /)"),
    },
  }, ({ sandbox_id, pattern, path }) => onSandbox(sandbox_id, async (rt) => {
    const r = fsResult(await rt.fs<{ matches?: unknown[]; truncated?: boolean; error?: string | null; message?: string | null }>(
      "glob", [pattern], { path: path ?? "/" }));
    return json({ matches: r.matches ?? [], truncated: Boolean(r.truncated) });
  }));

  server.registerTool("upload_files", {
    description: "Write files (text, or bytes as base64), each made atomically with its parents; one result per file",
    inputSchema: {
      sandbox_id: sandboxIdArg,
      files: z.array(z.object({
        path: z.string().min(1).describe("Absolute path"),
        text: z.string().optional().describe("Its content as text…"),
        base64: z.string().optional().describe("…or as base64 bytes"),
      })).min(1).max(1000),
    },
  }, ({ sandbox_id, files }) => onSandbox(sandbox_id, async (rt) => {
    const list: [string, Uint8Array][] = files.map((f, i) => {
      if ((f.text === undefined) === (f.base64 === undefined)) {
        throw new ToolError("invalid_argument", `files[${i}]: give either text or base64`);
      }
      return [f.path, f.text !== undefined ? new TextEncoder().encode(f.text) : new Uint8Array(Buffer.from(f.base64!, "base64"))];
    });
    const results: FileResult[] = await rt.uploadFiles(list);
    return json(results.map((r, i) => ({ path: list[i][0], error: r.error })));
  }));

  server.registerTool("download_files", {
    description: "Read whole files: each as text, or as base64 when it is not UTF-8 text, or its error",
    inputSchema: { sandbox_id: sandboxIdArg, paths: z.array(z.string().min(1)).min(1).max(1000).describe("Absolute paths") },
  }, ({ sandbox_id, paths }) => onSandbox(sandbox_id, async (rt) => {
    const results = await rt.downloadFiles(paths);
    return json(results.map((r, i) => r.error
      ? { path: paths[i], error: r.error }
      : { path: paths[i], ...fileContent(r.content ?? new Uint8Array()) }));
  }));

  return server;
}
