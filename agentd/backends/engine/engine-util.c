/* SPDX-License-Identifier: MIT */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentix/agentd-backend.h"
#include "engine-util.h"
#include "strv.h"

int docker_caller_labels(json_t *labels, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *key;
        json_t *value;

        json_object_foreach(labels, key, value) {
                char *kv;

                if (strneq(key, "org.agentix.", 12) || !json_string_value(value))
                        continue;
                if (asprintf(&kv, "%s=%s", key, json_string_value(value)) < 0 || strv_consume(&l, kv) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

uint64_t docker_label_u64(json_t *labels, const char *key, bool *ok) {
        const char *v = json_string_value(json_object_get(labels, key));
        unsigned long long n;
        char *end;

        if (!v) {
                *ok = false;
                return 0;
        }
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end)
                *ok = false;
        return n;
}

int docker_timeout_from_env(uint64_t *ret_usec, char **ret_error) {
        const char *v = getenv(AGENTD_BACKEND_TIMEOUT_ENV);
        char *end;
        double d;

        if (!v)
                return 0;
        d = strtod(v, &end);
        if (end == v || *end || !(d >= 0.1 && d <= 3600)) {
                if (asprintf(ret_error, "%s=%s is not a number of seconds from 0.1 to 3600", AGENTD_BACKEND_TIMEOUT_ENV,
                             v) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        *ret_usec = (uint64_t) (d * 1e6);
        return 0;
}

int docker_instance_from_env(char **ret, char **ret_error) {
        const char *v = getenv(AGENTD_INSTANCE_ENV);
        char *s;

        if (!v || !*v) {
                *ret = NULL;
                return 0;
        }
        /* It goes into labels and filters as it is: nothing that needs quoting there. */
        if (strlen(v) > AGENTD_INSTANCE_MAX ||
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(v))
                return backend_new_error(ret_error, -EINVAL, "%s=%s: a name of at most %d letters, digits, '.', '_' "
                                         "and '-' is expected", AGENTD_INSTANCE_ENV, v, AGENTD_INSTANCE_MAX);
        s = strdup(v);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

bool docker_labels_instance_is(json_t *labels, const char *instance) {
        const char *v = json_string_value(json_object_get(labels, AGENTD_INSTANCE_LABEL));

        return streq(v ?: "", instance ?: "");
}

/* Without a TTY (agentd never asks for one) Docker multiplexes standard output and error into
 * frames: one byte naming the stream, three zero bytes, the payload's size (32 bits, big-endian),
 * the payload. */
int docker_logs_demultiplex(const void *frames, size_t size, Buffer *out) {
        const uint8_t *data = frames;

        while (size > 0) {
                uint32_t n;

                if (size < 8 || data[0] > 2 || data[1] || data[2] || data[3])
                        return -EBADMSG;
                memcpy(&n, data + 4, 4);
                n = be32toh(n);
                if (n > size - 8)
                        return -EBADMSG;
                if (buffer_append(out, data + 8, n) < 0)
                        return -ENOMEM;
                data += 8 + n;
                size -= 8 + n;
        }
        return 0;
}

int backend_new_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return r;
}
