/* SPDX-License-Identifier: MIT */
/* loadgen: drive one /rpc server (agentix-server or the python-socketio peer) with calls and
 * print one JSON line of numbers. One connection, one thread, poll()-driven.
 *
 *   latency    — sequential calls, one in flight: p50/p90/p99 of the round trip
 *   throughput — N calls in flight for D seconds: calls/s (and the latencies seen)
 *   download   — sequential calls returning large values: MB/s per call
 *   spawn      — no server: run a command (e.g. `docker exec C true`) sequentially, the
 *                same percentiles, for comparing exec with what people use today
 *
 * Every answer is checked (a call:error, or a result map whose "error" is set, a non-zero
 * exit_code, a download of the wrong size, aborts the run): numbers come from calls that did
 * what they were asked. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>

#include "stats.h"
#include "envelope.h"
#include "log.h"
#include "rpc-client.h"

#define MAX_INFLIGHT 4096u
#define CALL_ID_LEN 32

typedef enum Mode {
        MODE_LATENCY,
        MODE_THROUGHPUT,
        MODE_DOWNLOAD,
        MODE_SPAWN,
} Mode;

typedef struct Slot {
        char id[CALL_ID_LEN + 1];
        uint64_t sent_ns;
        bool busy;
} Slot;

typedef struct Bench {
        RpcClient rpc;
        const char *label;
        Mode mode;
        const char *callable;
        const char *shape;
        Buffer args, kwargs;
        unsigned n_args, n_kwargs;
        bool ack;
        unsigned count, warmup, inflight;
        double duration_s;
        int64_t expect_bytes; /* download: content size; -1: unchecked */

        Slot *slots;
        uint32_t run_id;
        uint64_t seq;
        unsigned busy;
        bool issuing;          /* throughput: still starting new calls */
        uint64_t deadline_ns;
        uint64_t completed_in_window;
        bool record;           /* past warm-up */

        double *lat_us;
        size_t n_lat, cap_lat;
        double *mbps;
        size_t n_mbps;
        uint64_t last_bytes;   /* download: content bytes of the last result */
        uint64_t errors;
} Bench;

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int record_latency(Bench *b, double us) {
        if (b->n_lat == b->cap_lat) {
                size_t n = MAX(b->cap_lat * 2, (size_t) 1024);
                double *p = realloc(b->lat_us, n * sizeof(double));
                if (!p)
                        return -ENOMEM;
                b->lat_us = p;
                b->cap_lat = n;
        }
        b->lat_us[b->n_lat++] = us;
        return 0;
}

static int start_call(Bench *b, unsigned slot) {
        Slot *s = &b->slots[slot];

        /* slot (4 hex) + run (8 hex, random: ids stay unique across runs on one server, which
         * never runs a call_id twice) + sequence (20 hex) = 32, like a uuid4().hex. */
        snprintf(s->id, sizeof(s->id), "%04x%08x%020" PRIx64, slot & 0xffffu, b->run_id,
                 (uint64_t) (++b->seq & 0xffffffffffffffull));
        s->busy = true;
        b->busy++;
        s->sent_ns = now_ns();
        return rpc_client_queue_call(&b->rpc, s->id, CALL_ID_LEN, b->callable, b->shape, &b->args, &b->kwargs);
}

static void print_error(const char *call_id, size_t n, const msgpack_object *env) {
        const msgpack_object *e = mp_map_get(env, "error");
        const char *type = "?", *msg = "?";
        size_t tl = 1, ml = 1;

        if (e) {
                (void) mp_map_get_str(e, "type", &type, &tl);
                (void) mp_map_get_str(e, "message", &msg, &ml);
        }
        log_error("Call %.*s failed: %.*s: %.*s", (int) n, call_id, (int) tl, type, (int) ml, msg);
}

