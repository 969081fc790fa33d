# SPDX-License-Identifier: MIT
"""The Debian packages, as an operator gets them: built from a clean copy of the checkout
(scripts/build-debs.sh: dpkg-buildpackage, then lintian, whose errors fail the test), then in
the systemd container tests/systemd boots (Debian 12, systemd as PID 1, the host's Docker
socket): `apt-get install ./….deb` with Debian's own dependency resolution, a user of group
agentix creating, using and deleting a sandbox with agentixctl and busctl through D-Bus
activation, the Python package from the system Python, pkg-config and a C program linked with
libagentix, `apt-get purge` leaving no file the packages installed and agentd stopped, and a
reinstall that works again.

Needs: MESON_SOURCE_ROOT, MESON_BUILD_ROOT, the agentd test environment (agentd_env.py: the
bundle and the busybox image) and a running dockerd; apt's mirror (the container installs the
packages' dependencies). The packages are built once per source tree (cached by the tree's
git hash and the working tree's changes under MESON_BUILD_ROOT/debs-cache)."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agentd"))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
from agentd_env import BUSYBOX, bundle, cleanup, docker  # noqa: E402
from debs_build import ALL_PACKAGES, build, debs  # noqa: E402
from harness import main, test  # noqa: E402
from packaged_host import boot, shell  # noqa: E402

ROOT = os.environ["MESON_SOURCE_ROOT"]
CONTAINER = f"agentix-debs-test-{os.getpid()}"
# What this test installs (cockpit-agentix: tests/cockpit).
PACKAGES = ["agentd", "agentixctl", "libagentix0", "libagentix-dev", "agentix-runtime", "python3-agentix"]
# Where the file lists before install and after purge are compared: what dpkg owns.
FIND = ("find / -xdev -type f -not -path '/proc/*' -not -path '/var/cache/*' -not -path '/var/log/*' "
        "-not -path '/var/lib/apt/*' -not -path '/var/lib/dpkg/*' -not -path '/root/*' "
        "-not -path '/var/lib/systemd/*' -not -path '/tmp/*' | sort")
KEPT = {}


def sh(command, user=None, check=True, timeout=600):
    return shell(CONTAINER, command, user, check, timeout)


@test
def the_packages_build_and_lintian_finds_no_error():
    out = build()
    KEPT["out"] = out
    with open(os.path.join(out, "lintian.txt")) as f:
        report = [line for line in f.read().splitlines() if line[:3] in ("E: ", "W: ")]
    errors = [line for line in report if line.startswith("E: ")]
    print(f"  lintian: {len(errors)} errors, {len(report) - len(errors)} warnings")
    for line in report:
        print(f"  {line}")
    assert not errors, errors
    assert sorted({os.path.basename(d).split("_")[0] for d in debs(out, ALL_PACKAGES)}) == sorted(ALL_PACKAGES)


@test
def apt_installs_them_with_their_dependencies_in_a_booted_system():
    bundle()  # the example bundle and busybox, in the host's Docker the installed agentd uses
    boot(ROOT, CONTAINER)
    sh("mkdir -p /root/debs")
    for d in debs(KEPT["out"], PACKAGES):
        docker("cp", d, f"{CONTAINER}:/root/debs/")
    sh(f"{FIND} > /root/before.txt")
    # podman satisfies agentd's "docker.io | podman" without a second dockerd in the container:
    # the host's Docker is the one agentd drives here.
    sh("apt-get update -qq && apt-get install -y -qq --no-install-recommends podman "
       "/root/debs/agentd_*.deb /root/debs/agentixctl_*.deb /root/debs/libagentix0_*.deb "
       "/root/debs/libagentix-dev_*.deb /root/debs/agentix-runtime_*.deb /root/debs/python3-agentix_*.deb",
       timeout=900)
    assert sh("getent group agentix").stdout.startswith("agentix:")
    assert sh("systemctl is-enabled agentd.service", check=False).stdout.strip() == "enabled"
    # Installed, not started: D-Bus activation starts it.
    assert sh("systemctl is-active agentd.service", check=False).stdout.strip() == "inactive"
    sh("useradd -m -G agentix alice && useradd -m bob")


@test
def a_member_of_agentix_uses_a_sandbox_through_dbus_activation():
    r = sh(f"agentixctl --json -q create --image={BUSYBOX} --bundle={bundle()}", user="alice", timeout=300)
    sid = json.loads(r.stdout)["id"]
    assert sh("systemctl is-active agentd.service").stdout.strip() == "active"
    assert sh(f"agentixctl --sandbox={sid} exec -- echo from-the-package", user="alice").stdout == "from-the-package\n"
    listed = sh("busctl --system --json=short call org.agentix.Agentd1 /org/agentix/Agentd1 "
                "org.agentix.Agentd1.Manager ListSandboxes", user="alice").stdout
    assert sid in listed, listed
    # Not in the group: the bus policy says no.
    r = sh("busctl --system call org.agentix.Agentd1 /org/agentix/Agentd1 org.agentix.Agentd1.Manager "
           "ListSandboxes", user="bob", check=False)
    assert r.returncode != 0 and "denied" in (r.stdout + r.stderr).lower(), (r.stdout, r.stderr)
    sh(f"agentixctl delete {sid}", user="alice")
    assert sid not in sh("agentixctl --json list", user="alice").stdout
    # The same with busctl alone.
    r = sh("busctl --system --json=short --timeout=300 call org.agentix.Agentd1 /org/agentix/Agentd1 "
           f"org.agentix.Agentd1.Manager CreateSandbox a{{sv}} 2 image s {BUSYBOX} bundle s {bundle()}",
           user="alice", timeout=330)
    path, sid = json.loads(r.stdout)["data"]
    assert sh(f"agentixctl --sandbox={sid} exec -- id -u", user="alice").stdout == "0\n"
    sh(f"busctl --system call org.agentix.Agentd1 /org/agentix/Agentd1 org.agentix.Agentd1.Manager "
       f"DeleteSandbox s {sid}", user="alice")
    assert sid not in sh("agentixctl --json list", user="alice").stdout


@test
def the_python_package_imports_and_a_c_program_links_with_libagentix():
    r = sh("/usr/bin/python3 -c 'import agentix, agentix.deployment; print(agentix.RuntimeClient.__name__)'")
    assert r.stdout.strip() == "RuntimeClient", r.stdout
    sh("apt-get install -y -qq --no-install-recommends gcc libc6-dev pkg-config", timeout=900)
    cflags = sh("pkg-config --cflags --libs agentix").stdout
    assert "-lagentix" in cflags, cflags
    sh("cat > /root/hello.c <<'EOF'\n#include <agentix.h>\n#include <stdio.h>\n"
       "int main(void) {\n  agentix_client *c = NULL;\n"
       "  agentix_options o = { .url = \"http://127.0.0.1:9\", .token = \"t\" };\n"
       "  if (agentix_client_new(&o, NULL, &c) < 0) return 1;\n"
       "  printf(\"%s\\n\", agentix_error_kind_name(AGENTIX_E_CONNECTION));\n"
       "  agentix_client_unref(c);\n  return 0;\n}\nEOF\n"
       "cc -o /root/hello /root/hello.c $(pkg-config --cflags --libs agentix)")
    # A client made (no server needed for that) and a name from the library itself.
    assert sh("/root/hello").stdout.strip() == "ConnectionError"


@test
def purge_removes_every_file_and_stops_agentd():
    # Every file the packages installed, as dpkg lists them, and the conffile.
    owned = [p for p in sh("dpkg -L " + " ".join(PACKAGES)).stdout.split("\n")
             if p and sh(f"test -f '{p}' && ! test -L '{p}'", check=False).returncode == 0]
    assert "/usr/libexec/agentd" in owned and "/etc/agentix/agentd.conf" in owned, owned[:20]
    sh("apt-get purge -y -qq " + " ".join(PACKAGES), timeout=300)
    left = [p for p in owned if sh(f"test -e '{p}'", check=False).returncode == 0]
    assert not left, left
    assert sh("systemctl is-active agentd.service", check=False).stdout.strip() != "active"
    sh(f"{FIND} > /root/after.txt")
    before = set(sh("cat /root/before.txt").stdout.split("\n"))
    after = set(sh("cat /root/after.txt").stdout.split("\n"))
    # What gcc and pkg-config brought are theirs; what is left of ours would show here.
    ours = [p for p in after - before if "agentix" in p or "agentd" in p]
    assert not ours, ours
    assert sh("ls -d /var/lib/agentix /etc/agentix", check=False).returncode != 0


@test
def a_reinstall_works_again():
    sh("apt-get install -y -qq --no-install-recommends /root/debs/agentd_*.deb /root/debs/agentixctl_*.deb "
       "/root/debs/libagentix0_*.deb /root/debs/agentix-runtime_*.deb", timeout=600)
    r = sh(f"agentixctl --json -q create --image={BUSYBOX} --bundle={bundle()}", user="alice", timeout=300)
    sid = json.loads(r.stdout)["id"]
    assert sh(f"agentixctl --sandbox={sid} exec -- echo again", user="alice").stdout == "again\n"
    sh(f"agentixctl delete {sid}", user="alice")


if __name__ == "__main__":
    try:
        main()
    finally:
        if docker("inspect", CONTAINER, check=False).returncode == 0:
            sh("for id in $(agentixctl --json list 2>/dev/null | sed -n 's/.*\"id\": *\"\\([^\"]*\\)\".*/\\1/p'); do "
               "agentixctl -q delete $id; done", check=False)
            docker("rm", "-f", "-v", CONTAINER, check=False)
        cleanup()
