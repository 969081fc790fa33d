// SPDX-License-Identifier: MIT
// End to end: a real createDeepAgent, driven by a scripted chat model (no network, no API key),
// writes, edits, greps and runs a file in an agentix sandbox made through agentd
// (tests/agentd/with_agentd.py sets DBUS_SYSTEM_BUS_ADDRESS, AGENTIX_TEST_IMAGE and
// AGENTIX_TEST_BUNDLE: a busybox task image without python3 or GNU tools, and the bundle).
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createDeepAgent } from "deepagents";
import { execFileSync } from "node:child_process";
import { expect, it } from "vitest";

import { AgentixSandbox } from "../src/deepagents.js";
import { SandboxManager } from "../src/index.js";

/** Answers with the next message of its script, whatever it is asked; records what it saw. */
class ScriptedModel extends BaseChatModel {
  seen: BaseMessage[][] = [];
  private step = 0;
  constructor(private readonly script: AIMessage[]) {
    super({});
  }
  _llmType() {
    return "scripted";
  }
  bindTools() {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.seen.push(messages);
    const message = this.script[Math.min(this.step++, this.script.length - 1)];
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

const call = (id: string, name: string, args: Record<string, unknown>) =>
  new AIMessage({ content: "", tool_calls: [{ id, name, args, type: "tool_call" }] });

// Under runc, and under gVisor when dockerd has it (scripts/dockerd.sh registers runsc).
const runtimes = ["runc"];
if (execFileSync("docker", ["info", "--format", "{{json .Runtimes}}"], { encoding: "utf8" }).includes('"runsc"')) runtimes.push("runsc");

it.each(runtimes)("a deep agent writes, edits, greps and runs a file in the sandbox (%s)", async (runtime) => {
  const manager = new SandboxManager();
  const sandbox = await AgentixSandbox.create({
    manager, image: process.env.AGENTIX_TEST_IMAGE!, bundle: process.env.AGENTIX_TEST_BUNDLE!, runtime,
    initialFiles: { "/work/README.md": "# a task\n" },
  });
  try {
    const model = new ScriptedModel([
      call("1", "write_file", { file_path: "/work/app.py", content: "print('hello from the agent')\n" }),
      call("2", "edit_file", { file_path: "/work/app.py", old_string: "hello", new_string: "greetings" }),
      call("3", "grep", { pattern: "greetings", path: "/work" }),
      call("4", "execute", { command: "python3 /work/app.py" }),
      new AIMessage("The program runs."),
    ]);
    const agent = createDeepAgent({ model, backend: sandbox });
    const result = await agent.invoke({ messages: [{ role: "user", content: "Write, fix and run app.py" }] });
    const tools = result.messages.filter((m: BaseMessage) => m.getType() === "tool").map((m: BaseMessage) => String(m.content));
    expect(tools).toHaveLength(4);
    expect(tools[0]).toContain("/work/app.py");
    expect(tools[1]).toContain("Successfully replaced 1 occurrence(s)");
    expect(tools[2]).toContain("/work/app.py");
    expect(tools[2]).toContain("greetings from the agent");
    expect(tools[3]).toContain("greetings from the agent");
    expect(String(result.messages.at(-1)!.content)).toBe("The program runs.");
    // What the agent did is in the sandbox, not somewhere else.
    const [file] = await sandbox.downloadFiles(["/work/app.py"]);
    expect(new TextDecoder().decode(file.content!)).toBe("print('greetings from the agent')\n");
    expect((await sandbox.execute("test -x /usr/bin/python3 || echo no system python3")).output).toBe("no system python3\n");
  } finally {
    await sandbox.close();
    manager.close();
  }
});
