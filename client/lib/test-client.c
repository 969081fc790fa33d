/* SPDX-License-Identifier: MIT */
/* libagentix against a real agentix-server, over one transport (argv[1]: websocket|polling):
 * connect and auth failures, the three call shapes, cancel, deadlines, 1000 calls in flight,
 * reconnect with resume, WorkerDied, every typed helper, both the blocking API (private loop)
 * and the event-loop API (the caller's sd_event). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "agentix-private.h"
#include "test-mp.h"
#include "test-server.h"

#define TOKEN "s3cret-token"
#define MSEC 1000ULL
#define SEC 1000000ULL

static struct {
        TestServer server;
        agentix_transport transport;
        const char *transport_name;
        agentix_client *c; /* blocking use, private loop, connected */
        char dir[64];      /* scratch directory the server's worker writes into */
} F;

/* ---- helpers ---------------------------------------------------------------------------- */

static agentix_client *new_client(const char *token, sd_event *event) {
        agentix_options o = { .url = F.server.url, .token = token, .transport = F.transport };
        agentix_client *c = NULL;

        assert_int_equal(agentix_client_new(&o, event, &c), 0);
        return c;
}

static agentix_client *new_connected_client(void) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = new_client(TOKEN, NULL);
        int r = agentix_client_connect(c, &e);

        if (r < 0)
                fail_msg("connect: %s", e.message);
        assert_string_equal(agentix_client_transport(c), F.transport_name);
        return c;
}

/* Packed bytes of a JSON-written value (test-mp.h), in a buffer the caller frees. */
static Buffer packed(const char *json) {
        msgpack_unpacked u;
        Buffer b;

        test_mp(json, &b, &u);
        msgpack_unpacked_destroy(&u);
        return b;
}

/* sandbox::exec's positional args: [command]. */
static Buffer exec_args(const char *command) {
        Buffer b = BUFFER_NULL;
        msgpack_packer pk;

        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(msgpack_pack_array(&pk, 1), 0);
        assert_int_equal(mp_pack_cstr(&pk, command), 0);
        return b;
}

static agentix_args args_of(const Buffer *args, const Buffer *kwargs) {
        return (agentix_args) { .args = args ? buffer_data(args) : NULL, .args_size = args ? args->len : 0,
                                .kwargs = kwargs ? buffer_data(kwargs) : NULL, .kwargs_size = kwargs ? kwargs->len : 0 };
}

static void fail_with(const char *what, int r, const agentix_error *e) {
        fail_msg("%s: %d %s: %s", what, r, agentix_error_kind_name(e->kind), e->message);
}

/* Collect a stream/bidi exec: stdout, stderr, the exit code. */
typedef struct ExecOutput {
        Buffer out, err;
        int64_t exit_code;
        unsigned n_items;
} ExecOutput;

static void exec_output_add(ExecOutput *x, const msgpack_object *v) {
        const msgpack_object *stream = mp_map_get(v, "stream"), *data = mp_map_get(v, "data");

        x->n_items++;
        if (stream) {
                assert_non_null(data);
                assert_int_equal(data->type, MSGPACK_OBJECT_BIN);
                assert_int_equal(buffer_append(mp_str_eq(stream, "stderr") ? &x->err : &x->out, data->via.bin.ptr,
                                               data->via.bin.size),
                                 0);
        } else
                assert_int_equal(mp_map_get_int(v, "exit_code", &x->exit_code), 0);
}

static void exec_output_read(agentix_request *r, ExecOutput *x) {
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked item;
        int k;

        x->exit_code = -1000;
        while ((k = agentix_request_next(r, &item, 20 * SEC, &e)) > 0) {
                exec_output_add(x, &item.data);
                msgpack_unpacked_destroy(&item);
        }
        if (k < 0)
                fail_with("stream", k, &e);
        assert_int_equal(buffer_append_byte(&x->out, 0), 0);
        assert_int_equal(buffer_append_byte(&x->err, 0), 0);
}

static void exec_output_done(ExecOutput *x) {
        buffer_done(&x->out);
        buffer_done(&x->err);
}

static int64_t elapsed_ms(unsigned long long t0) {
        return (int64_t) ((now_usec() - t0) / MSEC);
}

/* ---- connection ------------------------------------------------------------------------- */

static void test_connect_refused(void **state) {
        agentix_options o = { .transport = F.transport };
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c;
        char url[64], prefix[96];
        unsigned long long t0;

        snprintf(url, sizeof(url), "http://127.0.0.1:%u", test_free_port());
        o.url = url;
        assert_int_equal(agentix_client_new(&o, NULL, &c), 0);

        /* Not connected yet: calls say so. */
        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, &e), -ENOTCONN);
        assert_int_equal(e.kind, AGENTIX_E_CONNECTION);

        t0 = now_usec();
        assert_true(agentix_client_connect(c, &e) < 0);
        assert_true(elapsed_ms(t0) < 5000); /* at once, not after a minute of retries */
        assert_int_equal(e.kind, AGENTIX_E_CONNECTION);
        snprintf(prefix, sizeof(prefix), "cannot connect to %s: ", url);
        assert_true(strneq(e.message, prefix, strlen(prefix)));
        assert_non_null(strcasestr(e.message, "refused"));
        print_message("    %s\n", e.message);
        assert_false(agentix_client_is_connected(c));
        agentix_error_done(&e);
        agentix_client_unref(c);

        /* Not an URL this client speaks. */
        o.url = "ftp://127.0.0.1:1";
        assert_int_equal(agentix_client_new(&o, NULL, &c), -EINVAL);
}

static void test_unauthorized(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        const char *tokens[] = { "wrong", NULL };

        for (size_t i = 0; i < ELEMENTSOF(tokens); i++) {
                agentix_client *c = new_client(tokens[i], NULL);

                assert_int_equal(agentix_client_connect(c, &e), -EACCES);
                assert_int_equal(e.kind, AGENTIX_E_UNAUTHORIZED);
                assert_string_equal(e.type, "Unauthorized");
                assert_non_null(strstr(e.message, F.server.url));
                print_message("    %s\n", e.message);
                agentix_client_unref(c);
        }
        agentix_error_done(&e);
}

/* AUTO takes WebSocket when the server offers it (polling is the fallback). */
static void test_auto_transport(void **state) {
        agentix_client *c;

        assert_int_equal(agentix_client_new(&(agentix_options) { .url = F.server.url, .token = TOKEN }, NULL, &c), 0);
        assert_int_equal(agentix_client_connect(c, NULL), 0);
        assert_string_equal(agentix_client_transport(c), "websocket");
        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);
        agentix_client_unref(c);
}

/* ---- the three shapes ------------------------------------------------------------------ */

