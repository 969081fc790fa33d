// SPDX-License-Identifier: MIT
// The unmodified `e2b` package's files API (getInfo, exists, makeDir, rename, remove) against
// agentix-server's envd Filesystem calls (e2b-envd-filesystem.c), the way the SDK reaches a
// sandbox it was told is local: E2B_DEBUG=true sends envd's requests to http://localhost:49983,
// where this test starts agentix-server (loopback, no token). Through agentix-e2b the same
// requests come with the sandbox's token.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync, symlinkSync, existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { startLocalServer } from "../lib/local-server.mjs";
import assert from "node:assert/strict";

import { FileNotFoundError, Sandbox } from "e2b";

const PORT = 49983; // envd's, fixed in E2B_DEBUG mode
let server;
let dir;

before(async () => {
  server = await startLocalServer(PORT);
  dir = server.dir;
});

after(async () => {
  await server?.stop();
});

test("getInfo and exists", async () => {
  const sbx = await Sandbox.create();
  writeFileSync(join(dir, "f.txt"), "hello");
  symlinkSync("f.txt", join(dir, "link"));
  const info = await sbx.files.getInfo(join(dir, "f.txt"));
  assert.equal(info.name, "f.txt");
  assert.equal(info.type, "file");
  assert.equal(info.path, join(dir, "f.txt"));
  assert.equal(info.size, 5);
  assert.match(info.permissions, /^-rw-[r-][w-]-[r-][w-]-$/);
  assert.equal(info.mode, statSync(join(dir, "f.txt")).mode & 0o7777);
  assert.ok(info.modifiedTime instanceof Date && Math.abs(info.modifiedTime - statSync(join(dir, "f.txt")).mtime) < 1000);
  assert.equal(typeof info.owner, "string");
  assert.equal((await sbx.files.getInfo(dir)).type, "dir");
  const link = await sbx.files.getInfo(join(dir, "link"));
  assert.equal(link.type, "symlink");
  assert.equal(link.symlinkTarget, "f.txt");
  assert.equal(await sbx.files.exists(join(dir, "f.txt")), true);
  assert.equal(await sbx.files.exists(join(dir, "missing")), false);
  await assert.rejects(sbx.files.getInfo(join(dir, "missing")), FileNotFoundError);
});

test("makeDir, rename and remove", async () => {
  const sbx = await Sandbox.create();
  assert.equal(await sbx.files.makeDir(join(dir, "a/b/c")), true);
  assert.equal(await sbx.files.makeDir(join(dir, "a/b/c")), false); // there already
  assert.ok(statSync(join(dir, "a/b/c")).isDirectory());
  const moved = await sbx.files.rename(join(dir, "a/b"), join(dir, "x/y"));
  assert.equal(moved.path, join(dir, "x/y"));
  assert.equal(moved.type, "dir");
  assert.ok(existsSync(join(dir, "x/y/c")) && !existsSync(join(dir, "a/b")));
  await assert.rejects(sbx.files.rename(join(dir, "nope"), join(dir, "z")), FileNotFoundError);
  await sbx.files.remove(join(dir, "x"));
  assert.equal(existsSync(join(dir, "x")), false);
  await assert.rejects(sbx.files.remove(join(dir, "x")), FileNotFoundError);
});