/* Is the result what the callable promises on success? */
static int check_value(Bench *b, const msgpack_object *v) {
        const msgpack_object *f;

        b->last_bytes = 0;
        if (!v)
                return log_error_errno(EBADMSG, "call:result without a value.");

        if (streq(b->callable, "fs::download")) {
                const msgpack_object *item, *content;

                if (v->type != MSGPACK_OBJECT_ARRAY)
                        return log_error_errno(EBADMSG, "fs::download did not return a list.");
                if (v->via.array.size == 0 && b->expect_bytes < 0)
                        return 0; /* download([]): the cheapest call there is */
                if (v->via.array.size != 1)
                        return log_error_errno(EBADMSG, "fs::download did not return a one-element list.");
                item = &v->via.array.ptr[0];
                f = mp_map_get(item, "error");
                if (f && f->type != MSGPACK_OBJECT_NIL)
                        return log_error_errno(EBADMSG, "fs::download reported an error: %.*s",
                                               f->type == MSGPACK_OBJECT_STR ? (int) f->via.str.size : 1,
                                               f->type == MSGPACK_OBJECT_STR ? f->via.str.ptr : "?");
                content = mp_map_get(item, "content");
                if (!content || content->type != MSGPACK_OBJECT_BIN)
                        return log_error_errno(EBADMSG, "fs::download content is not bytes.");
                b->last_bytes = content->via.bin.size;
                if (b->expect_bytes >= 0 && content->via.bin.size != (uint64_t) b->expect_bytes)
                        return log_error_errno(EBADMSG, "fs::download returned %" PRIu32 " bytes, expected %" PRIi64 ".",
                                               content->via.bin.size, b->expect_bytes);
                return 0;
        }
        if (v->type != MSGPACK_OBJECT_MAP)
                return 0;
        f = mp_map_get(v, "exit_code");
        if (f && !(f->type == MSGPACK_OBJECT_POSITIVE_INTEGER && f->via.u64 == 0))
                return log_error_errno(EBADMSG, "%s returned a non-zero exit_code.", b->callable);
        f = mp_map_get(v, "error");
        if (f && f->type != MSGPACK_OBJECT_NIL)
                return log_error_errno(EBADMSG, "%s returned error %.*s.", b->callable,
                                       f->type == MSGPACK_OBJECT_STR ? (int) f->via.str.size : 1,
                                       f->type == MSGPACK_OBJECT_STR ? f->via.str.ptr : "?");
        return 0;
}

static int on_event(RpcClient *c, const char *event, const char *call_id, size_t call_id_len, const msgpack_object *env,
                    size_t raw_size, void *userdata) {
        Bench *b = userdata;
        uint64_t t = now_ns();
        unsigned slot;
        Slot *s;
        int r;

        if (streq(event, "call:item")) {
                /* A stream's items: one that reports an error (code::run's {type: "error"}) means
                 * the call did not do its work, so it must not count. */
                const msgpack_object *v = mp_map_get(env, "value"), *type = v ? mp_map_get(v, "type") : NULL;

                if (type && type->type == MSGPACK_OBJECT_STR && type->via.str.size == 5 &&
                    memcmp(type->via.str.ptr, "error", 5) == 0) {
                        b->errors++;
                        return log_error_errno(EIO, "A stream item reports an error.");
                }
                return 0;
        }
        if (call_id_len != CALL_ID_LEN || sscanf(call_id, "%4x", &slot) != 1 || slot >= b->inflight)
                return log_error_errno(EBADMSG, "%s for a call_id we did not make: %.*s", event, (int) call_id_len, call_id);
        s = &b->slots[slot];
        if (!s->busy || memcmp(s->id, call_id, CALL_ID_LEN) != 0)
                return log_error_errno(EBADMSG, "%s for call %.*s, which is not in flight.", event, (int) call_id_len, call_id);

        if (streq(event, "call:error")) {
                b->errors++;
                print_error(call_id, call_id_len, env);
                return -EIO;
        }
        if (streq(event, "call:result")) {
                r = check_value(b, mp_map_get(env, "value"));
                if (r < 0) {
                        b->errors++;
                        return r;
                }
        } else if (!streq(event, "call:end"))
                return log_error_errno(EBADMSG, "Unexpected event %s.", event);

        s->busy = false;
        b->busy--;
        if (b->record && (b->mode != MODE_THROUGHPUT || t <= b->deadline_ns)) {
                double us = (double) (t - s->sent_ns) / 1000.0;
                r = record_latency(b, us);
                if (r < 0)
                        return r;
                if (b->mode == MODE_THROUGHPUT)
                        b->completed_in_window++;
                if (b->mode == MODE_DOWNLOAD && b->mbps && us > 0)
                        b->mbps[b->n_mbps++] = (double) b->last_bytes / us; /* bytes/µs = MB/s */
        }
        if (b->ack) {
                r = rpc_client_queue_ack(c, call_id, call_id_len);
                if (r < 0)
                        return r;
        }
        if (b->mode == MODE_THROUGHPUT && b->issuing)
                return start_call(b, slot);
        return 0;
}

static int wait_idle(Bench *b, int timeout_ms) {
        uint64_t end = now_ns() + (uint64_t) timeout_ms * 1000000u;

        while (b->busy > 0) {
                int r = rpc_client_pump(&b->rpc, 1000);
                if (r < 0)
                        return r;
                if (now_ns() > end)
                        return log_error_errno(ETIMEDOUT, "%u call(s) still in flight after %d ms.", b->busy, timeout_ms);
        }
        return 0;
}

