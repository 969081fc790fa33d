// SPDX-License-Identifier: MIT
// The unmodified @e2b/code-interpreter package against agentix-server's code interpreter API
// (e2b-code-interpreter.c), the way E2B's SDK reaches a sandbox it was told is local:
// E2B_DEBUG=true sends every request for port 49999 to http://localhost:49999, where this test
// starts agentix-server (loopback, no token) on the host's python3 kernel. Through agentix-e2b
// the same requests come with the sandbox's token.
import { after, before, test } from "node:test";
import { startLocalServer } from "../lib/local-server.mjs";
import assert from "node:assert/strict";

import { Sandbox } from "@e2b/code-interpreter";

const PORT = 49999; // the SDK's own, fixed in E2B_DEBUG mode
let server;

before(async () => {
  server = await startLocalServer(PORT);
});

after(async () => {
  await server?.stop();
});

test("runCode keeps state, streams output and gives the last line's value", async () => {
  const sbx = await Sandbox.create();
  await sbx.runCode("x = 41");
  const live = [];
  const ex = await sbx.runCode("print('hello')\nx + 1", { onStdout: (m) => live.push(m.line) });
  assert.equal(ex.text, "42");
  assert.deepEqual(ex.logs, { stdout: ["hello\n"], stderr: [] });
  assert.deepEqual(live, ["hello\n"]);
  assert.equal(typeof ex.executionCount, "number");
  assert.equal(ex.error, undefined);
});

test("a matplotlib figure comes back as a PNG, a DataFrame as HTML", async () => {
  const sbx = await Sandbox.create();
  let ex = await sbx.runCode("%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n" +
                             "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n" +
                             "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=50)\nplt.plot([1, 4])\nplt.show()");
  assert.deepEqual(ex.results.map((r) => r.formats()), [["png"]]);
  const png = Buffer.from(ex.results[0].png, "base64");
  assert.equal(png.subarray(1, 4).toString(), "PNG");
  assert.equal(png.readUInt32BE(16), 150); // width: 3 in at 50 dpi
  ex = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
  assert.ok(ex.results[0].html.includes("<table"), ex.results[0].html);
  assert.ok(ex.text.includes("a"), ex.text);
});

test("an exception is the execution's error, with onError", async () => {
  const sbx = await Sandbox.create();
  const seen = [];
  const ex = await sbx.runCode("1 / 0", { onError: (e) => seen.push(e.name) });
  assert.equal(ex.error.name, "ZeroDivisionError");
  assert.equal(ex.error.value, "division by zero");
  assert.ok(ex.error.traceback.includes("ZeroDivisionError"));
  assert.deepEqual(seen, ["ZeroDivisionError"]);
});

test("contexts: made, used apart, listed, restarted, removed", async () => {
  const sbx = await Sandbox.create();
  const ctx = await sbx.createCodeContext({ cwd: "/tmp" });
  assert.equal(ctx.cwd, "/tmp");
  assert.equal(ctx.language, "python");
  assert.equal((await sbx.runCode("import os; y = 3; os.getcwd()", { context: ctx })).text, "'/tmp'");
  assert.equal((await sbx.runCode("y")).error.name, "NameError"); // the default context has none
  assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
  await sbx.restartCodeContext(ctx);
  assert.equal((await sbx.runCode("y", { context: ctx })).error.name, "NameError");
  await sbx.removeCodeContext(ctx);
  // A failed runCode leaves the SDK's request timer running (requestTimeoutMs, 60 s by default),
  // which would keep this process alive that long: a short one for these.
  await assert.rejects(sbx.runCode("1", { context: ctx, requestTimeoutMs: 2000 }),
                       (e) => e.name === "NotFoundError" && /ContextNotFound/.test(e.message));
  await assert.rejects(sbx.runCode("1", { language: "cobol", requestTimeoutMs: 2000 }),
                       (e) => e.name === "NotFoundError" && /KernelNotFound/.test(e.message));
});

test("envs apply to one run", async () => {
  const sbx = await Sandbox.create();
  assert.equal((await sbx.runCode("import os; os.environ.get('AGX_SDK')", { envs: { AGX_SDK: "on" } })).text, "'on'");
  assert.equal((await sbx.runCode("import os; repr(os.environ.get('AGX_SDK'))")).text, "'None'");
});
