// SPDX-License-Identifier: MIT
// RuntimeClient: remote calls into one agentix runtime (agentix-server) with the stock
// socket.io-client, each event one msgpack attachment (@msgpack/msgpack), as ARCHITECTURE.md's
// wire protocol says. Calls of every shape (unary, stream as an async iterator, bidi with a
// channel), cancel, deadlines, resume after a reconnect, typed errors.

import { decode, encode } from "@msgpack/msgpack";
import { readFileSync } from "node:fs";
import { Agent as HttpsAgent } from "node:https";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { io, type Socket } from "socket.io-client";

import { Cancelled, ConnectionLost, DeadlineExceeded, ServerUnreachable, Unauthorized, remoteError, type RemoteErrorInfo } from "./errors.js";

const DEADLINE_GRACE_MS = 2000; // the server enforces deadlines; the client gives up this much later
const ACK_BATCH = 64;
const ACK_DELAY_MS = 50;

export interface ConnectOptions {
  /** "websocket" (default) and/or "polling". */
  transports?: ("websocket" | "polling")[];
  /** Reconnect and resume calls after a dropped connection (default true). */
  reconnect?: boolean;
  /** How long to wait for the first connection (default 10 s). */
  timeoutMs?: number;
  /** An https:// runtime: the CA (PEM) its certificate must chain to, the only one trusted
   * (agentd's Manager.RuntimeCA; default: the file AGENTIX_CA_FILE names). */
  ca?: string;
  /** The sandbox (its id) meant: an https:// runtime's certificate must then name it
   * (ID.sandbox.agentix) as well as the URL's address, so that another sandbox's runtime on
   * the same address (a swarm node's) is refused. SandboxManager.connect() gives it. */
  sandboxId?: string;
}

/** The DNS name agentd's certificate for a sandbox's runtime carries beside its address. */
export function sandboxTlsName(id: string): string {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(id)) throw new TypeError(`not a sandbox id: ${JSON.stringify(id)}`);
  return `${id}.sandbox.agentix`;
}

type IdentityCheck = ((host: string, cert: PeerCertificate) => Error | undefined) & { refused?: Error };

/** Node's check of the URL's host (IP addresses included), then, with a sandbox id, that the
 * certificate names that sandbox exactly (no wildcard: agentd issues none). What it refused is
 * kept in .refused: the polling transport reports a failed request without its reason. */
function identityCheck(sandboxId?: string): IdentityCheck {
  const name = sandboxId === undefined ? undefined : sandboxTlsName(sandboxId);
  const check: IdentityCheck = (host, cert) => {
    let err = checkServerIdentity(host, cert);
    if (!err && name && !(cert.subjectaltname ?? "").split(", ").includes(`DNS:${name}`)) {
      err = Object.assign(new Error(`the runtime's TLS certificate was made for another sandbox than ${sandboxId} (an impostor: another sandbox's runtime, or a redirected connection); it names ${cert.subjectaltname ?? "nothing"}`), { code: "ERR_TLS_CERT_ALTNAME_INVALID", reason: "another sandbox", host, cert });
    }
    if (err) check.refused = err;
    return err;
  };
  return check;
}

/** What the transport said below socket.io-client's "websocket error" / "xhr poll error": the
 * TLS verdict sits in err.description (ws's ErrorEvent, or the XHR's error). */
function transportDetail(err: Error & { description?: unknown }): string {
  const parts: string[] = [];
  let d: unknown = err.description;
  for (let i = 0; i < 3 && d && typeof d === "object"; i++) {
    const o = d as { message?: unknown; code?: unknown; error?: unknown };
    if (typeof o.message === "string") parts.push(o.message);
    if (typeof o.code === "string") parts.push(o.code);
    d = o.error;
  }
  return parts.length ? parts.join(": ") : err.message;
}

/** The CA an https:// runtime is verified with: options.ca, else AGENTIX_CA_FILE's text. */
function runtimeCa(url: string, ca?: string): string | undefined {
  if (!/^(https|wss):/i.test(url)) return undefined;
  if (ca) return ca;
  const file = process.env.AGENTIX_CA_FILE;
  if (!file) {
    throw new ServerUnreachable(`${url} serves TLS: give the CA to verify it with (the ca option, agentd's RuntimeCA, or AGENTIX_CA_FILE)`);
  }
  return readFileSync(file, "utf8");
}

