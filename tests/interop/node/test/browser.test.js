// SPDX-License-Identifier: MIT
// A real browser: headless Chromium (Debian's, driven by playwright-core) loads a page from
// another origin that uses the stock socket.io-client bundle to call sandbox::exec (unary and
// a stream), fs::write and fs::read through agentix-server, once over WebSocket and once forced
// to HTTP long-polling (CORS, the browser's own connection reuse). The test reads the results
// from the page. Skipped (77-style) only where Chromium is not installed.
import { before, after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, TOKEN } from '../lib/server.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const here = dirname(fileURLToPath(import.meta.url));
const files = {
  '/': [join(here, '../browser/page.html'), 'text/html; charset=utf-8'],
  '/socket.io.min.js': [join(here, '../node_modules/socket.io-client/dist/socket.io.min.js'), 'text/javascript'],
  '/msgpack.min.js': [join(here, '../node_modules/@msgpack/msgpack/dist.umd/msgpack.min.js'), 'text/javascript'],
};

const skip = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (scripts/deps.sh installs it)`;
let server, pages, browser, dir;

before(async () => {
  if (skip) return;
  server = await Server.start();
  dir = mkdtempSync(join(tmpdir(), 'agentix-browser-'));
  // The page's origin: another port, and "localhost" where the server is "127.0.0.1".
  pages = http.createServer((req, res) => {
    const f = files[new URL(req.url, 'http://x').pathname];
    if (!f) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': f[1] }).end(readFileSync(f[0]));
  });
  await new Promise((r) => pages.listen(0, '127.0.0.1', r));
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
  pages?.close();
  const st = await server.stop();
  rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(st, { code: 0, signal: null }, server.log());
});

describe('a browser page on another origin calls agentix-server with socket.io-client', { skip }, () => {
  for (const transport of ['websocket', 'polling']) {
    it(`over ${transport}`, async () => {
      const page = await browser.newPage();
      const consoleLines = [];
      page.on('console', (m) => consoleLines.push(m.text()));
      const url = `http://localhost:${pages.address().port}/?` + new URLSearchParams({
        server: server.url, token: TOKEN, transport, dir,
      });
      await page.goto(url);
      await page.waitForFunction(() => window.done === true, null, { timeout: 20000 });
      const r = await page.evaluate(() => window.results);
      await page.close();

      assert.deepEqual(r.errors, [], JSON.stringify({ r, consoleLines }));
      if (process.env.DEBUG_BROWSER) console.log(JSON.stringify(r));
      assert.notEqual(new URL(r.origin).origin, new URL(server.url).origin, 'the page is cross-origin');
      assert.deepEqual(r.transports, [transport, transport], 'no upgrade, no fallback');
      assert.equal(r.exec.exit_code, 3);
      assert.match(r.exec.output, /^hello from \S*sh\nto-stderr\n$/);
      assert.equal(r.exec.timed_out, false);
      assert.equal(r.write.error, null);
      assert.equal(r.read.error, null);
      assert.equal(r.read.content, '     1\tfirst line\n     2\tsecond ✓ line');
      assert.equal(r.stream.output, 'chunk 1\nchunk 2\nchunk 3\n');
      assert.equal(r.stream.exit_code, 0);
      assert.ok(r.stream.n_items >= 4, `${r.stream.n_items} items`);
      rmSync(join(dir, 'from-browser.txt'));
    });
  }
});
