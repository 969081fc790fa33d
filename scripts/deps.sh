#!/usr/bin/env bash
# Install what building and testing agentix needs on Debian 12 (run as root). Idempotent:
# packages already present are not reinstalled.
set -euo pipefail

packages=(
        build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
        libsystemd-dev libssl-dev libcurl4-openssl-dev libmsgpack-dev libwebsockets-dev libseccomp-dev zlib1g-dev
        libuv1-dev libhttp-parser-dev libjansson-dev libarchive-dev libcmocka-dev libelf-dev libinih-dev
        libzmq3-dev # the code module speaks to Jupyter kernels over ZeroMQ
        patchelf # agentixctl build patches ELF interpreters and RUNPATHs into the store
        libwebsockets-evlib-uv # agentix-server's libuv glue, which a bundle must carry
        docker.io busybox-static debootstrap # the bundle tests: a real dockerd and two task images
        git python3 ca-certificates # tools of the example bundle
        python3-ipykernel python3-numpy python3-pandas python3-matplotlib # the python-data bundle's kernel
        python3-jupyter-client # bench/code: the peer the code module is measured against
        python3-socketio python3-engineio python3-msgpack python3-requests python3-websocket
        python3-aiohttp python3-uvicorn python3-websockets
        python3-pytest python3-pytest-asyncio # the Python package's tests (client/python)
        util-linux procps curl iptables # nsenter and setpriv; agentix-firewall's rules
        man-db groff-base # tests render the man pages at 80 columns and lint them with groff -ww
        dbus-daemon python3-dbus python3-gi systemd # agentd's tests and benches: a private bus, D-Bus clients (GLib's loop for async calls), systemd-analyze
        prometheus # agentd's /metrics, scraped for real in its test
        podman netavark # the podman backend's test: a real `podman system service` (runc, NOTES.md)
        runsc # gVisor, the runtime=runsc sandboxes (registered with dockerd by scripts/dockerd.sh)
        docker-registry iproute2 # the swarm tests: a registry for the nodes, network namespaces
        chromium # the browser tests (tests/interop/node, tests/cockpit), driven by playwright-core
        esbuild node-xterm # the Cockpit page: xterm.js bundled from Debian's node-xterm
)

missing=()
for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
        echo "deps: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js + npm for the socket.io-client interop tests (a machine may already have a newer
# Node from elsewhere: keep it).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "deps: installing nodejs npm"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
