/* SPDX-License-Identifier: MIT */
#include "exec-env.h"
#include "macro.h"

bool env_key_is_valid(const char *key, size_t len) {
        if (len == 0)
                return false;
        return !memchr(key, '=', len) && !memchr(key, '\0', len);
}

bool env_value_is_valid(const char *value, size_t len) {
        return !memchr(value, '\0', len);
}

/* Does "KEY=value" entry e define the variable key[0..len)? */
static bool env_entry_matches(const char *e, const char *key, size_t len) {
        return strncmp(e, key, len) == 0 && e[len] == '=';
}

static bool env_overridden(const char *entry, const EnvOverride *o, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (env_entry_matches(entry, o[i].key, o[i].key_len))
                        return true;
        return false;
}

/* Is override i superseded by a later override of the same key? */
static bool env_override_superseded(const EnvOverride *o, size_t n, size_t i) {
        for (size_t j = i + 1; j < n; j++)
                if (o[j].key_len == o[i].key_len && memcmp(o[j].key, o[i].key, o[i].key_len) == 0)
                        return true;
        return false;
}

int env_merge(char *const *base, const EnvOverride *o, size_t n, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n_base = 0, k = 0;

        for (char *const *e = base; e && *e; e++)
                n_base++;

        l = calloc(n_base + n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;

        for (char *const *e = base; e && *e; e++) {
                if (env_overridden(*e, o, n))
                        continue;
                l[k] = strdup(*e);
                if (!l[k])
                        return -ENOMEM;
                k++;
        }

        for (size_t i = 0; i < n; i++) {
                char *s;

                if (!o[i].value || env_override_superseded(o, n, i))
                        continue;
                s = malloc(o[i].key_len + 1 + o[i].value_len + 1);
                if (!s)
                        return -ENOMEM;
                memcpy(s, o[i].key, o[i].key_len);
                s[o[i].key_len] = '=';
                memcpy(s + o[i].key_len + 1, o[i].value, o[i].value_len);
                s[o[i].key_len + 1 + o[i].value_len] = '\0';
                l[k++] = s;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

const char *env_get(char *const *env, const char *key) {
        size_t len = strlen(key);

        for (char *const *e = env; e && *e; e++)
                if (env_entry_matches(*e, key, len))
                        return *e + len + 1;
        return NULL;
}
