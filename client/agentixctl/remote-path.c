/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "remote-path.h"

/* Sandbox IDs as agentd makes them: letters, digits, '-', '_', '.'. */
static bool sandbox_id_is_valid(const char *s, size_t n) {
        if (n == 0 || n > 128)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      strchr("-_.", s[i])))
                        return false;
        return true;
}

int remote_path_parse(const char *operand, RemotePath *ret) {
        const char *colon = strchr(operand, ':'), *slash = strchr(operand, '/');
        char *id = NULL;

        if (!colon || (slash && slash < colon)) {
                *ret = (RemotePath) { .path = operand };
                return 0;
        }
        if (colon > operand) {
                if (!sandbox_id_is_valid(operand, (size_t) (colon - operand)))
                        return -EINVAL;
                id = strndup(operand, (size_t) (colon - operand));
                if (!id)
                        return -ENOMEM;
        }
        *ret = (RemotePath) { .remote = true, .sandbox = id, .path = colon + 1 };
        return 0;
}

void remote_path_done(RemotePath *p) {
        free(p->sandbox);
        *p = (RemotePath) {};
}
