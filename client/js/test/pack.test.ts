// SPDX-License-Identifier: MIT
// What a user installs: `npm pack` (dist/ built on prepare) gives a tarball that installs into a
// fresh project and works from there against a real agentix-server.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";

import { TOKEN, startServer, type Server } from "./server.js";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..");
let server: Server;
let work: string;

beforeAll(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), "agentix-js-pack-"));
});
afterAll(async () => {
  await server.stop();
  rmSync(work, { recursive: true, force: true });
});

it("npm pack gives a tarball that installs into a fresh project and works there", () => {
  const npm = (args: string[], cwd: string) =>
    execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8", timeout: 300_000 });
  const out = JSON.parse(npm(["pack", "--json", "--pack-destination", work], pkgDir));
  const files = (out[0].files as Array<{ path: string }>).map((f) => f.path);
  expect(files).toContain("dist/index.js");
  expect(files).toContain("dist/index.d.ts");
  expect(files).toContain("dist/deepagents.js");
  expect(files.some((f) => f.startsWith("src/") || f.startsWith("test/"))).toBe(false);
  const tarball = join(work, out[0].filename);

  const project = join(work, "project");
  execFileSync("mkdir", ["-p", project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "uses-agentix", private: true, type: "module" }));
  npm(["install", "--prefer-offline", tarball], project);
  expect(readdirSync(join(project, "node_modules", "@agentix", "client", "dist"))).toContain("index.js");

  writeFileSync(join(project, "main.mjs"), `
    import { RuntimeClient } from "@agentix/client";
    const rt = await RuntimeClient.connect(process.argv[2], process.argv[3]);
    const r = await rt.exec("echo from the installed package");
    console.log(r.exit_code, r.output.trim());
    await rt.close();
  `);
  const printed = execFileSync("node", ["main.mjs", server.url, TOKEN], { cwd: project, encoding: "utf8", timeout: 60_000 });
  expect(printed).toBe("0 from the installed package\n");
});
