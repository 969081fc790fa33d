// SPDX-License-Identifier: MIT
// agentix-server on 127.0.0.1:PORT (no token: loopback) in a scratch directory, for E2B's SDK
// in E2B_DEBUG mode, which sends a sandbox's requests for a port to localhost:PORT.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

export async function startLocalServer(port) {
  const dir = mkdtempSync(join(tmpdir(), "agentix-e2b-"));
  // HOME is the scratch directory: E2B's commands run `bash -l`, which must not read the profile
  // of whoever runs the tests (a slow one would time the commands out).
  const env = { ...process.env, HOME: dir };
  delete env.AGENTIX_TOKEN;
  const proc = spawn(process.env.AGENTIX_SERVER, ["--host", "127.0.0.1", "--port", String(port)],
                     { cwd: dir, env, stdio: ["ignore", "inherit", "inherit"] });
  const exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
  for (let i = 0; ; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false);
    if (up) break;
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r(undefined), 50))]);
    if (code !== undefined) throw new Error(`agentix-server exited with ${code} (is port ${port} taken?)`);
    if (i > 200) throw new Error("agentix-server did not come up");
  }
  process.env.E2B_DEBUG = "true";
  return {
    dir,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        assert.equal(await exited, 0, "agentix-server exits cleanly on SIGTERM");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
