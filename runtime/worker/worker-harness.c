/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <jansson.h>

#include "envelope.h"
#include "log.h"
#include "worker-harness.h"

/* Frames of other calls read while a test waited for one call. Bounded only by the test. */
typedef struct StashedFrame {
        struct StashedFrame *next;
        WorkerFrame frame;
} StashedFrame;

struct WorkerHarness {
        pid_t pid;
        int fd;
        bool exited;
        int status;
        FrameReader reader;
        StashedFrame *stash, **stash_tail;
        bool no_auto_credit;
};

void worker_frame_done(WorkerFrame *f) {
        if (!f)
                return;
        if (f->payload)
                msgpack_zone_destroy(&f->zone);
        free(f->payload);
        free(f->call_id);
        free(f->value_json);
        free(f->error_type);
        free(f->error_message);
        *f = (WorkerFrame) {};
}

pid_t worker_harness_pid(WorkerHarness *h) {
        return h->pid;
}

int worker_harness_fd(WorkerHarness *h) {
        return h->fd;
}

int worker_harness_start_full(const WorkerOptions *opts, void (*child_setup)(void *userdata), void *userdata,
                              WorkerHarness **ret) {
        _cleanup_free_ WorkerHarness *h = NULL;
        int pair[2];
        pid_t pid;

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();

        /* Do not let the child flush stdio buffers it inherited: they would print twice. */
        fflush(NULL);

        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(pair[0]);
                safe_close(pair[1]);
                return r;
        }
        if (pid == 0) {
                WorkerOptions o = opts ? *opts : (WorkerOptions) {};

                safe_close(pair[0]);
                if (child_setup)
                        child_setup(userdata);
                /* exit(), not _exit(): LeakSanitizer checks the worker at exit when it may. */
                exit(worker_main(pair[1], &o));
        }

        safe_close(pair[1]);
        h->pid = pid;
        h->fd = pair[0];
        h->stash_tail = &h->stash;
        *ret = TAKE_PTR(h);
        return 0;
}

int worker_harness_start(const WorkerOptions *opts, WorkerHarness **ret) {
        return worker_harness_start_full(opts, NULL, NULL, ret);
}

WorkerHarness *worker_harness_free(WorkerHarness *h) {
        if (!h)
                return NULL;
        if (!h->exited && h->pid > 0) {
                (void) kill(h->pid, SIGKILL);
                (void) waitpid(h->pid, NULL, 0);
        }
        safe_close(h->fd);
        frame_reader_done(&h->reader);
        while (h->stash) {
                StashedFrame *s = h->stash;
                h->stash = s->next;
                worker_frame_done(&s->frame);
                free(s);
        }
        free(h);
        return NULL;
}

/* ---- JSON ⇄ msgpack ------------------------------------------------------------------------ */

static int pack_json(msgpack_packer *pk, json_t *j) {
        int r = 0;

        switch (json_typeof(j)) {
        case JSON_NULL:
                return msgpack_pack_nil(pk);
        case JSON_TRUE:
                return msgpack_pack_true(pk);
        case JSON_FALSE:
                return msgpack_pack_false(pk);
        case JSON_INTEGER:
                return msgpack_pack_int64(pk, json_integer_value(j));
        case JSON_REAL:
                return msgpack_pack_double(pk, json_real_value(j));
        case JSON_STRING:
                return mp_pack_str(pk, json_string_value(j), json_string_length(j));
        case JSON_ARRAY: {
                size_t i;
                json_t *e;

                r |= msgpack_pack_array(pk, json_array_size(j));
                json_array_foreach(j, i, e)
                        r |= pack_json(pk, e);
                return r;
        }
        case JSON_OBJECT: {
                json_t *bin = json_object_get(j, "$bin");
                const char *k;
                json_t *v;

                if (json_object_size(j) == 1 && json_is_string(bin)) {
                        r |= msgpack_pack_bin(pk, json_string_length(bin));
                        r |= msgpack_pack_bin_body(pk, json_string_value(bin), json_string_length(bin));
                        return r;
                }
                r |= msgpack_pack_map(pk, json_object_size(j));
                json_object_foreach(j, k, v) {
                        r |= mp_pack_cstr(pk, k);
                        r |= pack_json(pk, v);
                }
                return r;
        }
        }
        return -1;
}

