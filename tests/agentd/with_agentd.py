#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run a command with an agentd of its own (a private bus with the project's policy, and the
real dockerd): DBUS_SYSTEM_BUS_ADDRESS, AGENTIX_TEST_IMAGE and AGENTIX_TEST_BUNDLE set for it.
Fails when the command fails, when agentd does not exit cleanly, or when a sandbox is left.

  with_agentd.py COMMAND [ARG…]          (needs what agentd_env.py needs)"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentd_env import BUSYBOX, Agentd, bundle, cleanup, managed_containers  # noqa: E402


def main():
    ref = bundle()
    before = managed_containers()
    a = Agentd("with-agentd")
    try:
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=a.address, AGENTIX_TEST_IMAGE=BUSYBOX, AGENTIX_TEST_BUNDLE=ref)
        rc = subprocess.run(sys.argv[1:], env=env).returncode
    finally:
        stopped = a.stop()
    if stopped != 0:
        print(f"agentd exited with {stopped}:\n{a.log_text()[-3000:]}")
        rc = rc or 1
    left = managed_containers() - before
    if left:
        print(f"sandboxes left behind: {sorted(left)}")
        rc = rc or 1
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        cleanup()
