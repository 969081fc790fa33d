#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""scripts/dev-env.sh clean removes everything agentix made on a host: after start, sandboxes
(the isolated network and one with an egress list), a snapshot, stop and clean, the host's
iptables and ip6tables rules, network links, Docker networks, containers, images and volumes
are what they were before, dockerd's daemon.json is back byte for byte, and the bundle cache and
dev-env's state directory are gone.

The "host" is a network namespace of the test's own with a dockerd of its own (its own data,
socket and daemon.json), so that neither the machine's firewall nor its Docker is touched and
the comparison holds whatever else runs. dev-env runs in it as a user would run it on a host.

Needs: MESON_BUILD_ROOT (a built tree), a dockerd binary, iproute2, iptables."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ["MESON_BUILD_ROOT"]
NETNS = "agxclean"
# What the operator had in daemon.json before agentix: it must come back as it was.
DAEMON_JSON = '{\n    "log-level": "warn"\n}\n'


class Host:
    """A network namespace with a dockerd in it: a host of the test's own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="agentix-clean-test-")
        self.socket = os.path.join(self.dir, "docker.sock")
        self.config = os.path.join(self.dir, "daemon.json")
        with open(self.config, "w") as f:
            f.write(DAEMON_JSON)
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)
        subprocess.run(["ip", "netns", "add", NETNS], check=True)
        self.sh("ip link set lo up")
        self.log = open(os.path.join(self.dir, "dockerd.log"), "ab")
        # nsenter, not `ip netns exec`: that one mounts a new /sys, which hides the cgroups.
        self.dockerd = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{NETNS}", "dockerd", "--host", f"unix://{self.socket}",
             "--config-file", self.config, "--data-root", os.path.join(self.dir, "data"),
             "--exec-root", os.path.join(self.dir, "exec"), "--pidfile", os.path.join(self.dir, "docker.pid")],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.sh("docker version", check=False).returncode == 0, 60, interval=0.25,
                   what="the test's dockerd")
        self.env = dict(os.environ, DOCKER_HOST=f"unix://{self.socket}", BUILD=BUILD,
                        AGENTIX_DEV_DIR=os.path.join(self.dir, "dev"),
                        AGENTIX_CACHE_DIR=os.path.join(self.dir, "cache"), AGENTIX_DOCKERD_CONFIG=self.config,
                        DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={self.dir}/dev/bus/system_bus_socket",
                        PATH=os.path.join(BUILD, "client", "agentixctl") + ":" + os.environ["PATH"])

    def sh(self, command, check=True, timeout=600):
        """command in the namespace, with the test host's environment."""
        r = subprocess.run(["nsenter", f"--net=/run/netns/{NETNS}", "sh", "-c", command], capture_output=True,
                           text=True, timeout=timeout, env=getattr(self, "env", dict(os.environ, DOCKER_HOST=f"unix://{self.socket}")),
                           cwd=ROOT)
        if check and r.returncode != 0:
            raise AssertionError(f"{command}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def state(self):
        """What clean must put back: firewall rules (without counters), links, and Docker's
        networks, containers, images and volumes."""
        def rules(tool):
            # Comments carry dates; counters change with traffic. A table whose built-in chains
            # all accept and hold no rule is no rule at all (the kernel makes one the first time
            # a rule is added or removed in it, and keeps it).
            tables, out = {}, []
            for line in self.sh(f"{tool}-save").stdout.splitlines():
                if line.startswith("*"):
                    table = tables.setdefault(line, [])
                elif line.startswith(":"):
                    table.append(line.split(" [")[0])
                elif line.startswith("-"):
                    table.append(line)
            for name, lines in tables.items():
                if any(not (line.startswith(":") and line.endswith(" ACCEPT")) for line in lines):
                    out += [name] + lines
            return sorted(out)
        docker = lambda *args: sorted(self.sh("docker " + " ".join(args)).stdout.split("\n"))
        return {
            "iptables": rules("iptables"),
            "ip6tables": rules("ip6tables"),
            "links": sorted(line.split()[0] for line in self.sh("ip -br link").stdout.splitlines()),
            "networks": docker("network ls --format '{{.Name}} {{.Driver}}'"),
            "containers": docker("ps -a --no-trunc --format '{{.ID}} {{.Names}}'"),
            "images": docker("images -a --no-trunc --format '{{.ID}} {{.Repository}}:{{.Tag}}'"),
            "volumes": docker("volume ls -q"),
        }

    def destroy(self):
        if self.dockerd.poll() is None:
            self.dockerd.terminate()
            try:
                self.dockerd.wait(60)
            except subprocess.TimeoutExpired:
                self.dockerd.kill()
                self.dockerd.wait()
        self.log.close()
        for line in sorted((m.split()[1] for m in open("/proc/mounts") if f" {self.dir}/" in m), reverse=True):
            subprocess.run(["umount", "-l", line], capture_output=True)
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@test
def clean_leaves_the_host_as_it_was():
    h = Host()
    try:
        before = h.state()
        assert not any("agentix" in line.lower() for lines in before.values() for line in lines), before

        out = h.sh("scripts/dev-env.sh start").stdout
        assert "DBUS_SYSTEM_BUS_ADDRESS" in out and "E2B_API_KEY=e2b_" in out, out
        # E2B's API answers with dev-env's key, its templates are there (a pool each).
        key = out.split("E2B_API_KEY=")[1].split()[0]
        r = h.sh(f"curl -sf -X POST -H 'X-API-KEY: {key}' -H 'Content-Type: application/json' "
                 "-d '{\"templateID\": \"base\"}' http://127.0.0.1:49982/v2/sandboxes")
        made = json.loads(r.stdout)
        assert made["templateID"] == "base", made
        h.sh(f"curl -sf -X DELETE -H 'X-API-KEY: {key}' http://127.0.0.1:49982/sandboxes/{made['sandboxID']}")
        plain = h.sh("agentixctl create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0").stdout.strip()
        walled = h.sh("agentixctl create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0 "
                      "--egress=192.0.2.0/24").stdout.strip()
        h.sh(f"agentixctl --sandbox={plain} exec -- sh -c 'echo made > /tmp/f'")
        snapshot = h.sh(f"agentixctl snapshot {plain}").stdout.strip()
        assert snapshot.startswith("agentix-snapshot/"), snapshot
        status = h.sh("scripts/dev-env.sh status").stdout
        assert "agentd: running" in status and "agentix-e2b: running" in status and "not started by dev-env" in status, \
            status
        r = h.sh("scripts/dev-env.sh stop")
        # What outlives stop is said, by count and in the right number: plain and walled, and the
        # member the base pool made again after the E2B create (unless its refill had not begun).
        m = re.search(r"left on this host: (\d+) (sandbox(?:es)?), (\d+) of them made for warm pools", r.stderr)
        assert m and int(m.group(1)) == 2 + int(m.group(3)) and int(m.group(3)) <= 1 and \
            m.group(2) == ("sandbox" if m.group(1) == "1" else "sandboxes"), r.stderr
        status = h.sh("scripts/dev-env.sh status").stdout
        assert "agentd: not running" in status and "agentix-e2b: not running" in status, status

        # What stays after stop, and what clean is for (each of them, so that the comparison
        # below is no empty one).
        during = h.state()
        assert {"agentix0", "agentix1"} <= set(during["links"]), during["links"]
        assert any("AGENTIX-FWD-agentix0" in line for line in during["iptables"]), during["iptables"]
        assert any(n.startswith("agentix-isolated ") for n in during["networks"]), during["networks"]
        assert any(n.startswith("agentix-egress ") for n in during["networks"]), during["networks"]
        names = " ".join(during["containers"])
        assert f"agentix-{plain}" in names and f"agentix-{walled}" in names and "carrier" in names, names
        tags = " ".join(during["images"])
        assert "example-bundle:0.1.0" in tags and "agentix-test/busybox:1" in tags and snapshot in tags, tags
        with open(h.config) as f:
            assert "runsc" in f.read() or not shutil.which("runsc")

        r = h.sh("scripts/dev-env.sh clean")
        for said in ("agentix-isolated", "agentix-egress", "rules for agentix0", "bundle cache"):
            assert said in r.stderr, (said, r.stderr)
        # Counts in the right number: "removed 1 snapshot image", "removed 3 sandbox containers".
        for one in ("sandbox container", "carrier container", "snapshot image", "bundle image", "task image"):
            m = re.search(rf"removed (\d+) {one}(s?)\b", r.stderr)
            assert m and (m.group(2) == "") == (m.group(1) == "1"), (one, r.stderr)
        assert "removed 1 snapshot image " in r.stderr or "removed 1 snapshot image\n" in r.stderr, r.stderr

        after = h.state()
        for what in before:
            assert after[what] == before[what], (what, sorted(set(after[what]) ^ set(before[what])))
        with open(h.config) as f:
            assert f.read() == DAEMON_JSON
        assert not os.path.exists(h.config + ".before-agentix")
        assert not os.path.exists(h.env["AGENTIX_CACHE_DIR"]) and not os.path.exists(h.env["AGENTIX_DEV_DIR"])
        # A second clean finds nothing to do, and says nothing was removed.
        r = h.sh("scripts/dev-env.sh clean")
        assert "removed" not in r.stderr.replace("agentix left nothing", ""), r.stderr
    finally:
        h.sh("scripts/dev-env.sh stop", check=False)
        h.destroy()


if __name__ == "__main__":
    main()
