// SPDX-License-Identifier: MIT
// RuntimeClient against a real agentix-server: every call shape, errors, cancel, deadlines,
// and calls that outlive a dropped connection.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ArgumentError, Cancelled, ContextNotFound, DeadlineExceeded, KernelNotFound, NoSuchCallable, RuntimeClient, ServerUnreachable, SessionBusy, SessionNotFound, Unauthorized } from "../src/index.js";
import { TOKEN, freePort, startServer, type Server } from "./server.js";

let server: Server;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.stop();
});

describe.each([["websocket"], ["polling"]] as const)("over %s", (transport) => {
  it("answers unary calls and throws typed errors", async () => {
    const rt = await RuntimeClient.connect(server.url, TOKEN, { transports: [transport] });
    try {
      expect(await rt.exec("echo out; echo err >&2; exit 3")).toEqual({ exit_code: 3, output: "out\nerr\n", truncated: false, timed_out: false });
      const written = await rt.fs("write", ["/tmp/agentix-js-rt.txt", "a\nb\n"], { overwrite: true });
      expect(written.error).toBeNull();
      expect((await rt.fs("read", ["/tmp/agentix-js-rt.txt"])).content).toBe("     1\ta\n     2\tb");
      await expect(rt.call("nosuch::thing")).rejects.toBeInstanceOf(NoSuchCallable);
      await expect(rt.call("fs::read", [42])).rejects.toBeInstanceOf(ArgumentError);
      const many = await Promise.all(Array.from({ length: 50 }, (_, i) => rt.exec(`echo ${i}`)));
      expect(many.map((r) => r.output)).toEqual(Array.from({ length: 50 }, (_, i) => `${i}\n`));
    } finally {
      rt.close();
    }
  });
});

it("keeps a shell session between runs, across clients", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  const other = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const sh = await rt.openShell({ cwd: "/" });
    expect(await sh.run("cd /tmp && export AGX_JS=7")).toEqual({ output: "", exit_code: 0, timed_out: false, truncated: false, ended: false });
    expect((await sh.run("pwd; echo $AGX_JS")).output).toBe("/tmp\n7\n");
    // A hung command: interrupted at its timeout, and the session goes on.
    const hung = await sh.run("echo a; sleep 60", { timeout: 0.5 });
    expect(hung.timed_out).toBe(true);
    expect(hung.output.startsWith("a\n")).toBe(true);
    // A prompt answered, and a hang interrupted, from another client.
    const reading = sh.run("read -r x; echo \"got $x\"");
    for (let i = 0; i < 200 && !(await other.listShells()).some((s) => s.id === sh.id && s.running); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    await expect(sh.run("true")).rejects.toBeInstanceOf(SessionBusy);
    await other.shell(sh.id).input("it\n");
    expect((await reading).output).toBe("got it\n");
    const sleeping = sh.run("sleep 60");
    await new Promise((r) => setTimeout(r, 200));
    await other.shell(sh.id).interrupt();
    expect((await sleeping).exit_code).toBe(130);
    expect((await other.listShells()).map((s) => [s.id, s.cwd])).toEqual([[sh.id, "/tmp"]]);
    await sh.close();
    await expect(sh.run("true")).rejects.toBeInstanceOf(SessionNotFound);
    expect(await rt.listShells()).toEqual([]);
  } finally {
    rt.close();
    other.close();
  }
});

it("keeps state in code contexts, gives rich results, and keeps contexts apart", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  const other = await RuntimeClient.connect(server.url, TOKEN);
  try {
    await rt.runCode("x = 20");
    const seen: string[] = [];
    let ex = await rt.runCode("print('out')\nx + 1", { onItem: (i) => seen.push(i.type) });
    expect([ex.stdout, ex.text, ex.error]).toEqual(["out\n", "21", undefined]);
    expect(seen).toEqual(ex.items.map((i) => i.type));
    ex = await rt.runCode("import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n" +
                          "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()");
    expect(ex.images.map(([m]) => m)).toEqual(["image/png"]);
    expect(Array.from(ex.images[0][1].subarray(0, 4))).toEqual([0x89, 0x50, 0x4e, 0x47]);
    expect((await rt.runCode("1/0")).error?.name).toBe("ZeroDivisionError");

    const ctx = await rt.createCodeContext({ cwd: "/tmp" });
    expect((await ctx.run("import os; os.getcwd()")).text).toBe("'/tmp'");
    expect((await ctx.run("x")).error?.name).toBe("NameError"); // contexts do not share
    const running = ctx.run("import time\nwhile True: time.sleep(0.05)");
    for (let i = 0; i < 200 && !(await other.codeContexts()).some((c) => c.id === ctx.id && c.running); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    await other.codeContext(ctx.id).interrupt();
    expect((await running).error?.name).toBe("KeyboardInterrupt");
    expect((await ctx.run("2 * 3", { timeout: 5 })).text).toBe("6");
    await ctx.run("kept = 1");
    await ctx.restart();
    expect((await ctx.run("kept")).error?.name).toBe("NameError");
    await ctx.delete();
    await expect(ctx.run("1")).rejects.toBeInstanceOf(ContextNotFound);
    await expect(rt.createCodeContext({ language: "cobol" })).rejects.toBeInstanceOf(KernelNotFound);
    expect((await rt.codeContexts()).map((c) => c.id)).toEqual(["default-python3"]);
    await rt.codeContext("default-python3").delete();
  } finally {
    rt.close();
    other.close();
  }
});

