/* SPDX-License-Identifier: MIT */
/* The worker's reader thread: confine the process, say READY, then read frames and dispatch
 * them. A CALL is checked, resolved and bound here (so a bad request is answered at once) and
 * then runs on a pool thread; IN/END_IN/CANCEL are routed to the running call by call_id. The
 * reader never waits for a call, so a stuck call blocks nobody. */
#include <poll.h>

#include <malloc.h>
#include <stdatomic.h>

#include "mp-check.h"
#include "call-table.h"
#include "call.h"
#include "frame-sink.h"
#include "frame.h"
#include "log.h"
#include "module-registry.h"
#include "signature.h"
#include "start-order.h"
#include "thread-pool.h"
#include "worker-confine.h"
#include "worker.h"

#define WORKER_MAX_CALLS_DEFAULT 1024u
#define WORKER_MIN_IDLE_THREADS 4u
#define WORKER_IDLE_TIMEOUT_MS 30000u
#define WORKER_THREAD_STACK (4u * 1024u * 1024u)
/* How long SHUTDOWN (or a vanished server) waits for cancelled calls to finish. */
#define WORKER_SHUTDOWN_GRACE_MS 5000u
#define CALLABLE_MAX 256

typedef struct Worker {
        int fd;
        size_t max_frame;
        unsigned max_calls;
        FrameSink sink;
        CallTable calls;
        ThreadPool *pool;
        StartOrder start_order;
        ModuleRegistry *registry;
        FrameReader reader;
        msgpack_zone scratch; /* decoding small control frames */
        Buffer reply;         /* errors the reader thread answers itself */
} Worker;

/* LeakSanitizer stops the world with ptrace, which the seccomp filter denies: when the filter
 * is on, leak checking in this process cannot work, so turn it off rather than fail at exit. */
__attribute__((visibility("default"))) int __lsan_is_turned_off(void);
__attribute__((visibility("default"))) int __lsan_is_turned_off(void) {
        return worker_seccomp_active();
}

static int reply_error(Worker *w, const char *id, size_t id_len, const char *type, const char *message) {
        int r;

        r = frame_sink_prepare(&w->reply);
        if (r < 0)
                return r;
        r = rpc_envelope_error(&w->reply, id, id_len, &(RpcError) { .type = type, .message = message });
        if (r < 0)
                return r;
        r = frame_sink_send(&w->sink, &w->reply, FRAME_ERROR);
        if (w->reply.cap > 64 * 1024)
                buffer_done(&w->reply);
        return r;
}

static int send_ready(Worker *w) {
        msgpack_packer pk;
        int r;

        r = frame_sink_prepare(&w->reply);
        if (r < 0)
                return r;
        mp_packer_init_buffer(&pk, &w->reply);
        if (msgpack_pack_map(&pk, 1) < 0 || mp_pack_cstr(&pk, "pid") < 0 || msgpack_pack_int64(&pk, getpid()) < 0)
                return -ENOMEM;
        return frame_sink_send(&w->sink, &w->reply, FRAME_READY);
}

/* ---- calls --------------------------------------------------------------------------------- */

/* An idle worker gives back the memory its calls used (a big result frame, thread arenas):
 * at most once a second, when no call is running. */
static void worker_maybe_trim(Worker *w) {
        static _Atomic uint64_t last_trim = 0;
        uint64_t now, last;
        size_t running;

        call_table_lock(&w->calls);
        running = w->calls.n_calls;
        call_table_unlock(&w->calls);
        if (running > 0)
                return;
        now = now_usec();
        last = last_trim;
        if (now - last < 1000000 || !atomic_compare_exchange_strong(&last_trim, &last, now))
                return;
        (void) malloc_trim(0);
}

static void run_call(void *userdata) {
        agentix_call *c = userdata;
        Worker *w = c->owner;
        uint8_t kind;
        int r;

        call_run(c, &kind);

        /* Leave the table first: once the server sees the terminal frame, the slot and the
         * call_id are free again, and must be so here too. */
        call_table_remove(&w->calls, c);
        r = frame_sink_send(&w->sink, &c->out, kind);
        if (r < 0)
                log_debug_errno(r, "Failed to send the terminal frame of call %s: %m", c->id);
        call_free(c);
        worker_maybe_trim(w);
}

