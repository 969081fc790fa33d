// SPDX-License-Identifier: MIT
// SandboxManager and session() against a real agentd on a private bus (tests/agentd/with_agentd.py
// starts it and sets DBUS_SYSTEM_BUS_ADDRESS, AGENTIX_TEST_IMAGE and AGENTIX_TEST_BUNDLE).
import { execFileSync } from "node:child_process";
import { afterAll, expect, it } from "vitest";

import { AgentdError, SandboxGone, SandboxManager, session } from "../src/index.js";

const image = process.env.AGENTIX_TEST_IMAGE!;
const bundle = process.env.AGENTIX_TEST_BUNDLE!;
const manager = new SandboxManager();
afterAll(() => manager.close());

it("runs code in a sandbox for the length of a callback, then deletes it", async () => {
  let id = "";
  const out = await session(manager, { image, bundle, memory: 256 << 20, env: { GREETING: "hello" } }, async (rt, sandbox) => {
    id = sandbox.id;
    expect(sandbox.state).toBe("running");
    expect(sandbox.pool).toBe(""); // agentd here has no warm pool: made for this create
    expect(await manager.logs(sandbox.id, 20)).toContain("listening on port 8000");
    const stats = await manager.stats(sandbox.id);
    expect(stats.memory_limit).toBe(256 << 20);
    expect(stats.memory_current).toBeGreaterThan(0);
    expect(stats.pids_current).toBeGreaterThanOrEqual(1);
    expect(typeof stats.cpu_percent).toBe("number");
    expect((await manager.list()).map((s) => s.id)).toContain(id);
    const r = await rt.exec("echo $GREETING; python3 -c 'print(6 * 7)'");
    return r.output;
  });
  expect(out).toBe("hello\n42\n");
  await expect(manager.get(id)).rejects.toBeInstanceOf(SandboxGone);
});

it("pauses, resumes and snapshots a sandbox; a create from the snapshot has its files", async () => {
  const made: string[] = [];
  let snap = "";
  try {
    const a = await manager.create({ image, bundle });
    made.push(a.id);
    const rt = await manager.connect(a.id);
    await rt.exec("echo from-ts > /snap.txt");
    await manager.pause(a.id);
    expect((await manager.get(a.id)).state).toBe("paused");
    await manager.resume(a.id);
    expect((await manager.get(a.id)).state).toBe("running");
    // A web server in the sandbox, through its port's URL.
    await rt.exec("mkdir -p /www && echo from-the-sandbox > /www/i.txt && cd /www && (python3 -m http.server 8080 >/dev/null 2>&1 &)");
    const { url, token } = await manager.portUrl(a.id, 8080);
    expect(url).toMatch(/\/proxy\/8080\/$/);
    let body = "";
    for (let i = 0; i < 100 && body === ""; i++) {
      const r = await fetch(`${url}i.txt`, { headers: { Authorization: `Bearer ${token}` } });
      if (r.status === 200) body = await r.text();
      else await new Promise((ok) => setTimeout(ok, 100));
    }
    expect(body).toBe("from-the-sandbox\n");
    expect((await fetch(`${url}i.txt`)).status).toBe(401);
    snap = await manager.snapshot(a.id, { tag: "agentix-test/ts-snap:1" });
    expect(snap).toBe("agentix-test/ts-snap:1");
    const listed = await manager.listSnapshots();
    expect(listed.find((s) => s.image === snap)?.sandboxId).toBe(a.id);
    rt.close();
    const b = await manager.create({ image: snap, bundle });
    made.push(b.id);
    const rt2 = await manager.connect(b.id);
    expect((await rt2.exec("cat /snap.txt")).output).toBe("from-ts\n");
    rt2.close();
  } finally {
    for (const id of made) await manager.delete(id);
    if (snap) await manager.deleteSnapshot(snap);
  }
  expect((await manager.listSnapshots()).map((s) => s.image)).not.toContain("agentix-test/ts-snap:1");
});

// gVisor through agentd, when dockerd has it (scripts/dockerd.sh registers runsc).
const runsc = execFileSync("docker", ["info", "--format", "{{json .Runtimes}}"], { encoding: "utf8" }).includes('"runsc"');
it.skipIf(!runsc)("runs a sandbox under gVisor with runtime: runsc", async () => {
  const out = await session(manager, { image, bundle, runtime: "runsc" },
    async (rt) => (await rt.exec("uname -r; python3 -c 'print(6 * 7)'")).output);
  expect(out).toBe("4.4.0\n42\n"); // gVisor's kernel answers, not the host's
});

it("passes an egress list: the sandbox goes on agentd's egress network with it", async () => {
  const out = await session(manager, { image, bundle, egress: ["192.0.2.0/24", "2001:db8::/32"] }, async (rt, sandbox) => {
    const info = JSON.parse(execFileSync("docker", ["inspect", `agentix-${sandbox.id}`], { encoding: "utf8" }))[0];
    expect(info.Config.Labels["org.agentix.egress"]).toBe("192.0.2.0/24 2001:db8::/32");
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual(["agentix-egress"]);
    return (await rt.exec("echo still answering")).output;
  });
  expect(out).toBe("still answering\n");
  const err = await manager.create({ image, bundle, egress: ["example.com"] }).catch((e) => e);
  expect(err.dbusName).toBe("org.agentix.Agentd1.InvalidConfig");
  expect(err.message).toContain("'example.com' is not a CIDR");
});

it("deletes the sandbox when the callback throws", async () => {
  let id = "";
  await expect(session(manager, { image, bundle }, async (_rt, sandbox) => {
    id = sandbox.id;
    throw new Error("the agent failed");
  })).rejects.toThrow("the agent failed");
  await expect(manager.get(id)).rejects.toBeInstanceOf(SandboxGone);
});

it("names agentd's errors", async () => {
  const err = await manager.create({ image: "agentix-test/no-such-image:1", bundle }).catch((e) => e);
  expect(err).toBeInstanceOf(AgentdError);
  expect(err.dbusName).toBe("org.agentix.Agentd1.ImageNotFound");
  await expect(manager.get("a000000000000000")).rejects.toBeInstanceOf(SandboxGone);
  await manager.delete("a000000000000000"); // already gone: no error
});

it("runs the example", async () => {
  const { execFile } = await import("node:child_process");
  const { fileURLToPath } = await import("node:url");
  const example = fileURLToPath(new URL("../../../examples/js-example/example.mjs", import.meta.url));
  const out = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [example, image, bundle], { timeout: 120000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  expect(out).toContain("hello agentix\nsum 12\n");
  expect(out).toContain("tick 3\n");
});