static void test_unary(void **state) {
        _cleanup_buffer_ Buffer args = packed("[{\"s\":\"hello\",\"n\":-7,\"b\":\"bin:\\u0000\\u00ff\",\"l\":[1,null]}]");
        _cleanup_buffer_ Buffer two = packed("[1,2,3]");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = args_of(&args, NULL);
        msgpack_unpacked res;
        const msgpack_object *v;
        int64_t n;
        int r;

        r = agentix_call(F.c, "sandbox::echo", &a, NULL, &res, &e);
        if (r < 0)
                fail_with("echo", r, &e);
        assert_int_equal(res.data.type, MSGPACK_OBJECT_MAP);
        assert_true(mp_str_eq(mp_map_get(&res.data, "s"), "hello"));
        assert_int_equal(mp_map_get_int(&res.data, "n", &n), 0);
        assert_int_equal(n, -7);
        v = mp_map_get(&res.data, "b");
        assert_int_equal(v->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(v->via.bin.size, 3); /* NUL, then "\u00ff" as UTF-8: c3 bf */
        msgpack_unpacked_destroy(&res);

        /* Typed remote errors. */
        assert_int_equal(agentix_call(F.c, "nope::nothing", NULL, NULL, NULL, &e), -ENOSYS);
        assert_int_equal(e.kind, AGENTIX_E_NO_SUCH_CALLABLE);
        a = args_of(&two, NULL);
        assert_int_equal(agentix_call(F.c, "sandbox::echo", &a, NULL, NULL, &e), -EINVAL);
        assert_int_equal(e.kind, AGENTIX_E_ARGUMENT);
        print_message("    %s\n", e.message);

        /* Bad arguments never leave the client. */
        a = (agentix_args) { .args = "\x81\xa1k\xc0", .args_size = 4 }; /* a map, not an array */
        assert_int_equal(agentix_call(F.c, "sandbox::echo", &a, NULL, NULL, &e), -EINVAL);
        assert_int_equal(e.kind, AGENTIX_E_INVALID);
        assert_int_equal(agentix_call(F.c, "", NULL, NULL, NULL, &e), -EINVAL);
        assert_int_equal(agentix_call(F.c, "sandbox::echo", NULL,
                                      &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, NULL, &e),
                         -EINVAL);
        agentix_error_done(&e);

        /* No args: echo(None). */
        assert_int_equal(agentix_call(F.c, "sandbox::echo", NULL, NULL, &res, NULL), 0);
        assert_int_equal(res.data.type, MSGPACK_OBJECT_NIL);
        msgpack_unpacked_destroy(&res);
}

static void test_stream(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("printf 'a\\nb\\n'; sleep 0.05; printf err >&2; exit 3");
        agentix_args a = args_of(&args, NULL);
        ExecOutput x = {};
        agentix_request *r;

        assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, &r),
                         0);
        assert_int_equal(strlen(agentix_request_id(r)), 32);
        exec_output_read(r, &x);
        assert_string_equal(buffer_data(&x.out), "a\nb\n");
        assert_string_equal(buffer_data(&x.err), "err");
        assert_int_equal(x.exit_code, 3);
        assert_true(agentix_request_is_done(r));
        /* The end stays the end. */
        assert_int_equal(agentix_request_next(r, NULL, 0, NULL), 0);
        /* Inbox items are for bidi calls. */
        assert_int_equal(agentix_request_send(r, "\xc0", 1), -EBADR);
        agentix_request_unref(r);
        exec_output_done(&x);
}

static void test_bidi(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("cat; echo end");
        _cleanup_buffer_ Buffer in1 = packed("{\"stdin\":\"hello \"}"), in2 = packed("{\"stdin\":\"bin:world\\n\"}");
        agentix_args a = args_of(&args, NULL);
        ExecOutput x = {};
        agentix_request *r;

        assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI }, &r),
                         0);
        assert_int_equal(agentix_request_send(r, buffer_data(&in1), in1.len), 0);
        assert_int_equal(agentix_request_send(r, buffer_data(&in2), in2.len), 0);
        assert_int_equal(agentix_request_send(r, "\xc1", 1), -EINVAL); /* not msgpack */
        assert_int_equal(agentix_request_close_inbox(r), 0);
        assert_int_equal(agentix_request_close_inbox(r), 0);
        assert_int_equal(agentix_request_send(r, buffer_data(&in1), in1.len), -EPIPE);
        exec_output_read(r, &x);
        assert_string_equal(buffer_data(&x.out), "hello world\nend\n");
        assert_int_equal(x.exit_code, 0);
        agentix_request_unref(r);
        exec_output_done(&x);
}

/* ---- flow control of the inbox ------------------------------------------------------------ */

/* Inbox items for a slow reader: item i holds lines FLOW_LINES*i … FLOW_LINES*(i+1)-1, each
 * its number, so the command below sees a lost, doubled or reordered item. The command reads
 * nothing for a while (so the sandbox takes only what fits its pipes and the window fills),
 * then prints "<lines> <lines out of place>". Without flow control the inbox overflows. */
#define FLOW_LINES 100u
#define FLOW_CHECK "sleep %s; awk '$0 != NR - 1 { bad++ } END { print NR, bad + 0 }'"

static Buffer flow_item_lines(unsigned i, unsigned lines) {
        _cleanup_free_ char *text = malloc(lines * 10 + 1);
        Buffer b = BUFFER_NULL;
        msgpack_packer pk;
        size_t n = 0;

        assert_non_null(text);
        for (unsigned l = 0; l < lines; l++)
                n += (size_t) snprintf(text + n, lines * 10 + 1 - n, "%09u\n", i * lines + l);
        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(msgpack_pack_map(&pk, 1), 0);
        assert_int_equal(mp_pack_cstr(&pk, "stdin"), 0);
        assert_int_equal(msgpack_pack_bin_with_body(&pk, text, n), 0);
        return b;
}

static Buffer flow_item(unsigned i) {
        return flow_item_lines(i, FLOW_LINES);
}

static Buffer flow_args(const char *sleep) {
        char command[128];

        snprintf(command, sizeof(command), FLOW_CHECK, sleep);
        return exec_args(command);
}

static void flow_expect_lines(ExecOutput *x, unsigned n_lines) {
        char expected[64];

        snprintf(expected, sizeof(expected), "%u 0\n", n_lines);
        assert_string_equal(buffer_data(&x->out), expected);
        assert_int_equal(x->exit_code, 0);
}

static void flow_expect(ExecOutput *x, unsigned n_items) {
        flow_expect_lines(x, n_items * FLOW_LINES);
}

/* Blocking use: agentix_request_send() waits while the window and the client's queue are full,
 * and every item arrives once, in order. */
static void test_inbox_flow_blocking(void **state) {
        _cleanup_buffer_ Buffer args = flow_args("1");
        agentix_args a = args_of(&args, NULL);
        unsigned long long t0 = now_usec();
        const unsigned n = 5000;
        ExecOutput x = {};
        agentix_request *r;

        assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI }, &r),
                         0);
        for (unsigned i = 0; i < n; i++) {
                _cleanup_buffer_ Buffer item = flow_item(i);
                assert_int_equal(agentix_request_send(r, buffer_data(&item), item.len), 0);
        }
        assert_int_equal(agentix_request_close_inbox(r), 0);
        exec_output_read(r, &x);
        flow_expect(&x, n);
        print_message("    %u items (%u KiB) into a slow reader: %lld ms\n", n, n * FLOW_LINES * 10 / 1024,
                      (long long) elapsed_ms(t0));
        agentix_request_unref(r);
        exec_output_done(&x);
}

