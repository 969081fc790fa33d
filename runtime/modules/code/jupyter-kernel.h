/* SPDX-License-Identifier: MIT */
#pragma once

/* One running Jupyter kernel: its process (started from a kernelspec with a connection file of
 * our making, in a session and process group of its own) and the client's ZeroMQ sockets to it
 * (shell and control: DEALER; iopub: SUB). Plain C over libzmq, no msgpack and no worker, so
 * that it is tested on its own against a real ipykernel; code.c makes the module.
 *
 * Not thread-safe except where said: one thread runs execute() at a time (code.c queues runs);
 * interrupt() and kill() may come from any thread meanwhile.
 *
 * The kernel's death is seen through a pidfd (no heartbeat channel): an execute() in progress
 * returns with `died`, and its output so far has been delivered. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jupyter-message.h"
#include "kernelspec.h"

/* For the kernel to answer kernel_info after it was started. */
#define JUPYTER_START_TIMEOUT_USEC (30ULL * 1000 * 1000)
/* After an interrupt (timeout, cancellation), how long the kernel has to become idle before it
 * is killed. */
#define JUPYTER_INTERRUPT_GRACE_USEC (3ULL * 1000 * 1000)
/* Until then, while the kernel says nothing, the interrupt is repeated this often (one sent as
 * the run starts may be lost). */
#define JUPYTER_INTERRUPT_REPEAT_USEC (1000ULL * 1000)
/* How long an execute_reply may trail the kernel's idle status before the run ends without
 * one (the request was interrupted before its code ran). */
#define JUPYTER_REPLY_GRACE_USEC (500ULL * 1000)
/* Largest message taken from a kernel (a bigger one drops that connection: ZMQ_MAXMSGSIZE). */
#define JUPYTER_MESSAGE_MAX (256LL * 1024 * 1024)

typedef struct JupyterKernel JupyterKernel;

typedef struct JupyterStartOptions {
        const KernelSpec *spec;
        const char *cwd;          /* NULL: the worker's */
        char *const *env;         /* NULL: environ; the kernelspec's env is added */
        uint64_t timeout_usec;    /* 0: JUPYTER_START_TIMEOUT_USEC */
} JupyterStartOptions;

/* Start a kernel and wait until it answers. On failure *ret_error (malloc()ed) says why,
 * with what the kernel printed when it died. */
int jupyter_kernel_start(const JupyterStartOptions *o, JupyterKernel **ret, char **ret_error);
/* Kill the kernel's process group, reap it, remove its connection file. NULL is fine. */
void jupyter_kernel_free(JupyterKernel *k);

pid_t jupyter_kernel_pid(const JupyterKernel *k);
const char *jupyter_kernel_name(const JupyterKernel *k);
const char *jupyter_kernel_language(const JupyterKernel *k);
bool jupyter_kernel_alive(JupyterKernel *k);
/* The last lines the kernel wrote to its stdout/stderr (malloc()ed; "" when none). */
char *jupyter_kernel_log_tail(const JupyterKernel *k);

/* ^C: SIGINT to the kernel (or interrupt_request on control, as its kernelspec asks). Any
 * thread. */
int jupyter_kernel_interrupt(JupyterKernel *k);
/* The user's ^C for the run in progress: sent now, and repeated by execute() while the kernel
 * stays silent (one that lands as the run starts is lost: ipykernel ignores SIGINT between
 * runs), never followed by a kill. The caller asks only while a run holds the kernel and
 * forgets the request when that turn ends, so that it cannot reach the next run. Any thread. */
int jupyter_kernel_ask_interrupt(JupyterKernel *k);
void jupyter_kernel_forget_interrupt(JupyterKernel *k);
/* SIGKILL to the kernel's process group. Any thread; an execute() in progress returns died. */
void jupyter_kernel_kill(JupyterKernel *k);

typedef struct JupyterExecuteHooks {
        void *userdata;
        /* An iopub message (execute_input, stream, execute_result, display_data, error, …) of
         * this run, in order; status messages are not passed. A negative return stops the run (the kernel
         * is interrupted, as for a cancellation). */
        int (*on_message)(void *userdata, const JupyterMessage *m);
        int wait_fd;                           /* POLLIN: ask cancelled(); -1: none */
        bool (*cancelled)(void *userdata);
} JupyterExecuteHooks;

typedef struct JupyterExecuteResult {
        char status[16];          /* execute_reply's: "ok", "error", "aborted"; "" without one (the
                                   * kernel died, or a ^C came before the code ran) */
        int64_t execution_count;  /* execute_reply's; -1 without one */
        bool timed_out;           /* interrupted at the timeout */
        bool cancelled;           /* interrupted because the caller cancelled or on_message stopped it */
        bool died;                /* the kernel exited (or was killed) during the run */
} JupyterExecuteResult;

/* Run `code`. silent: no execution count, no output of its own (jupyter's `silent`). timeout 0:
 * none. -EBUSY never (one thread at a time is the caller's rule); -ESRCH when the kernel is
 * dead before the run starts. */
int jupyter_kernel_execute(JupyterKernel *k, const char *code, bool silent, uint64_t timeout_usec,
                           const JupyterExecuteHooks *hooks, JupyterExecuteResult *ret);
