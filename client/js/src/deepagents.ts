// SPDX-License-Identifier: MIT
// AgentixSandbox: an agentix sandbox as a deepagents sandbox backend (import
// "@agentix/client/deepagents"; deepagents is a peer dependency).
//
// deepagents' BaseSandbox builds ls, read, grep and glob from shell commands (find, awk, grep)
// run through execute(), so the task image needs those tools and every call starts a shell.
// Here they are served by the runtime's fs module instead — no shell, no GNU tools, no python3 in
// the image — with the results and error strings BaseSandbox gives. write and edit use fs::write
// and fs::edit (the file never crosses the wire for an edit).

import { BaseSandbox, applyGrepMaxCount } from "deepagents";
import type {
  EditResult, ExecuteResponse, FileDownloadResponse, FileInfo, FileOperationError, FileUploadResponse, GlobResult,
  GrepMatch, GrepResult, LsResult, ReadResult, WriteResult,
} from "deepagents";

import { RuntimeClient, type FileResult } from "./runtime.js";
import { SandboxManager, type SandboxConfig } from "./manager.js";

export interface AgentixSandboxOptions extends Partial<SandboxConfig> {
  /** Attach to a running runtime: its URL and token (as GetRuntimeAccess gives them)… */
  url?: string;
  token?: string;
  /** …or create one through agentd from image and bundle (the manager defaults to the system bus). */
  manager?: SandboxManager;
  /** Files written before the sandbox is handed out. */
  initialFiles?: Record<string, string | Uint8Array>;
  /** Seconds a command may run when execute() names no timeout (default 1800). */
  defaultTimeout?: number;
}

const FILE_ERRORS = new Set(["file_not_found", "permission_denied", "is_directory", "invalid_path"]);
function fileError(code: unknown): FileOperationError | null {
  if (code === null || code === undefined) return null;
  if (FILE_ERRORS.has(code as string)) return code as FileOperationError;
  if (code === "not_a_file") return "is_directory";
  return "file_not_found";
}

// deepagents' own (not exported) MIME table: what is not text is read and written as bytes.
const MIME_TYPES: Record<string, string> = {
  ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
  ".svg": "image/svg+xml", ".heic": "image/heic", ".heif": "image/heif", ".mp3": "audio/mpeg", ".wav": "audio/wav",
  ".aiff": "audio/aiff", ".aac": "audio/aac", ".ogg": "audio/ogg", ".flac": "audio/flac", ".mp4": "video/mp4",
  ".webm": "video/webm", ".mpeg": "video/mpeg", ".mov": "video/quicktime", ".avi": "video/x-msvideo",
  ".flv": "video/x-flv", ".mpg": "video/mpeg", ".wmv": "video/x-ms-wmv", ".3gpp": "video/3gpp",
  ".pdf": "application/pdf", ".ppt": "application/vnd.ms-powerpoint",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation", ".txt": "text/plain",
  ".md": "text/markdown", ".markdown": "text/markdown", ".html": "text/html", ".htm": "text/html", ".css": "text/css",
  ".csv": "text/csv", ".xml": "text/xml", ".json": "application/json", ".js": "application/javascript",
  ".mjs": "application/javascript", ".cjs": "application/javascript", ".ts": "text/plain", ".tsx": "text/plain",
};
function mimeType(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  const dot = base.lastIndexOf(".");
  return (dot > 0 ? MIME_TYPES[base.slice(dot).toLowerCase()] : undefined) ?? "text/plain";
}
function isText(path: string): boolean {
  const m = mimeType(path);
  return m.startsWith("text/") || m === "application/json" || m === "application/javascript" || m === "image/svg+xml";
}

/** deepagents' glob: `*` and `?` stop at `/`, `**` crosses it, `[…]` classes. */
function globRegex(pattern: string): RegExp {
  let re = "^";
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i];
    if (c === "*" && pattern[i + 1] === "*") {
      i += 2;
      if (pattern[i] === "/") {
        re += "(.*/)?";
        i++;
      } else re += ".*";
    } else if (c === "*") {
      re += "[^/]*";
      i++;
    } else if (c === "?") {
      re += "[^/]";
      i++;
    } else if (c === "[") {
      let j = i + 1;
      while (j < pattern.length && pattern[j] !== "]") j++;
      re += pattern.slice(i, j + 1);
      i = j + 1;
    } else {
      re += ".+^${}()|\\".includes(c) ? `\\${c}` : c;
      i++;
    }
  }
  return new RegExp(`${re}$`);
}

// deepagents reads whole seconds (stat %T@ cut to an integer): so does this.
const iso = (t: unknown) => (typeof t === "string" ? new Date(Math.floor(Date.parse(t) / 1000) * 1000).toISOString() : undefined);

export class AgentixSandbox extends BaseSandbox {
  private runtime?: RuntimeClient;
  private sandboxId?: string;
  private manager?: SandboxManager;
  private ownManager = false;