int worker_json_to_msgpack(const char *json, msgpack_packer *pk, char **ret_error) {
        json_error_t err;
        json_t *j;
        int r;

        j = json_loads(json, JSON_DECODE_ANY, &err);
        if (!j) {
                if (ret_error && asprintf(ret_error, "bad JSON at %d:%d: %s", err.line, err.column, err.text) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        r = pack_json(pk, j);
        json_decref(j);
        return r < 0 ? -ENOMEM : 0;
}

static bool utf8_clean(const char *p, size_t n) {
        json_t *s;

        if (memchr(p, 0, n))
                return false;
        s = json_stringn(p, n);
        if (!s)
                return false;
        json_decref(s);
        return true;
}

static json_t *json_from_object(const msgpack_object *o) {
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return json_null();
        case MSGPACK_OBJECT_BOOLEAN:
                return json_boolean(o->via.boolean);
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                if (o->via.u64 > INT64_MAX)
                        return json_real((double) o->via.u64);
                return json_integer((json_int_t) o->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return json_integer(o->via.i64);
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                return json_real(o->via.f64);
        case MSGPACK_OBJECT_STR:
                return json_stringn(o->via.str.ptr, o->via.str.size) ?:
                       json_pack("{s:I}", "$str_invalid_size", (json_int_t) o->via.str.size);
        case MSGPACK_OBJECT_BIN:
                if (utf8_clean(o->via.bin.ptr, o->via.bin.size))
                        return json_pack("{s:s%}", "$bin", o->via.bin.ptr, (size_t) o->via.bin.size);
                return json_pack("{s:I}", "$bin_size", (json_int_t) o->via.bin.size);
        case MSGPACK_OBJECT_ARRAY: {
                json_t *a = json_array();

                for (uint32_t i = 0; a && i < o->via.array.size; i++)
                        if (json_array_append_new(a, json_from_object(&o->via.array.ptr[i])) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                return a;
        }
        case MSGPACK_OBJECT_MAP: {
                json_t *m = json_object();

                for (uint32_t i = 0; m && i < o->via.map.size; i++) {
                        const msgpack_object *k = &o->via.map.ptr[i].key;
                        _cleanup_free_ char *key = NULL;

                        if (k->type == MSGPACK_OBJECT_STR)
                                key = strndup(k->via.str.ptr, k->via.str.size);
                        else
                                key = worker_json_from_object(k);
                        if (!key || json_object_set_new(m, key, json_from_object(&o->via.map.ptr[i].val)) < 0) {
                                json_decref(m);
                                return NULL;
                        }
                }
                return m;
        }
        default:
                return json_pack("{s:i}", "$ext", o->via.ext.type);
        }
}

char *worker_json_from_object(const msgpack_object *o) {
        json_t *j = json_from_object(o);
        char *s;

        if (!j)
                return NULL;
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(j);
        return s;
}

/* ---- sending ------------------------------------------------------------------------------- */

int worker_harness_send_raw(WorkerHarness *h, uint8_t kind, const void *payload, size_t size) {
        uint8_t hdr[FRAME_HEADER_SIZE];
        int r;

        /* One send per part with MSG_NOSIGNAL: a dead worker gives -EPIPE, not SIGPIPE. */
        frame_header_write(hdr, kind, size);
        r = send(h->fd, hdr, sizeof(hdr), MSG_NOSIGNAL) < 0 ? negative_errno() : 0;
        for (size_t done = 0; r >= 0 && done < size;) {
                ssize_t k = send(h->fd, (const uint8_t *) payload + done, size - done, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        break;
                }
                done += (size_t) k;
        }
        return r;
}

static int send_buffer(WorkerHarness *h, uint8_t kind, Buffer *b) {
        return worker_harness_send_raw(h, kind, buffer_data(b), b->len);
}

static int pack_json_or_default(msgpack_packer *pk, const char *json, bool array) {
        _cleanup_free_ char *err = NULL;
        int r;

        if (!json)
                return array ? msgpack_pack_array(pk, 0) : msgpack_pack_map(pk, 0);
        r = worker_json_to_msgpack(json, pk, &err);
        if (r < 0)
                log_error("worker-harness: %s: %s", json, strna(err));
        return r;
}

static int pack_call_head(msgpack_packer *pk, const char *call_id, const char *callable, const char *shape,
                          int64_t deadline_ms, bool in_ack) {
        int r = 0;

        r |= msgpack_pack_map(pk, 5 + (deadline_ms >= 0) + in_ack);
        r |= mp_pack_cstr(pk, "call_id");
        r |= mp_pack_cstr(pk, call_id);
        r |= mp_pack_cstr(pk, "callable");
        r |= mp_pack_cstr(pk, callable);
        r |= mp_pack_cstr(pk, "shape");
        r |= mp_pack_cstr(pk, shape);
        if (deadline_ms >= 0) {
                r |= mp_pack_cstr(pk, "deadline_ms");
                r |= msgpack_pack_int64(pk, deadline_ms);
        }
        if (in_ack) {
                r |= mp_pack_cstr(pk, "in_ack");
                r |= msgpack_pack_true(pk);
        }
        return r ? -ENOMEM : 0;
}

static int call_json(WorkerHarness *h, const char *call_id, const char *callable, const char *shape,
                     const char *args_json, const char *kwargs_json, int64_t deadline_ms, bool in_ack) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        int r;

        mp_packer_init_buffer(&pk, &b);
        r = pack_call_head(&pk, call_id, callable, shape, deadline_ms, in_ack);
        if (r < 0)
                return r;
        if (mp_pack_cstr(&pk, "args") < 0 || pack_json_or_default(&pk, args_json, true) < 0 ||
            mp_pack_cstr(&pk, "kwargs") < 0 || pack_json_or_default(&pk, kwargs_json, false) < 0)
                return -EINVAL;
        return send_buffer(h, FRAME_CALL, &b);
}

int worker_harness_call(WorkerHarness *h, const char *call_id, const char *callable, const char *shape,
                        const char *args_json, const char *kwargs_json, int64_t deadline_ms) {
        return call_json(h, call_id, callable, shape, args_json, kwargs_json, deadline_ms, false);
}

int worker_harness_call_in_ack(WorkerHarness *h, const char *call_id, const char *callable, const char *args_json,
                               const char *kwargs_json) {
        return call_json(h, call_id, callable, "bidi", args_json, kwargs_json, -1, true);
}

int worker_harness_call_mp(WorkerHarness *h, const char *call_id, const char *callable, const char *shape,
                           const void *args, size_t args_size, const void *kwargs, size_t kwargs_size,
                           int64_t deadline_ms) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        int r;

        mp_packer_init_buffer(&pk, &b);
        r = pack_call_head(&pk, call_id, callable, shape, deadline_ms, false);
        if (r < 0)
                return r;
        r = mp_pack_cstr(&pk, "args");
        r = r ?: (args ? buffer_append(&b, args, args_size) : msgpack_pack_array(&pk, 0));
        r = r ?: mp_pack_cstr(&pk, "kwargs");
        r = r ?: (kwargs ? buffer_append(&b, kwargs, kwargs_size) : msgpack_pack_map(&pk, 0));
        if (r)
                return -ENOMEM;
        return send_buffer(h, FRAME_CALL, &b);
}

static int send_in_mp(WorkerHarness *h, const char *call_id, const void *item, size_t item_size, bool urgent) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &b);
        r |= msgpack_pack_map(&pk, urgent ? 3 : 2);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, call_id);
        if (urgent) {
                r |= mp_pack_cstr(&pk, "urgent");
                r |= msgpack_pack_true(&pk);
        }
        r |= mp_pack_cstr(&pk, "item");
        r |= buffer_append(&b, item, item_size);
        if (r)
                return -ENOMEM;
        return send_buffer(h, FRAME_IN, &b);
}

