/* SPDX-License-Identifier: MIT */
/* The bundle environment file's parser: assignments have valid names and values without NUL,
 * expansion sees earlier assignments, and a malformed line is reported by its number. */
#include "environment-file.h"
#include "fuzz-util.h"
#include "macro.h"

typedef struct Env {
        char names[64][256];
        char *values[64];
        size_t n;
} Env;

static const char *lookup(const char *name, void *userdata) {
        Env *e = userdata;

        for (size_t i = e->n; i > 0; i--)
                if (streq(e->names[i - 1], name))
                        return e->values[i - 1];
        return streq(name, "PATH") ? "/usr/bin:/bin" : NULL;
}

static int assign(const char *name, const char *value, void *userdata) {
        Env *e = userdata;

        CHECK(name[0] && strlen(name) < 256 && strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                            "0123456789_") == strlen(name));
        CHECK(!(name[0] >= '0' && name[0] <= '9'));
        if (e->n == 64)
                return -E2BIG;
        snprintf(e->names[e->n], sizeof(e->names[e->n]), "%s", name);
        e->values[e->n] = strdup(value);
        if (!e->values[e->n])
                return -ENOMEM;
        e->n++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Env e = {};
        unsigned line = 0, lines = 1;
        int r;

        if (size > 64 * 1024)
                return 0;
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        r = environment_parse((const char *) data, size, lookup, assign, &e, &line);
        if (r == -EBADMSG)
                CHECK(line >= 1 && line <= lines);
        else
                CHECK(r == 0 || r == -E2BIG || r == -ENOMEM);
        for (size_t i = 0; i < e.n; i++)
                free(e.values[i]);
        return 0;
}
