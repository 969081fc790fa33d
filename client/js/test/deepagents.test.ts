// SPDX-License-Identifier: MIT
// AgentixSandbox (deepagents backend) against a real agentix-server: every file operation
// served by fs gives what deepagents' own BaseSandbox gives through its shell fallback on the
// same sandbox, and how long each takes, native against shell.
import { BaseSandbox } from "deepagents";
import { afterAll, beforeAll, expect, it } from "vitest";

import { AgentixSandbox } from "../src/deepagents.js";
import { TOKEN, startServer, type Server } from "./server.js";

/** deepagents' shell fallback: only execute, uploadFiles and downloadFiles are the sandbox's. */
class ShellSandbox extends BaseSandbox {
  constructor(private readonly native: AgentixSandbox) {
    super();
  }
  get id() {
    return `shell:${this.native.id}`;
  }
  execute(command: string) {
    return this.native.execute(command);
  }
  uploadFiles(files: Array<[string, Uint8Array]>) {
    return this.native.uploadFiles(files);
  }
  downloadFiles(paths: string[]) {
    return this.native.downloadFiles(paths);
  }
}

let server: Server;
let native: AgentixSandbox;
let shell: ShellSandbox;
const dir = `/tmp/agentix-js-deepagents-${process.pid}`;
const enc = new TextEncoder();
const timings: Record<string, { native: number[]; shell: number[] }> = {};

beforeAll(async () => {
  server = await startServer();
  native = await AgentixSandbox.create({
    url: server.url, token: TOKEN,
    initialFiles: {
      [`${dir}/src/a.py`]: "import os\nprint('needle')\n",
      [`${dir}/src/b.txt`]: "a needle here\nand: colons: too\n",
      [`${dir}/src/deep/c.py`]: "x = 'needle'\n",
      [`${dir}/top.py`]: "x = 1\n",
      [`${dir}/notes.md`]: Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join("\n") + "\n",
      [`${dir}/long.txt`]: `${"x".repeat(12000)}\nshort\n`,
      [`${dir}/empty.txt`]: "",
      [`${dir}/image.png`]: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]),
    },
  });
  shell = new ShellSandbox(native);
});
afterAll(async () => {
  await native.execute(`rm -rf ${dir}`);
  await native.close();
  await server.stop();
  const rows = Object.entries(timings).map(([op, t]) => {
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    return `${op.padEnd(28)} native ${med(t.native).toFixed(2).padStart(7)} ms   shell ${med(t.shell).toFixed(2).padStart(7)} ms   ${(med(t.shell) / med(t.native)).toFixed(1)}x`;
  });
  console.log(`median of 15 runs each, same sandbox:\n${rows.join("\n")}`);
});

/** Both ways, timed; returns [native, shell]. */
async function both<T>(op: string, fn: (s: BaseSandbox) => Promise<T>): Promise<[T, T]> {
  const t = (timings[op] ??= { native: [], shell: [] });
  let a!: T, b!: T;
  for (let i = 0; i < 15; i++) {
    let t0 = performance.now();
    a = await fn(native);
    t.native.push(performance.now() - t0);
    t0 = performance.now();
    b = await fn(shell);
    t.shell.push(performance.now() - t0);
  }
  return [a, b];
}

const byPath = <T extends { path: string }>(xs: T[] = []) => [...xs].sort((x, y) => x.path.localeCompare(y.path));

it("ls lists a directory as deepagents does", async () => {
  const [a, b] = await both("ls", (s) => s.ls(dir));
  expect(byPath(a.files)).toEqual(byPath(b.files));
  expect(await native.ls(`${dir}/missing`)).toEqual(await shell.ls(`${dir}/missing`));
});

it("read pages a file as deepagents does", async () => {
  const [a, b] = await both("read", (s) => s.read(`${dir}/notes.md`));
  expect(a).toEqual(b);
  for (const [offset, limit] of [[5, 10], [25, 10], [30, 5], [99, 5], [0, 0]]) {
    expect(await native.read(`${dir}/notes.md`, offset, limit)).toEqual(await shell.read(`${dir}/notes.md`, offset, limit));
  }
  for (const f of ["missing.txt", "empty.txt", "long.txt", "image.png"]) {
    expect(await native.read(`${dir}/${f}`)).toEqual(await shell.read(`${dir}/${f}`));
  }
});

it("grep finds literal text as deepagents does", async () => {
  const [a, b] = await both("grep", (s) => s.grep("needle", dir));
  expect(byPath(a.matches)).toEqual(byPath(b.matches));
  expect((a.matches ?? []).length).toBe(3);
  const [c, d] = [await native.grep("needle", dir, "*.py"), await shell.grep("needle", dir, "*.py")];
  expect(byPath(c.matches)).toEqual(byPath(d.matches));
  expect(byPath((await native.grep(": colons:", dir)).matches)).toEqual(byPath((await shell.grep(": colons:", dir)).matches));
  expect(await native.grep("needle", dir, null, 1)).toEqual({ matches: [expect.anything()], truncated: true });
  expect(await native.grep("needle", `${dir}/missing`)).toEqual(await shell.grep("needle", `${dir}/missing`));
});

