#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/swarm/cluster.sh — a real three-node Docker Swarm on one machine, for the swarm backend's
# tests and bench/swarm.
#
#   cluster.sh up DIR              make it; DIR gets the nodes' sockets, data and logs, and env
#                                  (source it)
#   cluster.sh down DIR            remove everything up made (dockerds, namespaces, links, DIR)
#   cluster.sh push DIR IMAGE…     put images of the host's dockerd in the registry, under the
#                                  same names (through node 1, which trusts the registry)
#   cluster.sh kill-node DIR I     SIGKILL node I's dockerd (a node failure)
#   cluster.sh start-node DIR I    start node I's dockerd again; it rejoins the swarm
#
# Each node is a dockerd in a network namespace of its own (agxsw1..3), joined to a bridge in the
# host's namespace (agxswbr, 10.231.0.1/24) by a veth pair: node i is 10.231.0.1i. Each has its
# own socket, data-root, exec-root and pidfile. Node 1 is the manager, 2 and 3 workers. The
# host (agentd's side) reaches every node through the bridge; nothing leaves the machine. A
# registry (Debian's docker-registry) listens on the bridge at 10.231.0.1:5055 for the nodes
# (not 5000, where the docker-registry package's own service may listen). Node 1 also serves
# its Engine API on tcp://10.231.0.11:2376 with TLS both ways (a CA and certificates made by
# openssl in DIR/tls; DIR/tls/client is what SWARM_CERT_PATH names).
set -euo pipefail

cmd=${1:?up or down}
dir=${2:?directory}
NODES=3
BRIDGE=agxswbr
NET=10.231.0
DOCKER=/usr/bin/docker
REGISTRY_PORT=5055
TLS_PORT=2376

node_sock() { echo "unix://$dir/node$1/docker.sock"; }
d() { local n=$1; shift; "$DOCKER" -H "$(node_sock "$n")" "$@"; }

