// SPDX-License-Identifier: MIT
// The unmodified `e2b` package's commands API (run, background commands, stdin, kill, list,
// connect) against agentix-server's envd Process service (e2b-envd-process.c), in E2B_DEBUG
// mode: the SDK sends envd's requests to http://localhost:49983, where this test starts
// agentix-server (loopback, no token). Through agentix-e2b the same requests come with the
// sandbox's token (tests/e2b/gateway).
import { after, before, test } from "node:test";
import { startLocalServer } from "../lib/local-server.mjs";
import assert from "node:assert/strict";

import { CommandExitError, Sandbox } from "e2b";

const PORT = 49983;
let server;

before(async () => {
  server = await startLocalServer(PORT);
});

after(async () => {
  await server?.stop();
});

test("run: stdout, stderr, exit code, cwd, envs; a failing command is CommandExitError", async () => {
  const sbx = await Sandbox.create();
  const r = await sbx.commands.run("echo hello; echo oops >&2; printf 'no newline'");
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hello\nno newline");
  assert.equal(r.stderr, "oops\n");
  const seen = [];
  const w = await sbx.commands.run("pwd; echo $GREETING", { cwd: server.dir, envs: { GREETING: "hi there" },
                                                             onStdout: (d) => seen.push(d) });
  assert.equal(w.stdout, `${server.dir}\nhi there\n`);
  assert.equal(seen.join(""), w.stdout);
  await assert.rejects(sbx.commands.run("echo before; exit 3"), (e) => {
    assert.ok(e instanceof CommandExitError);
    assert.equal(e.exitCode, 3);
    assert.equal(e.stdout, "before\n");
    return true;
  });
  await assert.rejects(sbx.commands.run("true", { cwd: "/no/such/dir" }), /directory|not found|No such/i);
  // The runtime's own account (root here), and another: the command really is that account's
  // (nobody's home, /nonexistent, is no place to start in: a cwd is given).
  assert.equal((await sbx.commands.run("id -u", { user: "root" })).stdout, "0\n");
  assert.equal((await sbx.commands.run("id -u; echo $USER", { user: "nobody", cwd: "/" })).stdout, "65534\nnobody\n");
  await assert.rejects(sbx.commands.run("true", { user: "nobody" }), /nonexistent/);
  await assert.rejects(sbx.commands.run("id -u", { user: "no-such-account" }), /no such user/);
});

test("background commands: stdin, closeStdin, list, connect, kill", async () => {
  const sbx = await Sandbox.create();
  const h = await sbx.commands.run("read line; echo got $line; cat", { background: true, stdin: true });
  assert.ok(h.pid > 0);
  const listed = await sbx.commands.list();
  const mine = listed.find((p) => p.pid === h.pid);
  assert.ok(mine, JSON.stringify(listed));
  assert.equal(mine.cmd, "/bin/bash");
  assert.deepEqual(mine.args, ["-l", "-c", "read line; echo got $line; cat"]);
  await sbx.commands.sendStdin(h.pid, "first\n");
  await sbx.commands.sendStdin(h.pid, "to cat\n");
  await sbx.commands.closeStdin(h.pid);
  const done = await h.wait();
  assert.equal(done.exitCode, 0);
  assert.equal(done.stdout, "got first\nto cat\n");
  assert.equal((await sbx.commands.list()).find((p) => p.pid === h.pid), undefined);

  const sleeper = await sbx.commands.run("echo started; sleep 600", { background: true });
  await sleeper.disconnect();
  const again = await sbx.commands.connect(sleeper.pid);
  assert.equal(again.pid, sleeper.pid);
  assert.equal(await sbx.commands.kill(sleeper.pid), true);
  await assert.rejects(again.wait(), (e) => e instanceof CommandExitError && e.exitCode !== 0);
  assert.equal(await sbx.commands.kill(sleeper.pid), false);
  await assert.rejects(sbx.commands.connect(999999), /not found|no such/i);
});

test("a command that outlives its stream keeps running, and its output is not kept waiting", async () => {
  const sbx = await Sandbox.create();
  const h = await sbx.commands.run("for i in $(seq 2000); do echo line $i; done; sleep 600", { background: true });
  await h.disconnect();
  await new Promise((r) => setTimeout(r, 300));
  const alive = (await sbx.commands.list()).find((p) => p.pid === h.pid);
  assert.ok(alive, "still running after its stream went");
  assert.equal(await sbx.commands.kill(h.pid), true);
});

test("PTY: create, sendInput, resize, kill", async () => {
  const sbx = await Sandbox.create();
  let out = "";
  // A HOME of the test's own: the login shell reads no profile of the host's user.
  const term = await sbx.pty.create({ cols: 80, rows: 24, envs: { HOME: server.dir },
                                      onData: (d) => { out += new TextDecoder().decode(d); } });
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size; echo pty-ok\n"));
  for (let i = 0; i < 100 && !out.includes("pty-ok\r\n"); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(out, /24 80/);
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size\n"));
  for (let i = 0; i < 100 && !out.includes("30 100"); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(out, /30 100/);
  assert.equal(await sbx.pty.kill(term.pid), true);
});
