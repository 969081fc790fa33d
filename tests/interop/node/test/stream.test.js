// SPDX-License-Identifier: MIT
// Stream and bidi calls: call:item events in order, then exactly one call:end; the bidi inbox
// (call:in / call:end_in) reaches the child's stdin and signals reach its process group.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { eachTransport, sleep } from '../lib/suite.js';
import { waitUpgraded } from '../lib/rpc.js';

// Split stream items into data chunks and the final status item.
function splitItems(items) {
  assert.ok(items.length >= 1, 'at least the final status item');
  const last = items[items.length - 1];
  assert.equal(typeof last.exit_code, 'number', `the last item is the status: ${JSON.stringify(last)}`);
  const chunks = items.slice(0, -1);
  for (const ch of chunks) {
    assert.ok(['stdout', 'stderr', 'pty'].includes(ch.stream), `a data item: ${JSON.stringify(ch)}`);
    assert.ok(ch.data instanceof Uint8Array, 'data is msgpack bin');
  }
  const bytes = (s) => Buffer.concat(chunks.filter((ch) => ch.stream === s).map((ch) => Buffer.from(ch.data)));
  return { last, chunks, stdoutBytes: bytes('stdout'), stdout: bytes('stdout').toString(), stderr: bytes('stderr').toString() };
}

