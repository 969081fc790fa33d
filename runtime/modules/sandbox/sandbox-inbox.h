/* SPDX-License-Identifier: MIT */
#pragma once

/* The inbox of a bidi sandbox::exec: each item is a map with one or more of
 *   {stdin: str|bytes}        bytes for the child's stdin (the PTY with pty=True)
 *   {eof: true}               end of stdin (on a PTY: the VEOF character, ^D)
 *   {signal: int|str}         a signal for the process group: 2, "INT", "SIGINT"
 *   {resize: [rows, cols]}    new terminal size (pty=True only)
 * applied in that order when combined. Anything else raises ValueError (or TypeError): a typo
 * must not be silently dropped. The inbox closing means end of stdin. Items sent urgent (signals,
 * resizes) are taken even while the stdin buffer is full. */

#include "agentix-module.h"
#include "exec.h"

/* ExecHooks.on_inbox for a bidi call (userdata: the agentix_call). */
int sandbox_inbox_take(void *userdata, ExecRun *run);
/* ExecHooks.on_inbox_urgent: the same for an urgent item at the head of the inbox. */
int sandbox_inbox_take_urgent(void *userdata, ExecRun *run);
