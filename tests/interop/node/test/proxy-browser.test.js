// SPDX-License-Identifier: MIT
// A real browser through the port proxy: headless Chromium opens the link `agentixctl port
// --link` prints (/proxy/PORT/?agentix_token=…) of a web app behind agentix-server (a Node
// HTTP server with a WebSocket echo, on loopback as it would be inside a sandbox). The page
// loads, fetches a relative URL and talks over a WebSocket to its own origin; the token became
// an HttpOnly cookie and left the address bar. A browser without it gets 401. Skipped only
// where Chromium is not installed.
import { before, after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { WebSocketServer } from 'ws';
import { Server, TOKEN } from '../lib/server.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (scripts/deps.sh installs it)`;

const PAGE = `<!doctype html><meta charset="utf-8"><title>app</title>
<script>
window.results = {};
(async () => {
  try {
    window.results.fetched = await (await fetch('data.json')).json();
    const ws = new WebSocket(new URL('echo', location.href).href.replace(/^http/, 'ws'));
    await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('ws error')); });
    ws.send('ping through the proxy');
    window.results.echo = await new Promise((ok) => { ws.onmessage = (m) => ok(m.data); });
    ws.close();
    window.results.cookie = document.cookie;
    window.results.location = location.href;
  } catch (e) {
    window.results.error = String(e);
  }
  window.done = true;
})();
</script>`;

let server, app, browser;

before(async () => {
  if (skip) return;
  server = await Server.start();
  app = http.createServer((req, res) => {
    if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    else if (req.url === '/data.json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url, prefix: req.headers['x-forwarded-prefix'] }));
    else res.writeHead(404).end();
  });
  new WebSocketServer({ server: app, path: '/echo' }).on('connection', (ws) => ws.on('message', (m) => ws.send(m.toString())));
  await new Promise((r) => app.listen(0, '127.0.0.1', r));
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (skip) return;
  await browser?.close();
  app?.close();
  const st = await server.stop();
  assert.deepEqual(st, { code: 0, signal: null }, server.log());
});

describe('a browser opens a web app through the port proxy', { skip }, () => {
  it('with the link: page, fetch and WebSocket, the token a cookie', async () => {
    const port = app.address().port;
    const token = createHmac('sha256', TOKEN).update(`agentix-proxy:${port}`).digest('hex');
    const base = `${server.url}/proxy/${port}/`;
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(`${base}?agentix_token=${token}`);
    assert.equal(response.status(), 200);
    await page.waitForFunction(() => window.done === true, null, { timeout: 20000 });
    const r = await page.evaluate(() => window.results);
    assert.equal(r.error, undefined, JSON.stringify(r));
    assert.deepEqual(r.fetched, { path: '/data.json', prefix: `/proxy/${port}` });
    assert.equal(r.echo, 'ping through the proxy');
    assert.equal(r.location, base, 'the token left the address');
    assert.equal(r.cookie, '', 'the cookie is HttpOnly');
    const cookies = await context.cookies();
    assert.deepEqual(cookies.map((c) => [c.name, c.path, c.httpOnly]), [[`agentix_proxy_${port}`, `/proxy/${port}/`, true]]);
    await context.close();

    // Without the token: 401, and nothing of the app.
    const stranger = await browser.newContext();
    const p2 = await stranger.newPage();
    const denied = await p2.goto(base);
    assert.equal(denied.status(), 401);
    assert.doesNotMatch(await p2.content(), /window\.results/);
    await stranger.close();
  });
});
