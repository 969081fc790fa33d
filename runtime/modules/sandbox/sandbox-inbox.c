/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "sandbox-inbox.h"
#include "sandbox-args.h"
#include "signal-name.h"

static bool key_is(const msgpack_object *k, const char *name) {
        size_t n = strlen(name);

        return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0;
}

static int item_signal(agentix_call *call, const msgpack_object *o) {
        char name[32];

        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                return o->via.u64 > INT32_MAX ? -EINVAL : signal_from_number((long long) o->via.u64);
        if (o->type == MSGPACK_OBJECT_STR && o->via.str.size < sizeof(name)) {
                memcpy(name, o->via.str.ptr, o->via.str.size);
                name[o->via.str.size] = 0;
                return signal_from_string(name);
        }
        return -EINVAL;
}

static bool item_size(const msgpack_object *o, unsigned *ret) {
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 == 0 || o->via.u64 > 65535)
                return false;
        *ret = (unsigned) o->via.u64;
        return true;
}

static int apply_item(agentix_call *call, ExecRun *run, const msgpack_object *item) {
        const msgpack_object *in = NULL, *eof = NULL, *sig = NULL, *resize = NULL;
        unsigned rows, cols;
        int signo = 0, r;

        if (item->type != MSGPACK_OBJECT_MAP || item->via.map.size == 0)
                return agentix_call_raise(call, "ValueError",
                                          "exec() inbox items must be maps with stdin, eof, signal or resize");

        for (uint32_t i = 0; i < item->via.map.size; i++) {
                const msgpack_object *k = &item->via.map.ptr[i].key, *v = &item->via.map.ptr[i].val;

                if (key_is(k, "stdin"))
                        in = v;
                else if (key_is(k, "eof"))
                        eof = v;
                else if (key_is(k, "signal"))
                        sig = v;
                else if (key_is(k, "resize"))
                        resize = v;
                else if (k->type == MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "ValueError",
                                                  "exec() inbox item has an unknown key '%.*s' (expected stdin, eof, signal or resize)",
                                                  (int) MIN(k->via.str.size, 64u), k->via.str.ptr);
                else
                        return agentix_call_raise(call, "ValueError", "exec() inbox item keys must be str");
        }

        /* Check everything before doing anything, so a bad item has no effect. */
        if (in && in->type != MSGPACK_OBJECT_STR && in->type != MSGPACK_OBJECT_BIN)
                return agentix_call_raise(call, "TypeError", "exec() inbox item 'stdin' must be str or bytes");
        if (eof && eof->type != MSGPACK_OBJECT_BOOLEAN)
                return agentix_call_raise(call, "TypeError", "exec() inbox item 'eof' must be bool");
        if (sig) {
                signo = item_signal(call, sig);
                if (signo < 0)
                        return agentix_call_raise(call, "ValueError",
                                                  "exec() inbox item 'signal' must be a signal number or name like \"INT\" or \"SIGTERM\"");
        }
        if (resize) {
                if (resize->type != MSGPACK_OBJECT_ARRAY || resize->via.array.size != 2 ||
                    !item_size(&resize->via.array.ptr[0], &rows) || !item_size(&resize->via.array.ptr[1], &cols))
                        return agentix_call_raise(call, "ValueError",
                                                  "exec() inbox item 'resize' must be [rows, cols] with 1 <= rows, cols <= 65535");
                r = exec_run_resize(run, rows, cols);
                if (r == -ENOTTY)
                        return agentix_call_raise(call, "ValueError", "exec() inbox item 'resize' needs pty=True");
                if (r < 0)
                        return agentix_call_raise(call, "OSError", "Failed to resize the terminal: %s", strerror(-r));
        }

        if (in) {
                r = exec_run_write_stdin(run,
                                         in->type == MSGPACK_OBJECT_STR ? in->via.str.ptr : in->via.bin.ptr,
                                         in->type == MSGPACK_OBJECT_STR ? in->via.str.size : in->via.bin.size);
                if (r < 0)
                        return r;
        }
        if (eof && eof->via.boolean)
                exec_run_close_stdin(run);
        if (sig) {
                r = exec_run_signal(run, signo);
                /* ESRCH: the group is gone already; the exit status will tell. */
                if (r < 0 && r != -ESRCH)
                        return agentix_call_raise(call, sandbox_errno_type(r), "Failed to send signal %d: %s",
                                                  signo, strerror(-r));
        }
        return EXEC_INBOX_ITEM;
}

int sandbox_inbox_take(void *userdata, ExecRun *run) {
        agentix_call *call = userdata;
        msgpack_object item;
        int r;

        r = agentix_call_inbox_next(call, &item, 0);
        if (r == -ETIMEDOUT)
                return EXEC_INBOX_EMPTY;
        if (r == 0)
                return EXEC_INBOX_CLOSED;
        if (r < 0)
                return r; /* -ECANCELED */
        return apply_item(call, run, &item);
}

int sandbox_inbox_take_urgent(void *userdata, ExecRun *run) {
        agentix_call *call = userdata;
        msgpack_object item;
        int r;

        r = agentix_call_inbox_next_urgent(call, &item);
        if (r == -ETIMEDOUT)
                return EXEC_INBOX_EMPTY;
        if (r < 0)
                return r; /* -ECANCELED */
        return apply_item(call, run, &item);
}
