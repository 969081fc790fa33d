/* SPDX-License-Identifier: MIT */
#pragma once

/* Function signatures of agentix modules (grammar in agentix-module.h): parsing once per
 * function, then binding each call's args/kwargs to parameters with defaults and type checks. */

#include <msgpack.h>

typedef struct Signature Signature;

/* Parse `text`. On -EINVAL, *ret_error (if non-NULL) gets a malloc()ed message naming the
 * position and what was expected. */
int signature_parse(const char *text, Signature **ret, char **ret_error);
Signature *signature_free(Signature *s);

size_t signature_n_params(const Signature *s);
const char *signature_param_name(const Signature *s, size_t i);

/* Bind positional `args` (array or nil) and keyword `kwargs` (map or nil) to the parameters.
 * On success *ret_argv is an array of signature_n_params() objects allocated in `zone`
 * (defaults filled in). On -EINVAL, *ret_error is a malloc()ed message naming the parameter,
 * e.g. "read() argument 'offset': expected int, got str",
 *      "read() missing required argument 'path'",
 *      "read() got an unexpected keyword argument 'lenght'",
 *      "read() takes 3 positional arguments but 4 were given",
 *      "read() got multiple values for argument 'path'". */
int signature_bind(const Signature *s, const char *function_name, const msgpack_object *args,
                   const msgpack_object *kwargs, msgpack_zone *zone, msgpack_object **ret_argv,
                   char **ret_error);
