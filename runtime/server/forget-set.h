/* SPDX-License-Identifier: MIT */
#pragma once

/* The call_ids the server answered and forgot (acknowledged or evicted results), so a repeated
 * call_id is refused instead of run twice. A bounded window: the oldest fall out first. Ids are
 * kept as 64-bit keyed hashes (8 bytes each, not up to 129): a false "already used" needs a
 * hash collision, about 2^-64 per pair. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ForgetSet ForgetSet;

ForgetSet *forget_set_new(size_t window);
ForgetSet *forget_set_free(ForgetSet *f);

void forget_set_add(ForgetSet *f, const char *id, size_t len);
bool forget_set_contains(const ForgetSet *f, const char *id, size_t len);
