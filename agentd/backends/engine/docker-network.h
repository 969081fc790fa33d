/* SPDX-License-Identifier: MIT */
#pragma once

/* The isolated network (network=isolated, the docker backend's default): a bridge agentd owns,
 * agentix-isolated, on an interface of its own name, with traffic between its containers off,
 * and agentix-firewall's rules keeping its sandboxes off the host. docker-network.c. */

#include "docker-client.h"

typedef enum NetworkState {
        NETWORK_UNKNOWN,          /* not looked at yet, or gone (a resync), or making it failed */
        NETWORK_MAKING,
        NETWORK_READY,
        NETWORK_BROKEN,           /* its firewall rules could not be applied: never usable */
} NetworkState;

typedef struct DockerNetwork DockerNetwork;

/* The network of a backend talking to d (service: what messages call it), its bridge named by
 * $AGENTIX_ISOLATED_BRIDGE (default agentix0: one per dockerd on a host). On a bad name,
 * *ret_error says why. */
int docker_network_new(DockerClient *d, const char *service, DockerNetwork **ret, char **ret_error);
DockerNetwork *docker_network_free(DockerNetwork *n);

/* The Docker network's name (for NetworkMode). */
const char *docker_network_isolated_name(void);
NetworkState docker_network_state(const DockerNetwork *n);
/* Why it is not usable (after a failure), or NULL. */
const char *docker_network_error(const DockerNetwork *n);
/* Look for it, make it if missing (once; the state says how it went). */
void docker_network_ensure(DockerNetwork *n);
/* Look again next time (Docker restarted: it may be gone). */
void docker_network_forget(DockerNetwork *n);
/* agentix-firewall apply, at start, when we may change the firewall (CAP_NET_ADMIN); on failure
 * the network is BROKEN. */
int docker_network_apply_firewall(DockerNetwork *n);
