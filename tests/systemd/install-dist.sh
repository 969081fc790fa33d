#!/bin/sh
# SPDX-License-Identifier: MIT
# agentix built and installed as a distribution package would be: prefix /usr, a release build,
# `meson install` into a staging root. Units, D-Bus files, sysusers.d and tmpfiles.d land where
# systemd and dbus read them. Debian 12 has merged /usr, so /lib/... is moved under /usr/lib:
# copying a real /lib over the image's /lib symlink would break the image.
#
#   install-dist.sh SOURCE_DIR BUILD_DIR STAGING_DIR
set -eu

src=${1:?usage: install-dist.sh SOURCE_DIR BUILD_DIR STAGING_DIR}
build=${2:?}
staging=${3:?}

if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$src" --prefix=/usr --buildtype=release >"$build.setup.log" 2>&1 || {
                cat "$build.setup.log" >&2
                exit 1
        }
fi
meson compile -C "$build" >"$build.compile.log" 2>&1 || { tail -n 40 "$build.compile.log" >&2; exit 1; }
rm -rf "$staging"
DESTDIR="$staging" meson install -C "$build" --no-rebuild --quiet >/dev/null
if [ -d "$staging/lib" ]; then
        mkdir -p "$staging/usr/lib"
        cp -a "$staging/lib/." "$staging/usr/lib/"
        rm -rf "$staging/lib"
fi
