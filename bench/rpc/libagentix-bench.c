/* SPDX-License-Identifier: MIT */
/* libagentix-bench: the same /rpc measurements as loadgen, made through libagentix, so that
 * run.sh can report what the client library adds over the bare load generator.
 *
 *   latency    — sequential agentix_call() (the blocking API), one in flight: p50/p90/p99
 *   throughput — agentix_call_async() on the caller's sd-event loop, N in flight for D
 *                seconds after one second of warm-up: calls/s
 *
 * Arguments are packed once, as loadgen does (a str per --arg-str); every result is checked
 * (sandbox::echo must return what it was given) and any error aborts the run. Latency is
 * from just before the call is made to the moment its result is in the caller's hands. One
 * JSON line in loadgen's format is printed on success. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <sys/resource.h>
#include <time.h>

#include "stats.h"
#include "agentix.h"
#include "buffer.h"
#include "envelope.h"
#include "log.h"
#include "macro.h"

#define MAX_INFLIGHT 4096u

typedef enum Mode {
        MODE_LATENCY,
        MODE_THROUGHPUT,
} Mode;

typedef struct Bench {
        const char *label;
        Mode mode;
        const char *callable;
        agentix_transport transport;
        Buffer args;
        unsigned n_args;
        const char *first_str; /* sandbox::echo("x") must return "x" */
        unsigned count, warmup, inflight;
        double duration_s;

        /* throughput */
        sd_event *event;
        agentix_client *client;
        unsigned busy;
        bool issuing, record;
        uint64_t deadline_ns;
        uint64_t completed_in_window, completed_total;
        int failure;

        double *lat_us;
        size_t n_lat, cap_lat;
        uint64_t errors;
} Bench;

