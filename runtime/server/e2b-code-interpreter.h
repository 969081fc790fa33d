/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's code interpreter API (/execute, /contexts) on the worker's code:: module: see
 * e2b-code-interpreter.c. */

#include "http-server.h"
#include "rpc.h"

typedef struct CodeInterpreterApi CodeInterpreterApi;

/* Serve /execute and /contexts on http, with calls through rpc. */
int code_interpreter_api_new(Rpc *rpc, HttpServer *http, CodeInterpreterApi **ret);
CodeInterpreterApi *code_interpreter_api_free(CodeInterpreterApi *api);