export interface CallOptions {
  /** The call fails with DeadlineExceeded after this long. */
  deadlineMs?: number;
  /** Aborting it cancels the call. */
  signal?: AbortSignal;
}

type Shape = "unary" | "stream" | "bidi";

interface PendingCall {
  id: string;
  shape: Shape;
  sent: boolean;
  resolve(value: unknown): void;
  reject(error: Error): void;
  items: unknown[];
  wake?: () => void;
  done: boolean;
  error?: Error;
  timer?: ReturnType<typeof setTimeout>;
}

/** The items of a stream (or bidi) call, as an async iterator. */
export class CallStream<T = unknown> implements AsyncIterable<T> {
  constructor(protected readonly client: RuntimeClient, protected readonly call: PendingCall,
              readonly result: Promise<unknown>) {
    result.catch(() => undefined); // surfaced by the iterator
  }

  get callId(): string {
    return this.call.id;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    const call = this.call;
    for (;;) {
      if (call.items.length > 0) {
        yield call.items.shift() as T;
        continue;
      }
      if (call.done) {
        if (call.error) throw call.error;
        return;
      }
      await new Promise<void>((wake) => (call.wake = wake));
    }
  }

  /** Ask the server to stop the call; it then ends with Cancelled. */
  cancel(): void {
    this.client.cancel(this.call.id);
  }
}

/** A bidi call: send items to its inbox, end the inbox, iterate what it yields. */
export class Channel<T = unknown> extends CallStream<T> {
  send(item: unknown): void {
    this.client.emit("call:in", { call_id: this.callId, item });
  }

  end(): void {
    this.client.emit("call:end_in", { call_id: this.callId });
  }
}

export interface ExecResult {
  exit_code: number | null;
  output: string;
  truncated: boolean;
  timed_out: boolean;
}

export interface ExecOptions extends CallOptions {
  timeout?: number;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string | Uint8Array;
  max_output?: number;
}

/** What shell::run returns: the command's output (stdout and stderr as they came), its exit
 * status (null once the shell itself has ended), and whether it timed out, was truncated, or
 * ended the session (`exit`). */
export interface ShellRunResult {
  output: string;
  exit_code: number | null;
  timed_out: boolean;
  truncated: boolean;
  ended: boolean;
}

export interface ShellOpenOptions extends CallOptions {
  cwd?: string;
  env?: Record<string, string | null>;
  /** The bash to run (default: the bundle's, else the image's). */
  shell?: string;
}

export interface ShellRunOptions extends CallOptions {
  /** Seconds before the command is interrupted (^C), and killed if it does not stop. */
  timeout?: number;
  /** Bytes of output kept (default 1 MiB). */
  max_output?: number;
}

/** A persistent shell session in the sandbox (shell::): one bash whose working directory,
 * variables, functions and background jobs stay between run() calls. It lives in the runtime,
 * so it outlives this client; close() ends it. */
export class ShellSession {
  constructor(private readonly rt: RuntimeClient, readonly id: string) {}

  /** Run one or more lines; resolves when the prompt is back. SessionBusy while another runs. */
  run(command: string, options: ShellRunOptions = {}): Promise<ShellRunResult> {
    const { deadlineMs, signal, ...kwargs } = options;
    return this.rt.call<ShellRunResult>("shell::run", [this.id, command], given(kwargs), { deadlineMs, signal });
  }

  /** Bytes to the running command's input (an answer to `read`). */
  async input(data: string | Uint8Array): Promise<void> {
    await this.rt.call("shell::input", [this.id, data]);
  }

  /** ^C to the running command: its run() resolves (exit_code 130) and the session goes on. */
  async interrupt(): Promise<void> {
    await this.rt.call("shell::interrupt", [this.id]);
  }

  /** End the session, and the commands it started. */
  async close(): Promise<void> {
    await this.rt.call("shell::close", [this.id]);
  }
}

/** One item of a code run (code::run): output, a result or display (its MIME bundle: text as
 * strings, images but SVG as bytes, JSON types as values), an exception, or the run's number. */
export type CodeItem =
  | { type: "stdout" | "stderr"; text: string; truncated?: boolean }
  | { type: "result"; data: Record<string, unknown>; is_main_result: boolean; execution_count?: number }
  | { type: "error"; name: string; value: string; traceback: string }
  | { type: "execution_count"; execution_count: number };