int worker_harness_send_in_mp(WorkerHarness *h, const char *call_id, const void *item, size_t item_size) {
        return send_in_mp(h, call_id, item, item_size, false);
}

int worker_harness_send_in_urgent(WorkerHarness *h, const char *call_id, const char *item_json) {
        _cleanup_buffer_ Buffer item = {};
        msgpack_packer pk;
        int r;

        mp_packer_init_buffer(&pk, &item);
        r = pack_json_or_default(&pk, item_json ?: "null", false);
        if (r < 0)
                return r;
        return send_in_mp(h, call_id, buffer_data(&item), item.len, true);
}

int worker_harness_send_in(WorkerHarness *h, const char *call_id, const char *item_json) {
        _cleanup_buffer_ Buffer item = {};
        msgpack_packer pk;
        int r;

        mp_packer_init_buffer(&pk, &item);
        r = pack_json_or_default(&pk, item_json ?: "null", false);
        if (r < 0)
                return r;
        return worker_harness_send_in_mp(h, call_id, buffer_data(&item), item.len);
}

int worker_harness_end_in(WorkerHarness *h, const char *call_id) {
        _cleanup_buffer_ Buffer b = {};
        int r;

        r = rpc_envelope_call_id(&b, call_id, strlen(call_id));
        if (r < 0)
                return r;
        return send_buffer(h, FRAME_END_IN, &b);
}

int worker_harness_cancel(WorkerHarness *h, const char *call_id, const char *reason) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &b);
        r |= msgpack_pack_map(&pk, reason ? 2 : 1);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, call_id);
        if (reason) {
                r |= mp_pack_cstr(&pk, "reason");
                r |= mp_pack_cstr(&pk, reason);
        }
        if (r)
                return -ENOMEM;
        return send_buffer(h, FRAME_CANCEL, &b);
}

