// SPDX-License-Identifier: MIT
// The Cockpit page's own protocol code (cockpit/agentix: msgpack.js, websocket.js,
// runtime-socket.js), the same modules the browser loads, against a real agentix-server over a
// TCP socket standing in for the bridge's stream channel; msgpack.js against @msgpack/msgpack.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tcpConnect } from 'node:net';
import { encode as refEncode, decode as refDecode } from '@msgpack/msgpack';
import { encode, decode } from '../../../../cockpit/agentix/msgpack.js';
import { StreamWebSocket } from '../../../../cockpit/agentix/websocket.js';
import { RuntimeSocket } from '../../../../cockpit/agentix/runtime-socket.js';
import { Server, TOKEN } from '../lib/server.js';
import { assertCleanExit } from '../lib/suite.js';

const VALUES = [
  null, true, false, 0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER,
  -1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1, Number.MIN_SAFE_INTEGER,
  0.5, -1.25, 1e300, '', 'a', 'é ✓ 🚀', 'x'.repeat(31), 'x'.repeat(32), 'y'.repeat(255), 'y'.repeat(256),
  'z'.repeat(70000), new Uint8Array([]), new Uint8Array([0, 1, 255]), new Uint8Array(300).fill(7),
  new Uint8Array(70000).fill(9), [], [1, 'two', [3]], Array.from({ length: 16 }, (_, i) => i),
  Array.from({ length: 70000 }, (_, i) => i & 0xff), {}, { a: 1, b: { c: [true, null] } },
  Object.fromEntries(Array.from({ length: 17 }, (_, i) => ['k' + i, i])),
];

const asPlain = (v) => (v instanceof Uint8Array ? Array.from(v) : v);
const same = (a, b) => assert.deepEqual(JSON.parse(JSON.stringify(a, (k, v) => asPlain(v))),
                                        JSON.parse(JSON.stringify(b, (k, v) => asPlain(v))));

describe('cockpit page: msgpack.js', () => {
  it('what it encodes, @msgpack/msgpack decodes to the same value, and back', () => {
    for (const v of VALUES) {
      same(refDecode(encode(v)), v);
      same(decode(refEncode(v)), v);
      same(decode(encode(v)), v);
    }
  });

  it('uses the smallest form, byte for byte as @msgpack/msgpack does', () => {
    for (const v of VALUES.filter((x) => typeof x !== 'number' || Number.isInteger(x)))
      assert.deepEqual(Array.from(encode(v)), Array.from(refEncode(v)), JSON.stringify(v)?.slice(0, 40));
  });

  it('refuses what is cut short, what trails and what nests too deep', () => {
    const whole = encode({ call_id: 'x', value: 'hello' });
    for (let n = 0; n < whole.length; n++)
      assert.throws(() => decode(whole.subarray(0, n)), /ends inside|msgpack/);
    assert.throws(() => decode(new Uint8Array([...whole, 0])), /after the value/);
    const deep = new Uint8Array(101).fill(0x91); // [[[…]]] a hundred deep
    deep[100] = 0x90;
    assert.throws(() => decode(deep), /deeper/);
    assert.throws(() => decode(new Uint8Array([0xd4, 1, 2])), /not one the runtime sends/);
  });
});

// A TCP connection as the page's stream: what cockpit.channel({payload: "stream"}) gives it.
function tcpStream(port) {
  const sock = tcpConnect(port, '127.0.0.1');
  const stream = { onData: null, onClose: null };
  stream.send = (u8) => sock.write(u8);
  stream.close = () => sock.destroy();
  sock.on('data', (buf) => stream.onData && stream.onData(new Uint8Array(buf.buffer, buf.byteOffset, buf.length)));
  sock.on('close', () => stream.onClose && stream.onClose(null));
  sock.on('error', (e) => stream.onClose && stream.onClose(e.message));
  return stream;
}

async function open(server, token = TOKEN) {
  const ws = new StreamWebSocket(tcpStream(server.port), { host: `127.0.0.1:${server.port}`,
                                                           path: '/socket.io/?EIO=4&transport=websocket' });
  const rpc = new RuntimeSocket(ws, token);
  await rpc.connected;
  return rpc;
}

// One call to its end: { items, result, error }.
function run(rpc, callable, shape, kwargs, feed) {
  return new Promise((resolve) => {
    const items = [];
    const id = rpc.call(callable, shape, kwargs, {
      onItem: (v) => items.push(v),
      onResult: (v) => resolve({ items, result: v }),
      onEnd: () => resolve({ items }),
      onError: (e) => resolve({ items, error: e }),
    });
    if (feed)
      feed(id);
  });
}

const text = (items) => Buffer.concat(items.filter((x) => x.data).map((x) => Buffer.from(x.data))).toString();

describe('cockpit page: runtime-socket.js over websocket.js', () => {
  let server;
  before(async () => { server = await Server.start(); });
  after(async () => { if (server) await assertCleanExit(server); });

  it('connects with the token and runs a unary call', async () => {
    const rpc = await open(server);
    const r = await run(rpc, 'sandbox::exec', 'unary', { command: 'echo hi' });
    assert.equal(r.result.output, 'hi\n');
    assert.equal(r.result.exit_code, 0);
    rpc.close();
  });

  it('a wrong token is refused with the runtime\'s reason', async () => {
    await assert.rejects(open(server, 'wrong'), /refused the connection: unauthorized/);
  });

  it('a PTY shell: input, a resize, output and the exit status, as the terminal uses it', async () => {
    const rpc = await open(server);
    const r = await run(rpc, 'sandbox::exec', 'bidi',
                        { command: 'read line; echo "got:$line"; stty size', pty: true, rows: 24, cols: 80, timeout: 0,
                          max_output: Number.MAX_SAFE_INTEGER },
                        (id) => {
                          rpc.sendIn(id, { resize: [33, 101] });
                          rpc.sendIn(id, { stdin: new TextEncoder().encode('hello\r') });
                        });
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    const out = text(r.items);
    assert.match(out, /got:hello\r\n/);
    assert.match(out, /33 101/);
    assert.equal(r.items[r.items.length - 1].exit_code, 0);
    rpc.close();
  });

  it('large output arrives whole (frames over 64 KiB, 64-bit lengths)', async () => {
    const rpc = await open(server);
    const r = await run(rpc, 'sandbox::exec', 'stream', { command: 'head -c 3000000 /dev/zero | tr "\\0" x' });
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    const out = text(r.items);
    assert.equal(out.length, 3000000);
    assert.ok(/^x+$/.test(out));
    rpc.close();
  });

  it('cancel ends a running call with Cancelled', async () => {
    const rpc = await open(server);
    const r = await run(rpc, 'sandbox::exec', 'stream', { command: 'sleep 30' }, (id) => setTimeout(() => rpc.cancel(id), 200));
    assert.equal(r.error.type, 'Cancelled');
    rpc.close();
  });
});