static int run_sequential(Bench *b) {
        int r;

        for (unsigned i = 0; i < b->warmup + b->count; i++) {
                b->record = i >= b->warmup;
                r = start_call(b, 0);
                if (r < 0)
                        return r;
                r = rpc_client_flush(&b->rpc);
                if (r < 0)
                        return r;
                r = wait_idle(b, 600 * 1000);
                if (r < 0)
                        return r;
        }
        /* Let the last ack reach the server. */
        return rpc_client_flush(&b->rpc);
}

static int run_throughput(Bench *b) {
        uint64_t start, warm_end;
        int r;

        /* Warm-up: the same load for a short while, not counted. */
        b->issuing = true;
        b->record = false;
        warm_end = now_ns() + 1000000000ull;
        b->deadline_ns = UINT64_MAX;
        for (unsigned i = 0; i < b->inflight; i++) {
                r = start_call(b, i);
                if (r < 0)
                        return r;
        }
        while (now_ns() < warm_end) {
                r = rpc_client_pump(&b->rpc, 100);
                if (r < 0)
                        return r;
        }

        start = now_ns();
        b->deadline_ns = start + (uint64_t) (b->duration_s * 1e9);
        b->record = true;
        while (now_ns() < b->deadline_ns) {
                r = rpc_client_pump(&b->rpc, 100);
                if (r < 0)
                        return r;
        }
        b->issuing = false;
        return wait_idle(b, 60 * 1000);
}