static int resolve_error_type(int r, const char **ret_type) {
        switch (r) {
        case -ENOENT:
        case -ELIBBAD:
                *ret_type = RPC_ERR_NO_SUCH_CALLABLE;
                return 0;
        case -EINVAL:
        case -EPROTOTYPE:
                *ret_type = RPC_ERR_BAD_REQUEST;
                return 0;
        default:
                return r;
        }
}

static int dispatch_call(Worker *w, const uint8_t *payload, size_t size) {
        const msgpack_object *args, *kwargs;
        const ResolvedCallable *rc;
        _cleanup_free_ char *error = NULL;
        char callable[CALLABLE_MAX];
        const char *type;
        agentix_call *c;
        bool duplicate, full;
        int r;

        r = call_new(payload, size, &w->sink, w->max_frame, &c);
        if (r == -EBADMSG) {
                /* Answer if there is a call_id to answer to, however odd. */
                msgpack_object root;
                const char *id;
                size_t id_len, off = 0;

                msgpack_zone_clear(&w->scratch);
                if (msgpack_unpack((const char *) payload, size, &off, &w->scratch, &root) == MSGPACK_UNPACK_SUCCESS &&
                    mp_map_get_str(&root, "call_id", &id, &id_len) >= 0 && id_len > 0)
                        return reply_error(w, id, id_len, RPC_ERR_BAD_REQUEST,
                                           id_len > RPC_CALL_ID_MAX ? "call_id is longer than 128 bytes"
                                                                    : "CALL must be one msgpack map");
                log_warning("Dropping a CALL frame without a call_id (%zu bytes).", size);
                return 0;
        }
        if (r < 0)
                return r;

        r = call_parse_request(c, callable, sizeof(callable), &args, &kwargs, &error);
        if (r < 0) {
                r = reply_error(w, c->id, c->id_len, RPC_ERR_BAD_REQUEST, strna(error));
                call_free(c);
                return r;
        }

        r = module_registry_resolve(w->registry, callable, c->shape, &rc, &error);
        if (r < 0) {
                if (resolve_error_type(r, &type) < 0) {
                        log_error_errno(r, "Failed to resolve %s: %m", callable);
                        type = "InternalError";
                }
                if (!error && asprintf(&error, "cannot resolve %s: %s", callable, strerror(-r)) < 0)
                        error = NULL;
                r = reply_error(w, c->id, c->id_len, type, strna(error));
                call_free(c);
                return r;
        }

        r = signature_bind(rc->signature, rc->function->name, args, kwargs, &c->zone, &c->argv, &error);
        if (r < 0) {
                r = reply_error(w, c->id, c->id_len, r == -EINVAL ? RPC_ERR_ARGUMENT : "InternalError",
                                error ?: strerror(-r));
                call_free(c);
                return r;
        }
        c->owner = w;
        c->function = rc->function;
        c->argc = signature_n_params(rc->signature);

        call_table_lock(&w->calls);
        duplicate = call_table_find_locked(&w->calls, c->id, c->id_len);
        full = !duplicate && w->calls.n_calls >= w->max_calls;
        if (!duplicate && !full)
                call_table_add_locked(&w->calls, c);
        call_table_unlock(&w->calls);

        if (duplicate || full) {
                char m[128];

                if (full)
                        snprintf(m, sizeof(m), "this worker runs at most %u calls at a time", w->max_calls);
                r = reply_error(w, c->id, c->id_len, full ? RPC_ERR_TOO_MANY_CALLS : RPC_ERR_BAD_REQUEST,
                                full ? m : "a call with this call_id is already running");
                call_free(c);
                return r;
        }

        /* Quick, non-blocking functions run right here: no thread handoff either way. */
        if ((rc->function->flags & AGENTIX_FUNCTION_INLINE) && c->shape == AGENTIX_SHAPE_UNARY) {
                run_call(c);
                return 0;
        }

        if (rc->function->flags & AGENTIX_FUNCTION_ORDERED) {
                c->start_order = &w->start_order;
                c->start_ticket = start_order_take(&w->start_order);
        }
        r = thread_pool_submit(w->pool, run_call, c);
        if (r < 0) {
                if (c->start_order)
                        start_order_return(&w->start_order, c->start_ticket);
                call_table_remove(&w->calls, c);
                log_error_errno(r, "Failed to start a thread for call %s: %m", c->id);
                r = reply_error(w, c->id, c->id_len, RPC_ERR_TOO_MANY_CALLS, "the worker cannot start another thread");
                call_free(c);
                return r;
        }
        return 0;
}

