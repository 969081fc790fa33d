# SPDX-License-Identifier: MIT
"""The Cockpit page as an operator gets it: the Debian packages (agentd, agentixctl,
cockpit-agentix…, built as test-debs builds them) installed with apt in the systemd container
tests/systemd boots (Debian 12, systemd as PID 1, the host's Docker socket) beside Debian's
cockpit-ws; then headless Chromium (Debian's, driven by playwright-core: browser.test.mjs)
logs in through Cockpit's login page as a member of group agentix and uses the page.

Needs: MESON_SOURCE_ROOT, MESON_BUILD_ROOT, the agentd test environment (the bundle and the
busybox image), a running dockerd, chromium and npm (scripts/deps.sh), apt's mirror.
Screenshots of the main views go to MESON_BUILD_ROOT/meson-logs/cockpit-screenshots."""

import os
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agentd"))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "debs"))
from agentd_env import BUSYBOX, bundle, cleanup, docker  # noqa: E402
from debs_build import build, debs  # noqa: E402
from harness import main, test  # noqa: E402
from packaged_host import boot, shell  # noqa: E402

ROOT = os.environ["MESON_SOURCE_ROOT"]
CONTAINER = f"agentix-cockpit-test-{os.getpid()}"
PACKAGES = ["agentd", "agentixctl", "libagentix0", "agentix-runtime", "cockpit-agentix"]
NODE_DIR = os.path.join(ROOT, "tests", "interop", "node")  # playwright-core, pinned there
SCREENSHOTS = os.path.join(os.environ["MESON_BUILD_ROOT"], "meson-logs", "cockpit-screenshots")
PASSWORD = "agentix-cockpit-test"
KEPT = {}


def sh(command, user=None, check=True, timeout=600):
    return shell(CONTAINER, command, user, check, timeout)


def sandbox_containers():
    r = docker("ps", "-aq", "--no-trunc", "--filter", "label=org.agentix.sandbox")
    return set(r.stdout.split())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@test
def cockpit_and_the_page_install_from_the_packages():
    out = build()
    KEPT["containers_before"] = sandbox_containers()
    bundle()  # the example bundle and busybox, in the host's Docker the installed agentd uses
    boot(ROOT, CONTAINER)
    sh("mkdir -p /root/debs")
    for d in debs(out, PACKAGES):
        docker("cp", d, f"{CONTAINER}:/root/debs/")
    # podman satisfies agentd's "docker.io | podman" (the host's Docker is the one driven here);
    # cockpit-system is Cockpit's shell, the frame the page is shown in.
    # sudo: Cockpit's administrative access, for alice (group sudo), whose page then shows all.
    sh("apt-get update -qq && apt-get install -y -qq --no-install-recommends podman cockpit-system sudo "
       + " ".join(f"/root/debs/{p}_*.deb" for p in PACKAGES), timeout=900)
    assert sh("test -f /usr/share/cockpit/agentix/manifest.json && test -s /usr/share/cockpit/agentix/xterm.js",
              check=False).returncode == 0
    # Cockpit on a port of its own (the container shares the host's network).
    port = free_port()
    sh("mkdir -p /etc/systemd/system/cockpit.socket.d && printf '[Socket]\\nListenStream=\\nListenStream=127.0.0.1:%d\\n' "
       f"{port} > /etc/systemd/system/cockpit.socket.d/listen.conf && systemctl daemon-reload && "
       "systemctl restart cockpit.socket" % port)
    KEPT["url"] = f"https://127.0.0.1:{port}"
    # A warm pool the page shows and creates from.
    sh(f"mkdir -p /etc/agentix/pools.d && printf '[Pool]\\nSize=1\\nImage={BUSYBOX}\\nBundle={bundle()}\\n' "
       "> /etc/agentix/pools.d/warm.pool")
    sh(f"useradd -m -G agentix,sudo alice && useradd -m -G agentix bob && "
       f"printf 'alice:{PASSWORD}\\nbob:{PASSWORD}\\n' | chpasswd")
    # The page lists what cockpit-bridge finds, as alice.
    r = sh("cockpit-bridge --packages", user="alice")
    assert "agentix" in r.stdout, r.stdout


@test
def the_page_in_a_browser():
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    os.makedirs(SCREENSHOTS)
    r = subprocess.run([os.path.join(NODE_DIR, "run.sh"), "--deps-only"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    env = dict(os.environ, COCKPIT_URL=KEPT["url"], COCKPIT_CONTAINER=CONTAINER, COCKPIT_PASSWORD=PASSWORD,
               AGENTIX_TEST_IMAGE=BUSYBOX, AGENTIX_TEST_BUNDLE=bundle(), SCREENSHOTS=SCREENSHOTS,
               NODE_MODULES=os.path.join(NODE_DIR, "node_modules"))
    r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(HERE, "browser.test.mjs")],
                       env=env, capture_output=True, text=True, timeout=1200)
    print(r.stdout[-12000:])
    print(r.stderr[-3000:])
    print(f"  screenshots: {SCREENSHOTS}")
    assert r.returncode == 0, "the browser steps failed (above)"


if __name__ == "__main__":
    try:
        main()
    finally:
        if os.environ.get("AGENTIX_TEST_KEEP"):
            print(f"  kept for a look (AGENTIX_TEST_KEEP): container {CONTAINER}, {KEPT.get('url')}")
        elif docker("inspect", CONTAINER, check=False).returncode == 0:
            for user in ("alice", "bob"):
                sh("for id in $(agentixctl --json list 2>/dev/null | sed -n 's/.*\"id\": *\"\\([^\"]*\\)\".*/\\1/p'); "
                   "do agentixctl -q delete $id; done", user=user, check=False)
            sh("systemctl stop agentd", check=False)
            docker("rm", "-f", "-v", CONTAINER, check=False)
            # What that agentd left in the host's Docker (the pool's waiting member).
            for cid in sandbox_containers() - KEPT.get("containers_before", set()):
                docker("rm", "-f", "-v", cid, check=False)
        cleanup()
