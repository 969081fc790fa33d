// SPDX-License-Identifier: MIT
// The unmodified @e2b/code-interpreter package through agentix-e2b, on a template
// (AGENTIX_E2B_TEMPLATE, an agentd pool of examples/python-data) made by agentd in a real
// container: the sandbox is created by the control API, every runCode goes through the
// gateway's sandbox route to the runtime's code interpreter. tests/agentd/test_e2b.py runs it
// once per runtime (runc, runsc).
import { test } from "node:test";
import assert from "node:assert/strict";

import { Sandbox } from "@e2b/code-interpreter";

const template = process.env.AGENTIX_E2B_TEMPLATE;
assert.ok(template && process.env.E2B_API_URL && process.env.E2B_SANDBOX_URL, "run through tests/agentd/test_e2b.py");

test("runCode through the gateway: state, output, a DataFrame, a PNG, errors, contexts", async () => {
  const sbx = await Sandbox.create(template, { timeoutMs: 300_000 });
  try {
    await sbx.runCode("x = 41");
    const live = [];
    const ex = await sbx.runCode("print('hello')\nx + 1", { onStdout: (m) => live.push(m.line) });
    assert.equal(ex.text, "42");
    assert.deepEqual(ex.logs, { stdout: ["hello\n"], stderr: [] });
    assert.deepEqual(live, ["hello\n"]);

    const df = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
    assert.match(df.results[0].html, /<table/);

    const fig = await sbx.runCode("%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n" +
                                  "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n" +
                                  "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\n" +
                                  "plt.plot([1, 4])\nplt.show()");
    const png = Buffer.from(fig.results.find((r) => r.png).png, "base64");
    assert.equal(png.subarray(1, 4).toString(), "PNG");
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [400, 300]); // the IHDR's width, height

    const err = await sbx.runCode("1 / 0");
    assert.equal(err.error.name, "ZeroDivisionError");

    const ctx = await sbx.createCodeContext();
    const apart = await sbx.runCode("x", { context: ctx });
    assert.equal(apart.error.name, "NameError"); // its own state
    assert.equal((await sbx.runCode("x")).text, "41");
  } finally {
    await sbx.kill();
  }
});

test("code interpreter traffic without the sandbox's access token is refused", async () => {
  const sbx = await Sandbox.create(template, { timeoutMs: 120_000 });
  try {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
      headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49999", "X-Access-Token": "0".repeat(64) },
    });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).code, 401);
  } finally {
    await sbx.kill();
  }
});
