/* SPDX-License-Identifier: MIT */
/* Built-in module "sandbox": exec, the deepagents `execute` contract, in three shapes; echo, a
 * probe; stats, what the sandbox uses (sandbox-stats.c).
 *
 *   exec(command: str, timeout: float? = None, cwd: str? = None, env: map? = None,
 *        stdin: str|bytes? = None, max_output: int = 10485760, pty: bool = False,
 *        rows: int = 24, cols: int = 80, shell: str? = None, report_pid: bool = False) -> map
 *
 * Runs `<shell> -c <command>` (shell: /bin/sh, else /nix/runtime/bin/sh) in a new session.
 *   unary   → {exit_code, output, truncated, timed_out}; stdout and stderr share one pipe, so
 *             `output` has them in exact order; invalid UTF-8 becomes U+FFFD.
 *   stream  → items {stream: "stdout"|"stderr"|"pty", data: bytes}, then
 *             {exit_code, timed_out, truncated}, then the end.
 *   bidi    → like stream; the inbox feeds stdin and sends signals/resizes (sandbox-inbox.h).
 *   report_pid (stream, bidi): a first item {pid} (the shell's, also its process group's): E2B's
 *             envd process service names processes by it.
 *
 * exit_code: the shell's status; 128+N when killed by signal N; 124 on timeout (timed_out).
 * timeout (s): None → 1800, 0 → none, < 0 → ValueError; on expiry the whole process group is
 * SIGKILLed. The call's deadline bounds the run too: the group is killed and the call fails
 * with DeadlineExceeded. Cancellation kills the group at once.
 * cwd: absolute and an existing directory, else the call raises (ValueError,
 * FileNotFoundError, NotADirectoryError). env: merged over the worker's environment; None
 * unsets. stdin: absent → /dev/null (unary, stream). max_output: bytes kept (unary) or streamed;
 * the rest is read and dropped (truncated=True) so the command never blocks on a full pipe;
 * at most 64 MiB for unary. Background jobs that keep the output open do not block the call:
 * it returns 100 ms after the shell exits and leaves them running (exec.h). */
#include "agentix-module.h"
#include "buffer.h"
#include "exec.h"
#include "sandbox-args.h"
#include "sandbox-inbox.h"
#include "sandbox-stats.h"
#include "utf8.h"

/* What the hooks of one run share. */
typedef struct SandboxExec {
        agentix_call *call;
        Buffer output; /* unary: the captured output */
} SandboxExec;

static void sandbox_exec_donep(SandboxExec *e) {
        buffer_done(&e->output);
}

static bool exec_is_cancelled(void *userdata) {
        SandboxExec *e = userdata;
        return agentix_call_cancelled(e->call);
}

static int exec_take_inbox(void *userdata, ExecRun *run) {
        SandboxExec *e = userdata;
        return sandbox_inbox_take(e->call, run);
}

static int exec_take_urgent(void *userdata, ExecRun *run) {
        SandboxExec *e = userdata;
        return sandbox_inbox_take_urgent(e->call, run);
}

static bool exec_output_ready(void *userdata) {
        SandboxExec *e = userdata;
        return agentix_call_output_ready(e->call);
}

/* Parse, start and run to the end; the hooks decide what happens to the output. */
static int exec_run_call(SandboxExec *e, const msgpack_object *argv, size_t argc,
                         int (*on_output)(void *, ExecStream, const void *, size_t), ExecResult *ret) {
        _cleanup_(sandbox_exec_args_done) SandboxExecArgs a = {};
        _cleanup_exec_run_ ExecRun *run = NULL;
        ExecStage stage = EXEC_STAGE_SETUP;
        bool bidi = agentix_call_shape(e->call) == AGENTIX_SHAPE_BIDI;
        bool streaming = agentix_call_shape(e->call) != AGENTIX_SHAPE_UNARY;
        int output_fd = -EBADF, r;

        r = sandbox_exec_args_parse(e->call, argv, argc, &a);
        if (r < 0)
                return r;
        r = exec_start(&a.opts, &run, &stage);
        if (r < 0)
                return sandbox_raise_start_error(e->call, &a, stage, r);

        /* Streamed output is paced by the client (the call's output window): the loop stops
         * reading the child's pipes while the window is full, so the child blocks on write —
         * and it never blocks in item_end, so the timeout and signals are served meanwhile. */
        if (streaming) {
                agentix_call_set_output_blocking(e->call, false);
                output_fd = agentix_call_output_fd(e->call);
                if (output_fd < 0)
                        return output_fd;
        }
        if (streaming && a.report_pid) {
                msgpack_packer *pk = agentix_call_item_begin(e->call);

                (void) msgpack_pack_map(pk, 1);
                (void) agentix_pack_kv_int(pk, "pid", exec_run_pid(run));
                r = agentix_call_item_end(e->call);
                if (r < 0)
                        return r;
        }

        return exec_run_loop(run,
                             &(ExecHooks) {
                                     .userdata = e,
                                     .wait_fd = agentix_call_wait_fd(e->call),
                                     .is_cancelled = exec_is_cancelled,
                                     .on_output = on_output,
                                     .output_ready = streaming ? exec_output_ready : NULL,
                                     .output_fd = output_fd,
                                     .on_inbox = bidi ? exec_take_inbox : NULL,
                                     .on_inbox_urgent = bidi ? exec_take_urgent : NULL,
                             },
                             ret);
}

