# SPDX-License-Identifier: MIT
"""The Debian packages of this source tree, built once (scripts/build-debs.sh) and kept under
MESON_BUILD_ROOT/debs-cache by the tree's git hash and the working tree's changes: test-debs
and test-cockpit install the same files."""

import hashlib
import os
import shutil
import subprocess

ROOT = os.environ["MESON_SOURCE_ROOT"]
CACHE = os.path.join(os.environ["MESON_BUILD_ROOT"], "debs-cache")
# Every package debian/control makes.
ALL_PACKAGES = ["agentd", "agentixctl", "libagentix0", "libagentix-dev", "agentix-runtime", "python3-agentix",
                "cockpit-agentix"]


def tree_key():
    """The source the packages come from: HEAD's tree and what differs from it."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD^{tree}"], capture_output=True, text=True).stdout
    diff = subprocess.run(["git", "-C", ROOT, "diff", "HEAD"], capture_output=True).stdout
    others = subprocess.run(["git", "-C", ROOT, "ls-files", "--others", "--exclude-standard"], capture_output=True).stdout
    return hashlib.sha256(head.encode() + diff + others).hexdigest()[:16]


def build():
    """The directory with the .deb files and lintian.txt, built when this tree has none yet
    (AGENTIX_TEST_DEBS names a directory scripts/build-debs.sh filled, to use instead)."""
    if os.environ.get("AGENTIX_TEST_DEBS"):
        return os.environ["AGENTIX_TEST_DEBS"]
    out = os.path.join(CACHE, tree_key())
    if not os.path.exists(os.path.join(out, "lintian.txt")):
        shutil.rmtree(CACHE, ignore_errors=True)
        r = subprocess.run([os.path.join(ROOT, "scripts", "build-debs.sh"), out], capture_output=True, text=True,
                           timeout=2400)
        print(r.stdout[-1500:])
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def debs(out, names):
    return [os.path.join(out, f) for f in sorted(os.listdir(out))
            if f.endswith(".deb") and "dbgsym" not in f and f.split("_")[0] in names]