it("glob matches as deepagents does, directories included", async () => {
  for (const pattern of ["*.py", "**/*.py", "src/*.py", "src/**", "*.md", "*", "src/*", "**"]) {
    const [a, b] = await both(`glob ${pattern}`, (s) => s.glob(pattern, dir));
    expect(byPath(a.files), pattern).toEqual(byPath(b.files));
  }
  // The case of deepagents' standard sandbox tests ("should include directories in results").
  const src = (await native.glob("*", dir)).files?.find((f) => f.path === "src");
  expect(src?.is_dir).toBe(true);
  expect((await native.globInfo("src/*", dir)).filter((f) => f.is_dir).map((f) => f.path)).toEqual(["src/deep"]);
});

it("glob: nested patterns, hidden files and directories, no match, as BaseSandbox", async () => {
  const g = `${dir}/globs`;
  await native.uploadFiles([
    [`${g}/.env`, enc.encode("x")],
    [`${g}/.config/app.json`, enc.encode("{}")],
    [`${g}/pkg/.hidden.py`, enc.encode("x")],
    [`${g}/pkg/mod/__init__.py`, enc.encode("")],
    [`${g}/pkg/mod/deep/x.py`, enc.encode("x")],
    [`${g}/pkg/mod/deep/y.txt`, enc.encode("y")],
    [`${g}/pkg/empty/.keep`, enc.encode("")],
  ]);
  for (const pattern of [
    "**/*.py", "pkg/**/*.py", "pkg/mod/**", "pkg/*/deep/*", "**/deep", "pkg/*", ".*", "**/.*", ".config/*",
    "pkg/.hidden.py", "*/mod", "**/*.rs", "nothing/here/*", "pkg/mod/deep/x.py", "**/mod/**/*.py", "[p]kg/m?d",
  ]) {
    const [a, b] = await both(`glob ${pattern}`, (s) => s.glob(pattern, g));
    expect(byPath(a.files), pattern).toEqual(byPath(b.files));
  }
  // A path below the search root, and a root that does not exist.
  const [c, d] = [await native.glob("*.py", `${g}/pkg/mod`), await shell.glob("*.py", `${g}/pkg/mod`)];
  expect(byPath(c.files)).toEqual(byPath(d.files));
  expect(await native.glob("*", `${g}/missing`)).toEqual(await shell.glob("*", `${g}/missing`));
});

it("write and edit as deepagents does", async () => {
  const [a, b] = await both("write", (s) => s.write(`${dir}/w-${s === native ? "n" : "s"}.txt`, "one\ntwo two\n"));
  expect({ ...a, path: "" }).toEqual({ ...b, path: "" });
  expect(await native.read(`${dir}/w-n.txt`)).toEqual(await shell.read(`${dir}/w-s.txt`));
  const cases: Array<[string, string, boolean]> = [["one", "ONE", false], ["two", "2", false], ["two", "2", true], ["nope", "x", false]];
  for (const [old, repl, all] of cases) {
    await native.write(`${dir}/e.txt`, "one two two\n");
    const r1 = await native.edit(`${dir}/e.txt`, old, repl, all);
    const c1 = await native.read(`${dir}/e.txt`);
    await native.write(`${dir}/e.txt`, "one two two\n");
    const r2 = await shell.edit(`${dir}/e.txt`, old, repl, all);
    const c2 = await shell.read(`${dir}/e.txt`);
    expect([r1, c1]).toEqual([r2, c2]);
  }
  expect(await native.edit(`${dir}/missing.txt`, "a", "b")).toEqual(await shell.edit(`${dir}/missing.txt`, "a", "b"));
  await both("edit", (s) => s.edit(`${dir}/e.txt`, "one", "one"));
});

it("execute, upload and download report what deepagents expects", async () => {
  expect(await native.execute("echo out; echo err >&2; exit 3")).toEqual({ output: "out\nerr\n", exitCode: 3, truncated: false });
  const up = await native.uploadFiles([[`${dir}/u.bin`, new Uint8Array([1, 2])], ["relative", enc.encode("x")]]);
  expect(up).toEqual([{ path: `${dir}/u.bin`, error: null }, { path: "relative", error: "invalid_path" }]);
  const down = await native.downloadFiles([`${dir}/u.bin`, `${dir}/nope`, `${dir}/src`, "relative"]);
  expect(down.map((d) => d.error)).toEqual([null, "file_not_found", "is_directory", "invalid_path"]);
  expect(Array.from(down[0].content!)).toEqual([1, 2]);
  expect(await native.lsInfo(dir)).toEqual((await native.ls(dir)).files);
  expect(await native.grepRaw("needle", `${dir}/src/a.py`)).toEqual([{ path: `${dir}/src/a.py`, line: 2, text: "print('needle')" }]);
});
