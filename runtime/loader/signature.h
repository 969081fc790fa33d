/* SPDX-License-Identifier: MIT */
#pragma once

/* Function signatures of agentix modules (grammar in agentix-module.h): parsing once per
 * function, then binding each call's args/kwargs to parameters with defaults and type checks. */

#include <msgpack.h>

/* Bounds on what a module may declare (a module is trusted code, but a typo should give an
 * error, not a surprise). */
#define SIGNATURE_TEXT_MAX 4096      /* bytes of signature text */
#define SIGNATURE_PARAMS_MAX 64      /* parameters per function */
#define SIGNATURE_NAME_MAX 64        /* bytes of a parameter name */
#define SIGNATURE_DEPTH_MAX 8        /* lists nested in a type: list[list[…]] counts 2 */

typedef struct Signature Signature;

/* Parse `text`. On -EINVAL, *ret_error (if non-NULL) gets a malloc()ed message naming the
 * position and what was expected. */
int signature_parse(const char *text, Signature **ret, char **ret_error);
Signature *signature_free(Signature *s);

size_t signature_n_params(const Signature *s);
const char *signature_param_name(const Signature *s, size_t i);
/* The parameter's type in canonical form ("int", "list[str] | None", …), or the return type
 * ("None" when the signature has no "->"). Owned by the signature. */
const char *signature_param_type(const Signature *s, size_t i);
const char *signature_return_type(const Signature *s);

/* Bind positional `args` (array or nil) and keyword `kwargs` (map or nil) to the parameters.
 * On success *ret_argv is an array of signature_n_params() objects allocated in `zone`
 * (defaults filled in, an int given for a float parameter converted to FLOAT64, lists copied
 * into `zone` when an element had to be converted; everything else points into `args` and
 * `kwargs`, which must outlive argv). On -EINVAL, *ret_error (if non-NULL) is a malloc()ed
 * message naming the parameter, following Python's wording, e.g. "read() argument 'offset': expected int, got str",
 *      "read() missing required argument 'path'",
 *      "read() got an unexpected keyword argument 'lenght'",
 *      "read() takes 3 positional arguments but 4 were given",
 *      "read() got multiple values for argument 'path'". */
int signature_bind(const Signature *s, const char *function_name, const msgpack_object *args,
                   const msgpack_object *kwargs, msgpack_zone *zone, msgpack_object **ret_argv,
                   char **ret_error);