/* The window (16 MiB) is larger than the connection's own send queue (2 × max_message): items
 * the connection refuses wait and go a little later, none is lost. The server is stopped
 * while they are sent, so that the socket and that queue fill up for sure. */
static void test_inbox_flow_transport_full(void **state) {
        _cleanup_buffer_ Buffer args = flow_args("0.5");
        agentix_options o = { .url = F.server.url, .token = TOKEN, .transport = F.transport, .max_message = 1024 * 1024 };
        agentix_args a = args_of(&args, NULL);
        const unsigned n = 80, lines = 25600; /* 256000-byte items, 20 MB */
        agentix_client *c = NULL;
        ExecOutput x = {};
        agentix_request *r;
        int k = 0;

        assert_int_equal(agentix_client_new(&o, NULL, &c), 0);
        assert_int_equal(agentix_client_connect(c, NULL), 0);
        assert_int_equal(agentix_call_start(c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI }, &r),
                         0);
        assert_int_equal(agentix_request_wait(r, 200 * MSEC), -ETIMEDOUT); /* the call is in */
        for (unsigned i = 0; i < n; i++) {
                _cleanup_buffer_ Buffer item = flow_item_lines(i, lines);

                /* Less than what the window and the client's queue hold: no send waits. */
                if (i == 0)
                        assert_int_equal(kill(F.server.pid, SIGSTOP), 0);
                k = agentix_request_send(r, buffer_data(&item), item.len);
                if (i == 50)
                        assert_int_equal(kill(F.server.pid, SIGCONT), 0);
                assert_int_equal(k, 0);
        }
        assert_int_equal(agentix_request_close_inbox(r), 0);
        exec_output_read(r, &x);
        flow_expect_lines(&x, n * lines);
        agentix_request_unref(r);
        exec_output_done(&x);
        agentix_client_unref(c);
}

/* Event-loop use: a full window and queue make agentix_request_send() say -EAGAIN (the item is
 * not taken), the writable handler says when to go on; urgent items still go. */
typedef struct FlowRun {
        sd_event *event;
        agentix_client *c;
        agentix_request *r;
        Buffer args;
        unsigned next, n;
        unsigned n_eagain, n_writable, n_urgent;
        bool writable_pending;
        bool done;
        ExecOutput x;
        char error[512]; /* "" on success */
} FlowRun;

static void flow_produce(FlowRun *run) {
        while (run->next < run->n) {
                _cleanup_buffer_ Buffer item = flow_item(run->next);
                int k = agentix_request_send(run->r, buffer_data(&item), item.len);

                if (k == -EAGAIN) {
                        run->n_eagain++;
                        run->writable_pending = true;
                        /* The window is full, yet an urgent item goes (an empty stdin chunk). */
                        if (run->n_urgent < 3) {
                                _cleanup_buffer_ Buffer u = packed("{\"stdin\":\"\"}");
                                assert_int_equal(agentix_request_send_urgent(run->r, buffer_data(&u), u.len), 0);
                                run->n_urgent++;
                        }
                        return;
                }
                assert_int_equal(k, 0);
                run->next++;
        }
        assert_int_equal(agentix_request_close_inbox(run->r), 0);
}

static void flow_writable(agentix_request *r, void *userdata) {
        FlowRun *run = userdata;

        assert_true(run->writable_pending);
        run->writable_pending = false;
        run->n_writable++;
        flow_produce(run);
}

static void flow_on_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        exec_output_add(&((FlowRun *) userdata)->x, v);
}

static void flow_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata) {
        FlowRun *run = userdata;

        run->done = true;
        if (error)
                snprintf(run->error, sizeof(run->error), "%s: %s", agentix_error_kind_name(error->kind),
                         strna(error->message));
        (void) sd_event_exit(run->event, 0);
}

static void flow_connected(agentix_client *c, const agentix_error *error, void *userdata) {
        static const agentix_request_handlers h = { .item = flow_on_item, .done = flow_done };
        FlowRun *run = userdata;
        agentix_args a = args_of(&run->args, NULL);

        assert_null(error);
        assert_int_equal(agentix_call_async(c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI }, &h, run, &run->r),
                         0);
        agentix_request_set_writable_handler(run->r, flow_writable, run);
        flow_produce(run);
}

static void test_inbox_flow_async(void **state) {
        static FlowRun run;
        unsigned long long t0 = now_usec();

        run = (FlowRun) { .n = 3000, .args = flow_args("1"), .x.exit_code = -1000 };
        assert_int_equal(sd_event_new(&run.event), 0);
        run.c = new_client(TOKEN, run.event);
        assert_int_equal(agentix_client_connect_async(run.c, flow_connected, &run), 0);
        assert_int_equal(sd_event_loop(run.event), 0);
        if (run.error[0])
                fail_msg("bidi call: %s", run.error);
        assert_true(run.done);
        assert_int_equal(buffer_append_byte(&run.x.out, 0), 0);
        flow_expect(&run.x, run.n);
        print_message("    %u items, -EAGAIN %u times, writable %u times: %lld ms\n", run.n, run.n_eagain,
                      run.n_writable, (long long) elapsed_ms(t0));
        assert_true(run.n_eagain > 0);
        assert_int_equal(run.n_writable, run.n_eagain);
        assert_int_equal(run.n_urgent, 3);

        agentix_request_unref(run.r);
        agentix_client_unref(run.c);
        sd_event_unref(run.event);
        buffer_done(&run.args);
        exec_output_done(&run.x);
}

/* The connection drops while items are in flight: the ones it lost are sent again, the ones
 * the server has are not taken twice. */
static void test_inbox_flow_reconnect(void **state) {
        _cleanup_buffer_ Buffer args = flow_args("0.5");
        agentix_client *c = new_connected_client();
        agentix_args a = args_of(&args, NULL);
        const unsigned n = 2000;
        ExecOutput x = {};
        agentix_request *r;

        assert_int_equal(agentix_call_start(c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI }, &r),
                         0);
        for (unsigned i = 0; i < n; i++) {
                _cleanup_buffer_ Buffer item = flow_item(i);

                if (i % 400 == 399)
                        agentix_client_drop_for_testing(c);
                assert_int_equal(agentix_request_send(r, buffer_data(&item), item.len), 0);
        }
        assert_int_equal(agentix_request_close_inbox(r), 0);
        agentix_client_drop_for_testing(c); /* the end of the inbox may be lost too */
        exec_output_read(r, &x);
        flow_expect(&x, n);
        agentix_request_unref(r);
        exec_output_done(&x);
        agentix_client_unref(c);
}

/* ---- cancel, deadlines -------------------------------------------------------------------- */

