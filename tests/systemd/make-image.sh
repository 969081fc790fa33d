#!/bin/sh
# SPDX-License-Identifier: MIT
# The image tests/systemd boots: Debian 12 (minbase) with systemd as PID 1, dbus, and the
# libraries a distribution's agentix package depends on (what ldd shows for agentd, its
# backends, agentixctl and agentix-e2b), plus iptables for agentix-firewall and man-db (systemd-analyze verify
# checks that the units' Documentation= pages are installed). Made with debootstrap from the
# Debian mirror apt uses and imported into Docker; made once (the tag names its recipe).
#
#   make-image.sh TAG
set -eu

tag=${1:?usage: make-image.sh TAG}
if docker image inspect "$tag" >/dev/null 2>&1; then
        exit 0
fi
command -v debootstrap >/dev/null || { echo "make-image.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
root=$(mktemp -d /var/tmp/agentix-systemd-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase \
        --include=systemd-sysv,dbus,iptables,man-db,libcurl4,libinih1,libmsgpackc2,libjansson4,libwebsockets17,libwebsockets-evlib-uv,libuv1,libhttp-parser2.9,libelf1,libarchive13,libseccomp2 \
        bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >"$root.log" 2>&1 || {
        tail -n 20 "$root.log" >&2
        rm -f "$root.log"
        exit 1
}
rm -f "$root.log"
# No getty on a console that is not there; nothing that waits for hardware.
rm -f "$root/etc/systemd/system/getty.target.wants/"* "$root/etc/systemd/system/multi-user.target.wants/e2scrub_reap.service"
tar -C "$root" -c . | docker import --change 'CMD ["/sbin/init"]' --change 'ENV container=docker' - "$tag" >/dev/null
