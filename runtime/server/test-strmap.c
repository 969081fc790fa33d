/* SPDX-License-Identifier: MIT */
/* StrMap and ForgetSet: the server's tables of peer-chosen ids. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forget-set.h"
#include "strmap.h"

#define N 20000

static void test_strmap(void) {
        static char keys[N][16];
        StrMap *m = strmap_new();
        size_t state = 0, seen = 0;

        assert(m);
        for (int i = 0; i < N; i++) {
                snprintf(keys[i], sizeof(keys[i]), "id-%d", i);
                assert(strmap_put(m, keys[i], strlen(keys[i]), keys[i]) == 0);
        }
        assert(strmap_put(m, keys[7], strlen(keys[7]), keys[7]) == -EEXIST);
        assert(strmap_size(m) == N);
        for (int i = 0; i < N; i++)
                assert(strmap_get(m, keys[i], strlen(keys[i])) == keys[i]);
        assert(!strmap_get(m, "id-", 3));
        /* Remove every other key: the rest must stay reachable (backward-shift deletion). */
        for (int i = 0; i < N; i += 2)
                assert(strmap_remove(m, keys[i], strlen(keys[i])) == keys[i]);
        assert(!strmap_remove(m, keys[0], strlen(keys[0])));
        for (int i = 0; i < N; i++)
                assert((strmap_get(m, keys[i], strlen(keys[i])) != NULL) == (i % 2 == 1));
        while (strmap_iterate(m, &state))
                seen++;
        assert(seen == N / 2 && strmap_size(m) == N / 2);
        /* Keys are byte strings: embedded NULs and prefixes differ. */
        assert(strmap_put(m, "a\0b", 3, keys[1]) == 0);
        assert(!strmap_get(m, "a", 1));
        assert(strmap_get(m, "a\0b", 3) == keys[1]);
        strmap_free(m);
}

static void test_forget_set(void) {
        ForgetSet *f = forget_set_new(1000);
        char id[32];

        assert(f);
        for (int i = 0; i < 5000; i++) {
                snprintf(id, sizeof(id), "call-%d", i);
                forget_set_add(f, id, strlen(id));
                forget_set_add(f, id, strlen(id)); /* twice: still one entry */
        }
        /* The window keeps the newest 1000 and nothing older. */
        for (int i = 0; i < 5000; i++) {
                snprintf(id, sizeof(id), "call-%d", i);
                assert(forget_set_contains(f, id, strlen(id)) == (i >= 4000));
        }
        assert(!forget_set_contains(f, "never", 5));
        forget_set_free(f);
}

int main(void) {
        test_strmap();
        test_forget_set();
        printf("test-strmap: ok\n");
        return 0;
}
