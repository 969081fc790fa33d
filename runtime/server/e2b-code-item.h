/* SPDX-License-Identifier: MIT */
#pragma once

/* One item of code::run (code-output.h: {type: stdout|stderr|result|error|execution_count, …})
 * as the line E2B's code interpreter sends for it on POST /execute, which @e2b/code-interpreter
 * reads:
 *
 *   stdout, stderr        {type, text, timestamp}                  (µs since the epoch)
 *   result                {type, text, html, markdown, svg, png, jpeg, pdf, latex, json,
 *                          javascript, extra, is_main_result}      (the MIME types there are;
 *                                                                   images base64, JSON types
 *                                                                   as values, the rest in extra)
 *   error                 {type, name, value, traceback}
 *   execution_count       {type: "number_of_executions", execution_count}
 *
 * An item of another type gives NULL with -EBADMSG: the worker runs user code, so its items are
 * checked like any input. */

#include <jansson.h>
#include <msgpack.h>
#include <stdint.h>

int e2b_code_item_to_json(const msgpack_object *item, uint64_t timestamp_usec, json_t **ret);
