// SPDX-License-Identifier: MIT
// HTTP long-polling over persistent connections, as Node clients do it: the polling cases of
// the official engine.io-protocol and socket.io-protocol test suites against
// `agentix-server --conformance`, once through fetch (undici keeps connections alive) and once
// through http.Agent({keepAlive}) limited to one socket, where every request after the first
// must travel on the same connection (reusedSocket).
import { before, after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Server } from '../lib/server.js';

const PING_INTERVAL = 300;
const PING_TIMEOUT = 200;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let server;
before(async () => { server = await Server.start(['--conformance']); });
after(async () => {
  const st = await server.stop();
  assert.deepEqual(st, { code: 0, signal: null }, server.log());
});

// fetch: the default Node client since 18, keep-alive by default.
function fetchClient() {
  return {
    name: 'fetch',
    async request(method, path, body) {
      const res = await fetch(`${server.url}${path}`, { method, body });
      return { status: res.status, body: await res.text(), headers: res.headers };
    },
    reused: () => true,
    close() {},
  };
}

// http.Agent with keep-alive and a single socket: requests queue on one connection.
function agentClient() {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const reuse = [];
  return {
    name: 'http.Agent',
    request(method, path, body) {
      return new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: server.port, method, path, agent }, (res) => {
          let data = '';
          res.setEncoding('utf8');
          res.on('data', (c) => { data += c; });
          res.on('end', () => {
            reuse.push(req.reusedSocket);
            resolve({ status: res.statusCode, body: data, headers: res.headers });
          });
        });
        req.setTimeout(5000, () => req.destroy(new Error(`${method} ${path}: no answer in 5 s`)));
        req.on('error', reject);
        if (body !== undefined) req.write(body);
        req.end();
      });
    },
    // Every request but the first went over the first request's connection.
    reused: () => reuse.length > 1 && reuse.slice(1).every(Boolean),
    close() { agent.destroy(); },
  };
}

const EIO = '/engine.io/?EIO=4&transport=polling';
const SIO = '/socket.io/?EIO=4&transport=polling';

async function handshake(c, base = EIO) {
  const r = await c.request('GET', base);
  assert.equal(r.status, 200);
  assert.equal(r.body[0], '0');
  return JSON.parse(r.body.slice(1)).sid;
}

// GET until something other than a ping arrives (answering pings, as a client must).
async function poll(c, base, sid) {
  for (;;) {
    const r = await c.request('GET', `${base}&sid=${sid}`);
    if (r.status !== 200 || r.body !== '2') return r;
    await c.request('POST', `${base}&sid=${sid}`, '3');
  }
}

