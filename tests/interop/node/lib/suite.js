// SPDX-License-Identifier: MIT
// Runs a block of tests once per transport, each block against its own server, and ends the
// block with a test that stops the server with SIGTERM and asserts a clean exit (status 0: a
// sanitizer report at exit counts as a failure).
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server } from './server.js';
import { TRANSPORTS, connect, rawSocket, RpcClient } from './rpc.js';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function assertCleanExit(server) {
  const st = await server.stop();
  assert.deepEqual(st, { code: 0, signal: null },
    `agentix-server did not exit 0 on SIGTERM; its log ends with:\n${server.log().slice(-4000)}`);
}

// ctx.server, ctx.transport, ctx.dir (a fresh directory), ctx.connect(opts) (closed after each test).
export function eachTransport(title, body, { serverArgs = [], transports = Object.keys(TRANSPORTS) } = {}) {
  for (const transport of transports) {
    describe(`${title} [${transport}]`, () => {
      const clients = [];
      const ctx = {
        transport,
        dir: mkdtempSync(join(tmpdir(), `agentix-node-${transport}-`)),
        async connect(opts = {}) {
          const c = await connect(ctx.server.url, transport, opts);
          clients.push(c);
          return c;
        },
        // A client whose connection is still being made (emits are buffered until it is).
        open(opts = {}) {
          const c = new RpcClient(rawSocket(ctx.server.url, transport, opts));
          clients.push(c);
          return c;
        },
      };
      before(async () => { ctx.server = await Server.start(serverArgs); });
      afterEach(() => { for (const c of clients.splice(0)) c.close(); });
      after(async () => { if (ctx.server && !ctx.server.exitStatus) await ctx.server.stop(); });

      body(ctx);

      it('the server exits 0 on SIGTERM', async () => {
        for (const c of clients.splice(0)) c.close();
        await assertCleanExit(ctx.server);
      });
    });
  }
}

// Wait until a file exists (a command's way of saying "I have started").
export async function waitFile(path, ms = 10000) {
  const { existsSync } = await import('node:fs');
  const deadline = Date.now() + ms;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`${path} did not appear within ${ms} ms`);
    await sleep(10);
  }
}
