// SPDX-License-Identifier: MIT
// A real agentix-server on the host for the tests (AGENTIX_SERVER: its binary).
import { spawn, type ChildProcess } from "node:child_process";
import { connect, createServer } from "node:net";

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

/** tls: serve HTTPS with this certificate and key (files). */
export async function startServer(tls?: { cert: string; key: string }): Promise<Server> {
  const binary = process.env.AGENTIX_SERVER;
  if (!binary) throw new Error("set AGENTIX_SERVER to the agentix-server binary");
  const port = await freePort();
  const proc: ChildProcess = spawn(binary, ["--host", "127.0.0.1", "--port", String(port),
    ...(tls ? ["--tls-cert", tls.cert, "--tls-key", tls.key] : [])], {
    env: { ...process.env, AGENTIX_TOKEN: TOKEN },
    stdio: "ignore",
  });
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      if (tls) {
        // Up once the port takes connections (fetch would refuse the test CA).
        await new Promise<void>((resolve, reject) => {
          const s = connect(port, "127.0.0.1", () => { s.end(); resolve(); });
          s.on("error", reject);
        });
        break;
      }
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
