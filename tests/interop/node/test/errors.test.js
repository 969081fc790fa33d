// SPDX-License-Identifier: MIT
// Every error type a client can reach, each as the one terminal call:error of its call_id,
// with the stable `type` string and the {type, message, traceback, cancelled} shape.
import { it, describe } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eachTransport, sleep } from '../lib/suite.js';
import { newId, pack } from '../lib/rpc.js';

function assertError(err, type, { cancelled = false } = {}) {
  assert.equal(err?.type, type, `expected ${type}, got ${JSON.stringify(err)}`);
  assert.equal(typeof err.message, 'string');
  assert.ok(err.message.length > 0, 'the message says what went wrong');
  assert.ok('traceback' in err, 'error maps carry traceback (nil when there is none)');
  assert.equal(err.cancelled, cancelled);
}

function processGone(pid) {
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return e.code === 'ESRCH';
  }
}

// A BadRequest that cannot name a call carries call_id "".
async function expectAnonymousBadRequest(c, send) {
  const since = c.mark();
  send();
  const rec = await c.waitFor((r) => r.event === 'call:error', 5000, 'call:error BadRequest', since);
  assert.equal(rec.nargs, 1, 'errors carry one argument too');
  assert.equal(rec.binary, true, 'errors are one binary msgpack attachment too');
  assert.equal(rec.msg.call_id, '');
  assertError(rec.msg.error, 'BadRequest');
  return rec.msg.error;
}

