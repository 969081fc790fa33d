// SPDX-License-Identifier: MIT
// An agentix-server process on a free loopback port, stopped with SIGTERM at the end; stop()
// resolves to its exit status and the caller asserts it was 0.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, openSync, readFileSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TOKEN = 'secret';

export function serverBinary() {
  const path = process.env.AGENTIX_SERVER;
  if (!path) throw new Error('set AGENTIX_SERVER to the agentix-server binary');
  return path;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Server {
  static async start(extraArgs = [], { env = {} } = {}) {
    const s = new Server();
    await s.#start(extraArgs, env);
    return s;
  }

  async #start(extraArgs, env) {
    this.port = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.logPath = join(mkdtempSync(join(tmpdir(), 'agentix-node-')), 'server.log');
    const log = openSync(this.logPath, 'w');
    this.proc = spawn(serverBinary(), ['--host', '127.0.0.1', '--port', String(this.port), ...extraArgs], {
      env: { ...process.env, AGENTIX_TOKEN: TOKEN, ...env },
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => resolve({ code, signal }));
    });
    this.exitStatus = null;
    this.exited.then((st) => { this.exitStatus = st; });

    const deadline = Date.now() + 15000;
    for (;;) {
      if (this.exitStatus) throw new Error(`server exited early ${JSON.stringify(this.exitStatus)}: ${this.log()}`);
      try {
        const res = await fetch(`${this.url}/health`);
        if (res.ok) {
          this.health = await res.json();
          return;
        }
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) {
        this.proc.kill('SIGKILL');
        throw new Error(`server did not answer /health in time: ${this.log()}`);
      }
      await sleep(50);
    }
  }

  log() {
    try { return readFileSync(this.logPath, 'utf8'); } catch { return ''; }
  }

  // SIGTERM, wait (bounded), and return {code, signal}; SIGKILL if it hangs.
  async stop(timeoutMs = 15000) {
    if (!this.exitStatus) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    const st = await this.exited;
    clearTimeout(timer);
    return st;
  }
}
