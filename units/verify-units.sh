#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# systemd-analyze verify on agentd.service (with the D-Bus activation alias it is installed
# under) and syntax checks of the sysusers.d and tmpfiles.d snippets.
#
#   verify-units.sh SERVICE SYSUSERS TMPFILES
set -euo pipefail
service=$1 sysusers=$2 tmpfiles=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$service" "$dir/agentd.service"
# verify complains about what it cannot resolve (a missing binary, an unknown directive): all
# of it is an error here.
out=$(systemd-analyze verify --man=no "$dir/agentd.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
        echo "$out"
        exit 1
fi
systemd-sysusers --dry-run "$sysusers" >/dev/null 2>&1 || systemd-sysusers --root="$dir" "$sysusers"
systemd-tmpfiles --root="$dir" --create "$tmpfiles"
[ -d "$dir/etc/agentix/agentd.conf.d" ]
grep -q '^agentix:' "$dir/etc/group" 2>/dev/null || systemd-sysusers --root="$dir" "$sysusers"
grep -q '^agentix:' "$dir/etc/group"
echo "agentd.service, agentix sysusers.d and tmpfiles.d snippets verified"