eachTransport('stream and bidi', (ctx) => {
  it('sandbox::exec as a stream: items in order, the status, then call:end', async () => {
    const c = await ctx.connect();
    const h = c.exec('for i in 1 2 3 4 5; do echo line$i; sleep 0.05; done; echo warn >&2; exit 3', {},
      { shape: 'stream' });
    const t = await h.done();
    assert.equal(t.event, 'call:end', JSON.stringify(t.msg));
    assert.deepEqual(Object.keys(t.msg), ['call_id'], 'call:end carries only the call_id');
    const { last, chunks, stdout, stderr } = splitItems(t.items);
    assert.equal(stdout, 'line1\nline2\nline3\nline4\nline5\n', 'stdout items arrive in order');
    assert.equal(stderr, 'warn\n');
    assert.ok(chunks.length >= 5, `the 50 ms gaps give separate items (got ${chunks.length})`);
    assert.equal(last.exit_code, 3);
    assert.equal(last.timed_out, false);
    assert.equal(last.truncated, false);
  });

  it('stream items arrive while the command runs, not all at the end', async () => {
    const c = await ctx.connect();
    const h = c.exec('echo first; sleep 1; echo second', {}, { shape: 'stream' });
    const items = await h.nItems(1, 5000);
    assert.equal(Buffer.from(items[0].data).toString(), 'first\n');
    assert.equal(h.terminals.length, 0, 'the call is still running');
    const t = await h.done();
    assert.equal(t.event, 'call:end');
    assert.equal(splitItems(t.items).stdout, 'first\nsecond\n');
  });

  it('a stream sent before the connection is up, running across the transport upgrade, loses nothing', async () => {
    const c = ctx.open();
    const h = c.exec('i=1; while [ $i -le 60 ]; do echo $i; i=$((i+1)); sleep 0.01; done', {}, { shape: 'stream' });
    const sendIn = c.exec('cat', {}, { shape: 'bidi' });
    for (let i = 0; i < 20; i++) c.sendIn(sendIn.id, { stdin: `${i},` });
    c.endIn(sendIn.id);
    const t = await h.done();
    assert.equal(t.event, 'call:end');
    const expected = Array.from({ length: 60 }, (_, i) => `${i + 1}\n`).join('');
    assert.equal(splitItems(t.items).stdout, expected);
    const b = await sendIn.done();
    assert.equal(splitItems(b.items).stdout, Array.from({ length: 20 }, (_, i) => `${i},`).join(''),
      'inbox items keep their order across the upgrade');
    if (ctx.transport === 'upgrade') {
      assert.equal(c.initialTransport, 'polling');
      assert.equal(await waitUpgraded(c), 'websocket');
    }
  });

  it('a 20 MB stream arrives complete and in order', async () => {
    const c = await ctx.connect();
    // 20 MB of numbered 10-byte records, so a lost, repeated or reordered chunk shows.
    const h = c.exec("seq -f '%09.0f' 1 2000000", { max_output: 30000000 }, { shape: 'stream' });
    const t = await h.done(120000);
    assert.equal(t.event, 'call:end');
    const { last, stdoutBytes } = splitItems(t.items);
    assert.equal(last.exit_code, 0);
    assert.equal(last.truncated, false);
    assert.equal(stdoutBytes.length, 20000000);
    const records = stdoutBytes.toString('latin1').split('\n');
    assert.equal(records.pop(), '');
    for (let i = 0; i < records.length; i++) {
      if (Number(records[i]) !== i + 1) assert.fail(`record ${i} is ${JSON.stringify(records[i])}`);
    }
  });

  it('bidi: cat echoes each stdin item, call:end_in closes its stdin', async () => {
    const c = await ctx.connect();
    const h = c.exec('cat', {}, { shape: 'bidi' });
    const lines = ['hello\n', 'wörld\n', Buffer.from([0, 1, 2, 255, 10])];
    let expected = Buffer.alloc(0);
    for (const line of lines) {
      c.sendIn(h.id, { stdin: typeof line === 'string' ? Buffer.from(line) : line });
      expected = Buffer.concat([expected, Buffer.from(line)]);
      // Interactive: each piece comes back before the next one is sent.
      const deadline = Date.now() + 5000;
      for (;;) {
        const got = Buffer.concat(h.items.filter((i) => i.stream === 'stdout').map((i) => Buffer.from(i.data)));
        if (got.equals(expected)) break;
        assert.ok(Date.now() < deadline, `echo of ${JSON.stringify(String(line))} did not come back: ${got}`);
        assert.equal(h.terminals.length, 0, 'cat ended early');
        await sleep(10);
      }
    }
    assert.equal(h.terminals.length, 0, 'cat keeps running while its stdin is open');
    c.endIn(h.id);
    const t = await h.done();
    assert.equal(t.event, 'call:end', JSON.stringify(t.msg));
    const { last, stdoutBytes } = splitItems(t.items);
    assert.equal(last.exit_code, 0);
    assert.deepEqual(stdoutBytes, expected, 'all of stdin came back, byte for byte');
  });

  it('bidi: {eof: true} ends stdin and str stdin items work too', async () => {
    const c = await ctx.connect();
    const h = c.exec('wc -c', {}, { shape: 'bidi' });
    c.sendIn(h.id, { stdin: 'abc' });
    c.sendIn(h.id, { stdin: Buffer.from('defg') });
    c.sendIn(h.id, { eof: true });
    const t = await h.done();
    assert.equal(t.event, 'call:end');
    const { last, stdout } = splitItems(t.items);
    assert.equal(stdout.trim(), '7');
    assert.equal(last.exit_code, 0);
  });

  it('bidi: {signal: "INT"} reaches the process (exit 128+2)', async () => {
    const c = await ctx.connect();
    const h = c.exec('echo ready; exec sleep 30', {}, { shape: 'bidi' });
    await h.nItems(1, 5000);
    c.sendIn(h.id, { signal: 'INT' });
    const t = await h.done(5000);
    assert.equal(t.event, 'call:end');
    assert.equal(splitItems(t.items).last.exit_code, 130); // the signal, not sleep's end 30 s later
  });

  it('bidi with a pty: output is tagged pty and a resize reaches the terminal', async () => {
    const c = await ctx.connect();
    const h = c.exec('stty size; read x; stty size', { pty: true, rows: 24, cols: 80 }, { shape: 'bidi' });
    const waitText = async (re) => {
      const deadline = Date.now() + 5000;
      for (;;) {
        const text = Buffer.concat(h.items.filter((i) => i.stream === 'pty').map((i) => Buffer.from(i.data))).toString();
        if (re.test(text)) return text;
        assert.ok(Date.now() < deadline, `no ${re} in ${JSON.stringify(text)}`);
        await sleep(10);
      }
    };
    await waitText(/24 80/);
    c.sendIn(h.id, { resize: [40, 132] });
    c.sendIn(h.id, { stdin: 'go\n' });
    await waitText(/40 132/);
    const t = await h.done();
    assert.equal(t.event, 'call:end');
    assert.equal(splitItems(t.items).last.exit_code, 0);
  });

  it('an inbox item the callee rejects ends the call with that error', async () => {
    const c = await ctx.connect();
    const h = c.exec('cat', {}, { shape: 'bidi' });
    c.sendIn(h.id, { stdni: 'typo' });
    const e = await h.error();
    assert.equal(e.type, 'ValueError');
    assert.match(e.message, /stdni/);
  });
});
