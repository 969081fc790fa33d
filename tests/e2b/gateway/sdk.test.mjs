// SPDX-License-Identifier: MIT
// The unmodified `e2b` package through agentix-e2b: E2B_API_URL and E2B_SANDBOX_URL name the
// gateway, E2B_API_KEY a key of its keys file (E2B_OTHER_API_KEY another user's), and
// AGENTIX_E2B_TEMPLATE a template (an agentd pool). tests/agentd/test_e2b.py starts agentd, the
// gateway and this file.
import { test } from "node:test";
import assert from "node:assert/strict";

import { CommandExitError, FileNotFoundError, NotFoundError, Sandbox, SandboxNotFoundError } from "e2b";

const template = process.env.AGENTIX_E2B_TEMPLATE;
const other = { apiKey: process.env.E2B_OTHER_API_KEY };
for (const v of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "E2B_OTHER_API_KEY", "AGENTIX_E2B_TEMPLATE"])
  assert.ok(process.env[v], `${v} is not set (run through tests/agentd/test_e2b.py)`);

async function listAll(opts) {
  const paginator = Sandbox.list(opts);
  const all = [];
  while (paginator.hasNext) all.push(...(await paginator.nextItems()));
  return all;
}

test("create from a template with metadata, envs and a timeout; getInfo; isRunning", async () => {
  const sbx = await Sandbox.create(template, { metadata: { run: "sdk" }, envs: { GREETING: "hi" }, timeoutMs: 120_000 });
  try {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/);
    assert.equal(await sbx.isRunning(), true);
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, template);
    assert.deepEqual(info.metadata, { run: "sdk" });
    assert.equal(info.state, "running");
    assert.ok(Math.abs(info.endAt - Date.now() - 120_000) < 30_000, `endAt ${info.endAt}`);
    // Metrics: one reading, now, from agentd's GetStats().
    const metrics = await sbx.getMetrics();
    assert.equal(metrics.length, 1);
    assert.ok(metrics[0].memUsed > 0 && metrics[0].memTotal >= metrics[0].memUsed, JSON.stringify(metrics));
    assert.ok(metrics[0].cpuCount >= 1 && metrics[0].cpuUsedPct >= 0, JSON.stringify(metrics));
    assert.ok(Math.abs(metrics[0].timestamp.getTime() - Date.now()) < 60_000, JSON.stringify(metrics));
  } finally {
    await sbx.kill();
  }
});

test("files through the gateway: write, read, list, makeDir, exists, getInfo, rename, remove", async () => {
  const sbx = await Sandbox.create(template);
  try {
    await sbx.files.write("/tmp/e2b/w/hello.txt", "hello through the gateway");
    assert.equal(await sbx.files.read("/tmp/e2b/w/hello.txt"), "hello through the gateway");
    const bytes = new Uint8Array(1024 * 1024).map((_, i) => (i * 7) & 0xff);
    await sbx.files.write("/tmp/e2b/w/blob.bin", bytes.buffer);
    assert.ok(Buffer.from(await sbx.files.read("/tmp/e2b/w/blob.bin", { format: "bytes" })).equals(Buffer.from(bytes)));
    // envd 0.5.7's uploads: gzip-encoded, and a stream (application/octet-stream, chunked).
    const many = "gzip me ".repeat(100_000);
    await sbx.files.write("/tmp/e2b/w/zipped.txt", many, { gzip: true });
    assert.equal(await sbx.files.read("/tmp/e2b/w/zipped.txt"), many);
    const stream = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode("streamed, ")); c.enqueue(new TextEncoder().encode("in two")); c.close(); } });
    await sbx.files.write("/tmp/e2b/w/streamed.txt", stream);
    assert.equal(await sbx.files.read("/tmp/e2b/w/streamed.txt", { gzip: true }), "streamed, in two");
    await sbx.files.remove("/tmp/e2b/w/zipped.txt");
    await sbx.files.remove("/tmp/e2b/w/streamed.txt");
    assert.deepEqual((await sbx.files.list("/tmp/e2b/w")).map((e) => e.name).sort(), ["blob.bin", "hello.txt"]);
    const seen = [];
    const watch = await sbx.files.watchDir("/tmp/e2b/w", (e) => seen.push(`${e.type} ${e.name}`));
    await sbx.commands.run("echo new > /tmp/e2b/w/made-by-a-command");
    for (let i = 0; i < 100 && !seen.includes("create made-by-a-command"); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(seen.includes("create made-by-a-command"), JSON.stringify(seen));
    await watch.stop();
    await sbx.files.remove("/tmp/e2b/w");
    assert.equal(await sbx.files.makeDir("/tmp/e2b/a/b"), true);
    assert.equal(await sbx.files.exists("/tmp/e2b/a/b"), true);
    assert.equal((await sbx.files.getInfo("/tmp/e2b/a")).type, "dir");
    const moved = await sbx.files.rename("/tmp/e2b/a", "/tmp/e2b/z");
    assert.equal(moved.path, "/tmp/e2b/z");
    await sbx.files.remove("/tmp/e2b/z");
    assert.equal(await sbx.files.exists("/tmp/e2b/z"), false);
    await assert.rejects(sbx.files.getInfo("/tmp/e2b/z"), FileNotFoundError);
  } finally {
    await sbx.kill();
  }
});

