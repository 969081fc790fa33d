/* SPDX-License-Identifier: MIT */
/* A runtime takes a sealed certificate (tls-handover.h) only when agentd handed it over after
 * the one installed: one recorded on the way (the first goes over plain HTTP) and sent again
 * after a newer one is refused, whatever else it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>

#include "tls-handover.h"

#define TOKEN "token-0123456789abcdef"

static Buffer seal(uint64_t issued, const char *text) {
        Buffer b = BUFFER_NULL;

        assert_int_equal(tls_handover_seal(TOKEN, issued, text, strlen(text), &b), 0);
        return b;
}

/* What tls-install.c does: open against the installed count, and install (count it) on success. */
static int install(uint64_t *installed, const Buffer *m, char **ret_text) {
        uint64_t issued = 0;
        size_t n = 0;
        int r = tls_handover_open(TOKEN, buffer_data((Buffer *) m), m->len, *installed, &issued, ret_text, &n);

        if (r >= 0)
                *installed = issued;
        return r;
}

static void test_replay_refused(void **state) {
        Buffer older = seal(1764370000000000ULL, "older certificate"), newer = seal(1764370000000001ULL, "newer");
        uint64_t installed = 0;
        char *text = NULL;

        /* In order: both taken. */
        assert_int_equal(install(&installed, &older, &text), 0);
        assert_string_equal(text, "older certificate");
        OPENSSL_clear_free(text, strlen(text) + 1);
        assert_int_equal(install(&installed, &newer, &text), 0);
        OPENSSL_clear_free(text, strlen(text) + 1);
        assert_int_equal(installed, 1764370000000001ULL);

        /* The older one again: refused, nothing handed out, the newer one stays. */
        text = NULL;
        assert_int_equal(install(&installed, &older, &text), -ESTALE);
        assert_null(text);
        assert_int_equal(installed, 1764370000000001ULL);
        /* The newer one again (the same message twice): refused too. */
        assert_int_equal(install(&installed, &newer, &text), -ESTALE);
        assert_null(text);

        /* A forged count needs the token: a changed count does not open. */
        buffer_data(&older)[6] ^= 0x80;
        assert_int_equal(install(&installed, &older, &text), -EBADMSG);
        /* A runtime that has none from agentd yet (0) takes any genuine one. */
        installed = 0;
        assert_int_equal(install(&installed, &newer, &text), 0);
        OPENSSL_clear_free(text, strlen(text) + 1);
        buffer_done(&older);
        buffer_done(&newer);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_replay_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
