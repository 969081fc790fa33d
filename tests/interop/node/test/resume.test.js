// SPDX-License-Identifier: MIT
// Calls outlive a dropped connection: after a reconnect, `resume` re-attaches running calls
// and replays finished ones until they are acked; a repeated call_id never runs twice.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eachTransport, sleep, waitFile } from '../lib/suite.js';
import { dropConnection, reconnect, newId } from '../lib/rpc.js';

const lines = (path) => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : []);

eachTransport('resume and at-most-once', (ctx) => {
  it('a call still running when the connection drops is resumed after the reconnect', async () => {
    const c = await ctx.connect();
    const started = join(ctx.dir, `started-${newId()}`);
    const h = c.exec(`touch ${started}; sleep 1; echo done`);
    await waitFile(started); // the server has the call
    const oldId = c.socket.id;
    await dropConnection(c);
    await reconnect(c);
    assert.notEqual(c.socket.id, oldId, 'a new Socket.IO session');
    assert.equal(h.terminals.length, 0, 'the call was still running');
    c.resume([h.id]);
    const r = await h.result(10000);
    assert.deepEqual(r, { exit_code: 0, output: 'done\n', truncated: false, timed_out: false });
    await sleep(200);
    assert.equal(h.terminals.length, 1);
  });

  it('a result finished while disconnected is replayed to a new client until acked', async () => {
    const c1 = await ctx.connect();
    const started = join(ctx.dir, `started-${newId()}`);
    const h1 = c1.exec(`touch ${started}; sleep 0.3; echo done while away`);
    await waitFile(started);
    await dropConnection(c1);
    await sleep(1000); // the call finishes with nobody attached

    const c2 = await ctx.connect();
    const h2 = c2.track(h1.id);
    c2.resume([h1.id]);
    const r = await h2.result();
    assert.equal(r.output, 'done while away\n');
    assert.equal(h1.terminals.length, 0, 'the dropped client never saw it');

    // Not acked yet: a second resume replays it again.
    const since = c2.mark();
    c2.resume([h1.id]);
    const again = await c2.waitFor((e) => e.msg?.call_id === h1.id, 5000, 'the second replay', since);
    assert.equal(again.event, 'call:result');
    assert.deepEqual(again.msg.value, r);

    // Acked: gone.
    c2.ack(h1.id);
    const since2 = c2.mark();
    c2.resume([h1.id]);
    const gone = await c2.waitFor((e) => e.msg?.call_id === h1.id, 5000, 'ResultUnavailable', since2);
    assert.equal(gone.event, 'call:error');
    assert.equal(gone.msg.error.type, 'ResultUnavailable');
  });

  it('a clean disconnect (Socket.IO DISCONNECT) does not cancel a running call either', async () => {
    const c1 = await ctx.connect();
    const started = join(ctx.dir, `started-${newId()}`);
    const done = join(ctx.dir, `done-${newId()}`);
    const h = c1.exec(`touch ${started}; sleep 0.5; touch ${done}; echo finished`);
    await waitFile(started);
    c1.socket.disconnect();
    await waitFile(done, 5000); // it ran to the end with nobody connected
    const c2 = await ctx.connect();
    const h2 = c2.track(h.id);
    c2.resume([h.id]);
    assert.equal((await h2.result()).output, 'finished\n');
  });

  it('a stream resumed after a drop gets the items made meanwhile, in order, then call:end', async () => {
    const c = await ctx.connect();
    const h = c.exec('echo a; sleep 0.5; echo b; sleep 0.1; echo c', {}, { shape: 'stream' });
    await h.nItems(1, 5000);
    assert.equal(Buffer.from(h.items[0].data).toString(), 'a\n');
    await dropConnection(c);
    await sleep(1200); // b, c and the status are produced while nobody listens
    await reconnect(c);
    c.resume([h.id]);
    const t = await h.done(10000);
    assert.equal(t.event, 'call:end');
    const data = t.items.filter((i) => i.data).map((i) => Buffer.from(i.data).toString()).join('');
    assert.equal(data, 'a\nb\nc\n', 'every item exactly once, in order');
    assert.equal(t.items[t.items.length - 1].exit_code, 0);
  });

  it('resume mixes running, finished and unknown ids in one request', async () => {
    const c = await ctx.connect();
    const started = join(ctx.dir, `started-${newId()}`);
    const running = c.exec(`touch ${started}; sleep 0.8; echo slow`);
    const quick = c.exec('echo quick');
    await quick.result();
    await waitFile(started);
    await dropConnection(c);
    await reconnect(c);
    const unknown = c.track(newId('unknown'));
    const since = c.mark();
    c.resume([quick.id, running.id, unknown.id]);
    assert.equal((await running.result(10000)).output, 'slow\n');
    assert.equal((await unknown.error()).type, 'ResultUnavailable');
    const replay = await c.waitFor((e) => e.msg?.call_id === quick.id, 5000, 'the replay', since);
    assert.equal(replay.msg.value.output, 'quick\n');
  });

  it('a repeated call_id never runs twice: while running, after finishing, from another client, after ack', async () => {
    const c = await ctx.connect();
    const file = join(ctx.dir, `once-${newId()}.txt`);
    const started = join(ctx.dir, `started-${newId()}`);
    const call_id = newId('once');
    const cmd = `touch ${started}; sleep 0.3; echo ran >> ${file}; echo ok`;

    const h = c.exec(cmd, {}, { call_id });
    await waitFile(started);
    c.exec(cmd, {}, { call_id }); // a duplicate while it runs
    const r = await h.result(10000);
    assert.equal(r.output, 'ok\n');
    await sleep(300);
    assert.equal(h.terminals.length, 1, 'the duplicate re-attached: still one terminal event');
    assert.deepEqual(lines(file), ['ran']);

    // After it finished: the same id answers with the kept result and runs nothing.
    const since = c.mark();
    c.exec(cmd, {}, { call_id });
    const replay = await c.waitFor((e) => e.msg?.call_id === call_id, 5000, 'the replay', since);
    assert.equal(replay.event, 'call:result');
    assert.deepEqual(replay.msg.value, r);

    // From another connection, even with another callable: no second run.
    const c2 = await ctx.connect();
    const other = c2.call('fs::write', { args: [join(ctx.dir, 'must-not-exist'), 'x'], call_id });
    const t = await other.done();
    assert.equal(t.event, 'call:result');
    assert.deepEqual(t.msg.value, r, 'the first call\'s result, not a new run');
    assert.equal(existsSync(join(ctx.dir, 'must-not-exist')), false);

    // After ack: the id stays used.
    c2.ack(call_id);
    const since2 = c2.mark();
    c2.exec(cmd, {}, { call_id });
    const gone = await c2.waitFor((e) => e.msg?.call_id === call_id, 5000, 'ResultUnavailable', since2);
    assert.equal(gone.event, 'call:error');
    assert.equal(gone.msg.error.type, 'ResultUnavailable');

    await sleep(700); // time for any wrongful second run to write its line
    assert.deepEqual(lines(file), ['ran'], 'the command ran exactly once');
  });
});
