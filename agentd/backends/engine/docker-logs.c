/* SPDX-License-Identifier: MIT */
/* A sandbox's log: GET /containers/NAME/logs, its frames demultiplexed (docker-client.h). */

#include "buffer.h"
#include "docker-backend.h"
#include "docker-client.h"
#include "macro.h"

typedef struct LogsJob {
        agentd_logs_t done;
        void *userdata;
} LogsJob;

static void on_logs(DockerClient *d, int status, const void *data, size_t size, const char *error, void *userdata) {
        _cleanup_free_ LogsJob *j = userdata;
        _cleanup_buffer_ Buffer text = BUFFER_NULL;
        char buf[256];

        if (status == 404) {
                j->done(j->userdata, NULL, 0, AGENTD_ERROR_NO_SUCH_SANDBOX, "Its container is gone.");
                return;
        }
        if (status != 200) {
                json_t *body = status > 0 ? json_loadb(data, size, 0, NULL) : NULL;
                j->done(j->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                        docker_error_message(status, body, error, buf, sizeof(buf)));
                json_decref(body);
                return;
        }
        if (docker_logs_demultiplex(data, size, &text) < 0) {
                j->done(j->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                        "The container's log is not in the form Docker sends it in");
                return;
        }
        j->done(j->userdata, (const char *) buffer_data(&text), text.len, NULL, NULL);
}

int docker_backend_logs(DockerBackend *b, const char *sandbox_id, uint64_t lines, agentd_logs_t done, void *userdata) {
        LogsJob *j = malloc(sizeof(*j));
        DockerRequest *req;
        char path[160];
        int r;

        if (!j)
                return -ENOMEM;
        *j = (LogsJob) { .done = done, .userdata = userdata };
        snprintf(path, sizeof(path), "/containers/agentix-%s/logs?stdout=1&stderr=1&tail=%llu", sandbox_id,
                 (unsigned long long) lines);
        r = docker_request_raw(b->docker, path, on_logs, j, &req);
        if (r < 0)
                free(j);
        else
                docker_request_set_destroy(req, free); /* agentd stops before Docker answers */
        return r;
}
