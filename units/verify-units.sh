#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# systemd-analyze verify on agentd.service and agentix-egress.socket with its service, and
# syntax checks of the sysusers.d and tmpfiles.d snippets; the services' exposure
# (systemd-analyze security) stays at most 2.0 for agentd, 3.0 for the egress helper, which holds
# the two capabilities agentd does not, and 2.5 for agentix-e2b (CAP_SETUID and CAP_SETGID: it
# connects to the bus as each key's user).
#
#   verify-units.sh SERVICE SYSUSERS TMPFILES EGRESS_SOCKET EGRESS_SERVICE E2B_SERVICE E2B_SOCKET METRICS_SOCKET
set -euo pipefail
service=$1 sysusers=$2 tmpfiles=$3 egress_socket=$4 egress_service=$5 e2b_service=$6 e2b_socket=$7 metrics_socket=$8
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$service" "$dir/agentd.service"
cp "$egress_socket" "$dir/agentix-egress.socket"
cp "$egress_service" "$dir/agentix-egress@.service"
cp "$e2b_service" "$dir/agentix-e2b.service"
cp "$e2b_socket" "$dir/agentix-e2b.socket"
cp "$metrics_socket" "$dir/agentix-metrics.socket"
# verify complains about what it cannot resolve (a missing binary, an unknown directive): all
# of it is an error here.
out=$(systemd-analyze verify --man=no "$dir/agentd.service" "$dir/agentix-egress.socket" \
        "$dir/agentix-egress@.service" "$dir/agentix-e2b.service" "$dir/agentix-e2b.socket" \
        "$dir/agentix-metrics.socket" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
        echo "$out"
        exit 1
fi
exposure() { # UNIT-FILE MAX
        local level
        level=$(systemd-analyze security --offline=true "$1" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
        [ -n "$level" ] || { echo "no exposure level for $1"; exit 1; }
        awk -v l="$level" -v m="$2" 'BEGIN { exit !(l <= m) }' || { echo "$(basename "$1"): exposure $level > $2"; exit 1; }
        echo "$(basename "$1"): exposure $level (at most $2)"
}
exposure "$dir/agentd.service" 2.0
cp "$egress_service" "$dir/agentix-egress@x.service"
exposure "$dir/agentix-egress@x.service" 3.0
exposure "$dir/agentix-e2b.service" 2.5
systemd-sysusers --dry-run "$sysusers" >/dev/null 2>&1 || systemd-sysusers --root="$dir" "$sysusers"
systemd-tmpfiles --root="$dir" --create "$tmpfiles"
[ -d "$dir/etc/agentix/agentd.conf.d" ]
grep -q '^agentix:' "$dir/etc/group" 2>/dev/null || systemd-sysusers --root="$dir" "$sysusers"
grep -q '^agentix:' "$dir/etc/group"
echo "agentd.service, agentix-e2b.service, agentix sysusers.d and tmpfiles.d snippets verified"