static void test_cancel(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 30");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = args_of(&args, NULL);
        agentix_call_shape shapes[] = { AGENTIX_CALL_UNARY, AGENTIX_CALL_STREAM };

        for (size_t i = 0; i < ELEMENTSOF(shapes); i++) {
                unsigned long long t0;
                agentix_request *r;

                assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a,
                                                    &(agentix_call_options) { .shape = shapes[i] }, &r),
                                 0);
                assert_int_equal(agentix_request_wait(r, 200 * MSEC), -ETIMEDOUT);
                assert_false(agentix_request_is_done(r));
                t0 = now_usec();
                assert_int_equal(agentix_request_cancel(r), 0);
                assert_int_equal(agentix_request_next(r, NULL, 10 * SEC, &e), -ECANCELED);
                assert_true(elapsed_ms(t0) < 1000);
                assert_int_equal(e.kind, AGENTIX_E_CANCELLED);
                assert_true(e.cancelled);
                print_message("    cancelled in %lld ms: %s\n", (long long) elapsed_ms(t0), e.message);
                /* Cancelling what has ended is fine. */
                assert_int_equal(agentix_request_cancel(r), 0);
                agentix_request_unref(r);
        }

        /* A blocking call nobody reads any more is cancelled when dropped: the next call runs. */
        {
                agentix_request *r;
                assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a, NULL, &r), 0);
                assert_int_equal(agentix_request_wait(r, 100 * MSEC), -ETIMEDOUT);
                agentix_request_unref(r);
                assert_int_equal(agentix_call(F.c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);
        }
        agentix_error_done(&e);
}

static void test_deadline(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 30");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = args_of(&args, NULL);
        unsigned long long t0 = now_usec();
        int64_t ms;

        assert_int_equal(agentix_call(F.c, "sandbox::exec", &a, &(agentix_call_options) { .deadline_ms = 300 }, NULL,
                                      &e),
                         -ETIME);
        ms = elapsed_ms(t0);
        assert_int_equal(e.kind, AGENTIX_E_DEADLINE_EXCEEDED);
        assert_string_equal(e.type, "DeadlineExceeded");
        assert_true(ms >= 290 && ms < 2000);
        print_message("    deadline 300 ms → error after %lld ms: %s\n", (long long) ms, e.message);
        agentix_error_done(&e);
}

/* ---- WorkerDied --------------------------------------------------------------------------- */

static void test_worker_died(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_exec_result x;
        int r;

        r = agentix_exec(F.c, "kill -9 $PPID; sleep 5", NULL, &x, &e);
        assert_int_equal(r, -EOWNERDEAD);
        assert_int_equal(e.kind, AGENTIX_E_WORKER_DIED);
        assert_true(e.has_returncode);
        assert_int_equal(e.returncode, -9);
        print_message("    %s (returncode %d)\n", e.message, e.returncode);
        agentix_error_done(&e);

        /* A fresh worker takes the next call. */
        r = agentix_exec(F.c, "echo alive", NULL, &x, &e);
        if (r < 0)
                fail_with("exec after WorkerDied", r, &e);
        assert_string_equal(x.output, "alive\n");
        agentix_exec_result_done(&x);
}

/* ---- typed helpers ------------------------------------------------------------------------ */

static void test_exec_helper(void **state) {
        const char *env[] = { "GREETING=hi there", "HOME", NULL };
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_exec_result x;
        char expect[256];
        int r;

        r = agentix_exec(F.c, "pwd; echo \"$GREETING\"; echo \"${HOME-unset}\"; cat; echo oops >&2; exit 4",
                         &(agentix_exec_options) { .cwd = F.dir, .env = env, .stdin_data = "in\0put", .stdin_size = 6,
                                                   .timeout_sec = 20 },
                         &x, &e);
        if (r < 0)
                fail_with("exec", r, &e);
        snprintf(expect, sizeof(expect), "%s\nhi there\nunset\nin", F.dir);
        assert_int_equal(x.exit_code, 4);
        assert_false(x.truncated);
        assert_false(x.timed_out);
        assert_int_equal(x.output_size, strlen(expect) + 1 + 3 + 5);
        assert_memory_equal(x.output, expect, strlen(expect));
        assert_memory_equal(x.output + strlen(expect), "\0putoops\n", 9);
        agentix_exec_result_done(&x);

        /* timeout → 124 and timed_out; max_output → truncated. */
        r = agentix_exec(F.c, "echo started; sleep 10", &(agentix_exec_options) { .timeout_sec = 0.3 }, &x, &e);
        assert_int_equal(r, 0);
        assert_true(x.timed_out);
        assert_int_equal(x.exit_code, 124);
        assert_string_equal(x.output, "started\n");
        agentix_exec_result_done(&x);
        r = agentix_exec(F.c, "head -c 100000 /dev/zero | tr '\\0' x", &(agentix_exec_options) { .max_output = 1000 },
                         &x, &e);
        assert_int_equal(r, 0);
        assert_true(x.truncated);
        assert_int_equal(x.output_size, 1000);
        agentix_exec_result_done(&x);

        /* A bad cwd is raised by the module: AGENTIX_E_REMOTE with its type. */
        r = agentix_exec(F.c, "true", &(agentix_exec_options) { .cwd = "relative" }, &x, &e);
        assert_int_equal(r, -EREMOTEIO);
        assert_int_equal(e.kind, AGENTIX_E_REMOTE);
        assert_string_equal(e.type, "ValueError");
        print_message("    %s: %s\n", e.type, e.message);
        agentix_error_done(&e);
}

static void test_shell_helper(void **state) {
        const char *env[] = { "AGX_C=c-side", NULL };
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_shell_result x;
        _cleanup_free_ char *id = NULL;
        char expect[256];
        int r;

        r = agentix_shell_open(F.c, &(agentix_shell_options) { .cwd = F.dir, .env = env, .name = "c-test" }, &id, &e);
        if (r < 0)
                fail_with("shell open", r, &e);
        assert_string_equal(id, "c-test");
        r = agentix_shell_run(F.c, id, "cd /tmp; N=5", 0, &x, &e);
        if (r < 0)
                fail_with("shell run", r, &e);
        assert_int_equal(x.exit_code, 0);
        assert_string_equal(x.output, "");
        agentix_shell_result_done(&x);
        r = agentix_shell_run(F.c, id, "pwd; echo $N $AGX_C; false", 0, &x, &e);
        assert_int_equal(r, 0);
        snprintf(expect, sizeof(expect), "/tmp\n5 c-side\n");
        assert_string_equal(x.output, expect);
        assert_int_equal(x.exit_code, 1);
        agentix_shell_result_done(&x);

        r = agentix_shell_run(F.c, id, "sleep 30", 0.3, &x, &e);
        assert_int_equal(r, 0);
        assert_true(x.timed_out);
        assert_false(x.ended);
        agentix_shell_result_done(&x);

        r = agentix_shell_run(F.c, id, "exit 6", 0, &x, &e);
        assert_int_equal(r, 0);
        assert_true(x.ended);
        assert_int_equal(x.exit_code, 6);
        agentix_shell_result_done(&x);
        r = agentix_shell_close(F.c, id, &e);
        assert_int_equal(r, -EREMOTEIO);
        assert_string_equal(e.type, "SessionNotFound");
        agentix_error_done(&e);
        r = agentix_shell_run(F.c, NULL, "true", 0, &x, &e);
        assert_int_equal(e.kind, AGENTIX_E_INVALID);
        agentix_error_done(&e);
}

