/* SPDX-License-Identifier: MIT */
/* Image names as the swarm's nodes pull them, and their digests in the registry, asked of the
 * manager (GET /distribution/REF/json: the manager asks the registry, with its own trust and
 * credentials). A digest is kept for a moment: a burst of creates from the same image asks the
 * registry once, and a tag pushed again is seen within that moment. */
#include "swarm-backend.h"

#define DIGEST_KEEP_USEC (2ULL * 1000 * 1000)
#define DIGESTS_KEPT 32

char *swarm_image_ref(SwarmBackend *b, const char *name) {
        const char *slash = strchr(name, '/');
        size_t first = slash ? (size_t) (slash - name) : 0;
        char *ref;

        /* Docker's rule: a first component with a dot or a colon, or localhost, is a registry. */
        if (!b->registry || (slash && (memchr(name, '.', first) || memchr(name, ':', first) ||
                                       (first == 9 && strneq(name, "localhost", 9)))))
                return strdup(name);
        if (asprintf(&ref, "%s/%s", b->registry, name) < 0)
                return NULL;
        return ref;
}

typedef struct Resolve {
        swarm_resolved_t done;
        void *userdata;
        SwarmBackend *backend;
        char *ref;
} Resolve;

static void resolve_free(void *userdata) {
        Resolve *r = userdata;

        free(r->ref);
        free(r);
}

static struct SwarmDigest *digest_find(SwarmBackend *b, const char *ref) {
        for (size_t i = 0; i < b->n_digests; i++)
                if (streq_ptr(b->digests[i].ref, ref))
                        return &b->digests[i];
        return NULL;
}

/* The slot to keep ref's digest in, emptied: its own, a new one, or the oldest. */
static struct SwarmDigest *digest_take(SwarmBackend *b, const char *ref) {
        struct SwarmDigest *slot = digest_find(b, ref);

        if (!slot && b->n_digests < DIGESTS_KEPT) {
                struct SwarmDigest *grown = realloc(b->digests, (b->n_digests + 1) * sizeof(*grown));
                if (!grown)
                        return NULL;
                b->digests = grown;
                slot = &b->digests[b->n_digests++];
                *slot = (struct SwarmDigest) {};
        }
        if (!slot) { /* all DIGESTS_KEPT in use: the oldest goes */
                slot = &b->digests[0];
                for (size_t i = 1; i < b->n_digests; i++)
                        if (b->digests[i].at < slot->at)
                                slot = &b->digests[i];
        }
        free(slot->ref);
        free(slot->digest);
        *slot = (struct SwarmDigest) {};
        return slot;
}

void swarm_digests_free(SwarmBackend *b) {
        for (size_t i = 0; i < b->n_digests; i++) {
                free(b->digests[i].ref);
                free(b->digests[i].digest);
        }
        b->digests = mfree(b->digests);
        b->n_digests = 0;
}

static void on_distribution(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Resolve *r = userdata;
        const char *digest = json_string_value(json_object_get(json_object_get(body, "Descriptor"), "digest"));
        char buf[128];

        if (status == 200 && digest && startswith(digest, "sha256:")) {
                struct SwarmDigest *slot = digest_take(r->backend, r->ref);
                if (slot) {
                        slot->ref = strdup(r->ref);
                        slot->digest = strdup(digest);
                        slot->at = now_usec();
                        if (!slot->ref || !slot->digest)
                                slot->at = 0; /* never fresh */
                }
                r->done(r->backend, 200, digest, NULL, r->userdata);
        } else
                r->done(r->backend, status == 200 ? -EPROTO : status, NULL,
                        status == 200 ? "the registry gave no digest" : docker_error_message(status, body, error, buf, sizeof(buf)),
                        r->userdata);
        resolve_free(r);
}

int swarm_resolve(SwarmBackend *b, const char *ref, swarm_resolved_t done, void *userdata, DockerRequest **ret) {
        struct SwarmDigest *kept = digest_find(b, ref);
        _cleanup_free_ char *escaped = NULL, *path = NULL;
        Resolve *r;
        int k;

        if (kept && kept->digest && now_usec() - kept->at < DIGEST_KEEP_USEC) {
                _cleanup_free_ char *digest = strdup(kept->digest); /* the slot may be reused meanwhile */
                if (digest) {
                        *ret = NULL;
                        done(b, 200, digest, NULL, userdata);
                        return 0;
                }
        }
        r = calloc(1, sizeof(*r));
        escaped = docker_escape(ref);
        if (!r || !escaped || !(r->ref = strdup(ref)) || asprintf(&path, "/distribution/%s/json", escaped) < 0) {
                if (r)
                        resolve_free(r);
                return -ENOMEM;
        }
        r->done = done;
        r->userdata = userdata;
        r->backend = b;
        k = docker_request(b->manager, "GET", path, NULL, 0, on_distribution, r, ret);
        if (k < 0)
                resolve_free(r);
        else
                docker_request_set_destroy(*ret, resolve_free);
        return k;
}