it("moves many files at once, with an error per file", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const dir = `/tmp/agentix-js-files-${process.pid}`;
    const up = await rt.uploadFiles([[`${dir}/a.txt`, "alpha"], ["relative.txt", "x"], [`${dir}/b/c.bin`, new Uint8Array([0, 1])]]);
    expect(up.map((r) => [r.path, r.error])).toEqual([[`${dir}/a.txt`, null], ["relative.txt", "invalid_path"], [`${dir}/b/c.bin`, null]]);
    const down = await rt.downloadFiles([`${dir}/b/c.bin`, `${dir}/missing`, `${dir}/b`, `${dir}/a.txt`]);
    expect(down.map((r) => r.error)).toEqual([null, "file_not_found", "is_directory", null]);
    expect(Array.from(down[0].content!)).toEqual([0, 1]);
    expect(new TextDecoder().decode(down[3].content!)).toBe("alpha");
  } finally {
    rt.close();
  }
});

it("streams items in order, then ends", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const items: Record<string, unknown>[] = [];
    for await (const item of rt.execStream("for i in 1 2 3; do echo $i; sleep 0.05; done")) items.push(item);
    const out = Buffer.concat(items.filter((x) => x.data).map((x) => Buffer.from(x.data as Uint8Array))).toString();
    expect(out).toBe("1\n2\n3\n");
    expect(items.at(-1)?.exit_code).toBe(0);
  } finally {
    rt.close();
  }
});

it("sends to a bidi call's inbox and reads its items", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const ch = rt.bidi<Record<string, unknown>>("sandbox::exec", ["tr a-z A-Z"]);
    ch.send({ stdin: new TextEncoder().encode("hello ") });
    ch.send({ stdin: "world\n" });
    ch.end();
    const items = [];
    for await (const item of ch) items.push(item);
    const out = Buffer.concat(items.filter((x) => x.data).map((x) => Buffer.from(x.data as Uint8Array))).toString();
    expect(out).toBe("HELLO WORLD\n");
  } finally {
    rt.close();
  }
});

it("cancels a call, by cancel() and by an AbortSignal", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const s = rt.execStream("echo started; sleep 30");
    const it = s[Symbol.asyncIterator]();
    expect(Buffer.from((await it.next()).value.data as Uint8Array).toString()).toBe("started\n");
    s.cancel();
    await expect(it.next()).rejects.toBeInstanceOf(Cancelled);
    const abort = new AbortController();
    const p = rt.exec("sleep 30", { signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    await expect(p).rejects.toBeInstanceOf(Cancelled);
  } finally {
    rt.close();
  }
});

it("watches a directory until the AbortSignal aborts", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  const dir = mkdtempSync(join(tmpdir(), "agentix-watch-"));
  try {
    const abort = new AbortController();
    const seen: string[] = [];
    // Touch a file until the watch reports it (it is in place then), then make the changes.
    const poke = setInterval(() => writeFileSync(join(dir, "ready"), "x"), 20);
    for await (const change of rt.watch(dir, { signal: abort.signal })) {
      if (change.path.endsWith("/ready")) {
        if (seen.length === 0) {
          clearInterval(poke);
          seen.push("ready");
          mkdirSync(join(dir, "sub"));
        }
        continue;
      }
      seen.push(`${change.event} ${change.path.slice(dir.length)}`);
      if (change.path.endsWith("/sub") && change.event === "created") {
        writeFileSync(join(dir, "sub", "new.txt"), "hi"); // in a directory made after the watch began
        rmSync(join(dir, "sub", "new.txt"));
      }
      if (change.event === "deleted") abort.abort();
    }
    clearInterval(poke);
    expect(seen).toEqual(["ready", "created /sub", "created /sub/new.txt", "modified /sub/new.txt",
      "deleted /sub/new.txt"]);
    // A path that does not exist.
    await expect((async () => {
      for await (const _ of rt.watch(join(dir, "nope"))) void _;
    })()).rejects.toMatchObject({ type: "file_not_found" });
  } finally {
    rt.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

it("ends a call at its deadline", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const t0 = Date.now();
    await expect(rt.exec("sleep 20", { deadlineMs: 300 })).rejects.toBeInstanceOf(DeadlineExceeded);
    expect(Date.now() - t0).toBeLessThan(3000);
    expect((await rt.exec("echo after")).output).toBe("after\n");
  } finally {
    rt.close();
  }
});

it("keeps a call going over a dropped connection", async () => {
  const rt = await RuntimeClient.connect(server.url, TOKEN);
  try {
    const p = rt.exec("sleep 0.5; echo finished");
    await new Promise((r) => setTimeout(r, 200));
    // The network drops: the engine closes its transport; socket.io-client reconnects, the client resumes.
    (rt as unknown as { socket: { io: { engine: { close(): void } } } }).socket.io.engine.close();
    expect((await p).output).toBe("finished\n");
  } finally {
    rt.close();
  }
});

