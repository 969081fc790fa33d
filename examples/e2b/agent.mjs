// SPDX-License-Identifier: MIT
// A program written for E2B's SDK, unchanged: nothing here knows of agentix. Run it against
// agentix-e2b with the three variables E2B's SDK reads:
//
//   E2B_API_URL=http://127.0.0.1:49982 E2B_SANDBOX_URL=http://127.0.0.1:49982 \
//   E2B_API_KEY=e2b_... node agent.mjs
//
// It needs the template code-interpreter-v1: an agentd pool of a bundle with Python and
// ipykernel (examples/python-data), pools.d/code-interpreter-v1.pool.
import { Sandbox } from "@e2b/code-interpreter";

const sbx = await Sandbox.create({ metadata: { example: "agentix" }, timeoutMs: 120_000 });
try {
  console.log(`sandbox ${sbx.sandboxId}, template code-interpreter-v1`);
  let ex = await sbx.runCode("import platform\nimport pandas as pd\nprint('python', platform.python_version())\n" +
                             "pd.DataFrame({'x': [1, 2, 3, 4]}).describe().loc[['count', 'mean']]");
  process.stdout.write(ex.logs.stdout.join(""));
  console.log(ex.text);
  await sbx.runCode("total = sum(range(10))");
  console.log(`state kept between runs: total * 2 = ${(await sbx.runCode("total * 2")).text}`);
  ex = await sbx.runCode("1 / 0");
  console.log(`an error comes back as one: ${ex.error.name}: ${ex.error.value}`);
  await sbx.files.makeDir("/tmp/from-e2b");
  console.log(`files: /tmp/from-e2b exists: ${await sbx.files.exists("/tmp/from-e2b")}`);
  const listed = await Sandbox.list({ query: { metadata: { example: "agentix" } } }).nextItems();
  console.log(`Sandbox.list with metadata example=agentix: ${listed.map((s) => s.sandboxId).join(", ")}`);
} finally {
  await sbx.kill();
  console.log(`killed; running: ${await sbx.isRunning()}`);
}