test("list with depth: entries below a directory, breadth first; errors", async () => {
  const sbx = await Sandbox.create();
  const top = join(dir, "tree");
  await sbx.files.makeDir(join(top, "a/b/c"));
  writeFileSync(join(top, "f.txt"), "12345");
  writeFileSync(join(top, "a/g.txt"), "x");
  const one = await sbx.files.list(top);
  assert.deepEqual(one.map((e) => [e.name, e.type]).sort(), [["a", "dir"], ["f.txt", "file"]]);
  assert.equal(one.find((e) => e.name === "f.txt").size, 5);
  assert.equal(one.find((e) => e.name === "f.txt").path, join(top, "f.txt"));
  const two = await sbx.files.list(top, { depth: 2 });
  assert.deepEqual(two.map((e) => e.path.slice(top.length + 1)).sort(), ["a", "a/b", "a/g.txt", "f.txt"]);
  const all = await sbx.files.list(top, { depth: 10 });
  assert.deepEqual(all.map((e) => e.path.slice(top.length + 1)).sort(), ["a", "a/b", "a/b/c", "a/g.txt", "f.txt"]);
  assert.deepEqual(await sbx.files.list(join(top, "a/b/c")), []);
  await assert.rejects(sbx.files.list(join(top, "missing")), FileNotFoundError);
  await assert.rejects(sbx.files.list(join(top, "f.txt")), /not a directory/);
});

test("write and read: text, binary (3 MiB), several files at once, replacing; errors", async () => {
  const sbx = await Sandbox.create();
  const info = await sbx.files.write(join(dir, "w/new/hello.txt"), "hello, envd");
  assert.equal(info.path, join(dir, "w/new/hello.txt"));
  assert.equal(info.name, "hello.txt");
  assert.equal(readFileSync(join(dir, "w/new/hello.txt"), "utf8"), "hello, envd");
  assert.equal(await sbx.files.read(join(dir, "w/new/hello.txt")), "hello, envd");
  const bytes = new Uint8Array(3 * 1024 * 1024 + 7).map((_, i) => (i * 31) & 0xff);
  await sbx.files.write(join(dir, "w/blob.bin"), bytes.buffer);
  const back = await sbx.files.read(join(dir, "w/blob.bin"), { format: "bytes" });
  assert.equal(back.length, bytes.length);
  assert.ok(Buffer.from(back).equals(Buffer.from(bytes)));
  assert.equal(await sbx.files.read(join(dir, "w/new/hello.txt"), { format: "bytes" }).then((b) => b.length), 11);
  writeFileSync(join(dir, "w/empty"), "");
  assert.equal(await sbx.files.read(join(dir, "w/empty")), "");
  const many = await sbx.files.write([{ path: join(dir, "w/m/a"), data: "A" }, { path: join(dir, "w/m/b"), data: "B" }]);
  assert.deepEqual(many.map((f) => f.name), ["a", "b"]);
  assert.equal(readFileSync(join(dir, "w/m/b"), "utf8"), "B");
  await sbx.files.write(join(dir, "w/new/hello.txt"), "replaced");
  assert.equal(readFileSync(join(dir, "w/new/hello.txt"), "utf8"), "replaced");
  await assert.rejects(sbx.files.read(join(dir, "w/none")), FileNotFoundError);
  await assert.rejects(sbx.files.read(join(dir, "w")), /directory/);
  await assert.rejects(sbx.files.write(join(dir, "w/new/hello.txt/under-a-file"), "x"), /directory/);
  // gzip-encoded uploads inflate in the worker; content that is not gzip changes nothing.
  await sbx.files.write(join(dir, "w/z.bin"), bytes.buffer, { gzip: true });
  assert.ok(readFileSync(join(dir, "w/z.bin")).equals(Buffer.from(bytes)));
  const raw = (body, headers) => fetch(`http://127.0.0.1:${PORT}/files?path=${encodeURIComponent(join(dir, "w/z.bin"))}`,
                                       { method: "POST", body, headers: { "Content-Type": "application/octet-stream", ...headers } });
  let r = await raw("not gzip at all", { "Content-Encoding": "gzip" });
  assert.ok(r.status >= 400, `status ${r.status}`);
  assert.match((await r.json()).message, /not valid gzip/);
  r = await raw("x", { "Content-Encoding": "br" });
  assert.equal(r.status, 415);
  assert.ok(readFileSync(join(dir, "w/z.bin")).equals(Buffer.from(bytes)));
});