it("says what is wrong when it cannot connect", async () => {
  await expect(RuntimeClient.connect(server.url, "wrong")).rejects.toBeInstanceOf(Unauthorized);
  const url = `http://127.0.0.1:${await freePort()}`;
  await expect(RuntimeClient.connect(url, TOKEN, { timeoutMs: 2000 })).rejects.toBeInstanceOf(ServerUnreachable);
});

describe("over TLS", () => {
  // A CA and a certificate for 127.0.0.1 it signed (as agentd's runtime CA issues), and an
  // impostor's self-signed one for the same address.
  const dir = mkdtempSync(join(tmpdir(), "agentix-js-tls-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  let tlsServer: Server;
  let caPem: string;
  let impostorPem: string;
  beforeAll(async () => {
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", join(dir, "ca.key"),
      "-out", join(dir, "ca.crt"), "-days", "1", "-subj", "/CN=test runtime CA", "-addext", "basicConstraints=critical,CA:TRUE");
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", join(dir, "server.key"),
      "-out", join(dir, "server.csr"), "-subj", "/CN=127.0.0.1");
    writeFileSync(join(dir, "ext"), "subjectAltName=IP:127.0.0.1\n");
    openssl("x509", "-req", "-in", join(dir, "server.csr"), "-CA", join(dir, "ca.crt"), "-CAkey", join(dir, "ca.key"),
      "-CAcreateserial", "-out", join(dir, "server.crt"), "-days", "1", "-extfile", join(dir, "ext"));
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", join(dir, "impostor.key"),
      "-out", join(dir, "impostor.crt"), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1");
    caPem = readFileSync(join(dir, "ca.crt"), "utf8");
    impostorPem = readFileSync(join(dir, "impostor.crt"), "utf8");
    tlsServer = await startServer({ cert: join(dir, "server.crt"), key: join(dir, "server.key") });
  });
  afterAll(async () => {
    await tlsServer.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([["websocket"], ["polling"]] as const)("verifies the runtime against its CA over %s", async (transport) => {
    expect(tlsServer.url.startsWith("https://")).toBe(true);
    const rt = await RuntimeClient.connect(tlsServer.url, TOKEN, { transports: [transport], ca: caPem, reconnect: false });
    try {
      expect((await rt.exec("echo over-tls")).output).toBe("over-tls\n");
    } finally {
      rt.close();
    }
    // Another CA (an impostor's certificate as the anchor): the real runtime is refused.
    await expect(RuntimeClient.connect(tlsServer.url, TOKEN, { transports: [transport], ca: impostorPem, reconnect: false, timeoutMs: 3000 }))
      .rejects.toBeInstanceOf(ServerUnreachable);
  });

  it.each([["websocket"], ["polling"]] as const)("given a sandbox id, takes its own certificate and refuses a neighbour's over %s", async (transport) => {
    // As agentd issues them: the address and the sandbox's name (a1a1.sandbox.agentix).
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", join(dir, "a1a1.key"),
      "-out", join(dir, "a1a1.csr"), "-subj", "/CN=127.0.0.1");
    writeFileSync(join(dir, "a1a1.ext"), "subjectAltName=IP:127.0.0.1,DNS:a1a1.sandbox.agentix\n");
    openssl("x509", "-req", "-in", join(dir, "a1a1.csr"), "-CA", join(dir, "ca.crt"), "-CAkey", join(dir, "ca.key"),
      "-CAcreateserial", "-out", join(dir, "a1a1.crt"), "-days", "1", "-extfile", join(dir, "a1a1.ext"));
    const named = await startServer({ cert: join(dir, "a1a1.crt"), key: join(dir, "a1a1.key") });
    try {
      const rt = await RuntimeClient.connect(named.url, TOKEN, { transports: [transport], ca: caPem, sandboxId: "a1a1", reconnect: false });
      rt.close();
      // The same address, the same CA, but asked for b2b2: a1a1's runtime is not b2b2's.
      await expect(RuntimeClient.connect(named.url, TOKEN, { transports: [transport], ca: caPem, sandboxId: "b2b2", reconnect: false, timeoutMs: 3000 }))
        .rejects.toThrow(/another sandbox than b2b2/);
    } finally {
      await named.stop();
    }
  });

  it("refuses an https:// runtime without a CA", async () => {
    delete process.env.AGENTIX_CA_FILE;
    await expect(RuntimeClient.connect(tlsServer.url, TOKEN, { reconnect: false })).rejects.toThrow(/CA/);
  });

  it("refuses an impostor with a self-signed certificate for the same address", async () => {
    const impostor = await startServer({ cert: join(dir, "impostor.crt"), key: join(dir, "impostor.key") });
    try {
      await expect(RuntimeClient.connect(impostor.url, TOKEN, { ca: caPem, reconnect: false, timeoutMs: 3000 }))
        .rejects.toThrow(/certificate|refused/i);
    } finally {
      await impostor.stop();
    }
  });
});
