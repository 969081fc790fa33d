// SPDX-License-Identifier: MIT
// SandboxManager: sandboxes from agentd (org.agentix.Agentd1) over D-Bus with dbus-next, and
// session(): a sandbox for the length of a callback, deleted after it, also when it throws.

import dbus from "dbus-next";

import { AgentdError, SandboxGone, ServerUnreachable } from "./errors.js";
import { RuntimeClient, type ConnectOptions } from "./runtime.js";

const NAME = "org.agentix.Agentd1";
const PATH = "/org/agentix/Agentd1";
const MANAGER = "org.agentix.Agentd1.Manager";
const SANDBOX = "org.agentix.Agentd1.Sandbox";

/** CreateSandbox's config (org.agentix.Agentd1(5)); omitted keys take agentd's defaults. */
export interface SandboxConfig {
  image: string;
  bundle: string;
  platform?: string;
  backend?: string;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  ttl?: number;
  cpus?: number;
  memory?: number;
  pids?: number;
  network?: string;
  workdir?: string;
  bindToCaller?: boolean;
  setup?: string;
  /** The OCI runtime: "runc", or "runsc" for gVisor; omitted: agentd's default. */
  runtime?: string;
  /** A read-only root; /tmp and the workdir stay writable. */
  readOnly?: boolean;
  /** USER[:GROUP] (numbers, or names the image knows) the runtime and its commands run as. */
  user?: string;
  /** CIDRs it may reach (and DNS); []: no network at all, the runtime still answering;
   * omitted: agentd's isolated network (no host, no private ranges). */
  egress?: string[];
}

export interface SandboxInfo {
  id: string;
  path: string;
  state: string;
  runtimeUrl: string;
  image: string;
  bundle: string;
  backend: string;
  owner: number;
  createdAt: bigint; // µs since the epoch
  expiresAt: bigint;
  /** The agentd warm pool it was claimed from; "" when it was made for its create. */
  pool: string;
}

/** A snapshot: a sandbox's filesystem as an image a create can name (`image`). */
/** Sandbox.GetStats's numbers (bytes, µs); a key agentd cannot tell is absent. */
export interface SandboxStats {
  time?: number;
  cpu_usec?: number;
  cpu_percent?: number;
  memory_current?: number;
  memory_peak?: number;
  memory_limit?: number;
  pids_current?: number;
  pids_limit?: number;
  net_rx_bytes?: number;
  net_tx_bytes?: number;
  io_read_bytes?: number;
  io_write_bytes?: number;
}

export interface SnapshotInfo {
  image: string;
  sandboxId: string; // the sandbox it was taken of
  owner: number;
  createdAt: bigint; // seconds since the epoch
  size: bigint; // bytes, with its base image
}

const Variant = dbus.Variant;

function toDbus(config: SandboxConfig): Record<string, InstanceType<typeof Variant>> {
  const d: Record<string, InstanceType<typeof Variant>> = {
    image: new Variant("s", config.image),
    bundle: new Variant("s", config.bundle),
  };
  for (const key of ["platform", "backend", "network", "workdir", "setup", "runtime", "user"] as const) {
    if (config[key] !== undefined) d[key] = new Variant("s", config[key]);
  }
  if (config.env) d.env = new Variant("a{ss}", config.env);
  if (config.labels) d.labels = new Variant("a{ss}", config.labels);
  for (const key of ["ttl", "memory", "pids"] as const) {
    if (config[key] !== undefined) d[key] = new Variant("t", BigInt(config[key] as number));
  }
  if (config.cpus !== undefined) d.cpus = new Variant("d", config.cpus);
  if (config.bindToCaller) d.bind_to_caller = new Variant("b", true);
  if (config.readOnly) d.read_only = new Variant("b", true);
  if (config.egress !== undefined) d.egress = new Variant("as", config.egress);
  return d;
}

function agentdError(e: unknown): Error {
  const err = e as { type?: string; text?: string; message?: string };
  const name = err.type ?? "";
  const text = err.text ?? err.message ?? String(e);
  if (name.endsWith(".NoSuchSandbox")) return new SandboxGone(text);
  if (name === "org.freedesktop.DBus.Error.ServiceUnknown" || name === "org.freedesktop.DBus.Error.NameHasNoOwner") {
    return new ServerUnreachable("agentd is not on the bus (is agentd.service running, and may you call it? root and the group agentix may)");
  }
  if (name === "org.freedesktop.DBus.Error.AccessDenied") {
    return new AgentdError(name, `${text} (only root and members of the group agentix may call agentd)`);
  }
  return name ? new AgentdError(name, text) : (e as Error);
}

