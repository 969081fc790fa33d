/* SPDX-License-Identifier: MIT */
/* Snapshots: a sandbox's container committed as an image (POST /commit, paused while it is
 * taken, so files written before the call are in it). /nix is a volume from the bundle's
 * carrier and never part of a commit.
 *
 * A commit merges the container's own settings into the image: its environment (the runtime's
 * token) and its labels (agentd's record of the sandbox: pool, egress list, creator). Docker
 * keeps a key the commit names, so the commit names each of them with an empty value: no token,
 * and no record that a container made from the image could be taken for (docker-adopt.c skips
 * an empty org.agentix.sandbox; a create sets every key it reads again). The image's own
 * labels say whose snapshot it is: org.agentix.snapshot.{owner,sandbox,created,image,bundle}. */
#include <time.h>

#include "docker-backend.h"
#include "log.h"
#include "macro.h"

#define COMMIT_TIMEOUT_USEC (15ULL * 60 * 1000000) /* a large filesystem takes a while */
#define SNAPSHOT_REPOSITORY "agentix-snapshot/"
#define LABEL_OWNER "org.agentix.snapshot.owner"

typedef enum SnapshotStep {
        STEP_FIND_IMAGE,       /* the named image: none, or a snapshot the owner may replace */
        STEP_LIST_NUMBERS,     /* no name: the numbers agentix-snapshot/<id> has */
        STEP_INSPECT_CONTAINER,
        STEP_COMMIT,
        STEP_REMOVE_REPLACED,
} SnapshotStep;

typedef struct SnapshotJob {
        DockerBackend *backend;
        SnapshotStep step;
        char *sandbox_id;
        uid_t owner;
        char *repository, *tag;
        char *replaced_id;     /* the image the name named before, removed once the name moves */
        char *new_id;
        agentd_snapshot_t done;
        void *userdata;
} SnapshotJob;

static SnapshotJob *snapshot_job_free(SnapshotJob *j) {
        if (!j)
                return NULL;
        free(j->sandbox_id);
        free(j->repository);
        free(j->tag);
        free(j->replaced_id);
        free(j->new_id);
        return mfree(j);
}

static void snapshot_job_free_void(void *j) {
        snapshot_job_free(j);
}

/* REPOSITORY[:TAG] into its parts (TAG "latest" when none); a digest (@sha256:…) is refused. */
static int split_image_name(const char *image, char **ret_repository, char **ret_tag) {
        const char *colon = strrchr(image, ':'), *slash = strrchr(image, '/');

        if (!image[0] || strchr(image, '@'))
                return -EINVAL;
        if (colon && (!slash || colon > slash)) {
                if (colon == image || !colon[1])
                        return -EINVAL;
                *ret_repository = strndup(image, colon - image);
                *ret_tag = strdup(colon + 1);
        } else {
                *ret_repository = strdup(image);
                *ret_tag = strdup("latest");
        }
        return *ret_repository && *ret_tag ? 0 : -ENOMEM;
}