static int dispatch_in(Worker *w, const uint8_t *payload, size_t size) {
        InboxItem *item;
        agentix_call *c;
        int r;

        r = inbox_item_new(payload, size, &item);
        if (r == -EBADMSG) {
                log_warning("Dropping a malformed IN frame (%zu bytes).", size);
                return 0;
        }
        if (r < 0)
                return r;

        call_table_lock(&w->calls);
        c = call_table_find_locked(&w->calls, item->call_id, item->call_id_len);
        r = c ? inbox_push(&c->inbox, item) : -ESRCH;
        if (r == -ENOBUFS)
                call_stop(c, CALL_STOP_OVERFLOW);
        call_table_unlock(&w->calls);

        if (r < 0) {
                /* Unknown or finished call, or an inbox that is closed: nobody wants this item. */
                if (r != -ENOBUFS)
                        log_debug_errno(r, "Dropping an IN item for call %.*s: %m", (int) item->call_id_len,
                                        item->call_id);
                inbox_item_free(item);
        }
        return 0;
}

static CallStop cancel_reason(const msgpack_object *root) {
        const msgpack_object *reason = mp_map_get(root, "reason");

        if (mp_str_eq(reason, "deadline"))
                return CALL_STOP_DEADLINE;
        if (mp_str_eq(reason, "shutdown"))
                return CALL_STOP_SHUTDOWN;
        return CALL_STOP_CANCELLED;
}

/* END_IN and CANCEL: {call_id, reason?} */
static int dispatch_control(Worker *w, uint8_t kind, const uint8_t *payload, size_t size) {
        msgpack_object root;
        agentix_call *c;
        const char *id;
        size_t id_len, off = 0;

        msgpack_zone_clear(&w->scratch);
        if (mp_check((const uint8_t *) payload, size) < 0 || msgpack_unpack((const char *) payload, size, &off, &w->scratch, &root) != MSGPACK_UNPACK_SUCCESS ||
            mp_map_get_str(&root, "call_id", &id, &id_len) < 0) {
                log_warning("Dropping a malformed '%c' frame (%zu bytes).", kind, size);
                return 0;
        }

        call_table_lock(&w->calls);
        c = call_table_find_locked(&w->calls, id, id_len);
        if (c && kind == FRAME_END_IN)
                inbox_close(&c->inbox);
        else if (c)
                call_stop(c, cancel_reason(&root));
        call_table_unlock(&w->calls);
        return 0;
}

/* OUT_CREDIT {call_id, bytes}: the server passed `bytes` more of the call's items on to the
 * client, so the function may send that much more. */
