/* SPDX-License-Identifier: MIT */
/* The backend object of docker-backend.h: its making and freeing, the runtimes its service
 * has, removing a sandbox. Creates are docker-create.c's. */
#include <curl/curl.h>
#include <sys/stat.h>

#include "cgroup-stats.h"

#include "curl-event.h"
#include "docker-backend.h"
#include "docker-client.h"
#include "log.h"
#include "strv.h"

typedef struct RemoveJob {
        agentd_removed_t removed;
        void *userdata;
} RemoveJob;

int docker_backend_new(sd_event *event, const char *service, const char *socket, DockerBackend **ret) {
        DockerBackend *b = calloc(1, sizeof(*b));
        int r;

        if (!b)
                return -ENOMEM;
        b->event = sd_event_ref(event);
        b->service = strdup(service);
        r = b->service ? docker_client_new(event, socket, &b->docker) : -ENOMEM;
        if (r >= 0)
                r = curl_event_new(event, &b->probes);
        if (r < 0) {
                docker_backend_free(b);
                return r;
        }
        *ret = b;
        return 0;
}

DockerBackend *docker_backend_free(DockerBackend *b) {
        if (!b)
                return NULL;
        docker_request_cancel(b->events);
        docker_request_cancel(b->events_probe);
        docker_request_cancel(b->runtimes_request);
        sd_event_source_disable_unref(b->events_retry);
        network_shards_free(b->isolated); /* their requests go before the client */
        network_shards_free(b->egress);
        docker_client_free(b->docker);
        curl_event_free(b->probes);
        json_decref(b->host_config);
        json_decref(b->runtimes);
        free(b->counting_disk);
        free(b->resolv_conf);
        docker_stats_free_all(b);
        sd_event_unref(b->event);
        free(b->service);
        free(b->instance);
        free(b);
        return NULL;
}

void docker_backend_set_timeout(DockerBackend *b, uint64_t usec) {
        docker_client_set_timeout(b->docker, usec);
}

void docker_backend_set_host_config(DockerBackend *b, json_t *extra) {
        json_decref(b->host_config);
        b->host_config = extra;
}

/* ---- runtimes ---------------------------------------------------------------------------- */

/* The engine is on this host (a unix socket), so its data directory is a path here too. */
static void find_counting_disk(DockerBackend *b, json_t *info) {
        const char *data = json_string_value(json_object_get(info, "DockerRootDir"));
        struct stat st;
        int r;

        if (b->counting_disk || !streq_ptr(json_string_value(json_object_get(info, "CgroupVersion")), "1"))
                return;
        r = data && stat(data, &st) == 0 ? cgroup_v1_counting_disk("", st.st_dev, &b->counting_disk) : -ENOENT;
        if (r < 0)
                log_info("cgroup v1, and %s's data (%s) is on no disk of its own: the kernel may count no "
                         "block I/O for sandboxes (io_read_bytes, io_write_bytes stay 0).", b->service, strna(data));
        else
                log_info("cgroup v1: each sandbox gets a blk-throttle rule of 1 PiB/s on %s (%s's data), "
                         "without which the kernel counts no block I/O for it.", b->counting_disk, b->service);
}

/* Without live-restore, a dockerd restart (an upgrade, a crash) stops every container, and with
 * them every sandbox: worth one line at start. Podman has no such setting (its containers do
 * not depend on a daemon). */
static void check_live_restore(DockerBackend *b, json_t *info) {
        json_t *live = json_object_get(info, "LiveRestoreEnabled");

        if (b->live_restore_checked || !streq(b->service, "Docker") || !json_is_boolean(live))
                return;
        b->live_restore_checked = true;
        if (!json_is_true(live))
                log_warning("Docker runs without \"live-restore\": true (daemon.json): a restart of dockerd stops "
                            "every sandbox. Set it, then reload dockerd (SIGHUP), to keep them running across "
                            "its restarts; see agentd(8).");
}

void docker_backend_take_info(DockerBackend *b, json_t *info) {
        json_decref(b->runtimes);
        b->runtimes = json_incref(json_object_get(info, "Runtimes"));
        find_counting_disk(b, info);
        check_live_restore(b, info);
}

static void on_runtimes(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerBackend *b = userdata;

        b->runtimes_request = NULL;
        if (status != 200) {
                log_debug("%s did not say which runtimes it has (%s); asked again at the next create that names one.",
                          b->service, error ?: "refused");
                return;
        }
        docker_backend_take_info(b, body);
}

void docker_backend_ask_runtimes(DockerBackend *b) {
        if (b->runtimes || b->runtimes_request)
                return;
        (void) docker_request(b->docker, "GET", "/info", NULL, 0, on_runtimes, b, &b->runtimes_request);
}

int docker_backend_runtimes(DockerBackend *b, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *name;
        json_t *v;

        if (!json_is_object(b->runtimes))
                return -EAGAIN;
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_object_foreach(b->runtimes, name, v)
                if (strv_extend(&l, name) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* ---- remove ------------------------------------------------------------------------------ */

static void on_remove(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        RemoveJob *rj = userdata;
        agentd_removed_t removed = rj->removed;
        void *ud = rj->userdata;
        char buf[128];

        free(rj);
        if (!removed) {
                if (status != 204 && status != 404)
                        log_warning("Cannot remove a container (%s).", docker_error_message(status, body, error, buf,
                                                                                           sizeof(buf)));
                return;
        }
        if (status == 204 || status == 404)
                removed(ud, NULL, NULL);
        else
                removed(ud, AGENTD_ERROR_BACKEND_UNAVAILABLE, docker_error_message(status, body, error, buf, sizeof(buf)));
}

int docker_backend_remove(DockerBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata) {
        RemoveJob *rj = malloc(sizeof(*rj));
        DockerRequest *req;
        char path[128];
        int r;

        if (!rj)
                return -ENOMEM;
        *rj = (RemoveJob) { .removed = removed, .userdata = userdata };
        docker_stats_forget(b, sandbox_id);
        if (b->isolated)
                network_shards_release(b->isolated, sandbox_id);
        if (b->egress)
                network_shards_release(b->egress, sandbox_id);
        snprintf(path, sizeof(path), "/containers/agentix-%s?force=1&v=1", sandbox_id);
        r = docker_request(b->docker, "DELETE", path, NULL, 0, on_remove, rj, &req);
        if (r < 0)
                free(rj);
        else
                docker_request_set_destroy(req, free); /* agentd stops before Docker answers */
        return r;
}

int docker_backend_new_from_env(const char *service, const char *socket, DockerBackend **ret, char **ret_error) {
        _cleanup_free_ char *instance = NULL;
        uint64_t timeout = 0;
        sd_event *event = NULL;
        int r;

        log_parse_env();
        log_set_prefix("agentd");
        r = docker_timeout_from_env(&timeout, ret_error);
        if (r >= 0)
                r = docker_instance_from_env(&instance, ret_error);
        if (r < 0)
                return r;
        r = sd_event_default(&event);
        if (r < 0)
                return r;
        r = docker_backend_new(event, service, socket, ret);
        sd_event_unref(event);
        if (r < 0)
                return r;
        if (timeout > 0)
                docker_backend_set_timeout(*ret, timeout);
        (*ret)->instance = TAKE_PTR(instance);
        if ((*ret)->instance)
                log_info("%s at %s: only the containers labelled %s=%s are this agentd's.", service, socket,
                         AGENTD_INSTANCE_LABEL, (*ret)->instance);
        else
                log_debug("%s at %s.", service, socket);
        return 0;
}

void docker_backend_release(DockerBackend *b) {
        docker_backend_free(b);
}
