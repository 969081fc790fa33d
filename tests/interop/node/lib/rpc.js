// SPDX-License-Identifier: MIT
// A thin RPC client over the stock socket.io-client: every event carries exactly one argument,
// a Buffer holding one msgpack map, as ARCHITECTURE.md's wire protocol says.
import { io } from 'socket.io-client';
import { encode, decode } from '@msgpack/msgpack';
import { TOKEN } from './server.js';

// The three ways a stock client reaches the server.
export const TRANSPORTS = {
  websocket: { transports: ['websocket'] },
  polling: { transports: ['polling'], upgrade: false },
  upgrade: { transports: ['polling', 'websocket'] }, // the client's default: polling, then upgrade
};

export const TERMINAL = new Set(['call:result', 'call:end', 'call:error']);

let idCounter = 0;
export function newId(prefix = 'c') {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${++idCounter}`;
}

export function pack(map) {
  const clean = Object.fromEntries(Object.entries(map).filter(([, v]) => v !== undefined));
  const u8 = encode(clean);
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

export function unpack(arg) {
  if (arg instanceof ArrayBuffer || ArrayBuffer.isView(arg)) return decode(arg);
  return arg; // not binary: left for the test to look at
}

export function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

// A raw socket.io-client socket on /rpc; reconnection off unless asked for.
export function rawSocket(url, transport, { auth = { token: TOKEN }, ...opts } = {}) {
  const o = { ...TRANSPORTS[transport], forceNew: true, reconnection: false, timeout: 10000, ...opts };
  if (auth !== null) o.auth = auth;
  return io(`${url}/rpc`, o);
}

// Resolves with the connect_error's Error (or rejects if the socket connects after all).
export function expectConnectError(socket, ms = 10000) {
  return withTimeout(new Promise((resolve, reject) => {
    socket.once('connect', () => reject(new Error('connected although it should not have')));
    socket.once('connect_error', resolve);
  }), ms, 'connect_error');
}

class CallHandle {
  constructor(id) {
    this.id = id;
    this.items = [];
    this.terminals = []; // every terminal event seen, in order: one is the contract
    this.afterTerminal = []; // anything that came after the first terminal event
    this.#waiters = [];
  }

  #waiters;

  deliver(event, msg) {
    if (this.terminals.length > 0) this.afterTerminal.push({ event, msg });
    if (TERMINAL.has(event)) {
      this.terminals.push({ event, msg });
    } else if (event === 'call:item' && this.terminals.length === 0) {
      this.items.push(msg.value);
    }
    for (const w of this.#waiters.splice(0)) w();
  }

  #wait(pred, ms, what) {
    return withTimeout(new Promise((resolve) => {
      const check = () => (pred() ? resolve() : this.#waiters.push(check));
      check();
    }), ms, `${what} of call ${this.id}`);
  }

  // The first terminal event: {event, msg, items}.
  async done(ms = 20000) {
    await this.#wait(() => this.terminals.length > 0, ms, 'the terminal event');
    const t = this.terminals[0];
    return { event: t.event, msg: t.msg, items: this.items };
  }

  // The value of a call:result; throws with the server's error otherwise.
  async result(ms) {
    const t = await this.done(ms);
    if (t.event !== 'call:result') throw new Error(`expected call:result, got ${t.event}: ${JSON.stringify(t.msg)}`);
    return t.msg.value;
  }

  // The error map of a call:error; throws otherwise.
  async error(ms) {
    const t = await this.done(ms);
    if (t.event !== 'call:error') throw new Error(`expected call:error, got ${t.event}: ${JSON.stringify(t.msg)}`);
    return t.msg.error;
  }

  async nItems(n, ms = 20000) {
    await this.#wait(() => this.items.length >= n || this.terminals.length > 0, ms, `${n} items`);
    return this.items;
  }
}

export class RpcClient {
  constructor(socket) {
    this.socket = socket;
    this.calls = new Map();
    this.inbound = []; // every event received: {event, msg, binary}
    this.#watchers = [];
    socket.onAny((event, ...args) => this.#dispatch(event, args));
    // The engine exists as soon as io() returns: note where it started and when it upgrades.
    const engine = socket.io.engine;
    this.initialTransport = engine?.transport?.name;
    this.upgraded = new Promise((resolve) => engine?.once('upgrade', (t) => resolve(t.name)));
    this.upgraded.catch(() => {});
  }

  #watchers;

  #dispatch(event, args) {
    const binary = args.length === 1 && (args[0] instanceof ArrayBuffer || ArrayBuffer.isView(args[0]));
    const msg = binary ? unpack(args[0]) : args;
    const rec = { event, msg, binary, nargs: args.length, index: this.inbound.length };
    this.inbound.push(rec);
    const id = binary && msg && typeof msg.call_id === 'string' ? msg.call_id : undefined;
    if (id !== undefined && this.calls.has(id)) this.calls.get(id).deliver(event, msg);
    for (const w of [...this.#watchers]) w(rec);
  }

  // Wait for an inbound event (already received or future) matching pred.
  // Only events at or after index `since` count (this.mark() before sending).
  waitFor(pred, ms = 10000, what = 'an event', since = 0) {
    const p = pred;
    pred = (rec) => rec.index >= since && p(rec);
    const seen = this.inbound.find(pred);
    if (seen) return Promise.resolve(seen);
    let watcher;
    return withTimeout(new Promise((resolve) => {
      watcher = (rec) => { if (pred(rec)) resolve(rec); };
      this.#watchers.push(watcher);
    }), ms, what).finally(() => {
      this.#watchers = this.#watchers.filter((w) => w !== watcher);
    });
  }

  mark() { return this.inbound.length; }

  send(event, map) {
    this.socket.emit(event, pack(map));
  }

  // A handle that collects the events of call_id (for calls sent by hand or resumed).
  track(id) {
    if (!this.calls.has(id)) this.calls.set(id, new CallHandle(id));
    return this.calls.get(id);
  }

  call(callable, { args = [], kwargs = {}, shape = 'unary', deadline_ms, call_id = newId() } = {}) {
    const h = this.track(call_id);
    this.send('call', { call_id, callable, shape, args, kwargs, deadline_ms });
    return h;
  }

  exec(command, kwargs = {}, opts = {}) {
    return this.call('sandbox::exec', { kwargs: { command, ...kwargs }, ...opts });
  }

  sendIn(id, item) { this.send('call:in', { call_id: id, item }); }
  endIn(id) { this.send('call:end_in', { call_id: id }); }
  cancel(id) { this.send('cancel', { call_id: id }); }
  resume(ids) { this.send('resume', { call_ids: ids }); }
  ack(id) { this.send('ack', { call_id: id }); }

  get transportName() {
    return this.socket.io.engine?.transport?.name;
  }

  close() {
    this.socket.disconnect();
    this.socket.io.engine?.close();
  }
}

// Connect to /rpc and resolve with an RpcClient once the namespace is joined.
export async function connect(url, transport, opts = {}) {
  const socket = rawSocket(url, transport, opts);
  const client = new RpcClient(socket);
  await withTimeout(new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  }), 10000, `connect over ${transport}`);
  return client;
}

// For the upgrade transport: resolve when the engine runs on WebSocket.
export function waitUpgraded(client, ms = 10000) {
  return withTimeout(client.upgraded, ms, 'the upgrade to websocket');
}

// Drop the underlying Engine.IO connection as a network failure would (no Socket.IO
// DISCONNECT is sent), and wait until the client notices.
export async function dropConnection(client) {
  const gone = new Promise((resolve) => client.socket.once('disconnect', resolve));
  client.socket.io.engine.close();
  return withTimeout(gone, 5000, 'the disconnect');
}

// Reconnect the same socket object (a new Engine.IO session, a new Socket.IO id).
export async function reconnect(client) {
  const back = new Promise((resolve, reject) => {
    client.socket.once('connect', resolve);
    client.socket.once('connect_error', reject);
  });
  client.socket.connect();
  await withTimeout(back, 10000, 'the reconnect');
}