export interface CodeRunOptions extends CallOptions {
  /** Seconds before the run is interrupted (^C); the context keeps its state. */
  timeout?: number;
  /** Variables for this run only (python kernels). */
  env?: Record<string, string | null>;
  /** Bytes of output kept (default 16 MiB); past it, a stderr item with truncated: true. */
  max_output?: number;
  /** Called as each item comes. */
  onItem?: (item: CodeItem) => void;
}

export interface CodeContextOptions extends CallOptions {
  /** A kernelspec's name or language (default python). */
  language?: string;
  cwd?: string;
  env?: Record<string, string | null>;
}

/** One entry of code::contexts. */
export interface CodeContextInfo {
  id: string;
  language: string;
  kernel: string;
  cwd: string | null;
  pid: number | null;
  running: boolean;
  queued: number;
}

/** What one code run gave: every item in order, and views of them. An exception in the code is
 * `error`, not a throw. */
export class Execution {
  constructor(readonly items: CodeItem[]) {}

  get stdout(): string {
    return this.items.map((i) => (i.type === "stdout" ? i.text : "")).join("");
  }

  get stderr(): string {
    return this.items.map((i) => (i.type === "stderr" ? i.text : "")).join("");
  }

  /** The MIME bundles of the results and displays, in order. */
  get results(): Record<string, unknown>[] {
    return this.items.flatMap((i) => (i.type === "result" ? [i.data] : []));
  }

  /** The main result's MIME bundle (the value of the last line), or undefined. */
  get result(): Record<string, unknown> | undefined {
    for (const i of this.items) if (i.type === "result" && i.is_main_result) return i.data;
    return undefined;
  }

  /** The main result as text/plain, or undefined. */
  get text(): string | undefined {
    const t = this.result?.["text/plain"];
    return typeof t === "string" ? t : undefined;
  }

  get error(): { name: string; value: string; traceback: string } | undefined {
    for (const i of this.items) if (i.type === "error") return i;
    return undefined;
  }

  /** [mime, bytes] of every image the run gave (a matplotlib figure, …). */
  get images(): [string, Uint8Array][] {
    return this.results.flatMap((d) =>
      Object.entries(d).flatMap(([m, v]) => (m.startsWith("image/") && v instanceof Uint8Array ? [[m, v] as [string, Uint8Array]] : [])));
  }

  get truncated(): boolean {
    return this.items.some((i) => i.type === "stderr" && i.truncated === true);
  }
}

/** A code context in the sandbox (code::): a Jupyter kernel whose variables, imports and
 * figures stay between run() calls. It lives in the runtime, so it outlives this client;
 * delete() ends it. Runs on one context go one at a time, in the order they came. */
export class CodeContext {
  constructor(private readonly rt: RuntimeClient, readonly id: string) {}

  run(code: string, options: CodeRunOptions = {}): Promise<Execution> {
    return this.rt.runCode(code, { ...options, context: this.id });
  }

  /** ^C to the run in progress: it ends with a KeyboardInterrupt item. */
  async interrupt(): Promise<void> {
    await this.rt.call("code::interrupt", [this.id]);
  }

  /** A fresh kernel: the state is gone, the id stays. */
  async restart(): Promise<void> {
    await this.rt.call("code::restart", [this.id]);
  }

  /** End the context and its kernel. */
  async delete(): Promise<void> {
    await this.rt.call("code::delete_context", [this.id]);
  }
}

/** One entry of shell::list. */
export interface ShellInfo {
  id: string;
  pid: number;
  running: boolean;
  cwd: string | null;
}

/** One change fs::watch reports. */
export interface FileChange {
  path: string;
  event: "created" | "modified" | "deleted" | "moved_from" | "moved_to";
}

export interface WatchOptions extends CallOptions {
  /** Watch the directories below too, new ones as they appear (default true). */
  recursive?: boolean;
}

export interface FileResult {
  path: string | null;
  content?: Uint8Array | null;
  mode?: number | null;
  error: string | null;
  message: string | null;
}

let prefixCounter = 0;

