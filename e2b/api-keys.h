/* SPDX-License-Identifier: MIT */
#pragma once

/* agentix-e2b's API keys: a file (/etc/agentix/e2b-keys by default) of lines `KEY USER`, blank
 * lines and # comments allowed. A request that carries KEY (E2B's X-API-KEY) acts as USER: its
 * sandboxes are USER's on agentd. The file holds secrets, so it must belong to root (or to the
 * user the gateway runs as) and be readable by no one else (0600 or 0400). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define API_KEY_MIN_LEN 16
#define API_KEY_MAX_LEN 128
#define API_KEYS_MAX 4096
#define API_KEY_MAX_GROUPS 64

typedef struct ApiKey {
        char *key;
        char *user;
        uid_t uid;
        gid_t gid;
        gid_t groups[API_KEY_MAX_GROUPS]; /* the user's groups, the bus policy may ask for one */
        int n_groups;
} ApiKey;

typedef struct ApiKeys {
        ApiKey *keys;
        size_t n;
} ApiKeys;

/* Read path. A line that is not `KEY USER`, an unknown user, a key twice, or a file others may
 * read: -EINVAL (-EPERM for the mode) with *ret_error "PATH:LINE: what" (malloc'ed). A missing
 * file is -ENOENT. */
int api_keys_load(const char *path, ApiKeys **ret, char **ret_error);
ApiKeys *api_keys_free(ApiKeys *k);
static inline void api_keys_freep(ApiKeys **k) {
        api_keys_free(*k);
}

/* The entry for key (compared in constant time over every entry), or NULL. */
const ApiKey *api_keys_find(const ApiKeys *k, const char *key, size_t len);

/* A new key, "e2b_" and 40 hex digits from the kernel's random source, in ret. */
int api_key_make(char ret[static 45]);