static void test_upload_download(void **state) {
        char all[256], p_bin[128], p_empty[128], p_missing[128];
        agentix_file_result *res = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        int r;

        for (int i = 0; i < 256; i++)
                all[i] = (char) i;
        snprintf(p_bin, sizeof(p_bin), "%s/up/all-bytes.bin", F.dir);
        snprintf(p_empty, sizeof(p_empty), "%s/up/empty", F.dir);
        snprintf(p_missing, sizeof(p_missing), "%s/missing", F.dir);

        agentix_file files[] = {
                { p_bin, all, sizeof(all) },
                { p_empty, NULL, 0 },
                { "relative/path", "x", 1 },
        };
        r = agentix_upload(F.c, files, ELEMENTSOF(files), &res, &e);
        if (r < 0)
                fail_with("upload", r, &e);
        assert_null(res[0].error);
        assert_string_equal(res[0].path, p_bin);
        assert_null(res[1].error);
        assert_string_equal(res[2].error, "invalid_path");
        agentix_file_results_free(res, ELEMENTSOF(files));

        const char *paths[] = { p_missing, p_bin, F.dir, "relative", p_empty };
        r = agentix_download(F.c, paths, ELEMENTSOF(paths), &res, &e);
        if (r < 0)
                fail_with("download", r, &e);
        /* In input order, per-file errors, all 256 byte values intact. */
        assert_string_equal(res[0].error, "file_not_found");
        assert_null(res[0].content);
        assert_null(res[1].error);
        assert_int_equal(res[1].size, 256);
        assert_memory_equal(res[1].content, all, 256);
        assert_string_equal(res[2].error, "is_directory");
        assert_string_equal(res[3].error, "invalid_path");
        assert_null(res[4].error);
        assert_int_equal(res[4].size, 0);
        assert_string_equal(res[1].path, p_bin);
        agentix_file_results_free(res, ELEMENTSOF(paths));

        /* No files: an empty batch. */
        assert_int_equal(agentix_download(F.c, NULL, 0, &res, &e), 0);
        agentix_file_results_free(res, 0);
}

static void test_fs_single(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        char path[128], sub[128], missing[128];
        agentix_read_result rd;
        agentix_entries l;
        agentix_matches m;
        unsigned n;
        int r;

        snprintf(path, sizeof(path), "%s/fs/notes.txt", F.dir);
        snprintf(sub, sizeof(sub), "%s/fs", F.dir);
        snprintf(missing, sizeof(missing), "%s/fs/missing.txt", F.dir);

        r = agentix_write(F.c, path, "alpha\nbeta\ngamma beta\n", 22, false, &e);
        if (r < 0)
                fail_with("write", r, &e);
        /* Create-only unless overwrite: AGENTIX_E_FILE with the code and its errno. */
        assert_int_equal(agentix_write(F.c, path, "x", 1, false, &e), -EEXIST);
        assert_int_equal(e.kind, AGENTIX_E_FILE);
        assert_string_equal(e.type, "already_exists");
        print_message("    %s\n", e.message);
        assert_int_equal(agentix_write(F.c, path, "one\ntwo beta\nthree\n", 19, true, &e), 0);

        r = agentix_read(F.c, path, 1, 2, &rd, &e);
        if (r < 0)
                fail_with("read", r, &e);
        assert_string_equal(rd.content, "     2\ttwo beta\n     3\tthree");
        assert_int_equal(rd.total_lines, 3);
        assert_int_equal(rd.start_line, 2);
        assert_int_equal(rd.end_line, 3);
        assert_int_equal(rd.next_offset, -1);
        agentix_read_result_done(&rd);
        assert_int_equal(agentix_read(F.c, missing, 0, 10, &rd, &e), -ENOENT);
        assert_int_equal(e.kind, AGENTIX_E_FILE);
        assert_string_equal(e.type, "file_not_found");
        assert_int_equal(agentix_read(F.c, sub, 0, 10, &rd, &e), -EISDIR);

        assert_int_equal(agentix_edit(F.c, path, "two", "TWO", false, &n, &e), 0);
        assert_int_equal(n, 1);
        assert_int_equal(agentix_edit(F.c, path, "nothere", "x", false, &n, &e), -ENOMSG);
        assert_string_equal(e.type, "string_not_found");
        assert_int_equal(agentix_write(F.c, missing, "beta beta\n", 10, false, &e), 0);
        assert_int_equal(agentix_edit(F.c, missing, "beta", "B", false, &n, &e), -ENOTUNIQ);
        assert_string_equal(e.type, "multiple_occurrences");
        assert_int_equal(agentix_edit(F.c, missing, "beta", "B", true, &n, &e), 0);
        assert_int_equal(n, 2);

        assert_int_equal(agentix_ls(F.c, sub, &l, &e), 0);
        assert_int_equal(l.n_entries, 2);
        assert_non_null(strstr(l.entries[0].path, "missing.txt"));
        assert_non_null(strstr(l.entries[1].path, "notes.txt"));
        assert_false(l.entries[1].is_dir);
        assert_int_equal(l.entries[1].size, 19);
        assert_non_null(l.entries[1].modified_at);
        {
                /* The server runs here: its answer is the file's mode on this disk. */
                struct stat st;
                assert_int_equal(stat(l.entries[1].path, &st), 0);
                assert_int_equal(l.entries[1].mode, (int) (st.st_mode & 07777));
                assert_int_equal(chmod(l.entries[1].path, 0751), 0);
        }
        agentix_entries_done(&l);
        assert_int_equal(agentix_ls(F.c, sub, &l, &e), 0);
        assert_int_equal(l.entries[1].mode, 0751);
        agentix_entries_done(&l);
        assert_int_equal(agentix_ls(F.c, path, &l, &e), -ENOTDIR);
        assert_string_equal(e.type, "not_a_directory");

        assert_int_equal(agentix_grep(F.c, "beta", F.dir, "*.txt", -1, &m, &e), 0);
        assert_int_equal(m.n_matches, 1);
        assert_string_equal(m.matches[0].path, path);
        assert_int_equal(m.matches[0].line, 2);
        assert_string_equal(m.matches[0].text, "TWO beta");
        assert_false(m.truncated);
        agentix_matches_done(&m);
        assert_int_equal(agentix_grep(F.c, "e", sub, NULL, 1, &m, &e), 0);
        assert_int_equal(m.n_matches, 1);
        assert_true(m.truncated);
        agentix_matches_done(&m);
        assert_int_equal(agentix_grep(F.c, "x", "relative", NULL, -1, &m, &e), -EINVAL);
        assert_string_equal(e.type, "invalid_path");

        assert_int_equal(agentix_glob(F.c, "*.txt", F.dir, &l, &e), 0);
        assert_int_equal(l.n_entries, 2);
        assert_non_null(strstr(l.entries[1].path, "/fs/notes.txt"));
        assert_false(l.entries[0].is_dir);
        agentix_entries_done(&l);
        agentix_error_done(&e);
}

/* ---- the event-loop API on the caller's sd_event ----------------------------------------- */