export class RuntimeClient {
  private readonly calls = new Map<string, PendingCall>();
  private acks: string[] = [];
  private ackTimer?: ReturnType<typeof setTimeout>;
  private nextId = 0;
  private readonly prefix = `${process.pid.toString(36)}-${Date.now().toString(36)}-${(prefixCounter++).toString(36)}`;
  private closed = false;
  private failure?: Error;

  private constructor(readonly url: string, private readonly socket: Socket, private readonly reconnect: boolean) {
    for (const event of ["call:result", "call:item", "call:end", "call:error"]) {
      socket.on(event, (data: Uint8Array | ArrayBuffer) => this.dispatch(event, data));
    }
    socket.on("connect", () => this.resume());
    socket.on("disconnect", (reason) => {
      if (!this.reconnect && !this.closed) this.failAll(new ConnectionLost(`The connection to ${url} dropped (${reason})`));
    });
    socket.io.on("reconnect_failed", () => {
      this.failAll(new ConnectionLost(`The connection to ${url} dropped and could not be made again: is the sandbox still running?`));
    });
  }

  /** Connect to the runtime at url (http://HOST:PORT, as agentd's GetRuntimeAccess gives it). */
  static connect(url: string, token: string, options: ConnectOptions = {}): Promise<RuntimeClient> {
    const reconnect = options.reconnect ?? true;
    let ca: string | undefined;
    try {
      ca = runtimeCa(url, options.ca);
    } catch (e) {
      return Promise.reject(e);
    }
    let tls = {};
    let check: IdentityCheck | undefined;
    try {
      if (ca) {
        // Over TLS: agentd's CA alone, the certificate checked against the URL's host (Node's
        // checkServerIdentity, IP addresses included) and the sandbox's name. Through an agent
        // too: engine.io-client hands checkServerIdentity to its WebSocket but not to polling.
        check = identityCheck(options.sandboxId);
        const tlsOptions = { ca, rejectUnauthorized: true, checkServerIdentity: check };
        tls = { ...tlsOptions, agent: new HttpsAgent(tlsOptions) };
      }
    } catch (e) {
      return Promise.reject(e);
    }
    const socket = io(new URL("/rpc", url).toString(), {
      ...tls,
      path: "/socket.io/",
      transports: options.transports ?? ["websocket"],
      auth: { token },
      reconnection: reconnect,
      reconnectionAttempts: 30,
      reconnectionDelayMax: 1000,
      timeout: options.timeoutMs ?? 10000,
      autoConnect: false,
    });
    const client = new RuntimeClient(url, socket, reconnect);
    return new Promise((resolve, reject) => {
      const fail = (err: Error & { data?: unknown }) => {
        socket.off("connect", ok);
        socket.close();
        if (err.message === "unauthorized") {
          reject(new Unauthorized(`The runtime at ${url} refused the token: take the token from GetRuntimeAccess (or AGENTIX_TOKEN of the server).`));
        } else if (check?.refused) {
          reject(new ServerUnreachable(`The runtime at ${url} was refused: ${check.refused.message}`));
        } else if (ca && /certificate|self[- ]signed|altnames|issuer|CERT_/i.test(transportDetail(err))) {
          reject(new ServerUnreachable(`The runtime at ${url} was refused: its TLS certificate does not verify against agentd's runtime CA (${transportDetail(err)})`));
        } else {
          reject(new ServerUnreachable(`No agentix runtime answers at ${url} (${err.message}): is the sandbox running, and is this its RuntimeUrl?`));
        }
      };
      const ok = () => {
        socket.off("connect_error", fail);
        resolve(client);
      };
      socket.once("connect_error", fail);
      socket.once("connect", ok);
      socket.connect();
    });
  }

  /** Close the connection; calls still running fail with ConnectionLost. */
  close(): void {
    this.closed = true;
    if (this.ackTimer) clearTimeout(this.ackTimer);
    this.flushAcks();
    this.socket.close();
    this.failAll(new ConnectionLost("the client was closed"));
  }

  get connected(): boolean {
    return this.socket.connected;
  }

  /** @internal */
  emit(event: string, payload: unknown): boolean {
    const connected = this.socket.connected;
    this.socket.emit(event, encode(payload)); // buffered by socket.io-client while disconnected
    return connected;
  }

