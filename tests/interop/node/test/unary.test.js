// SPDX-License-Identifier: MIT
// Unary calls and binary data: fs round trips, sandbox::exec, and bytes that must arrive
// exactly as sent (all 256 byte values, 5 MiB) without base64 in the RPC layer.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eachTransport } from '../lib/suite.js';

const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

eachTransport('unary', (ctx) => {
  it('fs::write then fs::read round-trips text', async () => {
    const c = await ctx.connect();
    const path = join(ctx.dir, 'hello.txt');
    const text = 'hello\nwörld ✓\nthird line\n';
    const w = await c.call('fs::write', { args: [path, text] }).result();
    assert.deepEqual(w, { path, bytes_written: Buffer.byteLength(text), error: null, message: null });
    assert.equal(readFileSync(path, 'utf8'), text, 'the file on disk holds what was sent');

    const r = await c.call('fs::read', { args: [path] }).result();
    assert.equal(r.error, null);
    assert.equal(r.encoding, 'utf-8');
    assert.equal(r.total_lines, 3);
    assert.equal(r.content, '     1\thello\n     2\twörld ✓\n     3\tthird line');

    // kwargs work as well as args, and the second page starts where asked.
    const p = await c.call('fs::read', { kwargs: { path, offset: 1, limit: 1 } }).result();
    assert.equal(p.content, '     2\twörld ✓');
    assert.equal(p.next_offset, 2);
  });

  it('fs::write refuses to overwrite unless asked, reporting it in the result', async () => {
    const c = await ctx.connect();
    const path = join(ctx.dir, 'once.txt');
    assert.equal((await c.call('fs::write', { args: [path, 'one'] }).result()).error, null);
    const again = await c.call('fs::write', { args: [path, 'two'] }).result();
    assert.equal(again.error, 'already_exists');
    assert.equal(readFileSync(path, 'utf8'), 'one');
    const forced = await c.call('fs::write', { args: [path, 'two'], kwargs: { overwrite: true } }).result();
    assert.equal(forced.error, null);
    assert.equal(readFileSync(path, 'utf8'), 'two');
  });

  it('sandbox::exec echo returns the deepagents execute result', async () => {
    const c = await ctx.connect();
    const r = await c.exec('echo hello; echo oops >&2').result();
    assert.equal(r.exit_code, 0);
    assert.equal(r.truncated, false);
    assert.equal(r.timed_out, false);
    assert.match(r.output, /hello\n/);
    assert.match(r.output, /oops/, 'stderr is combined into output');

    const failed = await c.exec('exit 7').result();
    assert.equal(failed.exit_code, 7);

    const withArgs = await c.exec('pwd; printf %s "$GREETING"; cat', {
      cwd: ctx.dir, env: { GREETING: 'hi there' }, stdin: 'from stdin',
    }).result();
    assert.equal(withArgs.exit_code, 0);
    assert.equal(withArgs.output, `${ctx.dir}\nhi therefrom stdin`);
  });

  it('fs::upload then fs::download round-trips all 256 byte values', async () => {
    const c = await ctx.connect();
    const path = join(ctx.dir, 'bytes.bin');
    const up = await c.call('fs::upload', { args: [[[path, ALL_BYTES]]] }).result();
    assert.deepEqual(up, [{ path, error: null, message: null }]);
    assert.deepEqual(readFileSync(path), ALL_BYTES, 'the file on disk holds exactly the bytes sent');

    const down = await c.call('fs::download', { args: [[path]] }).result();
    assert.equal(down.length, 1);
    assert.equal(down[0].error, null);
    assert.ok(down[0].content instanceof Uint8Array, 'content comes back as msgpack bin');
    assert.deepEqual(Buffer.from(down[0].content), ALL_BYTES);

    // fs::read of a binary file gives the bytes too.
    const r = await c.call('fs::read', { args: [path] }).result();
    assert.equal(r.encoding, 'bytes');
    assert.deepEqual(Buffer.from(r.data), ALL_BYTES);
  });

  it('a 5 MiB buffer goes up and comes back byte for byte', async () => {
    const c = await ctx.connect();
    const big = randomBytes(5 * 1024 * 1024);
    const path = join(ctx.dir, 'big.bin');
    const up = await c.call('fs::upload', { args: [[[path, big]]] }).result(60000);
    assert.equal(up[0].error, null);
    assert.ok(readFileSync(path).equals(big));

    const down = await c.call('fs::download', { args: [[path]] }).result(60000);
    assert.equal(down[0].error, null);
    assert.equal(down[0].content.length, big.length);
    assert.ok(Buffer.from(down[0].content).equals(big), 'downloaded bytes differ from the uploaded ones');
  });

  it('fs::download keeps input order and reports per-file errors without failing the call', async () => {
    const c = await ctx.connect();
    const a = join(ctx.dir, 'a.txt');
    writeFileSync(a, 'A');
    const missing = join(ctx.dir, 'missing.txt');
    const down = await c.call('fs::download', { args: [[missing, a, 'relative/path', ctx.dir]] }).result();
    assert.deepEqual(down.map((d) => d.path), [missing, a, 'relative/path', ctx.dir]);
    assert.deepEqual(down.map((d) => d.error), ['file_not_found', null, 'invalid_path', 'is_directory']);
    assert.deepEqual(Buffer.from(down[1].content), Buffer.from('A'));
  });
});
