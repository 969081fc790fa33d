/* SPDX-License-Identifier: MIT */
/* Pausing a sandbox: POST /containers/NAME/pause freezes every process of the container in its
 * cgroup (the freezer); /unpause thaws them. Its runtime then answers nothing: connections are
 * accepted by the kernel and wait, which is what agentd documents for a paused sandbox. */
#include "docker-backend.h"
#include "macro.h"

typedef struct PauseJob {
        agentd_done_t done;
        void *userdata;
        bool pause;
} PauseJob;

static void on_pause(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ PauseJob *j = userdata;
        const char *message = json_string_value(json_object_get(body, "message")) ?: "";
        char buf[256];

        if (status == 204) {
                j->done(j->userdata, NULL, NULL);
                return;
        }
        if (status == 404) {
                j->done(j->userdata, AGENTD_ERROR_NO_SUCH_SANDBOX, "Its container is gone.");
                return;
        }
        /* Paused already, not paused, or not running (409 or 500): Docker says which in words only. */
        if ((status == 409 || status == 500) && (strstr(message, "already paused") || strstr(message, "is not paused"))) {
                j->done(j->userdata, NULL, NULL);
                return;
        }
        if (status == 409) {
                j->done(j->userdata, AGENTD_ERROR_NOT_RUNNING, docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        j->done(j->userdata, AGENTD_ERROR_BACKEND_UNAVAILABLE, docker_error_message(status, body, error, buf, sizeof(buf)));
}

int docker_backend_pause(DockerBackend *b, const char *sandbox_id, bool pause, agentd_done_t done, void *userdata) {
        PauseJob *j = malloc(sizeof(*j));
        DockerRequest *req;
        char path[128];
        int r;

        if (!j)
                return -ENOMEM;
        *j = (PauseJob) { .done = done, .userdata = userdata, .pause = pause };
        snprintf(path, sizeof(path), "/containers/agentix-%s/%s", sandbox_id, pause ? "pause" : "unpause");
        r = docker_request(b->docker, "POST", path, NULL, 0, on_pause, j, &req);
        if (r < 0)
                free(j);
        else
                docker_request_set_destroy(req, free); /* agentd stops before Docker answers */
        return r;
}