test("commands through the gateway: run, exit codes, background with stdin, kill, list", async () => {
  const sbx = await Sandbox.create(template);
  try {
    const r = await sbx.commands.run("echo out; echo err >&2; echo $GREETING", { envs: { GREETING: "hello" }, cwd: "/tmp" });
    assert.deepEqual([r.exitCode, r.stdout, r.stderr], [0, "out\nhello\n", "err\n"]);
    assert.equal((await sbx.commands.run("pwd", { cwd: "/tmp" })).stdout, "/tmp\n");
    await assert.rejects(sbx.commands.run("exit 7"), (e) => e instanceof CommandExitError && e.exitCode === 7);
    assert.equal((await sbx.commands.run("id -u", { user: "root" })).stdout, "0\n");
    const h = await sbx.commands.run("cat", { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, "via stdin\n");
    await sbx.commands.closeStdin(h.pid);
    assert.equal((await h.wait()).stdout, "via stdin\n");
    const sleeper = await sbx.commands.run("sleep 600", { background: true });
    assert.ok((await sbx.commands.list()).some((p) => p.pid === sleeper.pid));
    assert.equal(await sbx.commands.kill(sleeper.pid), true);
    await assert.rejects(sleeper.wait(), CommandExitError);
  } finally {
    await sbx.kill();
  }
});

test("users as in E2B: requests are `user`'s on an image that has it, root's when they say so", async () => {
  const sbx = await Sandbox.create(template);
  try {
    // The default user: commands, their home and cwd, and what files.* makes.
    const who = await sbx.commands.run("id -u; id -g; echo $HOME $USER; pwd");
    assert.equal(who.stdout, "1000\n1000\n/home/user user\n/home/user\n");
    await sbx.files.write("notes/today.txt", "mine");
    assert.equal(await sbx.files.read("/home/user/notes/today.txt"), "mine");
    assert.equal(await sbx.files.makeDir("made/deeper"), true);
    for (const p of ["notes", "notes/today.txt", "made", "made/deeper"]) {
      const info = await sbx.files.getInfo(p);
      assert.deepEqual([info.owner, info.group], ["user", "user"], p);
    }
    assert.equal((await sbx.files.getInfo("/home")).owner, "root"); // what was there stays
    // `user` is not root: /root is closed to it, as on E2B.
    await assert.rejects(sbx.commands.run("touch /root/x"), (e) => e instanceof CommandExitError && e.exitCode === 1);
    // Asking for root: a root command, root's home, root's files.
    const root = await sbx.commands.run("id -u; echo $HOME; pwd; touch /root/x && echo wrote", { user: "root" });
    assert.equal(root.stdout, "0\n/root\n/root\nwrote\n");
    await sbx.files.write("/tmp/by-root.txt", "r", { user: "root" });
    assert.equal((await sbx.files.getInfo("/tmp/by-root.txt")).owner, "root");
    // A background command as `user`, and a PTY: the same account.
    const h = await sbx.commands.run("id -u", { background: true });
    assert.equal((await h.wait()).stdout, "1000\n");
    let out = "";
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += new TextDecoder().decode(d); } });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("id -u; exit\n"));
    await pty.wait().catch(() => {});
    assert.match(out, /\b1000\b/);
  } finally {
    await sbx.kill();
  }
  // A template's DefaultUser= decides for requests that name no one.
  const rootTemplate = process.env.AGENTIX_E2B_ROOT_TEMPLATE;
  if (rootTemplate) {
    const r = await Sandbox.create(rootTemplate);
    try {
      assert.equal((await r.commands.run("id -u; echo $HOME")).stdout, "0\n/root\n");
      assert.equal((await r.commands.run("id -u", { user: "user" })).stdout, "1000\n");
    } finally {
      await r.kill();
    }
  }
});