static void finish(SnapshotJob *j, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void finish(SnapshotJob *j, const char *error_name, const char *fmt, ...) {
        _cleanup_free_ char *image = NULL, *message = NULL;
        va_list ap;

        if (error_name) {
                va_start(ap, fmt);
                if (vasprintf(&message, fmt, ap) < 0)
                        message = NULL;
                va_end(ap);
        } else if (asprintf(&image, "%s:%s", j->repository, j->tag) < 0) {
                image = NULL;
                error_name = AGENTD_ERROR_BACKEND_UNAVAILABLE;
        }
        j->done(j->userdata, image, error_name, message ?: (error_name ? "Out of memory" : NULL));
        snapshot_job_free(j);
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata);

static int send_step(SnapshotJob *j, const char *method, const char *path, json_t *body, uint64_t timeout) {
        DockerRequest *req;
        int r;

        r = docker_request(j->backend->docker, method, path, body, timeout, on_reply, j, &req);
        if (r >= 0)
                docker_request_set_destroy(req, snapshot_job_free_void); /* agentd stops first */
        return r;
}

static void next(SnapshotJob *j, SnapshotStep step, const char *method, const char *path, json_t *body,
                 uint64_t timeout) {
        j->step = step;
        if (send_step(j, method, path, body, timeout) < 0)
                finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask %s: out of memory", j->backend->service);
}

static void inspect_container(SnapshotJob *j) {
        char path[128];

        snprintf(path, sizeof(path), "/containers/agentix-%s/json", j->sandbox_id);
        next(j, STEP_INSPECT_CONTAINER, "GET", path, NULL, 0);
}

/* The labels and environment the commit names (see the top of the file). */
static json_t *commit_config(SnapshotJob *j, json_t *container) {
        json_t *labels = json_object_get(json_object_get(container, "Config"), "Labels"), *v;
        json_t *own = json_object();
        const char *key;
        char buf[32];

        json_object_foreach(labels, key, v)
                if (startswith(key, "org.agentix.") && !startswith(key, "org.agentix.snapshot."))
                        json_object_set_new(own, key, json_string(streq(key, "org.agentix.egress") ? "*" : ""));
        snprintf(buf, sizeof(buf), "%u", (unsigned) j->owner);
        json_object_set_new(own, LABEL_OWNER, json_string(buf));
        json_object_set_new(own, "org.agentix.snapshot.sandbox", json_string(j->sandbox_id));
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) time(NULL));
        json_object_set_new(own, "org.agentix.snapshot.created", json_string(buf));
        json_object_set_new(own, "org.agentix.snapshot.image",
                            json_incref(json_object_get(labels, "org.agentix.image") ?: json_string("")));
        json_object_set_new(own, "org.agentix.snapshot.bundle",
                            json_incref(json_object_get(labels, "org.agentix.bundle") ?: json_string("")));
        return json_pack("{s:o, s:[ssss]}", "Labels", own, "Env", "AGENTIX_TOKEN=", "AGENTIX_CLAIMABLE=",
                         "AGENTIX_TLS=", "AGENTIX_CHECKPOINT=");
}

static void commit(SnapshotJob *j, json_t *container) {
        _cleanup_free_ char *repository = docker_escape(j->repository), *tag = docker_escape(j->tag),
                            *comment = NULL, *path = NULL;
        json_t *config = commit_config(j, container);

        if (asprintf(&comment, "agentix snapshot of sandbox %s", j->sandbox_id) < 0)
                comment = NULL;
        _cleanup_free_ char *comment_escaped = comment ? docker_escape(comment) : NULL;
        if (!config || !repository || !tag || !comment_escaped ||
            asprintf(&path, "/commit?container=agentix-%s&repo=%s&tag=%s&comment=%s&pause=1", j->sandbox_id,
                     repository, tag, comment_escaped) < 0) {
                json_decref(config);
                finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                return;
        }
        next(j, STEP_COMMIT, "POST", path, config, COMMIT_TIMEOUT_USEC);
        json_decref(config);
}