  private resume(): void {
    const sent = [...this.calls.values()].filter((c) => c.sent).map((c) => c.id);
    if (sent.length > 0) this.emit("resume", { call_ids: sent });
    for (const c of this.calls.values()) c.sent = true; // the buffered ones went out on connect
  }

  private failAll(error: Error): void {
    this.failure = error;
    for (const call of this.calls.values()) this.finish(call, undefined, error);
    this.calls.clear();
  }

  private finish(call: PendingCall, value: unknown, error?: Error): void {
    if (call.done) return;
    call.done = true;
    call.error = error;
    if (call.timer) clearTimeout(call.timer);
    if (error) call.reject(error);
    else call.resolve(value);
    call.wake?.();
  }

  private dispatch(event: string, data: Uint8Array | ArrayBuffer): void {
    const m = decode(data instanceof ArrayBuffer ? new Uint8Array(data) : data) as Record<string, unknown>;
    const call = this.calls.get(m.call_id as string);
    if (!call) return;
    if (event === "call:item") {
      call.items.push(m.value);
      call.wake?.();
      return;
    }
    this.calls.delete(call.id);
    if (event === "call:error") this.finish(call, undefined, remoteError(m.error as RemoteErrorInfo));
    else this.finish(call, m.value);
    // The result is here: the server may forget it. Acks go in batches, off the call's path.
    this.acks.push(call.id);
    if (this.acks.length >= ACK_BATCH) this.flushAcks();
    else if (!this.ackTimer) this.ackTimer = setTimeout(() => this.flushAcks(), ACK_DELAY_MS);
  }

  private flushAcks(): void {
    this.ackTimer = undefined;
    const ids = this.acks;
    this.acks = [];
    if (!this.socket.connected) return;
    for (const id of ids) this.socket.emit("ack", encode({ call_id: id }));
  }

  private start(callable: string, shape: Shape, args: unknown[], kwargs: Record<string, unknown>,
                options: CallOptions): { call: PendingCall; result: Promise<unknown> } {
    if (this.failure) throw this.failure;
    const id = `${this.prefix}-${(this.nextId++).toString(36)}`;
    let call!: PendingCall;
    const result = new Promise<unknown>((resolve, reject) => {
      call = { id, shape, sent: false, resolve, reject, items: [], done: false };
    });
    this.calls.set(id, call);
    const message: Record<string, unknown> = { call_id: id, callable, shape, args, kwargs };
    if (options.deadlineMs !== undefined) {
      message.deadline_ms = Math.max(1, Math.floor(options.deadlineMs));
      call.timer = setTimeout(() => {
        this.cancel(id);
        this.calls.delete(id);
        this.finish(call, undefined, new DeadlineExceeded({ type: "DeadlineExceeded", message: "no answer before the deadline", cancelled: true }));
      }, options.deadlineMs + DEADLINE_GRACE_MS);
    }
    if (options.signal) {
      if (options.signal.aborted) this.cancel(id);
      options.signal.addEventListener("abort", () => this.cancel(id), { once: true });
    }
    call.sent = this.emit("call", message);
    return { call, result };
  }