typedef struct Flight {
        Bench *bench;
        uint64_t sent_ns;
} Flight;

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static double cpu_seconds(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return NAN;
        return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 + (double) ru.ru_stime.tv_sec +
               (double) ru.ru_stime.tv_usec / 1e6;
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

static agentix_args bench_args(const Bench *b) {
        return (agentix_args) { .args = buffer_data(&b->args), .args_size = b->args.len };
}

/* Is the result what the callable promises? Only sandbox::echo's is known here. */
static int check_value(const Bench *b, const msgpack_object *v) {
        if (!streq(b->callable, "sandbox::echo") || b->n_args != 1 || !b->first_str)
                return 0;
        if (!v || !mp_str_eq(v, b->first_str))
                return log_error_errno(EBADMSG, "sandbox::echo did not return its argument.");
        return 0;
}

static int log_call_error(const Bench *b, int r, const agentix_error *e) {
        return log_error_errno(r, "%s failed: %s: %s", b->callable, e ? agentix_error_kind_name(e->kind) : "?",
                               e && e->message ? e->message : "(no message)");
}

static int connect_client(Bench *b, const char *url, const char *token, sd_event *event, agentix_client **ret) {
        _cleanup_(agentix_error_done) agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = NULL;
        int r;

        r = agentix_client_new(&(agentix_options) { .url = url, .token = token, .transport = b->transport }, event, &c);
        if (r < 0)
                return log_error_errno(r, "Failed to make a client for %s: %m", url);
        r = agentix_client_connect(c, &e);
        if (r < 0) {
                agentix_client_unref(c);
                return log_error_errno(r, "Failed to connect to %s: %s", url, e.message ?: "?");
        }
        *ret = c;
        return 0;
}

static int run_latency(Bench *b, agentix_client *c) {
        _cleanup_(agentix_error_done) agentix_error e = AGENTIX_ERROR_NULL;
        agentix_args a = bench_args(b);
        int r;

        for (unsigned i = 0; i < b->warmup + b->count; i++) {
                msgpack_unpacked res;
                uint64_t t0 = now_ns(), t1;

                r = agentix_call(c, b->callable, &a, NULL, &res, &e);
                t1 = now_ns();
                if (r < 0) {
                        b->errors++;
                        return log_call_error(b, r, &e);
                }
                r = check_value(b, &res.data);
                msgpack_unpacked_destroy(&res);
                if (r < 0) {
                        b->errors++;
                        return r;
                }
                if (i >= b->warmup) {
                        r = record_latency(b, (double) (t1 - t0) / 1000.0);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int flight_start(Bench *b);

static void flight_done(agentix_request *req, const msgpack_object *result, const agentix_error *error,
                        void *userdata) {
        Flight *f = userdata;
        Bench *b = f->bench;
        uint64_t t = now_ns();
        int r;

        b->busy--;
        if (error) {
                b->errors++;
                b->failure = log_call_error(b, error->code ?: -EIO, error);
        } else if ((r = check_value(b, result)) < 0) {
                b->errors++;
                b->failure = r;
        } else if (b->record && t <= b->deadline_ns) {
                b->completed_in_window++;
                r = record_latency(b, (double) (t - f->sent_ns) / 1000.0);
                if (r < 0)
                        b->failure = r;
        }
        free(f);
        b->completed_total++;

        if (b->failure < 0) {
                b->issuing = false;
                (void) sd_event_exit(b->event, b->failure);
        } else if (b->issuing) {
                r = flight_start(b);
                if (r < 0)
                        (void) sd_event_exit(b->event, r);
        } else if (b->busy == 0)
                (void) sd_event_exit(b->event, 0);
}

static int flight_start(Bench *b) {
        static const agentix_request_handlers h = { .done = flight_done };
        agentix_args a = bench_args(b);

        while (b->issuing && b->busy < b->inflight) {
                Flight *f = calloc(1, sizeof(Flight));
                int r;

                if (!f)
                        return log_oom();
                f->bench = b;
                f->sent_ns = now_ns();
                /* No reference kept (ret NULL): the library drops its own after done. */
                r = agentix_call_async(b->client, b->callable, &a, NULL, &h, f, NULL);
                if (r < 0) {
                        free(f);
                        return log_error_errno(r, "Failed to start %s: %m", b->callable);
                }
                b->busy++;
        }
        return 0;
}

/* Warm-up ends: count from now; the window ends: stop issuing and wait for the last ones. */
static int on_phase(sd_event_source *s, uint64_t usec, void *userdata) {
        Bench *b = userdata;

        if (!b->record) {
                uint64_t now = now_ns();

                b->record = true;
                b->deadline_ns = now + (uint64_t) (b->duration_s * 1e9);
                return sd_event_source_set_time_relative(s, (uint64_t) (b->duration_s * 1e6)) < 0 ||
                                               sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) < 0
                               ? sd_event_exit(b->event, -EIO)
                               : 0;
        }
        b->issuing = false;
        if (b->busy == 0)
                (void) sd_event_exit(b->event, 0);
        return 0;
}

static int run_throughput(Bench *b) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *phase = NULL;
        int r;

        b->issuing = true;
        b->deadline_ns = UINT64_MAX;
        r = sd_event_add_time_relative(b->event, &phase, CLOCK_MONOTONIC, 1000000, 1000, on_phase, b);
        if (r < 0)
                return log_error_errno(r, "Failed to add a timer: %m");
        r = flight_start(b);
        if (r < 0)
                return r;
        r = sd_event_loop(b->event);
        if (r < 0)
                return log_error_errno(r, "Throughput run failed: %m");
        return b->failure;
}

static void print_json(Bench *b, const char *transport, double elapsed_s, double cpu_s, uint64_t calls_made) {
        double sum = 0;

        stats_sort(b->lat_us, b->n_lat);
        for (size_t i = 0; i < b->n_lat; i++)
                sum += b->lat_us[i];

        printf("{\"label\":\"%s\",\"mode\":\"%s\",\"callable\":\"%s\",\"calls\":%zu,\"errors\":%" PRIu64
               ",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f",
               b->label, b->mode == MODE_LATENCY ? "latency" : "throughput", b->callable, b->n_lat, b->errors,
               percentile(b->lat_us, b->n_lat, 50), percentile(b->lat_us, b->n_lat, 90),
               percentile(b->lat_us, b->n_lat, 99), b->n_lat ? sum / (double) b->n_lat : NAN,
               b->n_lat ? b->lat_us[0] : NAN, b->n_lat ? b->lat_us[b->n_lat - 1] : NAN);
        if (b->mode == MODE_THROUGHPUT)
                printf(",\"inflight\":%u,\"duration_s\":%.1f,\"calls_per_s\":%.0f", b->inflight, b->duration_s,
                       (double) b->completed_in_window / b->duration_s);
        /* The client's own CPU per call (connect and warm-up included): what the library costs. */
        printf(",\"client_cpu_us_per_call\":%.1f", calls_made ? cpu_s * 1e6 / (double) calls_made : NAN);
        printf(",\"transport\":\"%s\",\"load1\":%.2f,\"elapsed_s\":%.2f}\n", strna(transport), load1(), elapsed_s);
        fflush(stdout);
}

static void help(void) {
        printf("Usage: libagentix-bench [OPTIONS]\n"
               "\n"
               "Drive an agentix-server through libagentix and print one JSON line of numbers\n"
               "(loadgen's format).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --url=URL            Server, http://HOST:PORT (required)\n"
               "     --token=TOKEN        CONNECT auth token (default $AGENTIX_TOKEN)\n"
               "     --label=NAME         Name printed in the result (default libagentix)\n"
               "     --mode=MODE          latency (agentix_call) | throughput (agentix_call_async)\n"
               "     --transport=T        websocket | polling | auto (default websocket)\n"
               "     --callable=NAME      \"module::function\" (default sandbox::echo)\n"
               "     --arg-str=S          Append a str positional argument (default: one, \"hello\")\n"
               "     --count=N            Measured calls (latency; default 1000)\n"
               "     --warmup=N           Unmeasured calls first (latency; default 100)\n"
               "     --inflight=N         Calls in flight (throughput; default 64)\n"
               "     --duration=S         Seconds measured after 1 s of warm-up (throughput; default 10)\n");
}

static void bench_done(Bench *b) {
        agentix_client_unref(b->client);
        sd_event_unref(b->event);
        buffer_done(&b->args);
        free(b->lat_us);
}

int main(int argc, char *argv[]) {
        enum {
                ARG_URL = 0x100, ARG_TOKEN, ARG_LABEL, ARG_MODE, ARG_TRANSPORT, ARG_CALLABLE, ARG_ARG_STR, ARG_COUNT,
                ARG_WARMUP, ARG_INFLIGHT, ARG_DURATION,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "url", required_argument, NULL, ARG_URL },
                { "token", required_argument, NULL, ARG_TOKEN },
                { "label", required_argument, NULL, ARG_LABEL },
                { "mode", required_argument, NULL, ARG_MODE },
                { "transport", required_argument, NULL, ARG_TRANSPORT },
                { "callable", required_argument, NULL, ARG_CALLABLE },
                { "arg-str", required_argument, NULL, ARG_ARG_STR },
                { "count", required_argument, NULL, ARG_COUNT },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "inflight", required_argument, NULL, ARG_INFLIGHT },
                { "duration", required_argument, NULL, ARG_DURATION },
                {}
        };
        _cleanup_(bench_done) Bench b = {
                .label = "libagentix",
                .mode = MODE_LATENCY,
                .callable = "sandbox::echo",
                .transport = AGENTIX_TRANSPORT_WEBSOCKET,
                .count = 1000,
                .warmup = 100,
                .inflight = 64,
                .duration_s = 10,
        };
        _cleanup_(buffer_done) Buffer elements = BUFFER_NULL;
        const char *url = NULL, *token = getenv("AGENTIX_TOKEN"), *transport;
        agentix_client *latency_client = NULL;
        msgpack_packer pk;
        double cpu0, cpu1;
        uint64_t t0, t1, calls_made;
        int c, r;

        log_set_prefix("libagentix-bench");
        log_parse_env();
        mp_packer_init_buffer(&pk, &elements);

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_URL:
                        url = optarg;
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
                        else {
                                log_error("Unknown --mode: %s", optarg);
                                return 2;
                        }
                        break;
                case ARG_TRANSPORT:
                        if (streq(optarg, "websocket"))
                                b.transport = AGENTIX_TRANSPORT_WEBSOCKET;
                        else if (streq(optarg, "polling"))
                                b.transport = AGENTIX_TRANSPORT_POLLING;
                        else if (streq(optarg, "auto"))
                                b.transport = AGENTIX_TRANSPORT_AUTO;
                        else {
                                log_error("Unknown --transport: %s", optarg);
                                return 2;
                        }
                        break;
                case ARG_CALLABLE:
                        b.callable = optarg;
                        break;
                case ARG_ARG_STR:
                        if (mp_pack_cstr(&pk, optarg) < 0)
                                return 1;
                        if (b.n_args++ == 0)
                                b.first_str = optarg;
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
                default:
                        return 2;
                }
        }
        if (optind < argc) {
                log_error("Unexpected argument: %s", argv[optind]);
                return 2;
        }
        if (!url) {
                log_error("--url is required (see --help).");
                return 2;
        }
        if (b.inflight == 0 || b.inflight > MAX_INFLIGHT || !(b.duration_s > 0) || b.count == 0) {
                log_error("--inflight must be 1..%u, --duration positive and --count at least 1.", MAX_INFLIGHT);
                return 2;
        }
        if (b.n_args == 0) { /* loadgen's 1-echo scenario: sandbox::echo("hello") */
                if (mp_pack_cstr(&pk, "hello") < 0)
                        return 1;
                b.n_args = 1;
                b.first_str = "hello";
        }
        /* The array header goes in front of the elements collected above. */
        mp_packer_init_buffer(&pk, &b.args);
        if (msgpack_pack_array(&pk, b.n_args) < 0 || buffer_append(&b.args, buffer_data(&elements), elements.len) < 0)
                return log_oom(), 1;

        cpu0 = cpu_seconds();
        t0 = now_ns();
        if (b.mode == MODE_LATENCY) {
                r = connect_client(&b, url, token, NULL, &latency_client);
                if (r < 0)
                        return 1;
                transport = agentix_client_transport(latency_client);
                r = run_latency(&b, latency_client);
                calls_made = (uint64_t) b.warmup + b.n_lat;
        } else {
                r = sd_event_new(&b.event);
                if (r < 0)
                        return log_error_errno(r, "Failed to make an event loop: %m"), 1;
                r = connect_client(&b, url, token, b.event, &b.client);
                if (r < 0)
                        return 1;
                transport = agentix_client_transport(b.client);
                r = run_throughput(&b);
                calls_made = b.completed_total;
        }
        t1 = now_ns();
        cpu1 = cpu_seconds();
        if (r < 0) {
                agentix_client_unref(latency_client);
                log_error_errno(r, "%s: run against %s failed after %zu measured calls: %m", b.label, url, b.n_lat);
                return 1;
        }
        print_json(&b, transport, (double) (t1 - t0) / 1e9, cpu1 - cpu0, calls_made);
        agentix_client_unref(latency_client);
        return 0;
}
