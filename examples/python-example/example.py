#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A sandbox for a block, from Python: made through agentd, a file uploaded, code run, the
deepagents file methods used, deleted at the end.

    PYTHONPATH=client/python /usr/bin/python3 examples/python-example/example.py [IMAGE] [BUNDLE]

Needs agentd on the system bus with the example bundle built: `eval "$(scripts/dev-env.sh
start)"` starts both (DBUS_SYSTEM_BUS_ADDRESS picks another bus)."""

import asyncio
import sys

from agentix import AgentdDeployment, AgentdError, SandboxConfig, ServerUnreachable, session


async def main(image, bundle):
    deployment = AgentdDeployment()
    config = SandboxConfig(image=image, bundle=bundle, memory=512 << 20, env={"NAME": "agentix"})
    try:
        async with session(deployment, config, initial_files=[("/work/numbers.txt", b"3\n4\n5\n")]) as sandbox:
            print(f"sandbox {sandbox.id}")
            r = await sandbox.aexecute("echo hello $NAME; sh -c 'n=0; while read x; do n=$((n + x)); done "
                                       "< /work/numbers.txt; echo sum $n'")
            print(f"exit {r.exit_code}:\n{r.output}", end="")
            await sandbox.awrite("/work/notes.md", "# notes\nTODO: check\n")
            print((await sandbox.aedit("/work/notes.md", "TODO", "DONE")).occurrences, "edit")
            print(await sandbox.aread("/work/notes.md"))
            print([m["path"] for m in await sandbox.agrep_raw("DONE", "/work")])
    except (AgentdError, ServerUnreachable) as e:
        sys.exit(f"example: {e}")
    finally:
        deployment.close()


if __name__ == "__main__":
    asyncio.run(main(*(sys.argv[1:3] if len(sys.argv) >= 3 else ("agentix-test/busybox:1", "example-bundle:0.1.0"))))