async function until(what, fn) {
  for (let i = 0; i < 100; i++) {
    if (fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

test("watchDir: changes below a directory, recursive, as they happen; stop", async () => {
  const sbx = await Sandbox.create();
  const top = join(dir, "watched");
  mkdirSync(top);
  const seen = [];
  const handle = await sbx.files.watchDir(top, (e) => seen.push(`${e.type} ${e.name}`), { recursive: true });
  writeFileSync(join(top, "a.txt"), "x"); // watched already: watchDir returned after "start"
  mkdirSync(join(top, "sub"));
  await until("sub", () => seen.includes("create sub"));
  writeFileSync(join(top, "sub/b.txt"), "y");
  renameSync(join(top, "a.txt"), join(top, "c.txt"));
  rmSync(join(top, "c.txt"));
  await until("the remove", () => seen.includes("remove c.txt"));
  for (const e of ["create a.txt", "write a.txt", "create sub", "create sub/b.txt", "rename a.txt", "create c.txt"])
    assert.ok(seen.includes(e), `${e} in ${JSON.stringify(seen)}`);
  await handle.stop();
  await assert.rejects(sbx.files.watchDir(join(dir, "not-there"), () => {}), FileNotFoundError);
});

test("the polled watchers: CreateWatcher, GetWatcherEvents, RemoveWatcher", async () => {
  const call = async (method, body) => {
    const r = await fetch(`http://127.0.0.1:${PORT}/filesystem.Filesystem/${method}`, {
      method: "POST", headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1" },
      body: JSON.stringify(body),
    });
    return [r.status, await r.json()];
  };
  const top = join(dir, "polled");
  mkdirSync(top);
  const [status, created] = await call("CreateWatcher", { path: top, recursive: false });
  assert.equal(status, 200);
  assert.match(created.watcherId, /^[0-9a-f]{32}$/);
  writeFileSync(join(top, "f"), "1");
  let events = [];
  for (let i = 0; i < 50 && !events.some((e) => e.name === "f" && e.type === "EVENT_TYPE_CREATE"); i++) {
    await new Promise((r) => setTimeout(r, 50));
    events = events.concat((await call("GetWatcherEvents", { watcherId: created.watcherId }))[1].events);
  }
  assert.ok(events.some((e) => e.name === "f" && e.type === "EVENT_TYPE_CREATE"), JSON.stringify(events));
  assert.deepEqual(await call("RemoveWatcher", { watcherId: created.watcherId }), [200, {}]);
  assert.equal((await call("GetWatcherEvents", { watcherId: created.watcherId }))[1].code, "not_found");
  assert.equal((await call("CreateWatcher", { path: join(dir, "nope") }))[1].code, "not_found");
});

test("relative paths are below the user's home; an unknown user is refused", async () => {
  const sbx = await Sandbox.create();
  const home = await sbx.files.getInfo(".");
  assert.equal(home.type, "dir");
  assert.ok(!home.path.endsWith("/.") && home.path.startsWith("/"), home.path);
  await assert.rejects(sbx.files.getInfo("/", { user: "no-such-user-here" }), /user/);
});

test("Connect errors: unimplemented calls, bad requests", async () => {
  const post = (path, body) => fetch(`http://127.0.0.1:${PORT}${path}`, {
    method: "POST", headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1" }, body,
  });
  let r = await post("/filesystem.Filesystem/NoSuchCall", "{}");
  assert.equal(r.status, 404);
  assert.equal((await r.json()).code, "unimplemented");
  r = await post("/filesystem.Filesystem/Stat", "not json");
  assert.equal(r.status, 400);
  assert.equal((await r.json()).code, "invalid_argument");
  r = await post("/filesystem.Filesystem/Stat", JSON.stringify({ path: 5 }));
  assert.equal((await r.json()).code, "invalid_argument");
  r = await post("/filesystem.Filesystem/Move", JSON.stringify({ source: "/tmp" }));
  assert.equal((await r.json()).code, "invalid_argument");
});
