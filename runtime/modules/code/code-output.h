/* SPDX-License-Identifier: MIT */
#pragma once

/* What a run of code::run streams, made from the kernel's iopub messages:
 *
 *   {type: "stdout"|"stderr", text}                                        stream
 *   {type: "result", data: {MIME: value}, is_main_result, execution_count?} execute_result (main),
 *                                                                          display_data
 *   {type: "error", name, value, traceback}                                 error (traceback: one
 *                                                                          string, lines joined)
 *   {type: "execution_count", execution_count}                              execute_input
 *
 * In `data`, image types (but SVG) is bytes (the kernel's base64 decoded), application/json and
 * MIME types ending in +json are the JSON value, everything else text. Output is bounded: past
 * `max_output` bytes of text and data, text is cut, later stdout/stderr/result items are
 * dropped, and one {type: "stderr", text: "…", truncated: true} item says so. Error items are
 * cut (name, value, traceback) and counted too: the first CODE_ERRORS_PAST_CAP still go past
 * the cap, later ones are dropped there. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "jupyter-message.h"

#define CODE_TRACEBACK_MAX (64u * 1024u)
/* An error item's name and value are cut too: the kernel (user code) says how long they are. */
#define CODE_ERROR_NAME_MAX 256u
#define CODE_ERROR_VALUE_MAX (64u * 1024u)
/* The first errors of a run are sent past the cap (they say how it ended); later ones count
 * against it like any output, so that a kernel that publishes errors without end (IPython's
 * showtraceback() in a loop) is bounded. */
#define CODE_ERRORS_PAST_CAP 8u

typedef struct CodeOutput {
        size_t max_output;
        size_t used;          /* bytes of text and data sent so far */
        bool truncated;       /* the cap was hit (the notice is due or sent) */
        bool notice_sent;
        unsigned errors;      /* error items sent */
} CodeOutput;

/* Pack the item for `m` (one map) into pk: 1 when one was packed, 0 for messages that give no
 * item (status, clear_output, comm_*, …, and output past the cap), negative errno on failure. */
int code_output_pack(CodeOutput *o, const JupyterMessage *m, msgpack_packer *pk);

/* The cap was hit and the notice saying so is not out yet: pack it next. */
bool code_output_notice_due(const CodeOutput *o);
int code_output_pack_notice(CodeOutput *o, msgpack_packer *pk);

/* {type: "error", name, value, traceback: ""} — for errors of our own (timeout, dead kernel). */
int code_output_pack_error(msgpack_packer *pk, const char *name, const char *value);