down() {
        if [ -f "$dir/registry.pid" ]; then
                kill "$(cat "$dir/registry.pid")" 2>/dev/null || true
        fi
        for i in $(seq $NODES); do
                if [ -f "$dir/node$i/docker.pid" ]; then
                        pid=$(cat "$dir/node$i/docker.pid" 2>/dev/null || true)
                        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                                kill "$pid"
                                for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                                kill -9 "$pid" 2>/dev/null || true
                        fi
                fi
                # Whatever the node's dockerd mounted under its roots.
                { grep -o " $dir/node$i[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do
                        umount -l "$m" 2>/dev/null || true
                done
                ip netns del "agxsw$i" 2>/dev/null || true
                ip link del "agxsw$i-h" 2>/dev/null || true
        done
        ip link del "$BRIDGE" 2>/dev/null || true
        while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; do :; done
        rm -rf "$dir"
}

# TLS for the manager's Engine API on TCP, as an operator runs it: a CA, a server certificate
# for node 1's address, a client certificate for agentd (DIR/tls/client: ca.pem cert.pem key.pem,
# what SWARM_CERT_PATH names).
make_tls() {
        local t=$dir/tls
        mkdir -p "$t/client"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=agentix-test-ca -keyout "$t/ca-key.pem" \
                -out "$t/ca.pem" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj /CN=agxsw1 -keyout "$t/server-key.pem" -out "$t/server.csr" 2>/dev/null
        openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 2 \
                -extfile <(printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$NET.11") \
                -out "$t/server.pem" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj /CN=agentd -keyout "$t/client/key.pem" -out "$t/client.csr" 2>/dev/null
        openssl x509 -req -in "$t/client.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 2 \
                -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$t/client/cert.pem" 2>/dev/null
        cp "$t/ca.pem" "$t/client/ca.pem"
}

start_node() { # i
        local i=$1 tls=()
        # Node 1 (the manager) also serves its Engine API on TCP, with TLS both ways.
        [ "$i" = 1 ] && tls=(--host "tcp://$NET.11:$TLS_PORT" --tlsverify --tlscacert "$dir/tls/ca.pem"
                             --tlscert "$dir/tls/server.pem" --tlskey "$dir/tls/server-key.pem")
        # nsenter, not `ip netns exec`: that one mounts a new /sys, which hides the cgroup
        # hierarchies dockerd needs.
        nsenter --net="/run/netns/agxsw$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "agxsw$i" \
                dockerd --host "$(node_sock "$i")" "${tls[@]}" \
                --data-root "$dir/node$i/data" --exec-root "$dir/node$i/exec" \
                --pidfile "$dir/node$i/docker.pid" --insecure-registry "$NET.1:$REGISTRY_PORT" \
                >>"$dir/node$i/dockerd.log" 2>&1 &
}

wait_node() { # i [seconds]
        # A node restarted after SIGKILL first reaps what its old containerd left and finds its
        # swarm again: on two busy cores (the whole suite beside it) that took more than 30 s once.
        local tries=$(( ${2:-30} * 4 ))
        for _ in $(seq "$tries"); do d "$1" info >/dev/null 2>&1 && return 0; sleep 0.25; done
        d "$1" info >/dev/null || { tail -20 "$dir/node$1/dockerd.log" >&2; return 1; }
}

push() { # image…
        local image
        for image in "$@"; do
                docker save "$image" | d 1 load -q >/dev/null
                d 1 tag "$image" "$NET.1:$REGISTRY_PORT/$image"
                d 1 push -q "$NET.1:$REGISTRY_PORT/$image" >/dev/null
        done
}

up() {
        mkdir -p "$dir"
        ip link add "$BRIDGE" type bridge
        ip addr add "$NET.1/24" dev "$BRIDGE"
        ip link set "$BRIDGE" up
        # Bridged frames pass the host's iptables (br_netfilter), whose FORWARD policy the
        # host's dockerd set to DROP: let the nodes talk to each other.
        iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
        make_tls
        for i in $(seq $NODES); do
                ns=agxsw$i
                mkdir -p "$dir/node$i"
                ip netns add "$ns"
                ip link add "$ns-h" type veth peer name eth0 netns "$ns"
                ip link set "$ns-h" master "$BRIDGE" up
                ip -n "$ns" addr add "$NET.1$i/24" dev eth0
                ip -n "$ns" link set eth0 up
                ip -n "$ns" link set lo up
                ip -n "$ns" route add default via "$NET.1"
                start_node "$i"
        done
        # A registry every node pulls from (Debian's docker-registry), on the bridge only.
        cat >"$dir/registry.yml" <<REG
version: 0.1
storage:
  filesystem:
    rootdirectory: $dir/registry
  delete:
    enabled: true
http:
  addr: $NET.1:$REGISTRY_PORT
REG
        docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
        echo $! >"$dir/registry.pid"
        for i in $(seq $NODES); do
                wait_node "$i"
        done
        # Heartbeats every second: a node that stops answering is down within a few seconds
        # (Docker's default is 5 s).
        d 1 swarm init --advertise-addr "$NET.11" --dispatcher-heartbeat 1s >/dev/null
        token=$(d 1 swarm join-token -q worker)
        for i in $(seq 2 $NODES); do
                d "$i" swarm join --token "$token" --advertise-addr "$NET.1$i" "$NET.11:2377" >/dev/null
        done
        cat >"$dir/env" <<ENV
SWARM_MANAGER=$(node_sock 1)
SWARM_REGISTRY=$NET.1:$REGISTRY_PORT
SWARM_MANAGER_TLS=tcp://$NET.11:$TLS_PORT
SWARM_CERT_PATH=$dir/tls/client
SWARM_NODES="$(for i in $(seq $NODES); do printf '%s ' "$(node_sock "$i")"; done)"
ENV
}

case "$cmd" in
up)
        # `set -e` does not apply inside a function run as `up || …`: clean up from a trap.
        trap 'rc=$?; [ $rc = 0 ] || down; exit $rc' EXIT
        up
        trap - EXIT
        ;;
down) down ;;
push) shift 2; push "$@" ;;
kill-node) kill -9 "$(cat "$dir/node${3:?node}/docker.pid")" ;;
start-node) rm -f "$dir/node${3:?node}/docker.pid"; start_node "$3"; wait_node "$3" 180 ;;
*) echo "usage: $0 up|down|push|kill-node|start-node DIR …" >&2; exit 2 ;;
esac
