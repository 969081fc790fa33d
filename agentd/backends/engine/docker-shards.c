/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "docker-shards.h"
#include "log.h"
#include "macro.h"
#include "strmap.h"

typedef struct Placed {
        char id[64];              /* the key */
        unsigned shard;
} Placed;

struct NetworkShards {
        DockerClient *docker;
        char *service;
        NetworkKind kind;
        unsigned size;            /* sandboxes a shard takes */
        DockerNetwork *shards[NETWORK_SHARDS_MAX]; /* NULL: not needed yet */
        unsigned count[NETWORK_SHARDS_MAX];
        StrMap *placed;           /* sandbox id → Placed */
};

int network_shards_new(DockerClient *d, const char *service, NetworkKind kind, NetworkShards **ret, char **ret_error) {
        const char *v = getenv(NETWORK_SHARD_SIZE_ENV);
        unsigned long size = NETWORK_SHARD_SIZE_DEFAULT;
        NetworkShards *s;
        char *end = NULL;
        int r;

        if (v) {
                errno = 0;
                size = strtoul(v, &end, 10);
        }
        if (v && (errno || end == v || *end || size < 2 || size > NETWORK_SHARD_SIZE_MAX)) {
                if (asprintf(ret_error, "%s=%s: not a number of sandboxes from 2 to %u", NETWORK_SHARD_SIZE_ENV, v,
                             NETWORK_SHARD_SIZE_MAX) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (NetworkShards) { .docker = d, .kind = kind, .size = (unsigned) size, .service = strdup(service),
                               .placed = strmap_new() };
        r = s->service && s->placed ? 0 : -ENOMEM;
        /* Shard 0 now: a bad bridge name fails here, and its firewall rules are applied at start. */
        if (r >= 0)
                r = docker_network_new(d, service, kind, 0, &s->shards[0], ret_error);
        if (r < 0) {
                network_shards_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

NetworkShards *network_shards_free(NetworkShards *s) {
        size_t state = 0;
        Placed *p;

        if (!s)
                return NULL;
        for (unsigned k = 0; k < NETWORK_SHARDS_MAX; k++)
                docker_network_free(s->shards[k]);
        while (s->placed && (p = strmap_iterate(s->placed, &state)))
                free(p);
        strmap_free(s->placed);
        free(s->service);
        free(s);
        return NULL;
}

static int place(NetworkShards *s, const char *sandbox_id, unsigned k) {
        Placed *p;
        int r;

        if (strlen(sandbox_id) >= sizeof(p->id))
                return -EINVAL;
        network_shards_release(s, sandbox_id); /* a create again of the same id: counted once */
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        strcpy(p->id, sandbox_id);
        p->shard = k;
        r = strmap_put(s->placed, p->id, strlen(p->id), p);
        if (r < 0) {
                free(p);
                return r;
        }
        s->count[k]++;
        return 0;
}

int network_shards_take(NetworkShards *s, const char *sandbox_id, DockerNetwork **ret) {
        unsigned k;
        int r;

        /* Without shard 0's firewall rules no shard is safe: it says why. */
        if (docker_network_state(s->shards[0]) == NETWORK_BROKEN) {
                *ret = s->shards[0];
                return 0;
        }
        for (k = 0; k < NETWORK_SHARDS_MAX && s->count[k] >= s->size; k++)
                ;
        if (k == NETWORK_SHARDS_MAX)
                return -E2BIG;
        if (!s->shards[k]) {
                _cleanup_free_ char *error = NULL;

                r = docker_network_new(s->docker, s->service, s->kind, k, &s->shards[k], &error);
                if (r < 0) {
                        log_warning("No shard %u of agentd's network: %s", k, error ?: strerror(-r));
                        return r;
                }
        }
        r = place(s, sandbox_id, k);
        if (r < 0)
                return r;
        *ret = s->shards[k];
        return 0;
}

void network_shards_found(NetworkShards *s, const char *sandbox_id, const char *name) {
        _cleanup_free_ char *error = NULL;
        unsigned k;

        if (docker_network_shard_of(s->kind, name, &k) < 0 || k >= NETWORK_SHARDS_MAX)
                return;
        if (!s->shards[k] && docker_network_new(s->docker, s->service, s->kind, k, &s->shards[k], &error) < 0)
                return;
        (void) place(s, sandbox_id, k);
}

void network_shards_release(NetworkShards *s, const char *sandbox_id) {
        Placed *p = strmap_remove(s->placed, sandbox_id, strlen(sandbox_id));

        if (!p)
                return;
        s->count[p->shard]--;
        free(p);
}

void network_shards_forget(NetworkShards *s) {
        for (unsigned k = 0; k < NETWORK_SHARDS_MAX; k++)
                if (s->shards[k])
                        docker_network_forget(s->shards[k]);
}

int network_shards_apply_firewall(NetworkShards *s) {
        return docker_network_apply_firewall(s->shards[0]);
}
