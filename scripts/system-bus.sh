#!/usr/bin/env bash
# A private system bus for agentd (no systemd as PID 1 here): dbus-daemon with Debian's default
# system policy and agentd's policy file from policy/dbus (tests/agentd/bus.conf.in).
#
#   scripts/system-bus.sh start DIR   start it with its socket in DIR; prints the address to
#                                     export as DBUS_SYSTEM_BUS_ADDRESS
#   scripts/system-bus.sh stop DIR    stop the one start started
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:?start or stop}
dir=${2:?directory}

case "$cmd" in
start)
        mkdir -p "$dir"
        sed -e "s|@SOCKET@|$dir/system_bus_socket|" -e "s|@POLICY@|$root/policy/dbus/org.agentix.Agentd1.conf|" \
                "$root/tests/agentd/bus.conf.in" >"$dir/bus.conf"
        dbus-daemon --config-file="$dir/bus.conf" --nofork </dev/null >/dev/null 2>"$dir/dbus.log" &
        echo $! >"$dir/dbus.pid"
        for _ in $(seq 100); do
                [ -S "$dir/system_bus_socket" ] && break
                sleep 0.05
        done
        [ -S "$dir/system_bus_socket" ] || { cat "$dir/dbus.log" >&2; exit 1; }
        echo "unix:path=$dir/system_bus_socket"
        ;;
stop)
        pid=$(cat "$dir/dbus.pid" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
        ;;
*)
        echo "usage: $0 start|stop DIR" >&2
        exit 2
        ;;
esac