/** agentd on the system bus (DBUS_SYSTEM_BUS_ADDRESS honoured), or the session bus. */
export class SandboxManager {
  private readonly bus: dbus.MessageBus;
  private manager?: dbus.ClientInterface;

  constructor(options: { bus?: "system" | "session" } = {}) {
    this.bus = options.bus === "session" ? dbus.sessionBus() : dbus.systemBus();
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw agentdError(e);
    }
  }

  private async iface(): Promise<dbus.ClientInterface> {
    if (!this.manager) {
      const obj = await this.call(() => this.bus.getProxyObject(NAME, PATH));
      this.manager = obj.getInterface(MANAGER);
    }
    return this.manager;
  }

  private async info(path: string): Promise<SandboxInfo> {
    const obj = await this.bus.getProxyObject(NAME, path);
    const props = obj.getInterface("org.freedesktop.DBus.Properties");
    const all = (await props.GetAll(SANDBOX)) as Record<string, InstanceType<typeof Variant>>;
    const s = (k: string) => String(all[k].value);
    return {
      id: s("Id"), path, state: s("State"), runtimeUrl: s("RuntimeUrl"), image: s("Image"), bundle: s("Bundle"),
      backend: s("Backend"), owner: Number(all.Owner.value), createdAt: BigInt(all.CreatedAt.value as bigint),
      expiresAt: BigInt(all.ExpiresAt.value as bigint), pool: all.Pool ? String(all.Pool.value) : "",
    };
  }

  /** Make a sandbox; resolves once its runtime answers. */
  async create(config: SandboxConfig): Promise<SandboxInfo> {
    const m = await this.iface();
    const [path, id] = (await this.call(() => m.CreateSandbox(toDbus(config)))) as [string, string];
    try {
      return await this.call(() => this.info(path));
    } catch (e) {
      await this.delete(id).catch(() => undefined); // made but not handed out: it must not stay
      throw e;
    }
  }

  async get(id: string): Promise<SandboxInfo> {
    const m = await this.iface();
    const path = (await this.call(() => m.GetSandbox(id))) as string;
    return this.call(() => this.info(path));
  }

  async list(): Promise<SandboxInfo[]> {
    const m = await this.iface();
    const rows = (await this.call(() => m.ListSandboxes())) as [string, string, string, string][];
    return Promise.all(rows.map(([, , , path]) => this.call(() => this.info(path))));
  }

  /** The runtime's URL and token (the owner's and root's only). */
  async access(id: string): Promise<{ url: string; token: string }> {
    const m = await this.iface();
    const [url, token] = (await this.call(() => m.GetRuntimeAccess(id))) as [string, string];
    return { url, token };
  }

  /** A port inside the sandbox through its runtime's proxy: requests to `url` carry `token` as
   * `Authorization: Bearer`, or once as `?agentix_token=` (a browser then keeps it as a cookie). */
  async portUrl(id: string, port: number): Promise<{ url: string; token: string }> {
    const m = await this.iface();
    const [url, token] = (await this.call(() => m.GetPortUrl(id, port))) as [string, string];
    return { url, token };
  }

  /** The last `lines` lines its runtime wrote (its container's log); the owner's and root's only. */
  async logs(id: string, lines = 100): Promise<string> {
    const s = await this.sandboxIface(id);
    return String(await this.call(() => s.Logs(BigInt(lines))));
  }

  /**
   * What the sandbox uses now (Sandbox.GetStats; the owner's and root's only): cpu_usec,
   * cpu_percent (since the last reading: 100 = one CPU), memory_current, memory_peak,
   * memory_limit, pids_current, pids_limit, net_rx_bytes, net_tx_bytes, io_read_bytes,
   * io_write_bytes and time (µs since the epoch). A number agentd cannot tell is left out.
   */
  async stats(id: string): Promise<SandboxStats> {
    const s = await this.sandboxIface(id);
    const raw = (await this.call(() => s.GetStats())) as Record<string, InstanceType<typeof Variant>>;
    const out: SandboxStats = {};
    for (const [key, v] of Object.entries(raw)) out[key as keyof SandboxStats] = Number(v.value);
    return out;
  }

  private async sandboxIface(id: string) {
    const m = await this.iface();
    const path = (await this.call(() => m.GetSandbox(id))) as string;
    return this.call(async () => (await this.bus.getProxyObject(NAME, path)).getInterface(SANDBOX));
  }

  /** Freeze every process of the sandbox (state "paused"): calls to its runtime wait until resume(). */
  async pause(id: string): Promise<void> {
    const s = await this.sandboxIface(id);
    await this.call(() => s.Pause());
  }

  /** Thaw a paused sandbox: calls that waited go on. A hibernated one runs again from its
   * checkpoint (its runtime URL may change: clients reconnect). */
  async resume(id: string): Promise<void> {
    const s = await this.sandboxIface(id);
    await this.call(() => s.Resume());
  }

  /** Save its processes, memory and files to disk and stop it (state "hibernated"); resume()
   * runs it again as it was. gVisor (runtime runsc) only: else NotSupported; an open TCP
   * connection into or out of it: CheckpointFailed, naming it (it runs on untouched). */
  async hibernate(id: string): Promise<void> {
    const s = await this.sandboxIface(id);
    await this.call(() => s.Hibernate());
  }

  /** Commit its filesystem (not /nix, not its token) as an image; returns the image's name. */
  async snapshot(id: string, options: { tag?: string } = {}): Promise<string> {
    const s = await this.sandboxIface(id);
    const opts: Record<string, InstanceType<typeof Variant>> = {};
    if (options.tag !== undefined) opts.tag = new Variant("s", options.tag);
    return String(await this.call(() => s.Snapshot(opts)));
  }

  /** The caller's snapshots (root: everyone's). */
  async listSnapshots(): Promise<SnapshotInfo[]> {
    const m = await this.iface();
    const rows = (await this.call(() => m.ListSnapshots())) as [string, string, number, bigint, bigint][];
    return rows.map(([image, sandboxId, owner, createdAt, size]) => ({ image, sandboxId, owner, createdAt, size }));
  }

  /** Remove a snapshot (not while a sandbox runs from it). */
  async deleteSnapshot(image: string): Promise<void> {
    const m = await this.iface();
    await this.call(() => m.DeleteSnapshot(image));
  }

  /** Delete it; a sandbox already gone is no error. */
  async delete(id: string): Promise<void> {
    const m = await this.iface();
    try {
      await this.call(() => m.DeleteSandbox(id));
    } catch (e) {
      if (!(e instanceof SandboxGone)) throw e;
    }
  }

  /** agentd's runtime CA (PEM): what https:// runtime URLs are verified with; "" without TLS. */
  async runtimeCa(): Promise<string> {
    const obj = await this.call(() => this.bus.getProxyObject(NAME, PATH));
    const props = obj.getInterface("org.freedesktop.DBus.Properties");
    const v = (await this.call(() => props.Get(MANAGER, "RuntimeCA"))) as InstanceType<typeof Variant>;
    return String(v.value);
  }

  /** Connect to a sandbox's runtime (over TLS verified against agentd's runtime CA). */
  async connect(id: string, options?: ConnectOptions): Promise<RuntimeClient> {
    const { url, token } = await this.access(id);
    const ca = options?.ca ?? (/^https:/i.test(url) ? await this.runtimeCa() : undefined);
    return RuntimeClient.connect(url, token, { sandboxId: id, ...options, ...(ca ? { ca } : {}) });
  }

  close(): void {
    this.bus.disconnect();
  }
}

/** A sandbox for the length of fn: created, connected, handed to fn, then deleted — also when
 * fn throws (the error is rethrown). */
export async function session<T>(manager: SandboxManager, config: SandboxConfig,
                                 fn: (runtime: RuntimeClient, sandbox: SandboxInfo) => Promise<T>): Promise<T> {
  const sandbox = await manager.create(config);
  let runtime: RuntimeClient | undefined;
  try {
    runtime = await manager.connect(sandbox.id);
    return await fn(runtime, sandbox);
  } finally {
    runtime?.close();
    await manager.delete(sandbox.id);
  }
}
