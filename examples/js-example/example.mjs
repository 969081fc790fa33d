// SPDX-License-Identifier: MIT
// A sandbox for a callback, from TypeScript/JavaScript: made through agentd, code run, files
// moved, deleted at the end (also on a throw).
//
//   (cd client/js && npm ci && npm run build)
//   node examples/js-example/example.mjs [IMAGE] [BUNDLE]
//
// Needs agentd on the system bus with the example bundle built: `eval "$(scripts/dev-env.sh
// start)"` starts both (DBUS_SYSTEM_BUS_ADDRESS picks another bus).
import { AgentdError, SandboxManager, ServerUnreachable, session } from "../../client/js/dist/index.js";

const [image = "agentix-test/busybox:1", bundle = "example-bundle:0.1.0"] = process.argv.slice(2);
const manager = new SandboxManager();
try {
  await session(manager, { image, bundle, memory: 512 * 2 ** 20, env: { NAME: "agentix" } }, async (rt, sandbox) => {
    console.log(`sandbox ${sandbox.id}`);
    await rt.uploadFiles([["/work/numbers.txt", "3\n4\n5\n"]]);
    const r = await rt.exec("echo hello $NAME; n=0; while read x; do n=$((n + x)); done < /work/numbers.txt; echo sum $n");
    process.stdout.write(`exit ${r.exit_code}:\n${r.output}`);
    for await (const chunk of rt.execStream("for i in 1 2 3; do echo tick $i; sleep 0.1; done")) {
      if (chunk.data) process.stdout.write(Buffer.from(chunk.data));
    }
  });
} catch (e) {
  if (e instanceof AgentdError || e instanceof ServerUnreachable) {
    console.error(`example: ${e.message}`);
    process.exitCode = 1;
  } else {
    throw e;
  }
} finally {
  manager.close();
}
