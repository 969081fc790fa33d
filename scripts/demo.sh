#!/usr/bin/env bash
# The main job: build agentix, build the example bundle (agentixctl build), start dockerd, run a
# sandbox from the bundle on a task image with no libc at all (static busybox), run commands,
# file operations and a C module function in it through a real Socket.IO client and through
# agentixctl, show the replies, clean up.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
[ -d build ] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build

ctl=build/client/agentixctl/agentixctl
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
workdir=$(mktemp -d /tmp/agentix-demo.XXXXXX)
tag=$$
carrier=agentix-demo-carrier-$tag sandbox=agentix-demo-sandbox-$tag

cleanup() {
        docker rm -f -v "$sandbox" "$carrier" >/dev/null 2>&1 || true
        ./scripts/dockerd.sh stop "$workdir/dockerd.pid"
        rm -rf "$workdir"
}
trap cleanup EXIT

./scripts/dockerd.sh start "$workdir/dockerd.pid"
tests/bundle/make-task-images.sh busybox

echo "--- agentixctl build examples/bundle-example"
grep -v -e '^#' -e '^$' examples/bundle-example/agentix-bundle.conf | sed 's/^/    /'
AGENTIX_RUNTIME_DIR=build/runtime/server AGENTIX_INCLUDE_DIR=runtime/include \
        "$ctl" build --cache-dir "${AGENTIX_CACHE_DIR:-$HOME/.cache/agentix}" examples/bundle-example

echo "--- a sandbox: the bundle's /nix (a stopped carrier, --volumes-from) on agentix-test/busybox:1"
docker create --name "$carrier" example-bundle:0.1.0 >/dev/null
docker run -d --name "$sandbox" --volumes-from "$carrier" -e AGENTIX_TOKEN="$token" \
        -p 127.0.0.1::8000 --pids-limit 512 --memory 1g \
        --entrypoint /nix/runtime/bin/agentix-server agentix-test/busybox:1 >/dev/null
port=$(docker port "$sandbox" 8000/tcp | head -1 | cut -d: -f2)
for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
        sleep 0.05
done
echo "agentix-server in $sandbox on 127.0.0.1:$port: $(curl -s "http://127.0.0.1:$port/health")"

/usr/bin/python3 scripts/demo-client.py "http://127.0.0.1:$port" "$token" /tmp

# The same sandbox through agentixctl (built on libagentix).
export AGENTIX_URL="http://127.0.0.1:$port" AGENTIX_TOKEN="$token"
echo "--- agentixctl exec -- python3 -c ... (python3 from the bundle; the image has no libc)"
"$ctl" exec -- python3 -c 'import ssl, sqlite3, sys; print(sys.version.split()[0], ssl.OPENSSL_VERSION)'
echo "--- agentixctl exec -- bash -c 'git init && git commit ...'"
"$ctl" exec -- bash -c 'cd /tmp && git init -q repo && cd repo && echo hi > f && git add f &&
        git commit -q -m "first commit" && git log --oneline'
echo "--- agentixctl call example::greet '[\"agentix\"]' (the bundle's C module)"
"$ctl" call example::greet '["agentix"]'
echo "--- agentixctl exec -- sh -c 'echo hi from agentixctl; exit 7'"
"$ctl" exec -- sh -c 'echo hi from agentixctl; exit 7' && rc=0 || rc=$?
echo "    (exit status $rc)"
echo "--- agentixctl cp scripts :/tmp/copied && agentixctl ls /tmp/copied"
"$ctl" -q cp scripts ":/tmp/copied"
"$ctl" ls /tmp/copied

docker stop -t 5 "$sandbox" >/dev/null
echo "--- sandbox stopped (exit status $(docker inspect -f '{{.State.ExitCode}}' "$sandbox")); removing it"
