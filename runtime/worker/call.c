/* SPDX-License-Identifier: MIT */
/* The call context: the module API's agentix_call_* functions (agentix-module.h) and the
 * worker's side of one call. Everything a function packs goes straight into the frame that
 * carries it (c->out, with the frame header reserved in front), so a result is copied once:
 * by the packer. */
#include <stdarg.h>

#include "mp-check.h"
#include "call.h"
#include "frame.h"
#include "log.h"

/* msgpack write callback for c->pk: append to c->out, refusing to grow past the frame limit. */
static int call_pack_write(void *data, const char *buf, size_t len) {
        agentix_call *c = data;
        int r;

        if (c->pack_error < 0)
                return -1;
        if (len > c->max_frame || c->out.len > c->max_frame - len) {
                c->pack_error = -EMSGSIZE;
                return -1;
        }
        r = buffer_append(&c->out, buf, len);
        if (r < 0) {
                c->pack_error = r;
                return -1;
        }
        return 0;
}

int call_new(const void *payload, size_t size, FrameSink *sink, size_t max_frame, agentix_call **ret) {
        const char *id;
        size_t off = 0, id_len;
        agentix_call *c;
        int r;

        c = malloc(sizeof(*c) + size);
        if (!c)
                return -ENOMEM;
        memset(c, 0, sizeof(*c));
        memcpy(c->payload, payload, size);
        c->payload_size = size;
        c->sink = sink;
        c->max_frame = max_frame;
        msgpack_packer_init(&c->pk, c, call_pack_write);
        msgpack_zone_init(&c->zone, 2048);

        c->output_blocking = true;

        r = inbox_init(&c->inbox, false, 0);
        if (r < 0) {
                msgpack_zone_destroy(&c->zone);
                free(c);
                return r;
        }
        r = out_window_init(&c->out_window, 0, 0);
        if (r < 0) {
                inbox_done(&c->inbox);
                msgpack_zone_destroy(&c->zone);
                free(c);
                return r;
        }

        if (mp_check((const uint8_t *) c->payload, size) < 0 || msgpack_unpack((const char *) c->payload, size, &off, &c->zone, &c->request) != MSGPACK_UNPACK_SUCCESS ||
            off != size || c->request.type != MSGPACK_OBJECT_MAP ||
            mp_map_get_str(&c->request, "call_id", &id, &id_len) < 0 || id_len == 0 || id_len > RPC_CALL_ID_MAX) {
                call_free(c);
                return -EBADMSG;
        }
        memcpy(c->id, id, id_len);
        c->id[id_len] = 0;
        c->id_len = id_len;

        *ret = c;
        return 0;
}

agentix_call *call_free(agentix_call *c) {
        if (!c)
                return NULL;
        inbox_done(&c->inbox);
        out_window_done(&c->out_window);
        buffer_done(&c->out);
        buffer_done(&c->taken_frame);
        free(c->raise_type);
        free(c->raise_message);
        msgpack_zone_destroy(&c->zone);
        free(c);
        return NULL;
}