/* ---- unary ---- */

static int collect_output(void *userdata, ExecStream stream, const void *data, size_t size) {
        SandboxExec *e = userdata;
        return buffer_append(&e->output, data, size);
}

/* Pack the captured bytes as a valid UTF-8 str. */
static int pack_output(msgpack_packer *pk, const Buffer *raw, bool truncated) {
        _cleanup_buffer_ Buffer fixed = {};
        const uint8_t *p = buffer_data(raw);
        size_t n = raw->len;
        int r;

        /* A character cut by max_output is our doing: drop it rather than show U+FFFD. */
        if (truncated)
                n = utf8_trim_incomplete_tail(p, n);
        if (utf8_valid_prefix(p, n) != n) {
                r = utf8_append_sanitized(&fixed, p, n);
                if (r < 0)
                        return r;
                p = buffer_data(&fixed);
                n = fixed.len;
        }
        if (msgpack_pack_str(pk, n) < 0 || msgpack_pack_str_body(pk, p, n) < 0)
                return -ENOMEM;
        return 0;
}

static int sandbox_exec_unary(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(sandbox_exec_donep) SandboxExec e = { .call = call };
        ExecResult res;
        msgpack_packer *pk;
        int r;

        r = exec_run_call(&e, argv, argc, collect_output, &res);
        if (r < 0)
                return r;

        pk = agentix_call_result(call);
        if (msgpack_pack_map(pk, 4) < 0)
                return -ENOMEM;
        r = agentix_pack_kv_int(pk, "exit_code", res.exit_code);
        r = r ?: agentix_pack_cstr(pk, "output");
        r = r ?: pack_output(pk, &e.output, res.truncated);
        r = r ?: agentix_pack_kv_bool(pk, "truncated", res.truncated);
        r = r ?: agentix_pack_kv_bool(pk, "timed_out", res.timed_out);
        return r;
}

/* ---- stream and bidi ---- */

static int stream_output(void *userdata, ExecStream stream, const void *data, size_t size) {
        SandboxExec *e = userdata;
        msgpack_packer *pk = agentix_call_item_begin(e->call);

        /* Packing errors poison the packer and come back from item_end(). */
        (void) msgpack_pack_map(pk, 2);
        (void) agentix_pack_kv_str(pk, "stream", exec_stream_to_string(stream));
        (void) agentix_pack_cstr(pk, "data");
        (void) msgpack_pack_bin(pk, size);
        (void) msgpack_pack_bin_body(pk, data, size);
        return agentix_call_item_end(e->call);
}

static int sandbox_exec_stream(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(sandbox_exec_donep) SandboxExec e = { .call = call };
        ExecResult res;
        msgpack_packer *pk;
        int r;

        r = exec_run_call(&e, argv, argc, stream_output, &res);
        if (r < 0)
                return r;

        pk = agentix_call_item_begin(call);
        (void) msgpack_pack_map(pk, 3);
        (void) agentix_pack_kv_int(pk, "exit_code", res.exit_code);
        (void) agentix_pack_kv_bool(pk, "timed_out", res.timed_out);
        (void) agentix_pack_kv_bool(pk, "truncated", res.truncated);
        return agentix_call_item_end(call);
}

#define EXEC_DOC "Run a shell command: the deepagents execute contract (exit_code, output, truncated, timed_out)."
#define EXEC_STREAM_DOC "Run a shell command, streaming {stream, data} items, then {exit_code, timed_out, truncated}."
#define EXEC_BIDI_DOC \
        "Run a shell command interactively: inbox items {stdin}, {eof}, {signal}, {resize}; pty=True for a terminal."

/* echo(value: any = None) -> any: the value back. A liveness and latency probe that does no
 * work, so it runs inline on the worker's reader thread. */
static int sandbox_echo(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return msgpack_pack_object(agentix_call_result(call), argv[0]) < 0 ? -ENOMEM : 0;
}

static const agentix_function sandbox_functions[] = {
        { "echo", AGENTIX_SHAPE_UNARY, "(value: any = None) -> any", sandbox_echo, "return the value (a probe)",
          AGENTIX_FUNCTION_INLINE },
        { "exec", AGENTIX_SHAPE_UNARY, SANDBOX_EXEC_SIGNATURE, sandbox_exec_unary, EXEC_DOC },
        { "exec", AGENTIX_SHAPE_STREAM, SANDBOX_EXEC_SIGNATURE, sandbox_exec_stream, EXEC_STREAM_DOC },
        { "exec", AGENTIX_SHAPE_BIDI, SANDBOX_EXEC_SIGNATURE, sandbox_exec_stream, EXEC_BIDI_DOC },
        { "stats", AGENTIX_SHAPE_UNARY, SANDBOX_STATS_SIGNATURE, sandbox_stats, SANDBOX_STATS_DOC },
        {},
};

const agentix_module agentix_builtin_sandbox = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "sandbox",
        .doc = "Run commands in the sandbox.",
        .functions = sandbox_functions,
};