eachTransport('errors', (ctx) => {
  describe('BadRequest', () => {
    it('a call without call_id', async () => {
      const c = await ctx.connect();
      await expectAnonymousBadRequest(c, () => c.send('call', { callable: 'fs::ls', shape: 'unary', args: [ctx.dir], kwargs: {} }));
      await expectAnonymousBadRequest(c, () => c.send('call', { call_id: '', callable: 'fs::ls', shape: 'unary' }));
      await expectAnonymousBadRequest(c, () => c.send('call', { call_id: 42, callable: 'fs::ls', shape: 'unary' }));
    });

    it('a non-binary argument, two arguments, no argument, or an attachment that is not one map', async () => {
      const c = await ctx.connect();
      const body = { call_id: newId(), callable: 'fs::ls', shape: 'unary', args: [ctx.dir], kwargs: {} };
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', body)); // JSON, not msgpack
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', JSON.stringify(body)));
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', pack(body), pack(body)));
      await expectAnonymousBadRequest(c, () => c.socket.emit('call'));
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', Buffer.from([0x93, 1, 2, 3]))); // an array
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', Buffer.from([0xc1, 0xff, 0x00]))); // garbage
      await expectAnonymousBadRequest(c, () => c.socket.emit('call', Buffer.concat([pack(body), Buffer.from([0xc0])])));
      // None of those ran: that call_id is still free and runs now, once.
      const r = await c.call('fs::ls', { args: [ctx.dir], call_id: body.call_id }).result();
      assert.equal(r.error, null);
    });

    it('a bad shape names the call and runs nothing', async () => {
      const c = await ctx.connect();
      const marker = join(ctx.dir, `bad-shape-${Date.now()}`);
      for (const shape of ['duplex', '', 'UNARY', 7]) {
        const h = c.call('sandbox::exec', { kwargs: { command: `touch ${marker}` }, shape });
        const e = await h.error();
        assertError(e, 'BadRequest');
        assert.match(e.message, /shape/);
      }
      const e = await c.call('fs::read', { args: [marker], shape: 'stream' }).error();
      assertError(e, 'BadRequest');
      await sleep(200);
      assert.equal(existsSync(marker), false, 'a rejected call must not run');
    });

    it('a missing or malformed callable, bad args/kwargs/deadline types, an unknown event', async () => {
      const c = await ctx.connect();
      for (const fields of [
        { callable: undefined },
        { callable: 42 },
        { callable: 'fs' },
        { args: 'not-a-list' },
        { kwargs: ['not', 'a', 'map'] },
        { deadline_ms: -5 },
        { deadline_ms: 'soon' },
      ]) {
        const call_id = newId();
        const h = c.track(call_id);
        c.send('call', { call_id, callable: 'fs::ls', shape: 'unary', args: [ctx.dir], kwargs: {}, ...fields });
        assertError(await h.error(), 'BadRequest');
      }
      await expectAnonymousBadRequest(c, () => c.send('no-such-event', { call_id: newId() }));
      // The connection is still good for real work.
      assert.equal((await c.call('fs::ls', { args: [ctx.dir] }).result()).error, null);
    });
  });

  it('NoSuchCallable for an unknown module or function', async () => {
    const c = await ctx.connect();
    assertError(await c.call('nope::nothing').error(), 'NoSuchCallable');
    const e = await c.call('fs::nothing', { args: [] }).error();
    assertError(e, 'NoSuchCallable');
    assert.match(e.message, /nothing/);
  });

  it('ArgumentError names the parameter', async () => {
    const c = await ctx.connect();
    const cases = [
      [c.call('fs::read', { args: [42] }), 'path'],
      [c.call('fs::read', { args: [] }), 'path'],
      [c.call('fs::read', { args: ['/tmp'], kwargs: { bogus: 1 } }), 'bogus'],
      [c.call('fs::write', { kwargs: { path: join(ctx.dir, 'x'), content: 'x', overwrite: 'yes' } }), 'overwrite'],
      [c.call('sandbox::exec', { kwargs: {} }), 'command'],
      [c.call('sandbox::exec', { kwargs: { command: 'true', timeout: 'soon' } }), 'timeout'],
    ];
    for (const [h, param] of cases) {
      const e = await h.error();
      assertError(e, 'ArgumentError');
      assert.match(e.message, new RegExp(`'${param}'`), `the message names '${param}': ${e.message}`);
    }
    assert.equal(existsSync(join(ctx.dir, 'x')), false);
  });

  it('cancel: a running sleep 10 ends promptly with Cancelled, cancelled: true, and its process is gone', async () => {
    const c = await ctx.connect();
    const pidFile = join(ctx.dir, `cancel-${Date.now()}.pid`);
    for (const shape of ['unary', 'stream']) {
      const h = c.exec(`echo $$ > ${pidFile}; exec sleep 10`, {}, { shape });
      const deadline = Date.now() + 5000;
      while (!(existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'))) {
        assert.ok(Date.now() < deadline, 'the command did not start');
        await sleep(10);
      }
      const pid = Number(readFileSync(pidFile, 'utf8'));
      c.cancel(h.id);
      const e = await h.error(5000); // before sleep's own end (10 s): the cancel ended it
      assertError(e, 'Cancelled', { cancelled: true });
      // The process goes with the call (well before sleep would have ended on its own).
      const gone = Date.now() + 5000;
      while (!processGone(pid)) {
        assert.ok(Date.now() < gone, `sleep (pid ${pid}) still runs after the cancel`);
        await sleep(20);
      }
      await sleep(300);
      assert.deepEqual(h.afterTerminal, [], 'nothing after the terminal event');
      assert.equal(h.terminals.length, 1);
    }
    // Cancelling a finished or unknown call is harmless and answers nothing.
    const done = c.exec('echo hi');
    await done.result();
    c.cancel(done.id);
    c.cancel(newId('unknown'));
    await sleep(300);
    assert.equal(done.terminals.length, 1, 'a finished call stays finished');
  });

  it('DeadlineExceeded: deadline_ms 200 on sleep 5', async () => {
    const c = await ctx.connect();
    const e = await c.exec('sleep 5', {}, { deadline_ms: 200 }).error(4500); // before sleep's own end
    assertError(e, 'DeadlineExceeded', { cancelled: true });
    // A deadline that is not reached changes nothing.
    const ok = await c.exec('echo in time', {}, { deadline_ms: 10000 }).result();
    assert.equal(ok.output, 'in time\n');
  });

  it('ResultUnavailable: resume of an unknown id; resume after ack', async () => {
    const c = await ctx.connect();
    const unknown = newId('never-sent');
    const h = c.track(unknown);
    c.resume([unknown]);
    const e = await h.error();
    assertError(e, 'ResultUnavailable');

    const done = c.exec('echo kept');
    assert.equal((await done.result()).output, 'kept\n');
    c.ack(done.id);
    await sleep(100); // ack has no answer; give the server time to forget
    const again = c.track(newId('probe')); // same connection, ordered after the ack
    const since = c.mark();
    c.resume([done.id, again.id]);
    const after = await c.waitFor((r) => r.event === 'call:error' && r.msg.call_id === done.id, 5000,
      'ResultUnavailable for the acked call', since);
    assertError(after.msg.error, 'ResultUnavailable');
    assertError(await again.error(), 'ResultUnavailable');
  });

  it('WorkerDied: kill -9 of the worker fails the calls in flight with returncode -9; the next call works', async () => {
    const c = await ctx.connect();
    const inFlight = c.exec('sleep 5');
    await sleep(200);
    const killer = c.exec('kill -9 $PPID');
    const e = await killer.error(10000);
    assertError(e, 'WorkerDied');
    assert.equal(e.returncode, -9);
    const e2 = await inFlight.error(10000);
    assertError(e2, 'WorkerDied');
    assert.equal(e2.returncode, -9);

    const next = await c.exec('echo alive').result(10000);
    assert.equal(next.output, 'alive\n');
    const ls = await c.call('fs::ls', { args: [ctx.dir] }).result();
    assert.equal(ls.error, null);
  });
});

eachTransport('MessageTooLarge (--max-message=1048576)', (ctx) => {
  it('a 2 MiB call gets MessageTooLarge naming its call_id; the connection stays usable', async () => {
    const c = await ctx.connect();
    const sid = c.socket.id;
    let disconnected = false;
    c.socket.on('disconnect', () => { disconnected = true; });
    const path = join(ctx.dir, 'too-large.bin');
    const h = c.call('fs::write', { args: [path, Buffer.alloc(2 * 1024 * 1024, 0x61)] });
    const e = await h.error(20000);
    assertError(e, 'MessageTooLarge');
    assert.match(e.message, /1048576/, 'the message says the limit');
    assert.equal(existsSync(path), false, 'the oversized call did not run');

    const small = await c.call('fs::write', { args: [path, 'small'] }).result();
    assert.equal(small.error, null);
    assert.equal(readFileSync(path, 'utf8'), 'small');
    assert.equal(disconnected, false, 'the connection was not dropped');
    assert.equal(c.socket.id, sid);

    // Just under the limit still passes.
    const near = await c.call('fs::write', { args: [path, Buffer.alloc(1000 * 1000, 0x62)], kwargs: { overwrite: true } }).result();
    assert.equal(near.error, null);
    assert.equal(readFileSync(path).length, 1000 * 1000);
  });
}, { serverArgs: ['--max-message=1048576'] });
