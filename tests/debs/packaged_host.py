# SPDX-License-Identifier: MIT
"""A Debian 12 machine to install the packages on: the systemd container tests/systemd makes
(systemd as PID 1), on the host's network and driving the host's Docker through its socket.
test-debs and test-cockpit boot one each."""

import os
import subprocess

from agentd_env import docker
from harness import wait_until

IMAGE = "agentix-test/systemd:bookworm-4"


def boot(root, container):
    r = subprocess.run([os.path.join(root, "tests", "systemd", "make-image.sh"), IMAGE], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    docker("create", "--name", container, "--network=host", "--cgroupns=host", "--cap-add=SYS_ADMIN",
           "--cap-add=NET_ADMIN", "--security-opt", "seccomp=unconfined", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
           "--tmpfs", "/run", "--tmpfs", "/run/lock", "-v", "/var/run/docker.sock:/var/run/docker.sock", IMAGE)
    docker("start", container)
    wait_until(lambda: shell(container, "systemctl is-system-running", check=False).stdout.strip()
               in ("running", "degraded"), 90, 0.5, what="systemd in the container")


def shell(container, command, user=None, check=True, timeout=600):
    """command run by sh in the container, as root or as user; fails the test on a non-zero exit."""
    argv = ["docker", "exec", "-e", "DEBIAN_FRONTEND=noninteractive", container]
    if user:
        argv += ["runuser", "-u", user, "--"]
    r = subprocess.run(argv + ["sh", "-c", command], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{command!r} (as {user or 'root'}) exited {r.returncode}: {r.stdout}{r.stderr}")
    return r