  constructor(private readonly options: AgentixSandboxOptions) {
    super();
    if (!options.url && !(options.image && options.bundle)) {
      throw new TypeError("AgentixSandbox needs url and token (attach) or image and bundle (create through agentd)");
    }
  }

  /** Create (through agentd) or attach, then write initialFiles. */
  static async create(options: AgentixSandboxOptions): Promise<AgentixSandbox> {
    const sandbox = new AgentixSandbox(options);
    await sandbox.initialize();
    return sandbox;
  }

  /** The second step of a two-step start (create() does both). */
  async initialize(): Promise<void> {
    if (this.runtime) return;
    const o = this.options;
    try {
      if (o.url) {
        this.runtime = await RuntimeClient.connect(o.url, o.token ?? "");
      } else {
        this.manager = o.manager ?? new SandboxManager();
        this.ownManager = !o.manager;
        const { url: _u, token: _t, manager: _m, initialFiles: _f, defaultTimeout: _d, ...config } = o;
        const info = await this.manager.create(config as SandboxConfig);
        this.sandboxId = info.id;
        this.runtime = await this.manager.connect(info.id);
      }
      if (o.initialFiles) {
        const files = Object.entries(o.initialFiles).map(([p, c]) => [p, typeof c === "string" ? new TextEncoder().encode(c) : c] as [string, Uint8Array]);
        const failed = (await this.uploadFiles(files)).filter((r) => r.error);
        if (failed.length > 0) throw new Error(`initialFiles not written: ${failed.map((f) => `${f.path} (${f.error})`).join(", ")}`);
      }
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  get id(): string {
    return this.sandboxId ?? this.options.url ?? "";
  }

  get isRunning(): boolean {
    return this.runtime?.connected ?? false;
  }

  /** Disconnect; a sandbox create() made through agentd is deleted. */
  async close(): Promise<void> {
    this.runtime?.close();
    this.runtime = undefined;
    if (this.sandboxId && this.manager) await this.manager.delete(this.sandboxId).catch(() => undefined);
    this.sandboxId = undefined;
    if (this.ownManager) this.manager?.close();
    this.manager = undefined;
  }

  private rt(): RuntimeClient {
    if (!this.runtime) throw new Error("AgentixSandbox is not initialized (await create() or initialize())");
    return this.runtime;
  }

  // ---- the three calls deepagents asks every sandbox for -----------------------------------

  async execute(command: string, options: { timeout?: number } = {}): Promise<ExecuteResponse> {
    const timeout = options.timeout ?? this.options.defaultTimeout ?? 1800;
    const r = await this.rt().exec(command, { timeout: timeout > 0 ? timeout : undefined });
    const output = r.timed_out ? `${r.output}\nError: Command timed out after ${timeout} seconds.` : r.output;
    return { output, exitCode: r.exit_code, truncated: r.truncated };
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const results = await this.rt().uploadFiles(files);
    return results.map((r, i) => ({ path: files[i][0], error: fileError(r.error) }));
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const results: FileResult[] = await this.rt().downloadFiles(paths);
    return results.map((r, i) => ({ path: paths[i], content: r.error ? null : (r.content ?? new Uint8Array()), error: fileError(r.error) }));
  }

  // ---- served by fs, not by a shell --------------------------------------------------------

  async ls(path: string): Promise<LsResult> {
    const r = await this.rt().fs<{ entries?: Array<Record<string, unknown>>; error?: string | null; message?: string | null }>("ls", [path]);
    if (r.error) return r.error === "file_not_found" || r.error === "not_a_directory" ? { files: [] } : { error: r.message ?? r.error };
    return {
      files: (r.entries ?? []).map((e): FileInfo => ({
        path: e.is_dir ? `${e.path}/` : String(e.path), is_dir: Boolean(e.is_dir), size: Number(e.size), modified_at: iso(e.modified_at),
      })),
    };
  }

  async read(filePath: string, offset = 0, limit = 500): Promise<ReadResult> {
    if (!isText(filePath)) return super.read(filePath, offset, limit); // bytes through downloadFiles
    const start = Number.isFinite(offset) ? Math.max(0, Math.floor(offset)) : 0;
    const count = Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
    const mime = mimeType(filePath);
    if (count === 0) return { content: "", mimeType: mime };
    const r = await this.rt().fs<Record<string, any>>("read", [filePath], { offset: start, limit: count });
    if (r.error === "invalid_offset") return { content: "", mimeType: mime };
    if (r.error) return { error: `File '${filePath}' not found` };
    if (r.encoding === "bytes") return { content: r.data as Uint8Array, mimeType: mime };
    if (!r.content) return { content: r.message ? `${r.message}\n` : "", mimeType: mime };
    // Rows "%6d\t<text>", a line over 5000 characters continued in rows "%6d.N\t…": one row a line.
    const rows: string[] = [];
    for (const row of (r.content as string).split("\n")) {
      const m = /^\s*\d+\.\d+\t/.exec(row);
      if (m && rows.length > 0) rows[rows.length - 1] += row.slice(m[0].length);
      else rows.push(row);
    }
    const content = `${rows.join("\n")}\n`;
    if (r.truncated || typeof r.total_lines !== "number") {
      return { content, mimeType: mime, ...(r.next_offset != null ? { nextOffset: r.next_offset } : {}) };
    }
    const endLine = Math.min(start + count, r.total_lines);
    return {
      content, mimeType: mime, totalLines: r.total_lines, startLine: start + 1, endLine,
      nextOffset: endLine < r.total_lines ? endLine : undefined,
    };
  }

  async grep(pattern: string, path = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    const r = await this.rt().fs<{ matches?: GrepMatch[]; error?: string | null; message?: string | null }>(
      "grep", [pattern], { path, glob: glob ?? undefined });
    if (r.error) return r.error === "file_not_found" ? { matches: [] } : { error: r.message ?? r.error };
    const matches = (r.matches ?? []).filter((m) => isText(m.path)).map((m) => ({ path: m.path, line: m.line, text: m.text }));
    return applyGrepMaxCount({ result: { matches }, maxCount });
  }

  async glob(pattern: string, path = "/"): Promise<GlobResult> {
    // BaseSandbox lists everything below `path` (find -L) and keeps what deepagents' regex
    // matches, directories included. fs::glob lists the candidates natively: every file and
    // directory ("{*,.*}": names with and without a leading dot, at any depth) below the
    // pattern's literal leading directories, which nothing outside them can match.
    const base = path.endsWith("/") ? path.slice(0, -1) : path;
    const segments = pattern.split("/");
    const literal: string[] = [];
    while (segments.length > 1 && segments[0] !== "" && !/[*?[{\\]/.test(segments[0]) &&
           segments[0] !== "." && segments[0] !== "..") literal.push(segments.shift()!);
    const root = literal.length > 0 ? `${base}/${literal.join("/")}` : path;
    const r = await this.rt().fs<{ matches?: Array<Record<string, unknown>>; truncated?: boolean; error?: string | null; message?: string | null }>(
      "glob", ["{*,.*}"], { path: root });
    if (r.error) {
      const outside = literal.length > 0 && (r.error === "file_not_found" || r.error === "not_a_directory");
      return r.error === "file_not_found" || outside ? { files: [], truncated: false } : { error: r.message ?? r.error };
    }
    const regex = globRegex(pattern);
    const files: FileInfo[] = [];
    for (const m of r.matches ?? []) {
      const full = String(m.path);
      const rel = full.startsWith(`${base}/`) ? full.slice(base.length + 1) : full;
      if (regex.test(rel)) files.push({ path: rel, is_dir: Boolean(m.is_dir), size: Number(m.size), modified_at: iso(m.modified_at) });
    }
    return { files, truncated: Boolean(r.truncated) };
  }

  async write(filePath: string, content: string): Promise<WriteResult> {
    if (!isText(filePath)) return super.write(filePath, content); // base64 → bytes, as deepagents does
    const r = await this.rt().fs<{ error?: string | null }>("write", [filePath, content], { overwrite: true });
    if (r.error) return { error: `Failed to write to ${filePath}: ${fileError(r.error)}` };
    return { path: filePath, filesUpdate: null };
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    if (oldString.length === 0 || oldString === newString) return super.edit(filePath, oldString, newString, replaceAll);
    const r = await this.rt().fs<{ occurrences?: number; error?: string | null }>("edit", [filePath, oldString, newString], { replace_all: replaceAll });
    switch (r.error) {
      case null: case undefined:
        return { path: filePath, filesUpdate: null, occurrences: r.occurrences };
      case "string_not_found":
        return { error: `String not found in file '${filePath}'` };
      case "multiple_occurrences":
        return { error: `Multiple occurrences found in '${filePath}'. Use replaceAll=true to replace all.` };
      case "file_not_found": case "is_directory": case "not_a_file":
        return { error: `Error: File '${filePath}' not found` };
      default:
        return { error: `Failed to write edited file '${filePath}': ${fileError(r.error)}` };
    }
  }

  // ---- the names of deepagents' v1 protocol ------------------------------------------------

  async lsInfo(path: string): Promise<FileInfo[]> {
    return (await this.ls(path)).files ?? [];
  }

  async grepRaw(pattern: string, path = "/", glob: string | null = null): Promise<GrepMatch[] | string> {
    const r = await this.grep(pattern, path, glob);
    return r.error ?? r.matches ?? [];
  }

  async globInfo(pattern: string, path = "/"): Promise<FileInfo[]> {
    return (await this.glob(pattern, path)).files ?? [];
  }
}
