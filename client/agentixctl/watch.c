/* SPDX-License-Identifier: MIT */
/* agentixctl watch: fs::watch in the sandbox, one line per change, until Ctrl-C. */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "envelope.h"
#include "fail.h"
#include "json-msgpack.h"
#include "output.h"

typedef struct Watch {
        sd_event *event;
        agentix_request *request;
        uint64_t count, max;     /* max 0: no end but Ctrl-C */
        bool failed, stopped;
        agentix_error error;
} Watch;

static void watch_help(void) {
        printf("Usage: agentixctl watch [OPTIONS] PATH\n"
               "\n"
               "Print the changes below PATH in the sandbox as they happen, one per line: the\n"
               "event (created, modified, deleted, moved_from, moved_to), a tab, the path. New\n"
               "directories are watched as they appear. Runs until Ctrl-C (exit 0), or until\n"
               "PATH itself is deleted.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               One JSON object {path, event} per line\n"
               "     --no-recursive       Only PATH itself and the entries directly in it\n"
               "  -n --count=N            Stop after N changes\n"
               "\n"
               "See agentixctl(1).\n");
}

static void on_change(agentix_request *r, const msgpack_object *v, void *userdata) {
        Watch *w = userdata;
        json_t *change;

        if (w->max > 0 && w->count >= w->max)
                return; /* cancelled already: one more may be on its way */
        change = msgpack_to_json(v);
        if (arg_json)
                (void) print_json(json_incref(change));
        else
                printf("%s\t%s\n", strna(json_string_value(json_object_get(change, "event"))),
                       strna(json_string_value(json_object_get(change, "path"))));
        json_decref(change);
        fflush(stdout);
        if (w->max > 0 && ++w->count >= w->max) {
                w->stopped = true;
                (void) agentix_request_cancel(w->request);
        }
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Watch *w = userdata;

        if (e && e->kind != AGENTIX_E_NONE && !w->stopped) {
                w->failed = true;
                w->error = *e;
                w->error.type = e->type ? strdup(e->type) : NULL;
                w->error.message = e->message ? strdup(e->message) : NULL;
                w->error.traceback = NULL;
        }
        sd_event_exit(w->event, 0);
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Watch *w = userdata;

        if (w->stopped) {
                sd_event_exit(w->event, 0); /* a second Ctrl-C: do not wait for the server */
                return 0;
        }
        w->stopped = true;
        (void) agentix_request_cancel(w->request);
        return 0;
}

enum {
        ARG_NO_RECURSIVE = ARG_COMMON_END,
};

int verb_watch(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "no-recursive", no_argument, NULL, ARG_NO_RECURSIVE },
                { "count", required_argument, NULL, 'n' },
                {}
        };
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        agentix_client *client = NULL;
        sd_event *event = NULL;
        bool recursive = true;
        Watch w = {};
        msgpack_packer pk;
        char *end;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "n:", options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("watch", watch_help, argv);
                case ARG_NO_RECURSIVE:
                        recursive = false;
                        break;
                case 'n':
                        errno = 0;
                        w.max = strtoull(optarg, &end, 10);
                        if (errno || *end || w.max == 0)
                                return fail_usage("watch", "--count=%s: a number of changes, at least 1", optarg);
                        break;
                }
        if (optind + 1 != argc)
                return fail_usage("watch", "takes one path");

        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 1) < 0 || msgpack_pack_str_with_body(&pk, argv[optind], strlen(argv[optind])) < 0)
                return fail(EXIT_SOFTWARE, "out of memory");
        mp_packer_init_buffer(&pk, &kwargs);
        if (msgpack_pack_map(&pk, 1) < 0 || msgpack_pack_str_with_body(&pk, "recursive", 9) < 0 ||
            (recursive ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk)) < 0)
                return fail(EXIT_SOFTWARE, "out of memory");

        r = sd_event_new(&event);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "watch: cannot set up an event loop: %m");
        w.event = event;
        status = ctl_connect(event, 0, &client);
        if (status != EXIT_OK)
                goto finish;

        ctl_catch_stop_signals(event, on_signal, &w);

        agentix_args a = {
                .args = buffer_data(&args), .args_size = args.len,
                .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len,
        };
        agentix_call_options co = { .shape = AGENTIX_CALL_STREAM };
        agentix_request_handlers h = { .item = on_change, .done = on_done };
        r = agentix_call_async(client, "fs::watch", &a, &co, &h, &w, &w.request);
        if (r < 0) {
                status = fail_errno(EXIT_SOFTWARE, r, "watch: cannot start: %m");
                goto finish;
        }
        r = sd_event_loop(event);
        if (r < 0)
                status = fail_errno(EXIT_SOFTWARE, r, "watch: event loop failed: %m");
        else if (w.failed)
                status = fail_agentix(&w.error, "cannot watch %s", argv[optind]);
        else
                status = EXIT_OK;

finish:
        agentix_request_unref(w.request);
        agentix_error_done(&w.error);
        agentix_client_unref(client);
        sd_event_unref(event);
        return status;
}