#define N_ASYNC 1000

typedef struct AsyncRun {
        sd_event *event;
        agentix_client *c;
        unsigned done, good, item_calls;
        unsigned seen[N_ASYNC];
        int blocking_r;
        agentix_error_kind blocking_kind;
} AsyncRun;

static void async_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata);

typedef struct AsyncCall {
        AsyncRun *run;
        unsigned index;
} AsyncCall;

static AsyncCall calls[N_ASYNC];

static void async_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata) {
        AsyncCall *x = userdata;
        AsyncRun *run = x->run;
        int64_t v;

        run->seen[x->index]++;
        run->done++;
        if (!error && result && result->type == MSGPACK_OBJECT_POSITIVE_INTEGER && (v = (int64_t) result->via.u64) == x->index)
                run->good++;
        if (run->done == 1) {
                agentix_error e = AGENTIX_ERROR_NULL;
                /* Blocking calls refuse to run inside the loop's handlers. */
                run->blocking_r = agentix_call(run->c, "sandbox::echo", NULL, NULL, NULL, &e);
                run->blocking_kind = e.kind;
                agentix_error_done(&e);
        }
        if (run->done == N_ASYNC) {
                /* The last reference may go from inside a handler: the free waits for it. */
                run->c = agentix_client_unref(run->c);
                (void) sd_event_exit(run->event, 0);
        }
}

static void async_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        ((AsyncCall *) userdata)->run->item_calls++;
}

static void async_connected(agentix_client *c, const agentix_error *error, void *userdata) {
        AsyncRun *run = userdata;
        static const agentix_request_handlers h = { .item = async_item, .done = async_done };

        if (error) {
                print_error("connect: %s\n", error->message);
                (void) sd_event_exit(run->event, 1);
                return;
        }
        for (unsigned i = 0; i < N_ASYNC; i++) {
                uint8_t packed_args[8] = { 0x91, 0xcd, (uint8_t) (i >> 8), (uint8_t) i }; /* [uint16 i] */
                agentix_args a = { .args = packed_args, .args_size = 4 };

                calls[i] = (AsyncCall) { run, i };
                if (agentix_call_async(c, "sandbox::echo", &a, NULL, &h, &calls[i], NULL) < 0) {
                        (void) sd_event_exit(run->event, 1);
                        return;
                }
        }
}

static void test_async_many(void **state) {
        static AsyncRun run;
        unsigned long long t0;
        int r;

        run = (AsyncRun) {};
        assert_int_equal(sd_event_new(&run.event), 0);
        run.c = new_client(TOKEN, run.event);
        assert_ptr_equal(agentix_client_get_event(run.c), run.event);

        /* Blocking use works on the caller's loop too (outside its handlers). */
        assert_int_equal(agentix_client_connect(run.c, NULL), 0);
        assert_int_equal(agentix_call(run.c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);
        agentix_client_close(run.c);
        assert_false(agentix_client_is_connected(run.c));

        t0 = now_usec();
        assert_int_equal(agentix_client_connect_async(run.c, async_connected, &run), 0);
        r = sd_event_loop(run.event);
        print_message("    %u calls in flight on one connection: %lld ms\n", N_ASYNC, (long long) elapsed_ms(t0));
        assert_int_equal(r, 0);
        assert_int_equal(run.done, N_ASYNC);
        assert_int_equal(run.good, N_ASYNC);
        for (unsigned i = 0; i < N_ASYNC; i++)
                assert_int_equal(run.seen[i], 1);
        assert_int_equal(run.item_calls, 0);
        assert_int_equal(run.blocking_r, -EBUSY);
        assert_int_equal(run.blocking_kind, AGENTIX_E_INVALID);
        assert_null(run.c);

        /* The freed client's sources go with the loop. */
        sd_event_unref(run.event);
}

/* agentix_client_close() ends the calls in flight (handlers run), the client can connect again. */
typedef struct CloseRun {
        unsigned done;
        agentix_error_kind kind;
        char message[256];
} CloseRun;

static void close_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata) {
        CloseRun *x = userdata;

        x->done++;
        x->kind = error ? error->kind : AGENTIX_E_NONE;
        snprintf(x->message, sizeof(x->message), "%s", error && error->message ? error->message : "");
}

static void test_close(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 30");
        agentix_args a = args_of(&args, NULL);
        agentix_client *c = new_connected_client();
        CloseRun x = {};
        agentix_request *r;

        assert_int_equal(agentix_call_async(c, "sandbox::exec", &a, NULL,
                                            &(agentix_request_handlers) { .done = close_done }, &x, &r),
                         0);
        assert_int_equal(agentix_request_wait(r, 100 * MSEC), -ETIMEDOUT);
        agentix_client_close(c);
        assert_int_equal(x.done, 1);
        assert_int_equal(x.kind, AGENTIX_E_CONNECTION);
        print_message("    %s\n", x.message);
        assert_true(agentix_request_is_done(r));
        assert_int_equal(agentix_request_cancel(r), 0);
        agentix_request_unref(r);

        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, NULL), -ENOTCONN);
        assert_int_equal(agentix_client_connect(c, NULL), 0);
        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);

        /* Freeing the client ends what is in flight too; a request held stays valid. */
        x = (CloseRun) {};
        assert_int_equal(agentix_call_async(c, "sandbox::exec", &a, NULL,
                                            &(agentix_request_handlers) { .done = close_done }, &x, &r),
                         0);
        agentix_client_unref(c);
        assert_int_equal(x.done, 1);
        assert_int_equal(x.kind, AGENTIX_E_CONNECTION);
        print_message("    %s\n", x.message);
        assert_true(agentix_request_is_done(r));
        assert_int_equal(agentix_request_cancel(r), 0);
        assert_int_equal(agentix_request_wait(r, 0), 0);
        assert_int_equal(agentix_request_send(r, "\xc0", 1), -EBADR);
        agentix_request_unref(r);
}

/* ---- reconnect and resume ----------------------------------------------------------------- */