test("list with a metadata filter and pages; setTimeout; connect by id; pause and resume; kill", async () => {
  const made = [];
  try {
    for (let i = 0; i < 3; i++) made.push(await Sandbox.create(template, { metadata: { batch: "b1", i: String(i) } }));
    const ids = made.map((s) => s.sandboxId).sort();
    const listed = await listAll({ query: { metadata: { batch: "b1" } }, limit: 2 });
    assert.deepEqual(listed.map((s) => s.sandboxId).sort(), ids);
    const one = await listAll({ query: { metadata: { batch: "b1", i: "1" } } });
    assert.deepEqual(one.map((s) => s.sandboxId), [made[1].sandboxId]);

    await made[0].setTimeout(600_000);
    const info = await made[0].getInfo();
    assert.ok(Math.abs(info.endAt - Date.now() - 600_000) < 30_000, `endAt ${info.endAt}`);

    const again = await Sandbox.connect(made[0].sandboxId);
    assert.equal(again.sandboxId, made[0].sandboxId);
    assert.equal(await again.files.exists("/tmp"), true);

    assert.equal(await made[1].pause(), true);
    assert.equal((await made[1].getInfo()).state, "paused");
    const paused = await listAll({ query: { metadata: { batch: "b1" }, state: ["paused"] } });
    assert.deepEqual(paused.map((s) => s.sandboxId), [made[1].sandboxId]);
    const resumed = await Sandbox.connect(made[1].sandboxId);
    assert.equal(await resumed.isRunning(), true);
    assert.equal((await resumed.getInfo()).state, "running");

    assert.equal(await Sandbox.kill(made[2].sandboxId), true);
    assert.equal(await Sandbox.kill(made[2].sandboxId), false);
    assert.equal(await made[2].isRunning(), false);
  } finally {
    for (const s of made) await Sandbox.kill(s.sandboxId);
  }
});

test("a second key sees none of the first key's sandboxes", async () => {
  const sbx = await Sandbox.create(template, { metadata: { owner: "first" } });
  try {
    assert.deepEqual(await listAll({ ...other, query: { metadata: { owner: "first" } } }), []);
    await assert.rejects(Sandbox.connect(sbx.sandboxId, other), SandboxNotFoundError);
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId, other), (e) => e instanceof NotFoundError || e instanceof SandboxNotFoundError);
    assert.equal(await Sandbox.kill(sbx.sandboxId, other), false);
    assert.equal(await sbx.isRunning(), true);
  } finally {
    await sbx.kill();
  }
});

test("an unknown template is an error naming it", async () => {
  await assert.rejects(Sandbox.create("no-such-template"), /no-such-template/);
});
