/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's own networks: bridges agentd owns, on interfaces of their own names, with traffic
 * between their containers off, and agentix-firewall's rules keeping their sandboxes off the
 * host: agentix-isolated (the default) and agentix-egress (sandboxes with an egress list).
 * docker-network.c. */

#include "docker-client.h"

typedef enum NetworkState {
        NETWORK_UNKNOWN,          /* not looked at yet, or gone (a resync), or making it failed */
        NETWORK_MAKING,
        NETWORK_READY,
        NETWORK_BROKEN,           /* its firewall rules could not be applied: never usable */
} NetworkState;

typedef enum NetworkKind {
        NETWORK_ISOLATED,         /* agentix-isolated: no host, no private ranges */
        NETWORK_EGRESS,           /* agentix-egress: no host; each sandbox's own allow-list */
} NetworkKind;

typedef struct DockerNetwork DockerNetwork;

/* A network of a backend talking to d (service: what messages call it), its bridge named by
 * $AGENTIX_ISOLATED_BRIDGE or $AGENTIX_EGRESS_BRIDGE (default agentix0, agentix1: one pair per
 * dockerd on a host). Shard 0 is agentix-isolated on BRIDGE; shard N agentix-isolated-N on
 * BRIDGE-N (docker-shards.h). On a bad name, *ret_error says why. */
int docker_network_new(DockerClient *d, const char *service, NetworkKind kind, unsigned shard, DockerNetwork **ret,
                       char **ret_error);
/* Which shard of kind the Docker network `name` is; -ENOENT: none of kind's. */
int docker_network_shard_of(NetworkKind kind, const char *name, unsigned *ret);
DockerNetwork *docker_network_free(DockerNetwork *n);

/* The Docker network's name (for NetworkMode). */
const char *docker_network_name(const DockerNetwork *n);
NetworkState docker_network_state(const DockerNetwork *n);
/* Why it is not usable (after a failure), or NULL. */
const char *docker_network_error(const DockerNetwork *n);
/* Look for it, make it if missing (once; the state says how it went). */
void docker_network_ensure(DockerNetwork *n);
/* Look again next time (Docker restarted: it may be gone). */
void docker_network_forget(DockerNetwork *n);
/* agentix-firewall apply (--host-only for the egress network), at start, when we may change the
 * firewall (CAP_NET_ADMIN); on failure the network is BROKEN. The rules of BRIDGE cover its
 * shards' BRIDGE-N too: shard 0's call is the one needed. */
int docker_network_apply_firewall(DockerNetwork *n);

/* Where agentd reaches a sandbox's runtime (port 8000 in the container), from its container's
 * inspect: the port Docker publishes on 127.0.0.1, else (agentd's own networks publish none)
 * the container's address on its network. *ret: "http://ADDRESS:PORT". -ENOENT: neither. */
int docker_runtime_url(json_t *inspect, char **ret);