static void test_reconnect_resume(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 1; echo done");
        _cleanup_buffer_ Buffer sargs = exec_args("for i in 1 2 3 4 5; do echo $i; sleep 0.2; done");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = new_connected_client();
        agentix_args a = args_of(&args, NULL);
        msgpack_unpacked item;
        agentix_request *r;
        ExecOutput x = {};
        int64_t code;
        int k;

        /* A call running on the server while the connection drops completes with its result. */
        assert_int_equal(agentix_call_start(c, "sandbox::exec", &a, NULL, &r), 0);
        assert_int_equal(agentix_request_wait(r, 300 * MSEC), -ETIMEDOUT);
        agentix_client_drop_for_testing(c);
        assert_false(agentix_client_is_connected(c));
        k = agentix_request_next(r, &item, 20 * SEC, &e);
        if (k < 0)
                fail_with("resumed call", k, &e);
        assert_int_equal(k, 1);
        assert_true(mp_str_eq(mp_map_get(&item.data, "output"), "done\n"));
        assert_int_equal(mp_map_get_int(&item.data, "exit_code", &code), 0);
        assert_int_equal(code, 0);
        msgpack_unpacked_destroy(&item);
        assert_int_equal(agentix_request_next(r, NULL, 0, NULL), 0);
        agentix_request_unref(r);
        assert_true(agentix_client_is_connected(c));
        assert_string_equal(agentix_client_transport(c), F.transport_name);

        /* A stream across two drops: everything arrives, in order, once. */
        a = args_of(&sargs, NULL);
        assert_int_equal(agentix_call_start(c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, &r),
                         0);
        x.exit_code = -1000;
        for (unsigned drops = 0; (k = agentix_request_next(r, &item, 20 * SEC, &e)) > 0;) {
                exec_output_add(&x, &item.data);
                msgpack_unpacked_destroy(&item);
                if (drops < 2 && x.n_items >= 1 + 2 * drops) {
                        agentix_client_drop_for_testing(c);
                        drops++;
                }
        }
        if (k < 0)
                fail_with("resumed stream", k, &e);
        assert_int_equal(buffer_append_byte(&x.out, 0), 0);
        assert_string_equal(buffer_data(&x.out), "1\n2\n3\n4\n5\n");
        assert_int_equal(x.exit_code, 0);
        agentix_request_unref(r);
        exec_output_done(&x);

        agentix_client_unref(c);
        agentix_error_done(&e);
}

typedef struct OnceRun {
        unsigned done;
        bool good;
} OnceRun;

static void once_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata) {
        OnceRun *x = userdata;

        x->done++;
        x->good = !error && result && mp_str_eq(mp_map_get(result, "output"), "once\n");
}

static void test_result_during_drop(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 0.3; echo once");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = new_connected_client();
        agentix_args a = args_of(&args, NULL);
        agentix_request *r;
        OnceRun x = {};
        char id[64];

        assert_int_equal(agentix_call_async(c, "sandbox::exec", &a, NULL,
                                            &(agentix_request_handlers) { .done = once_done }, &x, &r),
                         0);
        snprintf(id, sizeof(id), "%s", agentix_request_id(r));
        assert_int_equal(agentix_request_wait(r, 100 * MSEC), -ETIMEDOUT);
        agentix_client_drop_for_testing(c);
        /* Nothing runs the loop: the call finishes on the server while the client is away. */
        usleep(800 * 1000);
        assert_int_equal(x.done, 0);
        assert_int_equal(agentix_request_wait(r, 20 * SEC), 0);
        assert_int_equal(x.done, 1);
        assert_true(x.good);
        agentix_request_unref(r);

        /* Nothing more comes for it, even across another reconnect. */
        agentix_client_drop_for_testing(c);
        for (int i = 0; i < 20; i++)
                (void) sd_event_run(agentix_client_get_event(c), 50 * MSEC);
        assert_true(agentix_client_is_connected(c));
        assert_int_equal(x.done, 1);

        /* The client acked it: the server forgot the result and refuses to run the id again. */
        assert_int_equal(agentix_call(c, "sandbox::exec", &a, &(agentix_call_options) { .call_id = id }, NULL, &e),
                         -ENODATA);
        assert_int_equal(e.kind, AGENTIX_E_RESULT_UNAVAILABLE);
        print_message("    same call_id again: %s\n", e.message);
        agentix_error_done(&e);
        agentix_client_unref(c);
}

/* Has the server forgotten this call_id, i.e. has its result been acked? Asked from another
 * connection: the server answers a call_id it knows from its result cache, and one it has
 * forgotten with ResultUnavailable. */
static bool server_forgot(const char *id) {
        _cleanup_buffer_ Buffer args = packed("[\"probe\"]");
        agentix_args a = args_of(&args, NULL);
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked res;
        int r;

        r = agentix_call(F.c, "sandbox::echo", &a, &(agentix_call_options) { .call_id = id }, &res, &e);
        if (r >= 0) {
                /* The replayed result: the first call's value, not "probe". */
                assert_true(mp_str_eq(&res.data, "acked"));
                msgpack_unpacked_destroy(&res);
                return false;
        }
        assert_int_equal(e.kind, AGENTIX_E_RESULT_UNAVAILABLE);
        agentix_error_done(&e);
        return true;
}

static void run_loop_for(agentix_client *c, uint64_t usec) {
        uint64_t end = now_usec() + usec, t;

        while ((t = now_usec()) < end)
                assert_true(sd_event_run(agentix_client_get_event(c), end - t) >= 0);
}

static void call_with_id(agentix_client *c, const char *id) {
        _cleanup_buffer_ Buffer args = packed("[\"acked\"]");
        agentix_args a = args_of(&args, NULL);
        msgpack_unpacked res;

        assert_int_equal(agentix_call(c, "sandbox::echo", &a, &(agentix_call_options) { .call_id = id }, &res, NULL), 0);
        assert_true(mp_str_eq(&res.data, "acked"));
        msgpack_unpacked_destroy(&res);
}

/* Acks do not go out with the result: they wait for the next message, for the loop to have
 * nothing else to do, or for a close — but they do go out. */
static void test_acks(void **state) {
        agentix_client *c = new_connected_client();
        char id[4][64];

        for (unsigned i = 0; i < ELEMENTSOF(id); i++)
                snprintf(id[i], sizeof(id[i]), "ack-%s-%d-%u", F.transport_name, (int) getpid(), i);

        /* A result that nothing follows: acked once the loop runs idle. */
        call_with_id(c, id[0]);
        run_loop_for(c, 300 * MSEC);
        assert_true(server_forgot(id[0]));

        /* Acked behind the next call. */
        call_with_id(c, id[1]);
        call_with_id(c, id[2]);
        usleep(100 * 1000);
        assert_true(server_forgot(id[1]));

        /* Acked before a close. Over polling a close drops the connection at once, so the
         * last ack (like the DISCONNECT) would need a POST that is never made. */
        call_with_id(c, id[3]);
        agentix_client_close(c);
        usleep(100 * 1000);
        assert_true(server_forgot(id[2]));
        if (F.transport == AGENTIX_TRANSPORT_WEBSOCKET)
                assert_true(server_forgot(id[3]));
        agentix_client_unref(c);
}

/* A call made while the connection is down waits for it and then runs. */
static void test_call_while_reconnecting(void **state) {
        _cleanup_buffer_ Buffer args = packed("[\"later\"]");
        agentix_args a = args_of(&args, NULL);
        agentix_client *c = new_connected_client();
        msgpack_unpacked res;

        agentix_client_drop_for_testing(c);
        assert_false(agentix_client_is_connected(c));
        assert_int_equal(agentix_call(c, "sandbox::echo", &a, NULL, &res, NULL), 0);
        assert_true(mp_str_eq(&res.data, "later"));
        msgpack_unpacked_destroy(&res);
        agentix_client_unref(c);
}

/* A server that goes away for good: reconnecting gives up, the calls in flight end with
 * AGENTIX_E_CONNECTION, the disconnect handler runs once. */
typedef struct GoneRun {
        unsigned disconnects;
        agentix_error_kind kind;
} GoneRun;

