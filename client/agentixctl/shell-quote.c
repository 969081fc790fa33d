/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "shell-quote.h"

/* Characters that mean nothing to sh in any position. '=' is left out on purpose: a bare
 * first word like FOO=bar would be read as an assignment, not as the program to run; '~'
 * would be expanded at the start of a word. */
static bool char_is_plain(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("_@%+:,./-", c);
}

static int quote_append(Buffer *b, const char *word) {
        bool plain = *word != 0;
        int r;

        for (const char *p = word; *p && plain; p++)
                plain = char_is_plain(*p);
        if (plain)
                return buffer_append(b, word, strlen(word));

        r = buffer_append_byte(b, '\'');
        for (const char *p = word; *p && r >= 0; p++)
                r = *p == '\'' ? buffer_append(b, "'\\''", 4) : buffer_append_byte(b, (uint8_t) *p);
        if (r >= 0)
                r = buffer_append_byte(b, '\'');
        return r;
}

char *shell_quote(const char *word) {
        return shell_quote_argv((char *const[]) { (char *) word }, 1);
}

char *shell_quote_argv(char *const *words, size_t n) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        for (size_t i = 0; i < n; i++) {
                if (i > 0 && buffer_append_byte(&b, ' ') < 0)
                        return NULL;
                if (quote_append(&b, words[i]) < 0)
                        return NULL;
        }
        return (char *) buffer_steal(&b, NULL);
}
