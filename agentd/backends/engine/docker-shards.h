/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's networks of one kind, sharded. A Linux bridge holds at most 1,024 ports ("exchange
 * full" past them), so sandboxes fill shard 0 (agentix-isolated, on agentix0) up to the shard
 * size, then shard 1 (agentix-isolated-1, on agentix0-1), and so on. Each shard is a network of
 * docker-network.h, made by the first create it gets; agentix-firewall's rules for BRIDGE cover
 * every BRIDGE-N, and Docker keeps its bridge networks apart, so isolation is the same on every
 * shard. Which sandbox is on which shard is kept here: taken at create, let go at remove or a
 * failed create, found again at adoption (from its container's network). */

#include "docker-network.h"

#define NETWORK_SHARD_SIZE_ENV "AGENTIX_NETWORK_SHARD_SIZE"
#define NETWORK_SHARD_SIZE_DEFAULT 1000u /* under the bridge's 1,024, for what else joins it */
#define NETWORK_SHARD_SIZE_MAX 1000u
#define NETWORK_SHARDS_MAX 32u           /* Docker's default address pools hold 31 networks */

typedef struct NetworkShards NetworkShards;

/* Shard size from $AGENTIX_NETWORK_SHARD_SIZE (2 to 1000; default 1000); *ret_error on a bad one. */
int network_shards_new(DockerClient *d, const char *service, NetworkKind kind, NetworkShards **ret, char **ret_error);
NetworkShards *network_shards_free(NetworkShards *s);

/* The network for a new sandbox: the first shard with room (made on demand), where it now
 * counts. -E2BIG: every shard is full. */
int network_shards_take(NetworkShards *s, const char *sandbox_id, DockerNetwork **ret);
/* The sandbox's container is on network `name` (adoption): it counts there, if that is a shard. */
void network_shards_found(NetworkShards *s, const char *sandbox_id, const char *name);
/* It is gone (or its create failed): its place is free. */
void network_shards_release(NetworkShards *s, const char *sandbox_id);

/* Docker came back: look at every shard again. */
void network_shards_forget(NetworkShards *s);
/* The firewall rules (shard 0's bridge name covers all): docker_network_apply_firewall(). */
int network_shards_apply_firewall(NetworkShards *s);