int worker_harness_credit(WorkerHarness *h, const char *call_id, uint64_t bytes) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &b);
        r |= msgpack_pack_map(&pk, 2);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, call_id);
        r |= mp_pack_cstr(&pk, "bytes");
        r |= msgpack_pack_uint64(&pk, bytes);
        if (r)
                return -ENOMEM;
        return send_buffer(h, FRAME_OUT_CREDIT, &b);
}

void worker_harness_set_auto_credit(WorkerHarness *h, bool on) {
        h->no_auto_credit = !on;
}

int worker_harness_shutdown_frame(WorkerHarness *h) {
        static const uint8_t empty_map = 0x80;

        return worker_harness_send_raw(h, FRAME_SHUTDOWN, &empty_map, 1);
}

/* ---- reading ------------------------------------------------------------------------------- */

static char *str_dup_object(const msgpack_object *o) {
        if (!o || o->type != MSGPACK_OBJECT_STR)
                return NULL;
        return strndup(o->via.str.ptr, o->via.str.size);
}

static int frame_decode(WorkerFrame *f, uint8_t kind, uint8_t *payload, size_t size) {
        size_t off = 0;
        const msgpack_object *o;

        *f = (WorkerFrame) { .kind = kind, .payload = payload, .size = size };
        msgpack_zone_init(&f->zone, 4096);
        if (msgpack_unpack((const char *) payload, size, &off, &f->zone, &f->root) != MSGPACK_UNPACK_SUCCESS ||
            off != size || f->root.type != MSGPACK_OBJECT_MAP) {
                log_error("worker-harness: frame '%c' is not one msgpack map", kind);
                return -EBADMSG;
        }

        f->call_id = str_dup_object(mp_map_get(&f->root, "call_id"));
        if (kind == FRAME_RESULT || kind == FRAME_ITEM) {
                f->value = mp_map_get(&f->root, "value");
                if (!f->value)
                        return -EBADMSG;
                f->value_json = worker_json_from_object(f->value);
        }
        if (kind == FRAME_ERROR) {
                f->error = mp_map_get(&f->root, "error");
                if (!f->error || f->error->type != MSGPACK_OBJECT_MAP)
                        return -EBADMSG;
                f->error_type = str_dup_object(mp_map_get(f->error, "type"));
                f->error_message = str_dup_object(mp_map_get(f->error, "message"));
                o = mp_map_get(f->error, "cancelled");
                f->cancelled = o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
        }
        if (kind == FRAME_READY)
                (void) mp_map_get_int(&f->root, "pid", &f->pid);
        if (kind != FRAME_READY && !f->call_id)
                return -EBADMSG;
        return 0;
}

static int read_socket(WorkerHarness *h, int timeout_ms, WorkerFrame *ret) {
        unsigned long long deadline = now_usec() + (unsigned long long) MAX(timeout_ms, 0) * 1000ULL;

        for (;;) {
                const uint8_t *p;
                size_t size;
                uint8_t kind;
                int r;

                r = frame_reader_peek(&h->reader, &kind, &p, &size);
                if (r < 0)
                        return r;
                if (r > 0) {
                        _cleanup_free_ uint8_t *copy = malloc(size + 1);
                        WorkerFrame f;

                        if (!copy)
                                return -ENOMEM;
                        memcpy(copy, p, size);
                        copy[size] = 0;
                        frame_reader_consume(&h->reader);
                        r = frame_decode(&f, kind, TAKE_PTR(copy), size);
                        if (r < 0) {
                                worker_frame_done(&f);
                                return r;
                        }
                        /* Like the server: an item read is an item the client has. */
                        if (kind == FRAME_ITEM && !h->no_auto_credit) {
                                r = worker_harness_credit(h, f.call_id, size);
                                if (r < 0 && r != -EPIPE) {
                                        worker_frame_done(&f);
                                        return r;
                                }
                        }
                        *ret = f;
                        return 0;
                }

                unsigned long long now = now_usec();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd pfd = { .fd = h->fd, .events = POLLIN };
                r = poll(&pfd, 1, (int) ((deadline - now + 999) / 1000));
                if (r < 0 && errno != EINTR)
                        return negative_errno();
                if (r <= 0)
                        continue;

                ssize_t k = frame_reader_fill(&h->reader, h->fd);
                if (k == 0)
                        return -EPIPE;
                if (k < 0 && k != -EAGAIN)
                        return (int) k;
        }
}

