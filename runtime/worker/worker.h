/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker: a process the server spawns (the agentix-worker program, worker-main.c). It
 * reads CALL/IN/END_IN/CANCEL/OUT_CREDIT/SHUTDOWN frames (frame.h) from its frame socket, runs
 * each call on a thread of its own, and writes RESULT/ITEM/END/ERROR/IN_TAKEN frames back.
 * Exactly one terminal frame per CALL, always — even after a CANCEL — so the server knows when
 * a call's slot frees.
 *
 * Flow control of stream and bidi output (out-window.h): a call may have FRAME_OUT_WINDOW bytes
 * of ITEM payload sent and not yet credited by OUT_CREDIT {call_id, bytes}; its next
 * agentix_call_item_end() waits for credit (or cancellation, the deadline, shutdown). The
 * server credits what has left its queue for the client, and nothing while no client is
 * attached, so a slow client slows the function down. Unary results are not counted; inline
 * functions (unary only) run on the reader thread, which is the one that takes in the credit,
 * and so never wait for it. OUT_CREDIT for an unknown or finished call is ignored.
 *
 * Flow control of bidi inboxes: a CALL with in_ack: true gets IN_TAKEN {call_id, count} frames
 * telling how many more IN items the function took out of its inbox (coalesced, see inbox.h:
 * at the latest when the function waits for more, and every 16 items or 4 MiB while it works
 * through a full inbox; none after the inbox closed). The server relays them to the client as
 * call:in_ack, and a client that keeps at most INBOX_MAX_ITEMS items unacknowledged never
 * overflows the inbox. IN_TAKEN frames may come before the terminal frame, never after it.
 * An IN {…, urgent: true} (a signal, a resize) is handed to the function ahead of the ordinary
 * items waiting, so a flood of input cannot hold it up.
 *
 * Before it answers READY {pid} the worker confines itself (worker-confine.h): frame socket
 * moved to fd >= 10 (close-on-exec, blocking), fds 0/1 on /dev/null, every other inherited fd
 * closed, rlimits, PR_SET_PDEATHSIG=SIGKILL, no_new_privs, the seccomp filter.
 *
 * Errors the worker itself produces (ERROR frames, {type, message, traceback: nil, cancelled}):
 *   BadRequest        malformed CALL, unknown shape, callable not "module::function", a shape the
 *                     function does not have, a call_id that is already running here, in_ack
 *                     that is not a bool
 *   NoSuchCallable    no such module or function, or the module failed to load (message says why)
 *   ArgumentError     the arguments do not bind to the function's signature
 *   TooManyCalls      max_calls calls are running already
 *   Cancelled         CANCEL {reason: "cancelled" or none}; SHUTDOWN / EOF ("shutting down");
 *                     cancelled: true
 *   DeadlineExceeded  deadline_ms (relative to the worker's receipt of the CALL) passed, or
 *                     CANCEL {reason: "deadline"}; cancelled: true. The function sees
 *                     agentix_call_cancelled() and its wait fd turns readable at the deadline;
 *                     whatever it returns then, the call ends with DeadlineExceeded. A deadline
 *                     already passed on arrival fails the call without running the function.
 *   InboxOverflow     the caller sent more IN items than a bidi function reads (64 items /
 *                     64 MiB per call, 512 MiB for the whole worker); cancelled: false. Only
 *                     callers that ignore in_ack flow control can cause it.
 *   MessageTooLarge   a result or item larger than max_frame
 *   OSError           the function returned a negative errno (message: strerror)
 *   <any>             what the function raised with agentix_call_raise()
 * A CANCEL after the terminal frame, and IN/END_IN for unknown or finished calls, are ignored.
 *
 * Programs that run the worker must be linked with export_dynamic (modules resolve the
 * agentix_call_* API from the executable) and must call worker_main() before starting any
 * thread of their own (the seccomp filter covers only threads created after it is loaded). */

#include <stdbool.h>
#include <stddef.h>

typedef struct WorkerOptions {
        const char *module_dir;      /* NULL: $AGENTIX_MODULE_DIR, else AGENTIX_MODULE_DIR_DEFAULT */
        const char *seccomp_profile; /* Docker-format JSON file; NULL: the built-in default profile */
        bool no_seccomp;             /* debugging only (--no-seccomp) */
        size_t max_frame;            /* largest frame payload accepted; 0: FRAME_DEFAULT_MAX */
        unsigned max_calls;          /* concurrent calls; 0: 1024 */
} WorkerOptions;

/* Run the worker on `frame_fd` until SHUTDOWN or EOF; then every running call is cancelled and
 * gets up to 5 s to send its terminal frame. Returns the process exit status: 0 after SHUTDOWN
 * or EOF, 1 when setup failed (no READY was sent) or the frame stream was broken. With the
 * seccomp filter on, LeakSanitizer is switched off in this process (it needs ptrace). */
int worker_main(int frame_fd, const WorkerOptions *opts);
