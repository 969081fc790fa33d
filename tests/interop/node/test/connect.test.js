// SPDX-License-Identifier: MIT
// Joining /rpc: the token in the CONNECT auth decides; a wrong or missing one gets
// CONNECT_ERROR {"message":"unauthorized"}.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { eachTransport, sleep } from '../lib/suite.js';
import { rawSocket, expectConnectError, waitUpgraded } from '../lib/rpc.js';

eachTransport('connect', (ctx) => {
  it('connects to /rpc with the right token, on the transport asked for', async () => {
    const c = await ctx.connect();
    assert.equal(c.socket.connected, true);
    assert.equal(typeof c.socket.id, 'string');
    if (ctx.transport === 'upgrade') {
      assert.equal(c.initialTransport, 'polling', 'the default client starts on polling');
      assert.equal(await waitUpgraded(c), 'websocket');
      assert.equal(c.transportName, 'websocket');
    } else {
      assert.equal(c.initialTransport, ctx.transport);
      await sleep(300); // time for an upgrade that must not happen
      assert.equal(c.transportName, ctx.transport);
    }
    // The connection does real work, not just the handshake.
    const ls = await c.call('fs::ls', { args: [ctx.dir] }).result();
    assert.equal(ls.error, null);
    assert.deepEqual(ls.entries, []);
  });

  for (const [what, auth] of [
    ['a wrong token', { token: 'not-the-secret' }],
    ['an empty token', { token: '' }],
    ['a token of the wrong type', { token: 12345 }],
    ['an auth payload without token', { user: 'secret' }],
    ['no auth payload at all', null],
  ]) {
    it(`${what} gets connect_error "unauthorized"`, async () => {
      const s = rawSocket(ctx.server.url, ctx.transport, { auth });
      try {
        const err = await expectConnectError(s);
        assert.equal(err.message, 'unauthorized');
        assert.deepEqual(err.data, undefined, 'the message is the whole CONNECT_ERROR payload');
        assert.equal(s.connected, false);
      } finally {
        s.close();
      }
    });
  }

  it('a refused client does not keep the server from serving the next one', async () => {
    const bad = rawSocket(ctx.server.url, ctx.transport, { auth: { token: 'nope' } });
    await expectConnectError(bad);
    bad.close();
    const c = await ctx.connect();
    const r = await c.call('fs::ls', { args: [ctx.dir] }).result();
    assert.equal(r.error, null);
  });
});

eachTransport('heartbeats (--ping-interval=200 --ping-timeout=400)', (ctx) => {
  it('an idle client answers the server\'s pings and stays connected', async () => {
    const c = await ctx.connect();
    let disconnectReason = null;
    c.socket.on('disconnect', (reason) => { disconnectReason = reason; });
    let pings = 0;
    c.socket.io.engine.on('ping', () => { pings++; });
    const sid = c.socket.id;
    await sleep(2000);
    assert.equal(disconnectReason, null, `disconnected: ${disconnectReason}`);
    assert.ok(pings >= 4, `the server pinged ${pings} times in 2 s at a 200 ms interval`);
    assert.equal(c.socket.id, sid);
    assert.equal((await c.call('fs::ls', { args: [ctx.dir] }).result()).error, null);
  });

  it('a client that stops answering pings is dropped by the server', async () => {
    const c = await ctx.connect();
    const engine = c.socket.io.engine;
    // Silence the client: it keeps reading (and its connection open) but never sends the pong.
    engine.flush = () => {};
    const closed = new Promise((resolve) => c.socket.once('disconnect', resolve));
    const reason = await Promise.race([closed, sleep(5000).then(() => 'still connected')]);
    assert.notEqual(reason, 'still connected');
    // The server ended it: the client saw its transport close (not its own ping timeout).
    assert.match(reason, /^transport (close|error)$/);
  });
}, { serverArgs: ['--ping-interval=200', '--ping-timeout=400'] });
