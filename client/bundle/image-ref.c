/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image-ref.h"
#include "macro.h"

#define TAG_MAX 128

static bool repository_valid(const char *s, size_t n) {
        const char *first_slash = memchr(s, '/', n);

        if (n == 0 || !strchr("abcdefghijklmnopqrstuvwxyz0123456789", s[0]) ||
            strchr("._-/", s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                /* A colon only in a registry's host:port, which a slash follows. */
                if (c == ':' && first_slash && s + i < first_slash)
                        continue;
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("._-/", c)))
                        return false;
                if (c == '/' && i + 1 < n && s[i + 1] == '/')
                        return false;
        }
        return true;
}

static bool tag_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > TAG_MAX || s[0] == '.' || s[0] == '-')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

int image_ref_split(const char *ref, char **ret_repository, char **ret_tag) {
        const char *colon = strrchr(ref, ':'), *slash = strrchr(ref, '/');
        _cleanup_free_ char *repository = NULL, *tag = NULL;

        /* The last colon separates a tag only when no slash follows it (host:port/name). */
        if (colon && (!slash || colon > slash)) {
                repository = strndup(ref, colon - ref);
                tag = strdup(colon + 1);
        } else {
                repository = strdup(ref);
                tag = strdup("latest");
        }
        if (!repository || !tag)
                return -ENOMEM;
        if (!repository_valid(repository, strlen(repository)) || !tag_valid(tag))
                return -EINVAL;
        *ret_repository = TAKE_PTR(repository);
        *ret_tag = TAKE_PTR(tag);
        return 0;
}