/* Run argv to completion `warmup + count` times; the exit status must be 0. */
static int run_spawn(Bench *b, char **argv) {
        extern char **environ;

        for (unsigned i = 0; i < b->warmup + b->count; i++) {
                uint64_t t0 = now_ns();
                pid_t pid;
                int status, r;

                r = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
                if (r != 0)
                        return log_error_errno(r, "Failed to run %s: %m", argv[0]);
                if (waitpid(pid, &status, 0) < 0)
                        return negative_errno();
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        b->errors++;
                        return log_error_errno(EIO, "%s failed (status 0x%x).", argv[0], status);
                }
                if (i >= b->warmup) {
                        r = record_latency(b, (double) (now_ns() - t0) / 1000.0);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static void print_json(Bench *b, double elapsed_s) {
        double sum = 0;

        stats_sort(b->lat_us, b->n_lat);
        for (size_t i = 0; i < b->n_lat; i++)
                sum += b->lat_us[i];

        printf("{\"label\":\"%s\",\"mode\":\"%s\",\"callable\":\"%s\",\"calls\":%zu,\"errors\":%" PRIu64
               ",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f",
               b->label,
               b->mode == MODE_LATENCY      ? "latency"
               : b->mode == MODE_THROUGHPUT ? "throughput"
               : b->mode == MODE_DOWNLOAD   ? "download"
                                            : "spawn",
               b->callable, b->n_lat, b->errors, percentile(b->lat_us, b->n_lat, 50), percentile(b->lat_us, b->n_lat, 90),
               percentile(b->lat_us, b->n_lat, 99), b->n_lat ? sum / (double) b->n_lat : NAN,
               b->n_lat ? b->lat_us[0] : NAN, b->n_lat ? b->lat_us[b->n_lat - 1] : NAN);
        if (b->mode == MODE_THROUGHPUT)
                printf(",\"inflight\":%u,\"duration_s\":%.1f,\"calls_per_s\":%.0f", b->inflight, b->duration_s,
                       (double) b->completed_in_window / b->duration_s);
        if (b->mode == MODE_DOWNLOAD) {
                stats_sort(b->mbps, b->n_mbps);
                printf(",\"bytes\":%" PRIu64 ",\"mb_per_s_median\":%.0f,\"mb_per_s_min\":%.0f,\"mb_per_s_max\":%.0f",
                       b->last_bytes, percentile(b->mbps, b->n_mbps, 50), b->n_mbps ? b->mbps[0] : NAN,
                       b->n_mbps ? b->mbps[b->n_mbps - 1] : NAN);
        }
        printf(",\"load1\":%.2f", load1());
        printf(",\"elapsed_s\":%.2f,\"ws_bytes_in\":%" PRIu64 ",\"ws_bytes_out\":%" PRIu64 "}\n", elapsed_s,
               b->rpc.ws.bytes_in, b->rpc.ws.bytes_out);
        fflush(stdout);
}

static void help(void) {
        printf("Usage: loadgen [OPTIONS]\n"
               "\n"
               "Drive an /rpc Socket.IO server with calls and print one JSON line of numbers.\n"
               "With --mode=spawn, run the command after the options instead (no server).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --host=HOST          Server address (default 127.0.0.1)\n"
               "     --port=PORT          Server port (required)\n"
               "     --token=TOKEN        CONNECT auth token (default $AGENTIX_TOKEN)\n"
               "     --label=NAME         Name printed in the result\n"
               "     --mode=MODE          latency | throughput | download | spawn (default latency)\n"
               "     --callable=NAME      \"module::function\" (required)\n"
               "     --arg-str=S          Append a str positional argument\n"
               "     --arg-strlist=S      Append a positional argument [S]\n"
               "     --arg-emptylist      Append a positional argument []\n"
               "     --kwarg-str=K=V      Add a str keyword argument\n"
               "     --shape=SHAPE        unary (default) or stream: a stream call ends at call:end, and an\n"
               "                          item {type: \"error\"} fails the run\n"
               "     --count=N            Measured calls (latency/download; default 1000)\n"
               "     --warmup=N           Unmeasured calls first (default 100)\n"
               "     --inflight=N         Calls in flight (throughput; default 64)\n"
               "     --duration=S         Seconds measured (throughput; default 10)\n"
               "     --expect-bytes=N     download: each result must carry N bytes of content\n"
               "     --no-ack             Do not ack results (the server keeps them until evicted)\n");
}

static int pack_kwarg(Bench *b, const char *kv) {
        const char *eq = strchr(kv, '=');
        msgpack_packer pk;

        if (!eq || eq == kv)
                return -EINVAL;
        mp_packer_init_buffer(&pk, &b->kwargs);
        if (mp_pack_str(&pk, kv, (size_t) (eq - kv)) < 0 || mp_pack_cstr(&pk, eq + 1) < 0)
                return -ENOMEM;
        b->n_kwargs++;
        return 0;
}

/* args/kwargs are collected as their elements, then prefixed with the container header. */
static int finish_container(Buffer *body, unsigned n, bool map) {
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        msgpack_packer pk;

        mp_packer_init_buffer(&pk, &out);
        if ((map ? msgpack_pack_map(&pk, n) : msgpack_pack_array(&pk, n)) < 0)
                return -ENOMEM;
        if (buffer_append(&out, buffer_data(body), body->len) < 0)
                return -ENOMEM;
        buffer_done(body);
        *body = out;
        out = BUFFER_NULL;
        return 0;
}

static void bench_done(Bench *b) {
        rpc_client_done(&b->rpc);
        buffer_done(&b->args);
        buffer_done(&b->kwargs);
        free(b->slots);
        free(b->mbps);
        free(b->lat_us);
}

int main(int argc, char *argv[]) {
        enum {
                ARG_HOST = 0x100, ARG_PORT, ARG_TOKEN, ARG_LABEL, ARG_MODE, ARG_CALLABLE, ARG_ARG_STR, ARG_ARG_STRLIST,
                ARG_ARG_EMPTYLIST, ARG_KWARG_STR, ARG_COUNT, ARG_WARMUP, ARG_INFLIGHT, ARG_DURATION, ARG_EXPECT_BYTES, ARG_NO_ACK,
                ARG_SHAPE,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "host", required_argument, NULL, ARG_HOST },
                { "port", required_argument, NULL, ARG_PORT },
                { "token", required_argument, NULL, ARG_TOKEN },
                { "label", required_argument, NULL, ARG_LABEL },
                { "mode", required_argument, NULL, ARG_MODE },
                { "callable", required_argument, NULL, ARG_CALLABLE },
                { "arg-str", required_argument, NULL, ARG_ARG_STR },
                { "arg-strlist", required_argument, NULL, ARG_ARG_STRLIST },
                { "arg-emptylist", no_argument, NULL, ARG_ARG_EMPTYLIST },
                { "kwarg-str", required_argument, NULL, ARG_KWARG_STR },
                { "count", required_argument, NULL, ARG_COUNT },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "inflight", required_argument, NULL, ARG_INFLIGHT },
                { "duration", required_argument, NULL, ARG_DURATION },
                { "expect-bytes", required_argument, NULL, ARG_EXPECT_BYTES },
                { "no-ack", no_argument, NULL, ARG_NO_ACK },
                { "shape", required_argument, NULL, ARG_SHAPE },
                {}
        };
        _cleanup_(bench_done) Bench b = {
                .rpc.ws.fd = -EBADF,
                .label = "server",
                .mode = MODE_LATENCY,
                .shape = "unary",
                .ack = true,
                .count = 1000,
                .warmup = 100,
                .inflight = 64,
                .duration_s = 10,
                .expect_bytes = -1,
        };
        const char *host = "127.0.0.1", *port = NULL, *token = getenv("AGENTIX_TOKEN");
        msgpack_packer pk;
        uint64_t t0;
        int c, r;

        log_set_prefix("loadgen");
        log_parse_env();
        mp_packer_init_buffer(&pk, &b.args);

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_HOST:
                        host = optarg;
                        break;
                case ARG_PORT:
                        port = optarg;
                        break;
                case ARG_TOKEN:
                        token = optarg;
                        break;
                case ARG_LABEL:
                        b.label = optarg;
                        break;
                case ARG_MODE:
                        if (streq(optarg, "latency"))
                                b.mode = MODE_LATENCY;
                        else if (streq(optarg, "throughput"))
                                b.mode = MODE_THROUGHPUT;
                        else if (streq(optarg, "download"))
                                b.mode = MODE_DOWNLOAD;
                        else if (streq(optarg, "spawn"))
                                b.mode = MODE_SPAWN;
                        else {
                                log_error("Unknown --mode: %s", optarg);
                                return 2;
                        }
                        break;
                case ARG_CALLABLE:
                        b.callable = optarg;
                        break;
                case ARG_SHAPE:
                        if (!streq(optarg, "unary") && !streq(optarg, "stream")) {
                                log_error("--shape is unary or stream: %s", optarg);
                                return 2;
                        }
                        b.shape = optarg;
                        break;
                case ARG_ARG_STR:
                        if (mp_pack_cstr(&pk, optarg) < 0)
                                return 1;
                        b.n_args++;
                        break;
                case ARG_ARG_STRLIST:
                        if (msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, optarg) < 0)
                                return 1;
                        b.n_args++;
                        break;
                case ARG_ARG_EMPTYLIST:
                        if (msgpack_pack_array(&pk, 0) < 0)
                                return 1;
                        b.n_args++;
                        break;
                case ARG_KWARG_STR:
                        if (pack_kwarg(&b, optarg) < 0) {
                                log_error("--kwarg-str wants KEY=VALUE: %s", optarg);
                                return 2;
                        }
                        break;
                case ARG_COUNT:
                        b.count = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case ARG_WARMUP:
                        b.warmup = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case ARG_INFLIGHT:
                        b.inflight = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case ARG_DURATION:
                        b.duration_s = strtod(optarg, NULL);
                        break;
                case ARG_EXPECT_BYTES:
                        b.expect_bytes = strtoll(optarg, NULL, 10);
                        break;
                case ARG_NO_ACK:
                        b.ack = false;
                        break;
                default:
                        return 2;
                }
        }
        if (b.mode == MODE_SPAWN) {
                if (optind >= argc) {
                        log_error("--mode=spawn wants the command after the options: loadgen --mode=spawn -- CMD ARGS…");
                        return 2;
                }
                b.callable = argv[optind];
                t0 = now_ns();
                if (run_spawn(&b, argv + optind) < 0)
                        return 1;
                print_json(&b, (double) (now_ns() - t0) / 1e9);
                return 0;
        }
        if (optind < argc) {
                log_error("Unexpected argument: %s", argv[optind]);
                return 2;
        }
        if (!port || !b.callable) {
                log_error("--port and --callable are required (see --help).");
                return 2;
        }
        if (b.mode != MODE_THROUGHPUT)
                b.inflight = 1;
        if (b.inflight == 0 || b.inflight > MAX_INFLIGHT || b.duration_s <= 0) {
                log_error("--inflight must be 1..%u and --duration positive.", MAX_INFLIGHT);
                return 2;
        }
        if (finish_container(&b.args, b.n_args, false) < 0 || finish_container(&b.kwargs, b.n_kwargs, true) < 0)
                return 1;
        b.slots = calloc(b.inflight, sizeof(Slot));
        b.mbps = calloc(b.count + 1, sizeof(double));
        if (!b.slots || !b.mbps)
                return 1;

        if (getrandom(&b.run_id, sizeof(b.run_id), 0) != sizeof(b.run_id))
                return 1;
        b.rpc.on_event = on_event;
        b.rpc.userdata = &b;
        r = rpc_client_connect(&b.rpc, host, port, token, 10000);
        if (r < 0)
                return 1;

        t0 = now_ns();
        r = b.mode == MODE_THROUGHPUT ? run_throughput(&b) : run_sequential(&b);
        if (r < 0) {
                log_error_errno(r, "%s: run against %s:%s failed after %zu measured calls: %m", b.label, host, port, b.n_lat);
                return 1;
        }
        print_json(&b, (double) (now_ns() - t0) / 1e9);

        (void) rpc_client_close(&b.rpc, 1000);
        return 0;
}
