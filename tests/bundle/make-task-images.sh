#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Make the task images the bundle tests and benchmarks run bundles on, unless Docker has them:
#   agentix-test/busybox:1        libc-free: busybox-static and a few applet links
#   agentix-test/debian:bookworm  Debian 12 from debootstrap --variant=minbase
#   agentix-test/e2b-base:1       the busybox image with E2B's account: `user` (1000, home
#                                 /home/user) beside root, as E2B's own images have
# No registry is reachable here: both are `docker import`s of a root filesystem made locally.
#
#   tests/bundle/make-task-images.sh [busybox|debian|e2b]...   (default: busybox and debian)
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

e2b_image() {
        local ref=agentix-test/e2b-base:1 root
        have $ref && return 0
        root=$(mktemp -d)
        mkdir -p "$root"/{bin,etc,root,tmp,home/user}
        chmod 1777 "$root/tmp"
        chmod 0700 "$root/root"
        cp /bin/busybox "$root/bin/busybox"
        for applet in sh ls cat echo ps sleep; do ln -s busybox "$root/bin/$applet"; done
        printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$root/etc/passwd"
        printf 'root:x:0:\nuser:x:1000:\n' >"$root/etc/group"
        # Everything root's but /home/user, which is user's (tar's --owner applies to a whole run).
        tar -C "$root" --owner=0 --group=0 --exclude=./home/user -c . >"$root.tar"
        tar -C "$root" --owner=1000 --group=1000 --no-recursion -r -f "$root.tar" ./home/user
        $DOCKER import - $ref <"$root.tar" >/dev/null
        rm -rf "$root" "$root.tar"
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
                e2b) e2b_image ;;
                *) echo "usage: $0 [busybox|debian|e2b]..." >&2; exit 2 ;;
                esac
        done
done
