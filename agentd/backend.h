/* SPDX-License-Identifier: MIT */
#pragma once

/* The backends agentd loaded: NAME.so from the backend directory, its AgentdBackendOps, and
 * the state its constructor made, or why loading it failed (the Backends property). */

#include <stddef.h>

#include "agentix/agentd-backend.h"

typedef struct Backend {
        char *name;
        char *path;
        void *dl;
        const AgentdBackendOps *ops;
        AgentdBackend *state;    /* NULL: it failed, see error */
        char *error;
        void *owner;             /* the Manager, for the backend's callbacks */
        bool adopting;           /* an adopt() is on its way */
        bool adopt_again;        /* and another was asked for meanwhile */
        bool looked;             /* the first adopt() at start has ended (or could not start) */
        bool tls;                /* its runtimes serve TLS ([Runtime] TLS=, its remote_runtimes) */
        const char *runtime_ca_pem; /* then agentd's runtime CA (PEM), which verifies them */
        /* Events about sandboxes the walk under way has not reported yet ("ID ACTION"): its
         * listing may be older than them (a destroy seen first would leave a sandbox listed
         * with no container), so each is applied once the walk reports its sandbox. */
        char **walk_events;
        size_t n_walk_events;
} Backend;

#define BACKEND_WALK_EVENTS_MAX 1024

/* Load each of names from dir; one that fails is kept with its error (never fatal here). */
int backends_load(char *const *names, const char *dir, Backend ***ret, size_t *ret_n);
void backends_free(Backend **l, size_t n);
/* The backend called name, loaded or not; NULL if not asked for. */
Backend *backends_find(Backend **l, size_t n, const char *name);
