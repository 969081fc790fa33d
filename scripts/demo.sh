#!/usr/bin/env bash
# The main job, on a fresh Debian 12 machine: install what is needed, build agentix, start
# dockerd and a system bus with agentd on it, make a task image with no libc at all (static
# busybox) and the example bundle (agentixctl build), then create sandboxes with plain busctl
# and with agentixctl, run commands and a C module function in them through a real Socket.IO
# client and through agentixctl, delete them, take one from a warm pool in milliseconds, run a
# program written for E2B's SDK unchanged through agentix-e2b, and show that no container is
# left.
set -euo pipefail
cd "$(dirname "$0")/.."

build_log=/tmp/agentix-demo-build.log
: >"$build_log"
./scripts/deps.sh
# The first screen shows what the demo does: the build's output goes to a log, and only a
# progress line shows (on a terminal).
printf '=== building agentix (log: %s)\n' "$build_log"
if { [ -d build ] || meson setup build --buildtype=debugoptimized >"$build_log" 2>&1; } &&
   if [ -t 1 ]; then
        ninja -C build 2>&1 | tee -a "$build_log" |
                awk '/^\[[0-9]+\/[0-9]+\]/ { printf "\r\033[K    %s", substr($0, 1, 72); fflush() } END { print "" }'
        [ "${PIPESTATUS[0]}" -eq 0 ]
   else
        ninja -C build >>"$build_log" 2>&1
   fi; then
        :
else
        tail -30 "$build_log"
        echo "the build failed; the whole log is $build_log" >&2
        exit 1
fi

ctl=build/client/agentixctl/agentixctl
work=$(mktemp -d /tmp/agentix-demo.XXXXXX)
agentd_pid=
e2b_pid=