static int dispatch_credit(Worker *w, const uint8_t *payload, size_t size) {
        msgpack_object root;
        agentix_call *c;
        const char *id;
        size_t id_len, off = 0;
        int64_t bytes;

        msgpack_zone_clear(&w->scratch);
        if (mp_check((const uint8_t *) payload, size) < 0 ||
            msgpack_unpack((const char *) payload, size, &off, &w->scratch, &root) != MSGPACK_UNPACK_SUCCESS ||
            mp_map_get_str(&root, "call_id", &id, &id_len) < 0 || mp_map_get_int(&root, "bytes", &bytes) < 0 ||
            bytes < 0) {
                log_warning("Dropping a malformed OUT_CREDIT frame (%zu bytes).", size);
                return 0;
        }

        call_table_lock(&w->calls);
        c = call_table_find_locked(&w->calls, id, id_len);
        if (c)
                out_window_credit(&c->out_window, (uint64_t) bytes);
        call_table_unlock(&w->calls);
        return 0;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void stop_call(agentix_call *c, void *userdata) {
        call_stop(c, CALL_STOP_SHUTDOWN);
}

/* 1: SHUTDOWN or EOF, 0: keep going, <0: a broken stream. */
static int process_frames(Worker *w) {
        for (;;) {
                const uint8_t *payload;
                size_t size;
                uint8_t kind;
                int r;

                r = frame_reader_peek(&w->reader, &kind, &payload, &size);
                if (r == -EMSGSIZE)
                        return log_error_errno(r, "Received a frame larger than %zu bytes, giving up on the stream.",
                                               w->max_frame);
                if (r < 0)
                        return log_error_errno(r, "Received a malformed frame, giving up on the stream: %m");
                if (r == 0)
                        return 0;

                switch (kind) {
                case FRAME_CALL:
                        r = dispatch_call(w, payload, size);
                        break;
                case FRAME_IN:
                        r = dispatch_in(w, payload, size);
                        break;
                case FRAME_END_IN:
                case FRAME_CANCEL:
                        r = dispatch_control(w, kind, payload, size);
                        break;
                case FRAME_OUT_CREDIT:
                        r = dispatch_credit(w, payload, size);
                        break;
                case FRAME_SHUTDOWN:
                        frame_reader_consume(&w->reader);
                        log_debug("SHUTDOWN received.");
                        return 1;
                default:
                        log_warning("Ignoring a '%c' frame: not for the worker.", kind);
                        r = 0;
                }
                frame_reader_consume(&w->reader);
                if (r == -EPIPE)
                        return 1; /* the server is gone; the read side will see EOF too */
                if (r < 0)
                        log_warning_errno(r, "Failed to handle a '%c' frame, continuing: %m", kind);
        }
}

static int serve(Worker *w) {
        for (;;) {
                ssize_t k;
                int r;

                k = frame_reader_fill(&w->reader, w->fd);
                if (k == -EAGAIN)
                        continue; /* EINTR */
                if (k < 0)
                        return log_error_errno((int) k, "Failed to read from the frame socket: %m");
                if (k == 0) {
                        log_debug("The server closed the frame socket.");
                        return 0;
                }
                r = process_frames(w);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
}

static void worker_done(Worker *w, bool calls_finished) {
        if (!calls_finished) {
                /* Threads still run calls and use all of this: leave it for exit() to reclaim. */
                log_warning("%zu call(s) did not stop within %u ms, exiting anyway.", w->calls.n_calls,
                            WORKER_SHUTDOWN_GRACE_MS);
                return;
        }
        if (thread_pool_free(w->pool, 1000) < 0)
                return;
        module_builtins_shutdown();
        module_registry_free(w->registry);
        frame_reader_done(&w->reader);
        buffer_done(&w->reply);
        msgpack_zone_destroy(&w->scratch);
        call_table_done(&w->calls);
        frame_sink_done(&w->sink);
        safe_close(w->fd);
}

int worker_main(int frame_fd, const WorkerOptions *opts) {
        static const WorkerOptions defaults = {};
        const char *module_dir;
        Worker w = { .start_order = START_ORDER_INIT };
        bool finished;
        int r;

        if (!opts)
                opts = &defaults;
        log_set_prefix("agentix-worker");
        log_parse_env();

        /* Calls run on many threads; one arena per thread would keep megabytes resident. */
        (void) mallopt(M_ARENA_MAX, 2);

        w.fd = worker_confine(frame_fd, opts);
        if (w.fd < 0)
                return EXIT_FAILURE;

        w.max_frame = opts->max_frame ?: FRAME_DEFAULT_MAX;
        w.max_calls = opts->max_calls ?: WORKER_MAX_CALLS_DEFAULT;
        w.reader.max_frame = w.max_frame;
        module_dir = opts->module_dir ?: getenv("AGENTIX_MODULE_DIR") ?: AGENTIX_MODULE_DIR_DEFAULT;

        r = frame_sink_init(&w.sink, w.fd);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the frame writer: %m"), EXIT_FAILURE;
        r = call_table_init(&w.calls, w.max_calls);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the call table: %m"), EXIT_FAILURE;
        msgpack_zone_init(&w.scratch, 1024);
        r = module_registry_new(module_dir, &w.registry);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the module registry for %s: %m", module_dir), EXIT_FAILURE;
        r = thread_pool_new(&(ThreadPoolConfig) {
                                    .max_threads = w.max_calls,
                                    .min_idle = MIN(WORKER_MIN_IDLE_THREADS, w.max_calls),
                                    .idle_timeout_ms = WORKER_IDLE_TIMEOUT_MS,
                                    .stack_size = WORKER_THREAD_STACK,
                            },
                            &w.pool);
        if (r < 0)
                return log_error_errno(r, "Failed to start the call threads: %m"), EXIT_FAILURE;

        r = send_ready(&w);
        if (r < 0)
                return log_error_errno(r, "Failed to send READY: %m"), EXIT_FAILURE;
        log_debug("Worker %d ready, modules from %s.", (int) getpid(), module_dir);

        r = serve(&w);

        /* SHUTDOWN, EOF or a broken stream: every call ends now (each still sends its terminal
         * frame if the server listens). */
        call_table_foreach(&w.calls, stop_call, NULL);
        finished = call_table_wait_empty(&w.calls, WORKER_SHUTDOWN_GRACE_MS);
        worker_done(&w, finished);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
