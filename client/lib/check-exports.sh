#!/bin/sh
# SPDX-License-Identifier: MIT
# libagentix exports the agentix_* API and nothing else (no wire-library or msgpack helpers
# that could clash with a program's own symbols), each under the LIBAGENTIX_0 version.
# With a man page as second argument, every export but the test hooks must be in it.
set -eu
lib="$1"
man="${2:-}"
syms=$(nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }')
bad=$(printf '%s\n' "$syms" | grep -v '^agentix_[a-z0-9_]*@@LIBAGENTIX_0$' || true)
if [ -n "$bad" ]; then
        echo "unexpected exports:" >&2
        printf '%s\n' "$bad" >&2
        exit 1
fi
for s in agentix_client_new agentix_call agentix_call_async agentix_exec agentix_grep agentix_error_done; do
        printf '%s\n' "$syms" | grep -q "^$s@@LIBAGENTIX_0$" || { echo "missing export: $s" >&2; exit 1; }
done
if [ -n "$man" ]; then
        for s in $(printf '%s\n' "$syms" | sed 's/@@.*//' | grep -v '_for_testing$'); do
                grep -qw "$s" "$man" || { echo "$s is not documented in $man" >&2; exit 1; }
        done
fi
echo "$(printf '%s\n' "$syms" | wc -l) exports, all agentix_*${man:+, all documented}"