cleanup() {
        [ -n "$e2b_pid" ] && kill "$e2b_pid" 2>/dev/null && wait "$e2b_pid" 2>/dev/null || true
        [ -n "$agentd_pid" ] && kill "$agentd_pid" 2>/dev/null && wait "$agentd_pid" 2>/dev/null || true
        ./scripts/system-bus.sh stop "$work/bus"
        ./scripts/dockerd.sh stop "$work/dockerd.pid"
        rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n=== %s\n' "$*"; }

step "dockerd, a task image without libc, the example bundle"
./scripts/dockerd.sh start "$work/dockerd.pid"
before=$(docker ps -a --filter label=org.agentix.sandbox --format '{{.Names}}' | sort)
tests/bundle/make-task-images.sh busybox
grep -v -e '^#' -e '^$' examples/bundle-example/agentix-bundle.conf | sed 's/^/    /'
built=$(AGENTIX_RUNTIME_DIR=build/runtime/server AGENTIX_INCLUDE_DIR=runtime/include \
        "$ctl" build --cache-dir "${AGENTIX_CACHE_DIR:-$HOME/.cache/agentix}" examples/bundle-example)
echo "$built"
# The demo runs this checkout's runtime: the tag must name the image just built (a cache hit
# only moves the tags), not another build's (the tests use a tag of their own for theirs).
if [ "$(docker image inspect --format '{{.Id}}' example-bundle:0.1.0)" != "${built%% *}" ]; then
        echo "example-bundle:0.1.0 is not the bundle just built (${built%% *})" >&2
        exit 1
fi

step "a system bus with agentd on it"
DBUS_SYSTEM_BUS_ADDRESS=$(./scripts/system-bus.sh start "$work/bus")
export DBUS_SYSTEM_BUS_ADDRESS
mkdir -p "$work/etc/pools.d" "$work/state"
: >"$work/etc/agentd.conf"
AGENTD_BACKEND_DIR=build/agentd/backends/engine AGENTIX_FIREWALL=policy/firewall/agentix-firewall \
        STATE_DIRECTORY="$work/state" build/agentd/agentd --config="$work/etc/agentd.conf" 2>"$work/agentd.log" &
agentd_pid=$!
for _ in $(seq 100); do
        busctl status org.agentix.Agentd1 >/dev/null 2>&1 && break
        sleep 0.05
done
busctl tree org.agentix.Agentd1

step "busctl call ... CreateSandbox (answered once the runtime inside answers /health)"
M="org.agentix.Agentd1 /org/agentix/Agentd1 org.agentix.Agentd1.Manager"
reply=$(busctl --timeout=120 call $M CreateSandbox 'a{sv}' 3 image s agentix-test/busybox:1 \
        bundle s example-bundle:0.1.0 env 'a{ss}' 1 GREETING hello)
echo "$reply"
id=$(echo "$reply" | awk '{print $3}' | tr -d '"')
busctl call $M ListSandboxes
busctl get-property org.agentix.Agentd1 "/org/agentix/Agentd1/sandbox/$id" org.agentix.Agentd1.Sandbox State
access=$(busctl call $M GetRuntimeAccess s "$id")
url=$(echo "$access" | awk '{print $2}' | tr -d '"')
token=$(echo "$access" | awk '{print $3}' | tr -d '"')
echo "runtime: $url"

step "python-socketio calls into sandbox $id"
AGENTIX_SANDBOX="$id" /usr/bin/python3 scripts/demo-client.py "$url" "$token" /tmp

step "busctl call ... DeleteSandbox"
busctl call $M DeleteSandbox s "$id"

step "agentixctl create / --sandbox exec / call / list / delete"
id=$("$ctl" create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0 --memory=512M --pids=256)
echo "created $id"
"$ctl" --sandbox="$id" exec -- python3 -c 'import ssl, sys; print(sys.version.split()[0], ssl.OPENSSL_VERSION)'
"$ctl" --sandbox="$id" exec -- bash -c 'cd /tmp && git init -q repo && cd repo && echo hi > f &&
        git add f && git commit -q -m "first commit" && git log --oneline'
"$ctl" --sandbox="$id" call example::greet '["agentix"]'
"$ctl" list
"$ctl" delete "$id"

step "agentixctl run: create, run, delete in one go; the command's exit status is agentixctl's"
echo "The task image has no /lib and no libc: everything that runs comes from the bundle at /nix."
echo "The command ends with 'exit 3' on purpose, to show that the status comes back."
"$ctl" run --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0 -- \
        sh -c 'echo "hello from $(uname -s)"; [ -e /lib ] && echo "/lib is there" || echo "no /lib in this image";
               exit 3' && rc=0 || rc=$?
echo "agentixctl run exited with $rc: the command's own status, and the sandbox is gone (also on Ctrl-C)"
[ "$rc" = 3 ]

step "a sandbox under gVisor (runtime=runsc): its own kernel answers, and the host is out of reach"
host_ip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
"$ctl" run --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0 --runtime=runsc -- \
        python3 -c "import os, socket
print('uname -r in the sandbox:', os.uname().release, '(the host: $(uname -r))')
try:
    socket.create_connection(('$host_ip', 22), timeout=2)
    print('reached the host at $host_ip')
except OSError as e:
    print('the host ($host_ip) is out of reach:', type(e).__name__)"

step "a warm pool (pools.d/demo.pool): two sandboxes kept ready, a create answered in milliseconds"
printf '[Pool]\nSize=2\nImage=agentix-test/busybox:1\nBundle=example-bundle:0.1.0\nMemory=256M\n' \
        >"$work/etc/pools.d/demo.pool"
busctl call $M Reload
for _ in $(seq 600); do
        "$ctl" -q pools --json | grep -q '"ready":2' && break
        sleep 0.1
done
"$ctl" pools
start=$(date +%s%N)
id=$("$ctl" create --image=agentix-test/busybox:1 --bundle=example-bundle:0.1.0 --memory=256M)
echo "created $id in $(( ($(date +%s%N) - start) / 1000000 )) ms (agentixctl's own start-up included)"
"$ctl" --sandbox="$id" exec -- sh -c 'echo "a token minted at the claim: the pool never saw it"'
"$ctl" delete "$id"
rm "$work/etc/pools.d/demo.pool"
busctl call $M Reload # the pool's sandboxes go with its file
for _ in $(seq 300); do
        [ -z "$(docker ps -aq --filter label=org.agentix.pool=demo)" ] && break
        sleep 0.1
done

step "E2B's SDK, unmodified, through agentix-e2b (a template is a pool; a key names a user)"
AGENTIX_RUNTIME_DIR=build/runtime/server "$ctl" build -q --cache-dir "${AGENTIX_CACHE_DIR:-$HOME/.cache/agentix}" \
        examples/python-data >/dev/null
printf '[Pool]\nSize=0\nImage=agentix-test/busybox:1\nBundle=python-data:0.1.0\n' \
        >"$work/etc/pools.d/code-interpreter-v1.pool"
busctl call $M Reload
(umask 077 && build/e2b/agentix-e2b --make-key=root >"$work/e2b-keys")
build/e2b/agentix-e2b --listen=127.0.0.1:49982 --keys="$work/e2b-keys" 2>"$work/agentix-e2b.log" &
e2b_pid=$!
(cd examples/e2b && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
for _ in $(seq 100); do
        curl -sf http://127.0.0.1:49982/health >/dev/null && break
        sleep 0.05
done
echo "examples/e2b/agent.mjs imports @e2b/code-interpreter and knows nothing of agentix:"
E2B_API_URL=http://127.0.0.1:49982 E2B_SANDBOX_URL=http://127.0.0.1:49982 \
        E2B_API_KEY=$(cut -d' ' -f1 "$work/e2b-keys") node examples/e2b/agent.mjs
rm "$work/etc/pools.d/code-interpreter-v1.pool"
busctl call $M Reload

step "sandbox containers left behind by this run"
left=$(comm -13 <(echo "$before") <(docker ps -a --filter label=org.agentix.sandbox --format '{{.Names}}' | sort))
echo "${left:-none}"
[ -z "$left" ]
