/* SPDX-License-Identifier: MIT */
/* sandbox::echo round trips through libagentix's blocking API against a real agentix-server
 * on 127.0.0.1: latency percentiles of agentix_call(), then the throughput of the event-loop
 * API with many calls in flight. Usage: bench-client-echo [websocket|polling] [N]. */

#include <stdio.h>
#include <stdlib.h>

#include "agentix.h"
#include "macro.h"
#include "test-server.h"

#define TOKEN "bench"

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

typedef struct Flight {
        sd_event *event;
        agentix_client *c;
        unsigned started, done, total, window, failed;
} Flight;

static void flight_start(Flight *f);

static void flight_done(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata) {
        Flight *f = userdata;

        f->failed += !!error;
        if (++f->done == f->total)
                (void) sd_event_exit(f->event, 0);
        else
                flight_start(f);
}

static void flight_start(Flight *f) {
        static const uint8_t args[] = { 0x91, 0xa1, 'x' }; /* ["x"] */
        static const agentix_request_handlers h = { .done = flight_done };

        while (f->started < f->total && f->started - f->done < f->window) {
                if (agentix_call_async(f->c, "sandbox::echo", &(agentix_args) { .args = args, .args_size = sizeof(args) },
                                       NULL, &h, f, NULL) < 0) {
                        f->failed++;
                        (void) sd_event_exit(f->event, 1);
                        return;
                }
                f->started++;
        }
}

int main(int argc, char **argv) {
        static const uint8_t args[] = { 0x91, 0xa1, 'x' };
        const char *transport = argc > 1 ? argv[1] : "websocket";
        unsigned n = argc > 2 ? (unsigned) atoi(argv[2]) : 5000;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = NULL;
        TestServer server;
        uint64_t *t, t0, total;
        Flight f = {};
        int r, status;

        if (n < 10)
                n = 10;
        t = calloc(n, sizeof(*t));
        if (!t || test_server_start(&server, TOKEN) < 0)
                return 1;

        r = agentix_client_new(&(agentix_options) { .url = server.url, .token = TOKEN,
                                                     .transport = streq(transport, "polling") ? AGENTIX_TRANSPORT_POLLING
                                                                                              : AGENTIX_TRANSPORT_WEBSOCKET },
                               NULL, &c);
        if (r >= 0)
                r = agentix_client_connect(c, &e);
        if (r < 0) {
                fprintf(stderr, "connect: %s\n", e.message ?: strerror(-r));
                return 1;
        }

        for (unsigned i = 0; i < 200; i++) /* warm up: worker, allocator, caches */
                (void) agentix_call(c, "sandbox::echo", &(agentix_args) { .args = args, .args_size = sizeof(args) }, NULL,
                                    NULL, NULL);
        for (unsigned i = 0; i < n; i++) {
                msgpack_unpacked res;

                t0 = now_usec();
                r = agentix_call(c, "sandbox::echo", &(agentix_args) { .args = args, .args_size = sizeof(args) }, NULL,
                                 &res, &e);
                t[i] = now_usec() - t0;
                if (r < 0) {
                        fprintf(stderr, "echo: %s\n", e.message);
                        return 1;
                }
                msgpack_unpacked_destroy(&res);
        }
        qsort(t, n, sizeof(*t), cmp_u64);
        printf("agentix_call(sandbox::echo) over %s, n=%u: p50 %llu us, p90 %llu us, p99 %llu us, max %llu us\n",
               transport, n, (unsigned long long) t[n / 2], (unsigned long long) t[n * 9 / 10],
               (unsigned long long) t[n * 99 / 100], (unsigned long long) t[n - 1]);
        agentix_client_unref(c);

        /* Throughput: the event-loop API on a caller's loop, 64 calls in flight. */
        if (sd_event_new(&f.event) < 0 ||
            agentix_client_new(&(agentix_options) { .url = server.url, .token = TOKEN,
                                                     .transport = streq(transport, "polling") ? AGENTIX_TRANSPORT_POLLING
                                                                                              : AGENTIX_TRANSPORT_WEBSOCKET },
                               f.event, &f.c) < 0 ||
            agentix_client_connect(f.c, NULL) < 0)
                return 1;
        f.total = n * 4;
        f.window = 64;
        t0 = now_usec();
        flight_start(&f);
        r = sd_event_loop(f.event);
        total = now_usec() - t0;
        printf("agentix_call_async(sandbox::echo) over %s, %u calls, %u in flight: %.0f calls/s%s\n", transport, f.total,
               f.window, f.total / (total / 1e6), f.failed ? " (with failures)" : "");
        agentix_client_unref(f.c);
        sd_event_unref(f.event);

        status = test_server_stop(&server);
        free(t);
        agentix_error_done(&e);
        return r < 0 || f.failed || status != 0;
}
