// SPDX-License-Identifier: MIT
// bench/e2b/bench.mjs TEMPLATE RUNS CREATE_JSON — the E2B side of bench/e2b/run.sh (which sets
// E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY and AGENTIX_ROOT): Sandbox.create from the warm pool
// (timed only while the pool has a ready sandbox), then commands.run("true") through the gateway
// and exec("true") through @agentix/client on one sandbox, alternating, 10 times RUNS each.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const [template, runsArg, createJson] = process.argv.slice(2);
const RUNS = Number(runsArg);
const root = process.env.AGENTIX_ROOT;
const { Sandbox } = await import(`${root}/tests/e2b/node_modules/e2b/dist/index.mjs`);
const { RuntimeClient } = await import(`${root}/client/js/dist/index.js`);
const M = ["org.agentix.Agentd1", "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager"];

function busctl(...args) {
  return JSON.parse(execFileSync("busctl", ["--json=short", "call", ...M, ...args], { encoding: "utf8" })).data;
}

function ready() {
  return busctl("ListPools")[0].find(([name]) => name === template)?.[1] ?? 0;
}

function stats(ms) {
  ms = [...ms].sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.round(q * (ms.length - 1)))];
  return { median_ms: +at(0.5).toFixed(2), p99_ms: +at(0.99).toFixed(2), min_ms: +ms[0].toFixed(2),
           max_ms: +ms[ms.length - 1].toFixed(2), runs: ms.length };
}

const create = [];
while (create.length < RUNS) {
  for (let i = 0; ready() < 1; i++) {
    if (i > 2400) throw new Error("the pool does not refill");
    await new Promise((r) => setTimeout(r, 50));
  }
  const t0 = performance.now();
  const sbx = await Sandbox.create(template, { timeoutMs: 300_000 });
  create.push(performance.now() - t0);
  await sbx.kill();
}

const sbx = await Sandbox.create(template, { timeoutMs: 600_000 });
const [url, token] = busctl("GetRuntimeAccess", "s", sbx.sandboxId);
const rt = await RuntimeClient.connect(url, token);
// E2B's SDK runs every command as `/bin/bash -l -c CMD` (a login bash: here the bundle's, the
// busybox image has none): the same process through @agentix/client is the like-for-like peer;
// `true` alone (which the runtime runs without any shell) is the floor.
// Where the difference goes: the same Start request as the SDK sends it (Connect, JSON), made
// with plain fetch through the gateway and straight to the runtime's port.
const startBody = (() => {
  const json = Buffer.from(JSON.stringify({ process: { cmd: "/bin/bash", args: ["-l", "-c", "true"], envs: {} }, stdin: false }));
  const b = Buffer.alloc(5 + json.length);
  b.writeUInt32BE(json.length, 1);
  json.copy(b, 5);
  return b;
})();
async function rawStart(base, headers) {
  const r = await fetch(`${base}/process.Process/Start`, {
    method: "POST", body: startBody,
    headers: { "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1", ...headers } });
  const text = Buffer.from(await r.arrayBuffer()).toString();
  if (r.status !== 200 || !text.includes('"end"')) throw new Error(`Start: ${r.status} ${text}`);
}
const throughGateway = () => rawStart(process.env.E2B_SANDBOX_URL, {
  "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983", "X-Access-Token": sbx.envdAccessToken });
const straight = () => rawStart(url, { "X-Access-Token": token });
const e2b = [], native = [], nativeBash = [], rawGateway = [], rawStraight = [];
await sbx.commands.run("true");
await rt.exec("true");
await rt.exec("exec bash -l -c true");
await throughGateway();
await straight();
for (let i = 0; i < RUNS * 10; i++) {
  let t0 = performance.now();
  await sbx.commands.run("true");
  e2b.push(performance.now() - t0);
  t0 = performance.now();
  await throughGateway();
  rawGateway.push(performance.now() - t0);
  t0 = performance.now();
  await straight();
  rawStraight.push(performance.now() - t0);
  t0 = performance.now();
  await rt.exec("exec bash -l -c true");
  nativeBash.push(performance.now() - t0);
  t0 = performance.now();
  await rt.exec("true");
  native.push(performance.now() - t0);
}
await rt.close();
await sbx.kill();

const direct = JSON.parse(readFileSync(createJson, "utf8"));
const c = stats(create), run = stats(e2b), nat = stats(native), natBash = stats(nativeBash);
const line = (name, s) => `${name.padEnd(58)} ${String(s.median_ms).padStart(8)} ${String(s.p99_ms).padStart(8)} ${String(s.runs).padStart(5)}`;
console.log(`${"".padEnd(58)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)} ${"runs".padStart(5)}`);
console.log(line("Sandbox.create (E2B SDK → agentix-e2b → agentd, warm pool)", c));
console.log(line("CreateSandbox {pool} (dbus-python → agentd)", direct));
console.log(line('commands.run("true") (E2B SDK → agentix-e2b → envd)', run));
console.log(line('  the same Start with fetch, through agentix-e2b', stats(rawGateway)));
console.log(line('  the same Start with fetch, straight to the runtime', stats(rawStraight)));
console.log(line('exec("exec bash -l -c true") (@agentix/client → runtime)', natBash));
console.log(line('exec("true") (@agentix/client → runtime, no shell)', nat));
console.log(`create through the gateway / straight to agentd: ${(c.median_ms / direct.median_ms).toFixed(2)}x; ` +
            `commands.run / the same bash through @agentix/client: ${(run.median_ms / natBash.median_ms).toFixed(2)}x; ` +
            `/ exec("true"): ${(run.median_ms / nat.median_ms).toFixed(2)}x`);
console.log(JSON.stringify({ create_e2b: c, create_agentd: direct, run_e2b: run, exec_bash_agentix: natBash,
                             exec_agentix: nat, start_fetch_gateway: stats(rawGateway),
                             start_fetch_straight: stats(rawStraight), create_ratio: +(c.median_ms / direct.median_ms).toFixed(2),
                             run_ratio_same_command: +(run.median_ms / natBash.median_ms).toFixed(2),
                             run_ratio_true: +(run.median_ms / nat.median_ms).toFixed(2) }));
