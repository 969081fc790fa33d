#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/build-debs.sh [OUTDIR] — the Debian packages of this tree (debian/): agentd,
# agentixctl, libagentix0, libagentix-dev, agentix-runtime, python3-agentix, built with
# dpkg-buildpackage from a clean copy of the checkout (git archive of HEAD plus uncommitted
# changes, so build directories in the tree do not leak in), then checked with lintian.
# OUTDIR (default <repo>/debs) receives the .deb files and lintian's report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/debs}
case $out in /*) ;; *) out=$PWD/$out ;; esac

"$root/scripts/deps.sh"
need=()
for p in debhelper dh-python pybuild-plugin-pyproject python3-all lintian dpkg-dev fakeroot; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
        echo "build-debs: installing ${need[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The packages' version is the project's: debian/changelog is kept with meson.build.
project=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$root/meson.build" | head -n 1)
changelog=$(cd "$root" && dpkg-parsechangelog -S Version)
if [ "$project" != "$changelog" ]; then
        echo "build-debs: debian/changelog says $changelog, meson.build $project: add a changelog entry (dch -v $project)" >&2
        exit 1
fi

work=$(mktemp -d /tmp/agentix-debs.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/agentix
mkdir -p "$src"
# What git tracks, as it is in the working tree (committed or not; a file removed is left out).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$src"

# Debian's own tools first: pybuild runs the python3 it finds on PATH, which must be Debian's.
(cd "$src" && PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$work/build.log" 2>&1) || {
        tail -60 "$work/build.log" >&2
        echo "build-debs: dpkg-buildpackage failed (the log's end above)" >&2
        exit 1
}
mkdir -p "$out"
cp "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$out"/
(cd "$work" && PATH=/usr/sbin:/usr/bin:/sbin:/bin lintian --no-tag-display-limit ./*.changes) >"$out/lintian.txt" 2>&1 || true
errors=$(grep -c '^E: ' "$out/lintian.txt" || true)
warnings=$(grep -c '^W: ' "$out/lintian.txt" || true)
ls -1 "$out"/*.deb
echo "lintian: $errors errors, $warnings warnings ($out/lintian.txt)"
[ "$errors" -eq 0 ]