  /** A unary call: its value, or its error thrown. */
  call<T = unknown>(callable: string, args: unknown[] = [], kwargs: Record<string, unknown> = {},
                    options: CallOptions = {}): Promise<T> {
    try {
      return this.start(callable, "unary", args, kwargs, options).result as Promise<T>;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** A stream call: iterate its items. */
  stream<T = unknown>(callable: string, args: unknown[] = [], kwargs: Record<string, unknown> = {},
                      options: CallOptions = {}): CallStream<T> {
    const { call, result } = this.start(callable, "stream", args, kwargs, options);
    return new CallStream<T>(this, call, result);
  }

  /** A bidi call: a channel to send to and iterate. */
  bidi<T = unknown>(callable: string, args: unknown[] = [], kwargs: Record<string, unknown> = {},
                    options: CallOptions = {}): Channel<T> {
    const { call, result } = this.start(callable, "bidi", args, kwargs, options);
    return new Channel<T>(this, call, result);
  }

  /** Ask the server to cancel a call; it then ends with Cancelled. */
  cancel(callId: string): void {
    if (this.calls.has(callId)) this.emit("cancel", { call_id: callId });
  }

  // ---- the built-in modules -------------------------------------------------------------

  /** sandbox::exec: stdout and stderr combined. */
  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const { deadlineMs, signal, ...kwargs } = options;
    return this.call<ExecResult>("sandbox::exec", [command], given(kwargs), { deadlineMs, signal });
  }

  /** sandbox::exec as a stream: {stream, data} chunks, then {exit_code}. */
  execStream(command: string, options: ExecOptions = {}): CallStream<Record<string, unknown>> {
    const { deadlineMs, signal, ...kwargs } = options;
    return this.stream("sandbox::exec", [command], given(kwargs), { deadlineMs, signal });
  }

  /** shell::open: a persistent shell session (see ShellSession). */
  async openShell(options: ShellOpenOptions = {}): Promise<ShellSession> {
    const { deadlineMs, signal, ...kwargs } = options;
    return new ShellSession(this, await this.call<string>("shell::open", [], given(kwargs), { deadlineMs, signal }));
  }

  /** An open session by its id (from listShells(), or another client's openShell()). */
  shell(id: string): ShellSession {
    return new ShellSession(this, id);
  }

  /** shell::list: the sessions open in the sandbox. */
  listShells(options: CallOptions = {}): Promise<ShellInfo[]> {
    return this.call<ShellInfo[]>("shell::list", [], {}, options);
  }

  /** code::run in `context`, else in the language's default context (python unless
   * `language` says): an Execution. */
  async runCode(code: string, options: CodeRunOptions & { context?: string; language?: string } = {}): Promise<Execution> {
    const { deadlineMs, signal, onItem, ...kwargs } = options;
    const items: CodeItem[] = [];
    for await (const item of this.stream<CodeItem>("code::run", [code], given(kwargs), { deadlineMs, signal })) {
      items.push(item);
      onItem?.(item);
    }
    return new Execution(items);
  }

  /** code::create_context: a new code context on a Jupyter kernel (see CodeContext). */
  async createCodeContext(options: CodeContextOptions = {}): Promise<CodeContext> {
    const { deadlineMs, signal, ...kwargs } = options;
    return new CodeContext(this, await this.call<string>("code::create_context", [], given(kwargs), { deadlineMs, signal }));
  }

  /** A context by its id (from codeContexts(), or another client's). */
  codeContext(id: string): CodeContext {
    return new CodeContext(this, id);
  }

  /** code::contexts: the code contexts in the sandbox. */
  codeContexts(options: CallOptions = {}): Promise<CodeContextInfo[]> {
    return this.call<CodeContextInfo[]>("code::contexts", [], {}, options);
  }

  /** Write many files at once (parents made, each atomically): one result per file, in order,
   * with its error code (invalid_path, permission_denied, …) instead of a throw. */
  async uploadFiles(files: [string, string | Uint8Array][], options: CallOptions = {}): Promise<FileResult[]> {
    return this.call<FileResult[]>("fs::upload", [files], {}, options);
  }

  /** Read many files at once: one result per path, in order, content or error code
   * (file_not_found, is_directory, permission_denied, invalid_path, too_large, …). */
  async downloadFiles(paths: string[], options: CallOptions = {}): Promise<FileResult[]> {
    return this.call<FileResult[]>("fs::download", [paths], {}, options);
  }

  /** fs::watch: the changes below a path, until `signal` aborts (the iteration then simply
   * ends) or the loop stops early (the watch is cancelled). A path that does not exist throws
   * file_not_found; inotify's limits throw io_error. */
  watch(path: string, options: WatchOptions = {}): AsyncIterable<FileChange> {
    const { deadlineMs, signal, recursive } = options;
    const changes = this.stream<FileChange>("fs::watch", [path], given({ recursive }), { deadlineMs, signal });
    return (async function* () {
      try {
        yield* changes;
      } catch (e) {
        if (signal?.aborted && e instanceof Cancelled) return;
        throw e;
      } finally {
        changes.cancel(); // a loop that ended early: the server stops watching
      }
    })();
  }

  /** fs::FUNCTION (read, write, edit, ls, grep, glob, upload, download, mkdir). */
  fs<T = Record<string, unknown>>(fn: string, args: unknown[], kwargs: Record<string, unknown> = {},
                                  options: CallOptions = {}): Promise<T> {
    return this.call<T>(`fs::${fn}`, args, given(kwargs), options);
  }
}

function given(kwargs: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(kwargs).filter(([, v]) => v !== undefined));
}