static void gone_disconnected(agentix_client *c, const agentix_error *error, void *userdata) {
        GoneRun *x = userdata;

        x->disconnects++;
        x->kind = error->kind;
}

static void test_server_gone(void **state) {
        _cleanup_buffer_ Buffer args = exec_args("sleep 10");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = args_of(&args, NULL);
        unsigned long long t0;
        agentix_client *c;
        agentix_request *r;
        TestServer server;
        GoneRun x = {};
        int64_t ms;
        int k;

        assert_int_equal(test_server_start(&server, TOKEN), 0);
        assert_int_equal(agentix_client_new(&(agentix_options) { .url = server.url, .token = TOKEN,
                                                                 .transport = F.transport,
                                                                 .reconnect_timeout_usec = 1 * SEC },
                                            NULL, &c),
                         0);
        agentix_client_set_disconnect_handler(c, gone_disconnected, &x);
        assert_int_equal(agentix_client_connect(c, NULL), 0);
        assert_int_equal(agentix_call_start(c, "sandbox::exec", &a, NULL, &r), 0);
        assert_int_equal(agentix_request_wait(r, 200 * MSEC), -ETIMEDOUT);

        assert_int_equal(kill(server.pid, SIGKILL), 0);
        (void) waitpid(server.pid, NULL, 0);
        t0 = now_usec();
        k = agentix_request_next(r, NULL, 20 * SEC, &e);
        ms = elapsed_ms(t0);
        assert_true(k < 0);
        assert_int_equal(k, e.code);
        assert_int_equal(e.kind, AGENTIX_E_CONNECTION);
        assert_true(strneq(e.message, "lost the connection to ", 23));
        print_message("    after %lld ms: %s\n", (long long) ms, e.message);
        assert_true(ms < 5000);
        assert_int_equal(x.disconnects, 1);
        assert_int_equal(x.kind, AGENTIX_E_CONNECTION);
        assert_false(agentix_client_is_connected(c));
        agentix_request_unref(r);

        /* Calls now fail at once, and say why. */
        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, &e), -ENOTCONN);
        assert_int_equal(e.kind, AGENTIX_E_CONNECTION);
        agentix_client_unref(c);
        assert_int_equal(x.disconnects, 1);
        agentix_error_done(&e);
        (void) unlink(server.log_path);
}

/* Bounded memory: items nobody reads stop at the client's limit (the call is cancelled and
 * fails with AGENTIX_E_OVERFLOW); a result over max_message ends its call, not the connection. */
static void test_limits(void **state) {
        _cleanup_buffer_ Buffer flood = exec_args("head -c 100000000 /dev/zero");
        _cleanup_buffer_ Buffer flood_kw = packed("{\"max_output\":200000000}");
        _cleanup_buffer_ Buffer big = exec_args("head -c 100000 /dev/zero | tr '\\0' x");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = args_of(&flood, &flood_kw);
        agentix_client *c;
        agentix_request *r;
        unsigned n = 0;
        int k;

        assert_int_equal(agentix_call_start(F.c, "sandbox::exec", &a,
                                            &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, &r),
                         0);
        assert_int_equal(agentix_request_wait(r, 60 * SEC), 0);
        while ((k = agentix_request_next(r, NULL, 0, &e)) > 0)
                n++;
        assert_int_equal(k, -ENOBUFS);
        assert_int_equal(e.kind, AGENTIX_E_OVERFLOW);
        print_message("    %u items kept, then: %s\n", n, e.message);
        agentix_request_unref(r);
        assert_int_equal(agentix_call(F.c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);

        assert_int_equal(agentix_client_new(&(agentix_options) { .url = F.server.url, .token = TOKEN,
                                                                 .transport = F.transport, .max_message = 65536 },
                                            NULL, &c),
                         0);
        assert_int_equal(agentix_client_connect(c, NULL), 0);
        a = args_of(&big, NULL);
        assert_int_equal(agentix_call(c, "sandbox::exec", &a, NULL, NULL, &e), -EMSGSIZE);
        assert_int_equal(e.kind, AGENTIX_E_MESSAGE_TOO_LARGE);
        print_message("    %s\n", e.message);
        assert_true(agentix_client_is_connected(c));
        assert_int_equal(agentix_call(c, "sandbox::echo", NULL, NULL, NULL, NULL), 0);
        agentix_client_unref(c);
        agentix_error_done(&e);
}

/* ---- fixture ------------------------------------------------------------------------------- */

static int group_setup(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        int r;

        if (test_server_start(&F.server, TOKEN) < 0)
                return -1;
        snprintf(F.dir, sizeof(F.dir), "/tmp/agentix-client-test-XXXXXX");
        if (!mkdtemp(F.dir))
                return -1;
        F.c = new_client(TOKEN, NULL);
        r = agentix_client_connect(F.c, &e);
        if (r < 0) {
                fprintf(stderr, "connect: %s\n", e.message);
                agentix_error_done(&e);
                return -1;
        }
        return 0;
}

static int group_teardown(void **state) {
        char cmd[128];
        int status;

        F.c = agentix_client_unref(F.c);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", F.dir);
        (void) system(cmd);
        status = test_server_stop(&F.server);
        if (status != 0) {
                fprintf(stderr, "agentix-server exited with status %d after SIGTERM\n", status);
                test_server_print_log(&F.server);
                return -1;
        }
        return 0;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_connect_refused),
                cmocka_unit_test(test_unauthorized),
                cmocka_unit_test(test_auto_transport),
                cmocka_unit_test(test_unary),
                cmocka_unit_test(test_stream),
                cmocka_unit_test(test_bidi),
                cmocka_unit_test(test_inbox_flow_blocking),
                cmocka_unit_test(test_inbox_flow_transport_full),
                cmocka_unit_test(test_inbox_flow_async),
                cmocka_unit_test(test_inbox_flow_reconnect),
                cmocka_unit_test(test_cancel),
                cmocka_unit_test(test_deadline),
                cmocka_unit_test(test_worker_died),
                cmocka_unit_test(test_exec_helper),
                cmocka_unit_test(test_shell_helper),
                cmocka_unit_test(test_upload_download),
                cmocka_unit_test(test_fs_single),
                cmocka_unit_test(test_async_many),
                cmocka_unit_test(test_close),
                cmocka_unit_test(test_reconnect_resume),
                cmocka_unit_test(test_result_during_drop),
                cmocka_unit_test(test_call_while_reconnecting),
                cmocka_unit_test(test_acks),
                cmocka_unit_test(test_server_gone),
                cmocka_unit_test(test_limits),
        };
        const char *t = argc > 1 ? argv[1] : "websocket";

        if (streq(t, "websocket"))
                F.transport = AGENTIX_TRANSPORT_WEBSOCKET;
        else if (streq(t, "polling"))
                F.transport = AGENTIX_TRANSPORT_POLLING;
        else {
                fprintf(stderr, "usage: %s websocket|polling [test-name-pattern]\n", argv[0]);
                return 2;
        }
        F.transport_name = t;
        if (argc > 2)
                cmocka_set_test_filter(argv[2]);
        return cmocka_run_group_tests_name(t, tests, group_setup, group_teardown);
}
