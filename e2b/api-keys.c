/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "api-keys.h"
#include "macro.h"

ApiKeys *api_keys_free(ApiKeys *k) {
        if (!k)
                return NULL;
        for (size_t i = 0; i < k->n; i++) {
                OPENSSL_cleanse(k->keys[i].key, strlen(k->keys[i].key));
                free(k->keys[i].key);
                free(k->keys[i].user);
        }
        free(k->keys);
        free(k);
        return NULL;
}

static bool key_chars_ok(const char *s, size_t n) {
        return n >= API_KEY_MIN_LEN && n <= API_KEY_MAX_LEN &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

static int fail(char **ret_error, int r, const char *path, unsigned line, const char *what) {
        if (line > 0 ? asprintf(ret_error, "%s:%u: %s", path, line, what) < 0 :
                       asprintf(ret_error, "%s: %s", path, what) < 0)
                *ret_error = NULL;
        return r;
}

/* One `KEY USER` line into k (the user looked up now: a key for no account is a mistake best
 * seen at start). */
static int add_line(ApiKeys *k, char *text, const char *path, unsigned line, char **ret_error) {
        char *key = strtok(text, " \t"), *user = strtok(NULL, " \t"), *extra = strtok(NULL, " \t");
        struct passwd *pw;
        ApiKey *e;
        int n;

        if (!key || !user || extra)
                return fail(ret_error, -EINVAL, path, line, "expected KEY USER");
        if (!key_chars_ok(key, strlen(key)))
                return fail(ret_error, -EINVAL, path, line,
                            "a key is 16 to 128 letters, digits, '_' or '-' (agentix-e2b --make-key=USER makes one)");
        if (api_keys_find(k, key, strlen(key)))
                return fail(ret_error, -EINVAL, path, line, "this key is on an earlier line too");
        if (k->n >= API_KEYS_MAX)
                return fail(ret_error, -E2BIG, path, line, "more than 4096 keys");
        errno = 0;
        pw = getpwnam(user);
        if (!pw) {
                char *what = NULL;
                int r = asprintf(&what, "no user '%s' on this system", user) < 0 ? -ENOMEM :
                        fail(ret_error, -EINVAL, path, line, what);
                free(what);
                return r;
        }
        e = realloc(k->keys, (k->n + 1) * sizeof(ApiKey));
        if (!e)
                return -ENOMEM;
        k->keys = e;
        e = &k->keys[k->n];
        *e = (ApiKey) { .uid = pw->pw_uid, .gid = pw->pw_gid };
        n = API_KEY_MAX_GROUPS;
        if (getgrouplist(pw->pw_name, pw->pw_gid, e->groups, &n) < 0)
                n = API_KEY_MAX_GROUPS; /* more than we keep: the first ones */
        e->n_groups = n;
        e->key = strdup(key);
        e->user = strdup(pw->pw_name);
        if (!e->key || !e->user) {
                free(e->key);
                free(e->user);
                return -ENOMEM;
        }
        k->n++;
        return 0;
}

int api_keys_load(const char *path, ApiKeys **ret, char **ret_error) {
        _cleanup_(api_keys_freep) ApiKeys *k = calloc(1, sizeof(ApiKeys));
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        unsigned line = 0;
        struct stat st;
        int r;

        *ret_error = NULL;
        if (!k)
                return -ENOMEM;
        f = fopen(path, "re");
        if (!f)
                return fail(ret_error, -errno, path, 0, strerror(errno));
        if (fstat(fileno(f), &st) < 0)
                return fail(ret_error, -errno, path, 0, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return fail(ret_error, -EINVAL, path, 0, "not a regular file");
        if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 0077))
                return fail(ret_error, -EPERM, path, 0,
                            "holds secrets: it must belong to root and be readable by no one else (chmod 0600)");
        while (getline(&text, &size, f) >= 0) {
                char *p = text + strspn(text, " \t");

                line++;
                p[strcspn(p, "\r\n")] = 0;
                if (*p == 0 || *p == '#')
                        continue;
                r = add_line(k, p, path, line, ret_error);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return fail(ret_error, -EIO, path, 0, "read error");
        if (text)
                OPENSSL_cleanse(text, size);
        *ret = TAKE_PTR(k);
        return 0;
}

const ApiKey *api_keys_find(const ApiKeys *k, const char *key, size_t len) {
        const ApiKey *found = NULL;

        /* Every entry is compared, and each in constant time for its length: how long an answer
         * takes says nothing of how close a guess came. */
        for (size_t i = 0; k && i < k->n; i++) {
                size_t n = strlen(k->keys[i].key);

                if (n == len && CRYPTO_memcmp(k->keys[i].key, key, len) == 0)
                        found = &k->keys[i];
        }
        return found;
}

int api_key_make(char ret[static 45]) {
        uint8_t bytes[20];

        if (getrandom(bytes, sizeof(bytes), 0) != (ssize_t) sizeof(bytes))
                return -EIO;
        strcpy(ret, "e2b_");
        for (size_t i = 0; i < sizeof(bytes); i++)
                sprintf(ret + 4 + 2 * i, "%02x", bytes[i]);
        return 0;
}
