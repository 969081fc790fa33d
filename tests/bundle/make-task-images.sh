#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Make the task images the bundle tests and benchmarks run bundles on, unless Docker has them:
#   agentix-test/busybox:1        libc-free: busybox-static and a few applet links
#   agentix-test/debian:bookworm  Debian 12 from debootstrap --variant=minbase
# No registry is reachable here: both are `docker import`s of a root filesystem made locally.
#
#   tests/bundle/make-task-images.sh [busybox|debian]...   (default: both)
# Environment: AGENTIX_TEST_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

DOCKER=${DOCKER:-docker}
mirror=${AGENTIX_TEST_MIRROR:-http://deb.debian.org/debian}

have() { $DOCKER image inspect "$1" >/dev/null 2>&1; }

busybox_image() {
        local ref=agentix-test/busybox:1 root
        have $ref && return 0
        root=$(mktemp -d)
        mkdir -p "$root"/{bin,etc,root,tmp}
        chmod 1777 "$root/tmp"
        cp /bin/busybox "$root/bin/busybox"
        for applet in sh ls cat echo ps sleep; do ln -s busybox "$root/bin/$applet"; done
        echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
        tar -C "$root" -c . | $DOCKER import - $ref >/dev/null
        rm -rf "$root"
}

debian_image() {
        local ref=agentix-test/debian:bookworm root log
        have $ref && return 0
        root=$(mktemp -d)
        log=$(mktemp)
        if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$log" 2>&1; then
                tail -20 "$log" >&2
                rm -rf "$root" "$log"
                return 1
        fi
        tar -C "$root" -c . | $DOCKER import - $ref >/dev/null
        rm -rf "$root" "$log"
}

for what in "${@:-busybox debian}"; do
        for w in $what; do
                case $w in
                busybox) busybox_image ;;
                debian) debian_image ;;
                *) echo "usage: $0 [busybox|debian]..." >&2; exit 2 ;;
                esac
        done
done