for (const make of [fetchClient, agentClient]) {
  describe(`polling over one kept-alive connection (${make().name})`, () => {
    it('handshake, then errors answered with status and body on a connection that stays usable', async () => {
      const c = make();
      const r = await c.request('GET', EIO);
      assert.equal(r.status, 200);
      const open = JSON.parse(r.body.slice(1));
      assert.deepEqual(Object.keys(open).sort(), ['maxPayload', 'pingInterval', 'pingTimeout', 'sid', 'upgrades']);
      assert.deepEqual(open.upgrades, ['websocket']);
      assert.equal(open.pingInterval, PING_INTERVAL);
      assert.equal(open.pingTimeout, PING_TIMEOUT);

      const cases = [
        ['GET', '/engine.io/?EIO=abc&transport=polling', 5, 'Unsupported protocol version'],
        ['GET', '/engine.io/?EIO=4&transport=abc', 0, 'Transport unknown'],
        ['PUT', EIO, 2, 'Bad handshake method'],
        ['GET', `${EIO}&sid=nope`, 1, 'Session ID unknown'],
        ['POST', `${EIO}&sid=nope`, 1, 'Session ID unknown'],
      ];
      for (const [method, path, code, message] of cases) {
        const e = await c.request(method, path, method === 'GET' ? undefined : '4x');
        assert.equal(e.status, 400, `${method} ${path}`);
        assert.deepEqual(JSON.parse(e.body), { code, message });
      }
      const h = await c.request('GET', '/health');
      assert.equal(h.status, 200);
      assert.equal(JSON.parse(h.body).status, 'ok');
      assert.ok(c.reused(), 'every request after the first reused the connection');
      c.close();
    });

    it('sends and receives text, several packets, text and binary', async () => {
      const c = make();
      const sid = await handshake(c);
      const url = `${EIO}&sid=${sid}`;
      let r = await c.request('POST', url, '4hello');
      assert.deepEqual([r.status, r.body], [200, 'ok']);
      assert.equal((await poll(c, EIO, sid)).body, '4hello');

      r = await c.request('POST', url, '4a\x1e4b\x1e4c');
      assert.deepEqual([r.status, r.body], [200, 'ok']);
      assert.equal((await poll(c, EIO, sid)).body, '4a\x1e4b\x1e4c');

      r = await c.request('POST', url, 'bAQIDBA==\x1e4hello');
      assert.deepEqual([r.status, r.body], [200, 'ok']);
      assert.equal((await poll(c, EIO, sid)).body, 'bAQIDBA==\x1e4hello');
      assert.ok(c.reused());
      c.close();
    });

    it('an invalid packet is a 400 and closes the session', async () => {
      const c = make();
      const sid = await handshake(c);
      const r = await c.request('POST', `${EIO}&sid=${sid}`, 'abc');
      assert.equal(r.status, 400);
      assert.equal((await c.request('GET', `${EIO}&sid=${sid}`)).status, 400);
      assert.ok(c.reused());
      c.close();
    });

    it('heartbeat: ping, pong, and the session times out without pong', async () => {
      const c = make();
      const sid = await handshake(c);
      const url = `${EIO}&sid=${sid}`;
      let r = await c.request('GET', url);
      assert.deepEqual([r.status, r.body], [200, '2']);
      r = await c.request('POST', url, '3');
      assert.deepEqual([r.status, r.body], [200, 'ok']);
      r = await c.request('GET', url);
      assert.deepEqual([r.status, r.body], [200, '2']);
      await sleep(PING_INTERVAL + PING_TIMEOUT + 200);
      assert.equal((await c.request('GET', url)).status, 400);
      assert.ok(c.reused());
      c.close();
    });

    it('a forced close answers the pending GET and ends the session', async () => {
      const c = make();
      const other = make(); // the parked GET holds its connection: the close goes on another
      const sid = await handshake(c);
      const url = `${EIO}&sid=${sid}`;
      const pending = c.request('GET', url);
      await sleep(50);
      assert.equal((await other.request('POST', url, '1')).status, 200);
      const r = await pending;
      assert.equal(r.status, 200);
      assert.ok(r.body === '6' || r.body === '1', r.body);
      assert.equal((await c.request('GET', url)).status, 400);
      assert.ok(c.reused());
      c.close();
      other.close();
    });

    it('a second concurrent GET is a 400 and closes the session', async () => {
      const c = make();
      const other = make();
      const sid = await handshake(c);
      const url = `${EIO}&sid=${sid}`;
      const first = c.request('GET', url);
      await sleep(50);
      assert.equal((await other.request('GET', url)).status, 400);
      const r = await first;
      assert.equal(r.status, 200);
      assert.equal((await c.request('GET', url)).status, 400);
      c.close();
      other.close();
    });

    it('Socket.IO: main and custom namespaces, with and without payload, and leaving them', async () => {
      const c = make();
      const sid = await handshake(c, SIO);
      const url = `${SIO}&sid=${sid}`;
      const next = async () => (await poll(c, SIO, sid)).body.split('\x1e');

      assert.equal((await c.request('POST', url, '40')).status, 200);
      let got = await next();
      assert.match(got[0], /^40\{"sid":"[^"]+"\}$/);
      if (got.length < 2) got = got.concat(await next());
      assert.equal(got[1], '42["auth",{}]');

      assert.equal((await c.request('POST', url, '40/custom,{"token":"abc"}')).status, 200);
      got = await next();
      assert.match(got[0], /^40\/custom,\{"sid":"[^"]+"\}$/);
      if (got.length < 2) got = got.concat(await next());
      assert.equal(got[1], '42/custom,["auth",{"token":"abc"}]');

      // Leaving /custom keeps the main namespace and the connection.
      assert.equal((await c.request('POST', url, '41/custom,')).status, 200);
      assert.equal((await c.request('POST', url, '42["message","to main"]')).status, 200);
      assert.deepEqual(await next(), ['42["message-back","to main"]']);

      assert.equal((await c.request('POST', url, '41')).status, 200);
      // Joining again after leaving works on the same Engine.IO session.
      assert.equal((await c.request('POST', url, '40{"token":"123"}')).status, 200);
      got = await next();
      assert.match(got[0], /^40\{"sid":"[^"]+"\}$/);
      if (got.length < 2) got = got.concat(await next());
      assert.equal(got[1], '42["auth",{"token":"123"}]');
      assert.ok(c.reused());
      c.close();
    });
  });
}
