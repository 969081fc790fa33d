// SPDX-License-Identifier: MIT
// A real agentix-server on the host for the tests (AGENTIX_SERVER: its binary).
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";

export const TOKEN = "js-client-token";

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Server {
  url: string;
  stop(): Promise<void>;
}

export async function startServer(): Promise<Server> {
  const binary = process.env.AGENTIX_SERVER;
  if (!binary) throw new Error("set AGENTIX_SERVER to the agentix-server binary");
  const port = await freePort();
  const proc: ChildProcess = spawn(binary, ["--host", "127.0.0.1", "--port", String(port)], {
    env: { ...process.env, AGENTIX_TOKEN: TOKEN },
    stdio: "ignore",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  return {
    url,
    stop: () => new Promise((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGTERM");
    }),
  };
}
