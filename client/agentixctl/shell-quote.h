/* SPDX-License-Identifier: MIT */
#pragma once

/* `agentixctl exec -- CMD ARG…` runs CMD with exactly these arguments, like docker exec: the
 * words are quoted into one POSIX shell command line that sandbox::exec hands to `sh -c`. */

#include <stddef.h>

/* Quote one word so that sh reads it back unchanged: bare when it only holds characters sh
 * never interprets, else in single quotes (a ' inside becomes '\''). */
char *shell_quote(const char *word);

/* Quote and join n words with spaces; NULL when out of memory. */
char *shell_quote_argv(char *const *words, size_t n);