static int bad_request(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int bad_request(char **ret_error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return -EINVAL;
}

/* The inbox's report of taken items (flow control, see inbox.h): an IN_TAKEN frame
 * {call_id, count}, which the server turns into call:in_ack for the client. */
static void call_report_taken(void *userdata, unsigned n) {
        agentix_call *c = userdata;
        msgpack_packer pk;
        int r;

        r = frame_sink_prepare(&c->taken_frame);
        if (r >= 0) {
                mp_packer_init_buffer(&pk, &c->taken_frame);
                if (msgpack_pack_map(&pk, 2) < 0 || mp_pack_str(&pk, "call_id", STRLEN("call_id")) < 0 ||
                    mp_pack_str(&pk, c->id, c->id_len) < 0 || mp_pack_str(&pk, "count", STRLEN("count")) < 0 ||
                    msgpack_pack_unsigned_int(&pk, n) < 0)
                        r = -ENOMEM;
        }
        if (r < 0) {
                /* The producer will wait for this credit; better a clear failure than a stall. */
                log_oom();
                call_stop(c, CALL_STOP_SHUTDOWN);
                return;
        }
        r = frame_sink_send(c->sink, &c->taken_frame, FRAME_IN_TAKEN);
        if (r < 0)
                /* The server is gone: nobody will send more items either. */
                call_stop(c, CALL_STOP_SHUTDOWN);
}

int call_parse_request(agentix_call *c, char *callable, size_t n, const msgpack_object **ret_args,
                       const msgpack_object **ret_kwargs, char **ret_error) {
        const msgpack_object *shape, *args, *kwargs, *deadline, *v;
        int r;

        if (memchr(c->id, 0, c->id_len))
                return bad_request(ret_error, "call_id must not contain NUL bytes");

        shape = mp_map_get(&c->request, "shape");
        if (mp_str_eq(shape, "unary"))
                c->shape = AGENTIX_SHAPE_UNARY;
        else if (mp_str_eq(shape, "stream"))
                c->shape = AGENTIX_SHAPE_STREAM;
        else if (mp_str_eq(shape, "bidi"))
                c->shape = AGENTIX_SHAPE_BIDI;
        else
                return bad_request(ret_error, "\"shape\" must be \"unary\", \"stream\" or \"bidi\"");

        r = mp_map_copy_str(&c->request, "callable", callable, n);
        if (r == -ENAMETOOLONG)
                return bad_request(ret_error, "\"callable\" is longer than %zu bytes", n - 1);
        if (r < 0)
                return bad_request(ret_error, "\"callable\" must be a string \"module::function\"");

        args = mp_map_get(&c->request, "args");
        if (args && args->type != MSGPACK_OBJECT_ARRAY && args->type != MSGPACK_OBJECT_NIL)
                return bad_request(ret_error, "\"args\" must be an array");
        kwargs = mp_map_get(&c->request, "kwargs");
        if (kwargs && kwargs->type != MSGPACK_OBJECT_MAP && kwargs->type != MSGPACK_OBJECT_NIL)
                return bad_request(ret_error, "\"kwargs\" must be a map");

        deadline = mp_map_get(&c->request, "deadline_ms");
        if (deadline && deadline->type != MSGPACK_OBJECT_NIL) {
                double ms;

                if (deadline->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                        ms = (double) deadline->via.u64;
                else if (deadline->type == MSGPACK_OBJECT_FLOAT64 || deadline->type == MSGPACK_OBJECT_FLOAT32)
                        ms = deadline->via.f64;
                else
                        ms = -1;
                if (!(ms >= 0 && ms <= 1e12)) /* also rejects NaN */
                        return bad_request(ret_error, "\"deadline_ms\" must be a number of milliseconds >= 0");
                /* +1: a deadline of 0 ms has passed already, and 0 means "none" below. */
                c->deadline_usec = now_usec() + (uint64_t) (ms * 1000.0) + 1;
        }

        v = mp_map_get(&c->request, "in_ack");
        if (v && v->type != MSGPACK_OBJECT_BOOLEAN && v->type != MSGPACK_OBJECT_NIL)
                return bad_request(ret_error, "\"in_ack\" must be true or false");
        if (c->shape == AGENTIX_SHAPE_BIDI && v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean)
                inbox_set_taken_handler(&c->inbox, call_report_taken, c);

        c->inbox.closed = c->shape != AGENTIX_SHAPE_BIDI;
        c->inbox.absent = c->inbox.closed;
        c->inbox.deadline_usec = c->deadline_usec;
        /* A unary result is one frame the server must take anyway: no window. Only unary
         * functions run inline on the reader thread — the thread that receives the credit —
         * so that thread never waits for it. */
        c->out_window.size = c->shape == AGENTIX_SHAPE_UNARY ? 0 : FRAME_OUT_WINDOW;
        c->out_window.deadline_usec = c->deadline_usec;
        *ret_args = args;
        *ret_kwargs = kwargs;
        return 0;
}

void call_stop(agentix_call *c, CallStop reason) {
        int expected = CALL_STOP_NONE;

        if (reason != CALL_STOP_DEADLINE && c->deadline_usec > 0 && now_usec() >= c->deadline_usec)
                reason = CALL_STOP_DEADLINE;
        (void) atomic_compare_exchange_strong(&c->stop, &expected, (int) reason);
        inbox_cancel(&c->inbox);
        out_window_stop(&c->out_window);
}

CallStop call_stop_reason(agentix_call *c) {
        CallStop s = (CallStop) atomic_load(&c->stop);

        if (s == CALL_STOP_NONE && c->deadline_usec > 0 && now_usec() >= c->deadline_usec)
                s = CALL_STOP_DEADLINE;
        return s;
}

/* Start the {call_id, value: …} envelope in c->out; the value is packed next. */
static int begin_value_envelope(agentix_call *c) {
        int r;

        r = frame_sink_prepare(&c->out);
        if (r < 0) {
                c->pack_error = r;
                return r;
        }
        r = msgpack_pack_map(&c->pk, 2);
        r = r ?: mp_pack_str(&c->pk, "call_id", STRLEN("call_id"));
        r = r ?: mp_pack_str(&c->pk, c->id, c->id_len);
        r = r ?: mp_pack_str(&c->pk, "value", STRLEN("value"));
        return r < 0 ? c->pack_error ?: -ENOMEM : 0;
}

/* A function used the API against its shape: fail the call with an error that says so. */
static msgpack_packer *misuse(agentix_call *c, const char *what) {
        if (!c->raise_type)
                (void) agentix_call_raise(c, "RuntimeError", "%s called by a %s function", what,
                                          c->shape == AGENTIX_SHAPE_UNARY ? "unary" : "stream/bidi");
        c->pack_error = -EINVAL; /* the packer refuses everything from now on */
        return &c->pk;
}

/* ---- the module API ------------------------------------------------------------------------ */

AGENTIX_EXPORT msgpack_packer *agentix_call_result(agentix_call *call) {
        if (call->shape != AGENTIX_SHAPE_UNARY)
                return misuse(call, "agentix_call_result()");
        if (!call->result_started) {
                call->result_started = true;
                (void) begin_value_envelope(call);
        }
        return &call->pk;
}

AGENTIX_EXPORT msgpack_packer *agentix_call_item_begin(agentix_call *call) {
        if (call->shape == AGENTIX_SHAPE_UNARY)
                return misuse(call, "agentix_call_item_begin()");
        call->item_open = true;
        (void) begin_value_envelope(call);
        return &call->pk;
}

AGENTIX_EXPORT int agentix_call_item_end(agentix_call *call) {
        int r;

        if (call->shape == AGENTIX_SHAPE_UNARY || !call->item_open)
                return -EINVAL;
        call->item_open = false;

        if (call_stop_reason(call) != CALL_STOP_NONE)
                return -ECANCELED;
        if (call->pack_error < 0)
                return call->pack_error; /* stays set: the call ends with this error */

        /* Backpressure: wait while the client has a window's worth of items still to take. The
         * wait ends early on cancellation, the deadline or shutdown; the item is dropped then. */
        r = out_window_reserve(&call->out_window, call->out.len, call->output_blocking);
        if (r < 0)
                return -ECANCELED;

        r = frame_sink_send(call->sink, &call->out, FRAME_ITEM);
        if (r < 0) {
                /* The server is gone: nobody will read more items. */
                call_stop(call, CALL_STOP_SHUTDOWN);
                return -ECANCELED;
        }
        /* Do not keep a big item's buffer around for the small ones after it. */
        if (call->out.cap > 1024 * 1024)
                buffer_done(&call->out);
        return call_stop_reason(call) != CALL_STOP_NONE ? -ECANCELED : 0;
}

AGENTIX_EXPORT bool agentix_call_output_ready(agentix_call *call) {
        return out_window_ready(&call->out_window);
}

AGENTIX_EXPORT int agentix_call_output_fd(agentix_call *call) {
        return out_window_fd(&call->out_window);
}

AGENTIX_EXPORT void agentix_call_set_output_blocking(agentix_call *call, bool blocking) {
        call->output_blocking = blocking;
}

#define BIN_FROM_FD_SLACK 4096u

AGENTIX_EXPORT int agentix_pack_bin_from_fd(msgpack_packer *pk, int fd, size_t size) {
        agentix_call *c = pk->callback == call_pack_write ? pk->data : NULL;
        uint8_t chunk[64 * 1024], *dst;
        size_t done = 0;
        int result = 0;

        if (size > UINT32_MAX)
                return -EMSGSIZE;
        if (msgpack_pack_bin(pk, size) < 0)
                return c && c->pack_error < 0 ? c->pack_error : -ENOMEM;

        if (c) {
                /* Our own packer: read straight into the frame. */
                if (size > c->max_frame || c->out.len > c->max_frame - size)
                        return (c->pack_error = -EMSGSIZE);
                /* With room for what usually follows (the rest of a small map): growing a
                 * buffer of many MiB afterwards would copy all of it again. */
                if (buffer_reserve(&c->out, size + BIN_FROM_FD_SLACK) < 0)
                        return (c->pack_error = -ENOMEM);
        }

        while (done < size) {
                size_t want = c ? size - done : MIN(size - done, sizeof(chunk));
                ssize_t k;

                dst = c ? buffer_data(&c->out) + c->out.len : chunk;
                k = result < 0 ? 0 : read(fd, dst, want);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        /* The file shrank or a read failed: the bin header already promised
                         * `size` bytes, so zero-fill the rest (the frame stays well-formed)
                         * and let the caller report the content as invalid. */
                        if (result == 0)
                                result = k < 0 ? negative_errno() : -EIO;
                        k = (ssize_t) MIN(want, sizeof(chunk));
                        memset(dst, 0, (size_t) k);
                }
                if (c)
                        c->out.len += (size_t) k;
                else if (msgpack_pack_bin_body(pk, chunk, (size_t) k) < 0)
                        return -ENOMEM;
                done += (size_t) k;
        }
        return result;
}

AGENTIX_EXPORT int agentix_call_raisev(agentix_call *call, const char *type, const char *fmt, va_list ap) {
        char *t, *m = NULL;

        t = strdup(type ?: "Error");
        if (fmt && vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        free(call->raise_type);
        free(call->raise_message);
        call->raise_type = t;
        call->raise_message = m;
        /* Any negative value would do: a raised error wins over the return value. */
        return -EREMOTEIO;
}

AGENTIX_EXPORT int agentix_call_raise(agentix_call *call, const char *type, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = agentix_call_raisev(call, type, fmt, ap);
        va_end(ap);
        return r;
}

AGENTIX_EXPORT bool agentix_call_cancelled(agentix_call *call) {
        return call_stop_reason(call) != CALL_STOP_NONE;
}

AGENTIX_EXPORT int agentix_call_inbox_next(agentix_call *call, msgpack_object *ret_item, int timeout_ms) {
        return inbox_next(&call->inbox, ret_item, timeout_ms);
}

AGENTIX_EXPORT int agentix_call_inbox_next_urgent(agentix_call *call, msgpack_object *ret_item) {
        return inbox_next_urgent(&call->inbox, ret_item);
}

AGENTIX_EXPORT int agentix_call_wait_fd(agentix_call *call) {
        return inbox_wait_fd(&call->inbox);
}

AGENTIX_EXPORT const char *agentix_call_id(agentix_call *call) {
        return call->id;
}

AGENTIX_EXPORT agentix_shape agentix_call_shape(agentix_call *call) {
        return call->shape;
}

AGENTIX_EXPORT int64_t agentix_call_remaining_ms(agentix_call *call) {
        unsigned long long now;

        if (call->deadline_usec == 0)
                return -1;
        now = now_usec();
        return now >= call->deadline_usec ? 0 : (int64_t) ((call->deadline_usec - now) / 1000u);
}

/* ---- the end of a call --------------------------------------------------------------------- */

int call_build_error(agentix_call *c, const char *type, const char *message, bool cancelled) {
        int r;

        r = frame_sink_prepare(&c->out);
        if (r < 0)
                return r;
        return rpc_envelope_error(&c->out, c->id, c->id_len,
                                  &(RpcError) { .type = type, .message = message, .cancelled = cancelled });
}

static int build_stop_error(agentix_call *c, CallStop stop) {
        switch (stop) {
        case CALL_STOP_DEADLINE:
                return call_build_error(c, RPC_ERR_DEADLINE, RPC_DEADLINE_MESSAGE, true);
        case CALL_STOP_SHUTDOWN:
                return call_build_error(c, RPC_ERR_CANCELLED, "the worker is shutting down", true);
        case CALL_STOP_OVERFLOW: {
                char m[320];

                snprintf(m, sizeof(m),
                         "the inbox of this bidi call overflowed: more than %u items or %u MiB were waiting "
                         "for the function to read them (or all inboxes of the worker held %u MiB); a client "
                         "with flow control (call:in_ack) waits instead",
                         INBOX_MAX_ITEMS, INBOX_MAX_BYTES / (1024u * 1024u), INBOX_TOTAL_MAX_BYTES / (1024u * 1024u));
                return call_build_error(c, CALL_ERR_INBOX_OVERFLOW, m, false);
        }
        default:
                return call_build_error(c, RPC_ERR_CANCELLED, "the call was cancelled", true);
        }
}

static int build_terminal(agentix_call *c, int r, uint8_t *ret_kind) {
        CallStop stop = call_stop_reason(c);

        *ret_kind = FRAME_ERROR;
        if (stop != CALL_STOP_NONE)
                return build_stop_error(c, stop);
        if (c->raise_type)
                return call_build_error(c, c->raise_type, c->raise_message ?: "", false);
        /* A packing failure explains a failed function better than the errno it passed on. */
        if (c->pack_error == -EMSGSIZE) {
                char m[128];

                snprintf(m, sizeof(m), "the %s is larger than the frame limit of %zu bytes",
                         c->shape == AGENTIX_SHAPE_UNARY ? "result" : "item", c->max_frame);
                return call_build_error(c, RPC_ERR_TOO_LARGE, m, false);
        }
        if (c->pack_error == -ENOMEM)
                return call_build_error(c, "MemoryError", "out of memory while packing the result", false);
        if (r < 0)
                return call_build_error(c, "OSError", strerror(-r), false);
        if (c->pack_error < 0)
                return call_build_error(c, "OSError", strerror(-c->pack_error), false);

        if (c->shape == AGENTIX_SHAPE_UNARY) {
                if (!c->result_started) {
                        (void) agentix_call_result(c);
                        (void) msgpack_pack_nil(&c->pk);
                }
                if (c->pack_error < 0) /* packing nil failed */
                        return build_terminal(c, c->pack_error, ret_kind);
                *ret_kind = FRAME_RESULT;
                return 0;
        }

        *ret_kind = FRAME_END;
        r = frame_sink_prepare(&c->out);
        if (r < 0)
                return r;
        return rpc_envelope_call_id(&c->out, c->id, c->id_len);
}

void agentix_call_let_next_start(agentix_call *c) {
        if (!c->start_pending)
                return;
        c->start_pending = false;
        start_order_pass(c->start_order, c->start_ticket);
}

void call_run(agentix_call *c, uint8_t *ret_kind) {
        int r = 0;

        if (c->start_order) {
                start_order_wait(c->start_order, c->start_ticket);
                c->start_pending = true;
        }
        if (call_stop_reason(c) == CALL_STOP_NONE)
                r = c->function->impl(c, c->argv, c->argc);
        agentix_call_let_next_start(c);

        /* The function is done with its inbox item and wait fd. */
        if (build_terminal(c, r, ret_kind) < 0) {
                /* Not even an error envelope fits in memory: drop the buffer and try once more. */
                buffer_done(&c->out);
                if (call_build_error(c, "MemoryError", "out of memory", false) < 0) {
                        log_error("Out of memory for the terminal frame of call %s, giving up.", c->id);
                        abort();
                }
                *ret_kind = FRAME_ERROR;
        }
}