int worker_harness_read(WorkerHarness *h, int timeout_ms, WorkerFrame *ret) {
        if (h->stash) {
                StashedFrame *s = h->stash;

                h->stash = s->next;
                if (!h->stash)
                        h->stash_tail = &h->stash;
                *ret = s->frame;
                free(s);
                return 0;
        }
        return read_socket(h, timeout_ms, ret);
}

int worker_harness_read_for(WorkerHarness *h, const char *call_id, int timeout_ms, WorkerFrame *ret) {
        unsigned long long deadline = now_usec() + (unsigned long long) MAX(timeout_ms, 0) * 1000ULL;

        for (StashedFrame **s = &h->stash; *s; s = &(*s)->next)
                if ((*s)->frame.call_id && streq((*s)->frame.call_id, call_id)) {
                        StashedFrame *found = *s;

                        *s = found->next;
                        if (!*s)
                                h->stash_tail = s;
                        *ret = found->frame;
                        free(found);
                        return 0;
                }

        for (;;) {
                unsigned long long now = now_usec();
                WorkerFrame f;
                int r;

                r = read_socket(h, now >= deadline ? 0 : (int) ((deadline - now + 999) / 1000), &f);
                if (r < 0)
                        return r;
                if (f.call_id && streq(f.call_id, call_id)) {
                        *ret = f;
                        return 0;
                }

                StashedFrame *s = calloc(1, sizeof(*s));
                if (!s) {
                        worker_frame_done(&f);
                        return -ENOMEM;
                }
                s->frame = f;
                *h->stash_tail = s;
                h->stash_tail = &s->next;
        }
}

int worker_harness_collect(WorkerHarness *h, const char *call_id, int timeout_ms, char **ret_items_json,
                           WorkerFrame *ret_terminal) {
        _cleanup_buffer_ Buffer items = {};
        unsigned long long deadline = now_usec() + (unsigned long long) MAX(timeout_ms, 0) * 1000ULL;
        size_t n = 0;
        int r;

        r = buffer_append_byte(&items, '[');
        if (r < 0)
                return r;

        for (;;) {
                unsigned long long now = now_usec();
                WorkerFrame f;

                r = worker_harness_read_for(h, call_id, now >= deadline ? 0 : (int) ((deadline - now + 999) / 1000), &f);
                if (r < 0)
                        return r;
                if (f.kind == FRAME_ITEM) {
                        r = n++ > 0 ? buffer_append_byte(&items, ',') : 0;
                        r = r ?: buffer_append(&items, f.value_json, strlen(f.value_json));
                        worker_frame_done(&f);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!frame_kind_is_terminal(f.kind)) {
                        log_error("worker-harness: unexpected frame '%c' for call %s", f.kind, call_id);
                        worker_frame_done(&f);
                        return -EBADMSG;
                }
                r = buffer_append_byte(&items, ']');
                if (r < 0) {
                        worker_frame_done(&f);
                        return r;
                }
                if (ret_items_json)
                        *ret_items_json = (char *) buffer_steal(&items, NULL);
                if (ret_terminal)
                        *ret_terminal = f;
                else
                        worker_frame_done(&f);
                return 0;
        }
}

int worker_harness_wait_ready(WorkerHarness *h, int timeout_ms) {
        WorkerFrame f;
        int r;

        r = worker_harness_read(h, timeout_ms, &f);
        if (r < 0)
                return r;
        r = f.kind == FRAME_READY && f.pid == h->pid ? 0 : -EBADMSG;
        if (r < 0)
                log_error("worker-harness: expected READY {pid: %d}, got '%c' (pid %" PRIi64 ")",
                          (int) h->pid, f.kind, f.pid);
        worker_frame_done(&f);
        return r;
}

int worker_harness_wait_exit(WorkerHarness *h, int timeout_ms, int *ret_status) {
        unsigned long long deadline = now_usec() + (unsigned long long) MAX(timeout_ms, 0) * 1000ULL;

        while (!h->exited) {
                pid_t p = waitpid(h->pid, &h->status, WNOHANG);
                if (p < 0)
                        return negative_errno();
                if (p == h->pid) {
                        h->exited = true;
                        break;
                }
                if (now_usec() >= deadline)
                        return -ETIMEDOUT;
                (void) usleep(2000);
        }
        if (ret_status)
                *ret_status = h->status;
        return 0;
}

int worker_harness_shutdown(WorkerHarness *h, int timeout_ms, int *ret_status) {
        int r;

        r = worker_harness_shutdown_frame(h);
        if (r < 0 && r != -EPIPE)
                return r;
        return worker_harness_wait_exit(h, timeout_ms, ret_status);
}
