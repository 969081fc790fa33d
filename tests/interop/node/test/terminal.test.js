// SPDX-License-Identifier: MIT
// Exactly one terminal event per call_id, and nothing after it, over a batch of 200
// concurrent calls of every shape and outcome, including the races of cancel and deadline
// against normal completion.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eachTransport, sleep } from '../lib/suite.js';
import { TERMINAL, newId } from '../lib/rpc.js';

eachTransport('one terminal event per call', (ctx) => {
  it('200 concurrent calls: each call_id gets exactly one terminal event, nothing after it', async () => {
    const c = await ctx.connect();
    const file = join(ctx.dir, 'lines.txt');
    writeFileSync(file, 'one\ntwo\n');

    const expect = new Map(); // call_id -> check(terminal, items)
    const launch = (kind, start, check) => {
      const h = start();
      expect.set(h.id, { kind, check, h });
    };
    for (let i = 0; i < 200; i++) {
      switch (i % 10) {
        case 0: case 1: case 2:
          launch('exec', () => c.exec(`echo ${i}`), (t) => {
            assert.equal(t.event, 'call:result');
            assert.equal(t.msg.value.output, `${i}\n`);
          });
          break;
        case 3:
          launch('stream', () => c.exec(`printf 'a${i}b'`, {}, { shape: 'stream' }), (t) => {
            assert.equal(t.event, 'call:end');
            const data = t.items.filter((x) => x.data).map((x) => Buffer.from(x.data).toString()).join('');
            assert.equal(data, `a${i}b`);
            assert.equal(t.items[t.items.length - 1].exit_code, 0);
          });
          break;
        case 4:
          launch('read', () => c.call('fs::read', { args: [file] }), (t) => {
            assert.equal(t.event, 'call:result');
            assert.equal(t.msg.value.content, '     1\tone\n     2\ttwo');
          });
          break;
        case 5:
          launch('nosuch', () => c.call('nope::nothing'), (t) => {
            assert.equal(t.event, 'call:error');
            assert.equal(t.msg.error.type, 'NoSuchCallable');
          });
          break;
        case 6:
          launch('argerr', () => c.call('fs::read', { args: [i] }), (t) => {
            assert.equal(t.event, 'call:error');
            assert.equal(t.msg.error.type, 'ArgumentError');
          });
          break;
        case 7: {
          // cancel races completion: either outcome, but only one of them
          launch('cancel-race', () => { const h = c.exec(`echo ${i}`); c.cancel(h.id); return h; }, (t) => {
            if (t.event === 'call:error') {
              assert.equal(t.msg.error.type, 'Cancelled');
              assert.equal(t.msg.error.cancelled, true);
            } else {
              assert.equal(t.event, 'call:result');
              assert.equal(t.msg.value.output, `${i}\n`);
            }
          });
          break;
        }
        case 8:
          // deadline races completion
          launch('deadline-race', () => c.exec('sleep 0.2', {}, { deadline_ms: 200 }), (t) => {
            if (t.event === 'call:error') assert.equal(t.msg.error.type, 'DeadlineExceeded');
            else assert.equal(t.msg.value.exit_code, 0);
          });
          break;
        case 9:
          launch('cancel-stream', () => {
            const h = c.exec('sleep 5', {}, { shape: 'stream' });
            setTimeout(() => c.cancel(h.id), 100);
            return h;
          }, (t) => {
            assert.equal(t.event, 'call:error');
            assert.equal(t.msg.error.type, 'Cancelled');
          });
          break;
      }
    }
    assert.equal(expect.size, 200);

    await Promise.all([...expect.values()].map(({ h }) => h.done(60000)));
    await sleep(1000); // anything late (a second terminal, a stray item) shows up here

    const perId = new Map();
    for (const rec of c.inbound) {
      const id = rec.msg?.call_id;
      assert.ok(expect.has(id), `an event for a call_id nobody sent: ${rec.event} ${JSON.stringify(rec.msg)}`);
      const seen = perId.get(id) ?? { terminal: 0, afterTerminal: [] };
      if (seen.terminal > 0) seen.afterTerminal.push(rec.event);
      if (TERMINAL.has(rec.event)) seen.terminal++;
      perId.set(id, seen);
    }
    const outcomes = {};
    for (const [id, { kind, check, h }] of expect) {
      const seen = perId.get(id);
      assert.ok(seen, `${kind} call ${id} got no event at all`);
      assert.equal(seen.terminal, 1, `${kind} call ${id} got ${seen.terminal} terminal events`);
      assert.deepEqual(seen.afterTerminal, [], `${kind} call ${id} got events after its terminal one`);
      const t = await h.done();
      check(t, t.items);
      const key = `${kind}:${t.event === 'call:error' ? t.msg.error.type : t.event}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    }
    ctx.outcomes = outcomes;
    console.log(`[${ctx.transport}] outcomes: ${JSON.stringify(outcomes)}`);
  });
});

eachTransport('many clients', (ctx) => {
  it('30 clients at once: each gets the events of its own calls and nothing else', async () => {
    const clients = await Promise.all(Array.from({ length: 30 }, () => ctx.connect()));
    const calls = clients.map((c, i) => [
      c.exec(`echo client ${i}`),
      c.exec(`printf 'stream ${i}'`, {}, { shape: 'stream' }),
    ]);
    await Promise.all(calls.flat().map((h) => h.done(30000)));
    await sleep(300);
    clients.forEach((c, i) => {
      const mine = new Set(calls[i].map((h) => h.id));
      for (const rec of c.inbound) assert.ok(mine.has(rec.msg?.call_id), `client ${i} got ${rec.event} for ${rec.msg?.call_id}`);
      assert.equal(calls[i][0].terminals[0].msg.value.output, `client ${i}\n`);
      assert.equal(Buffer.from(calls[i][1].items[0].data).toString(), `stream ${i}`);
    });
  });
});