/* One more than the highest number among the tags of agentix-snapshot/<id>. */
static int next_number(SnapshotJob *j, json_t *images, char **ret_tag) {
        unsigned long long highest = 0;
        size_t i, k;
        json_t *image, *tag;

        json_array_foreach(images, i, image)
                json_array_foreach(json_object_get(image, "RepoTags"), k, tag) {
                        const char *t = json_string_value(tag), *colon = t ? startswith(t, j->repository) : NULL;
                        unsigned long long n;
                        char *end;

                        if (!colon || colon[0] != ':')
                                continue;
                        errno = 0;
                        n = strtoull(colon + 1, &end, 10);
                        if (!errno && end != colon + 1 && !*end && n > highest)
                                highest = n;
                }
        return asprintf(ret_tag, "%llu", highest + 1) < 0 ? -ENOMEM : 0;
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        SnapshotJob *j = userdata;
        const char *service = j->backend->service;
        char buf[256];

        switch (j->step) {
        case STEP_FIND_IMAGE:
                if (status == 404 && !strstr(json_string_value(json_object_get(body, "message")) ?: "",
                                             "invalid reference format"))
                        break; /* a new name */
                if (status == 400 || status == 404) {
                        finish(j, AGENTD_ERROR_INVALID_CONFIG, "'%s:%s' is not an image name: %s", j->repository,
                               j->tag, docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                if (status != 200) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s cannot say whether image %s:%s exists: %s",
                               service, j->repository, j->tag,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                switch (docker_snapshot_owner(body, j->owner)) {
                case DOCKER_SNAPSHOT_NONE:
                        finish(j, AGENTD_ERROR_NOT_OWNER, "Image %s:%s exists and is not a snapshot: choose another tag.",
                               j->repository, j->tag);
                        return;
                case DOCKER_SNAPSHOT_OTHERS:
                        finish(j, AGENTD_ERROR_NOT_OWNER, "Image %s:%s is a snapshot of another user.", j->repository,
                               j->tag);
                        return;
                case DOCKER_SNAPSHOT_OURS:
                        break;
                }
                j->replaced_id = strdup(json_string_value(json_object_get(body, "Id")) ?: "");
                if (!j->replaced_id) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                        return;
                }
                break;
        case STEP_LIST_NUMBERS:
                if (status != 200) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s cannot list the sandbox's snapshots: %s", service,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                if (next_number(j, body, &j->tag) < 0) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                        return;
                }
                break;
        case STEP_INSPECT_CONTAINER:
                if (status == 404) {
                        finish(j, AGENTD_ERROR_NO_SUCH_SANDBOX, "The container of sandbox %s is gone.", j->sandbox_id);
                        return;
                }
                if (status != 200) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s cannot say what sandbox %s holds: %s", service,
                               j->sandbox_id, docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                commit(j, body);
                return;
        case STEP_COMMIT:
                if (status == 404) {
                        finish(j, AGENTD_ERROR_NO_SUCH_SANDBOX, "The container of sandbox %s is gone.", j->sandbox_id);
                        return;
                }
                if (status == 400 || status == 500) {
                        /* Docker checks the name; its words say what is wrong with it. */
                        finish(j, status == 400 ? AGENTD_ERROR_INVALID_CONFIG : AGENTD_ERROR_BACKEND_UNAVAILABLE,
                               "%s could not commit sandbox %s as %s:%s: %s", service, j->sandbox_id, j->repository,
                               j->tag, docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                if (status != 201) {
                        finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s could not commit sandbox %s: %s", service,
                               j->sandbox_id, docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                j->new_id = strdup(json_string_value(json_object_get(body, "Id")) ?: "");
                if (j->replaced_id && j->replaced_id[0] && j->new_id && !streq(j->new_id, j->replaced_id)) {
                        /* The name moved: the image it named goes, unless something still uses it. */
                        _cleanup_free_ char *id = docker_escape(j->replaced_id), *path = NULL;
                        if (id && asprintf(&path, "/images/%s", id) >= 0) {
                                next(j, STEP_REMOVE_REPLACED, "DELETE", path, NULL, 0);
                                return;
                        }
                }
                finish(j, NULL, NULL);
                return;
        case STEP_REMOVE_REPLACED:
                if (status != 200 && status != 404)
                        log_info("The snapshot image %s:%s named before is kept: %s", j->repository, j->tag,
                                 docker_error_message(status, body, error, buf, sizeof(buf)));
                finish(j, NULL, NULL);
                return;
        }
        inspect_container(j);
}

int docker_backend_snapshot(DockerBackend *b, const char *sandbox_id, uid_t owner, const char *image,
                            agentd_snapshot_t done, void *userdata) {
        SnapshotJob *j = calloc(1, sizeof(*j));
        _cleanup_free_ char *path = NULL, *escaped = NULL;
        int r;

        if (!j)
                return -ENOMEM;
        *j = (SnapshotJob) { .backend = b, .owner = owner, .done = done, .userdata = userdata };
        j->sandbox_id = strdup(sandbox_id);
        if (!j->sandbox_id)
                return snapshot_job_free(j), -ENOMEM;
        if (image) {
                r = split_image_name(image, &j->repository, &j->tag);
                if (r < 0)
                        return snapshot_job_free(j), r;
                escaped = docker_escape(image);
                if (!escaped || asprintf(&path, "/images/%s/json", escaped) < 0)
                        return snapshot_job_free(j), -ENOMEM;
                j->step = STEP_FIND_IMAGE;
        } else {
                _cleanup_free_ char *filters = NULL;
                if (asprintf(&j->repository, SNAPSHOT_REPOSITORY "%s", sandbox_id) < 0) {
                        j->repository = NULL;
                        return snapshot_job_free(j), -ENOMEM;
                }
                if (asprintf(&filters, "{\"reference\":[\"%s\"]}", j->repository) < 0 ||
                    !(escaped = docker_escape(filters)) || asprintf(&path, "/images/json?filters=%s", escaped) < 0)
                        return snapshot_job_free(j), -ENOMEM;
                j->step = STEP_LIST_NUMBERS;
        }
        r = send_step(j, "GET", path, NULL, 0);
        if (r < 0)
                snapshot_job_free(j);
        return r;
}

DockerSnapshotOwner docker_snapshot_owner(json_t *image, uid_t uid) {
        json_t *labels = json_object_get(json_object_get(image, "Config"), "Labels");
        bool ok = true;
        uid_t owner = (uid_t) docker_label_u64(labels, LABEL_OWNER, &ok);

        if (!json_object_get(labels, LABEL_OWNER))
                return DOCKER_SNAPSHOT_NONE;
        return uid == 0 || (ok && owner == uid) ? DOCKER_SNAPSHOT_OURS : DOCKER_SNAPSHOT_OTHERS;
}

/* ---- the list ---------------------------------------------------------------------------- */

typedef struct ListJob {
        agentd_snapshots_t done;
        void *userdata;
} ListJob;

static void on_list(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ ListJob *j = userdata;
        _cleanup_free_ AgentdSnapshot *list = NULL;
        size_t n = 0, i, k, max = 0;
        json_t *image, *tag;
        char buf[256];

        if (status != 200) {
                j->done(j->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                        docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        json_array_foreach(body, i, image)
                max += json_array_size(json_object_get(image, "RepoTags"));
        list = calloc(MAX(max, 1U), sizeof(*list));
        if (!list) {
                j->done(j->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                return;
        }
        json_array_foreach(body, i, image) {
                json_t *labels = json_object_get(image, "Labels");
                bool ok = true;
                AgentdSnapshot s = {
                        .sandbox_id = json_string_value(json_object_get(labels, "org.agentix.snapshot.sandbox")) ?: "",
                        .owner = (uid_t) docker_label_u64(labels, LABEL_OWNER, &ok),
                        .created_at = (uint64_t) json_integer_value(json_object_get(image, "Created")),
                        .size = (uint64_t) json_integer_value(json_object_get(image, "Size")),
                };

                if (!ok)
                        continue; /* not a snapshot agentd took */
                json_array_foreach(json_object_get(image, "RepoTags"), k, tag) {
                        s.image = json_string_value(tag);
                        if (s.image && !streq(s.image, "<none>:<none>"))
                                list[n++] = s;
                }
        }
        j->done(j->userdata, list, n, NULL, NULL);
}

int docker_backend_snapshots(DockerBackend *b, agentd_snapshots_t done, void *userdata) {
        _cleanup_free_ char *filters = docker_escape("{\"label\":[\"" LABEL_OWNER "\"]}");
        ListJob *j = malloc(sizeof(*j));
        DockerRequest *req;
        char path[256];
        int r;

        if (!j || !filters) {
                free(j);
                return -ENOMEM;
        }
        *j = (ListJob) { .done = done, .userdata = userdata };
        snprintf(path, sizeof(path), "/images/json?filters=%s", filters);
        r = docker_request(b->docker, "GET", path, NULL, 0, on_list, j, &req);
        if (r < 0)
                free(j);
        else
                docker_request_set_destroy(req, free);
        return r;
}

/* ---- removing one ------------------------------------------------------------------------ */

typedef struct DeleteJob {
        DockerBackend *backend;
        char *image;
        uid_t owner;
        bool inspected;
        agentd_done_t done;
        void *userdata;
} DeleteJob;

static void delete_job_free(void *userdata) {
        DeleteJob *j = userdata;

        free(j->image);
        free(j);
}

static void delete_finish(DeleteJob *j, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void delete_finish(DeleteJob *j, const char *error_name, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;

        if (error_name) {
                va_start(ap, fmt);
                if (vasprintf(&message, fmt, ap) < 0)
                        message = NULL;
                va_end(ap);
        }
        j->done(j->userdata, error_name, error_name ? message ?: "Out of memory" : NULL);
        delete_job_free(j);
}

static void on_delete_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DeleteJob *j = userdata;
        _cleanup_free_ char *escaped = NULL, *path = NULL;
        DockerRequest *req;
        char buf[256];

        if (j->inspected) {
                if (status == 200 || status == 404)
                        delete_finish(j, NULL, NULL);
                else if (status == 409)
                        delete_finish(j, AGENTD_ERROR_IN_USE, "Snapshot %s is in use: %s", j->image,
                                      docker_error_message(status, body, error, buf, sizeof(buf)));
                else
                        delete_finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s could not remove %s: %s",
                                      j->backend->service, j->image,
                                      docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        if (status == 404) {
                delete_finish(j, AGENTD_ERROR_NO_SUCH_SNAPSHOT, "There is no image %s.", j->image);
                return;
        }
        if (status != 200) {
                delete_finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s cannot say what %s is: %s", j->backend->service,
                              j->image, docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        switch (docker_snapshot_owner(body, j->owner)) {
        case DOCKER_SNAPSHOT_NONE:
                delete_finish(j, AGENTD_ERROR_NO_SUCH_SNAPSHOT, "Image %s is not a snapshot.", j->image);
                return;
        case DOCKER_SNAPSHOT_OTHERS:
                delete_finish(j, AGENTD_ERROR_NOT_OWNER, "Snapshot %s is another user's.", j->image);
                return;
        case DOCKER_SNAPSHOT_OURS:
                break;
        }
        j->inspected = true;
        escaped = docker_escape(j->image);
        if (!escaped || asprintf(&path, "/images/%s", escaped) < 0 ||
            docker_request(j->backend->docker, "DELETE", path, NULL, 0, on_delete_reply, j, &req) < 0) {
                delete_finish(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                return;
        }
        docker_request_set_destroy(req, delete_job_free);
}

int docker_backend_delete_snapshot(DockerBackend *b, const char *image, uid_t owner, agentd_done_t done,
                                   void *userdata) {
        _cleanup_free_ char *escaped = docker_escape(image), *path = NULL;
        DeleteJob *j = calloc(1, sizeof(*j));
        DockerRequest *req;
        int r;

        if (!j || !escaped || asprintf(&path, "/images/%s/json", escaped) < 0 || !(j->image = strdup(image))) {
                free(j);
                return -ENOMEM;
        }
        j->backend = b;
        j->owner = owner;
        j->done = done;
        j->userdata = userdata;
        r = docker_request(b->docker, "GET", path, NULL, 0, on_delete_reply, j, &req);
        if (r < 0)
                delete_job_free(j);
        else
                docker_request_set_destroy(req, delete_job_free);
        return r;
}
