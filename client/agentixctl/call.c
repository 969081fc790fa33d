/* SPDX-License-Identifier: MIT */
/* agentixctl call: any callable, any shape, with JSON in and out. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "envelope.h"
#include "fail.h"
#include "json-msgpack.h"
#include "output.h"
#include "parse-util.h"
#include "stdin-reader.h"

#define INBOX_LINE_MAX (256u * 1024u * 1024u)

static void help(void) {
        printf("Usage: agentixctl call [OPTIONS] MODULE::FUNCTION [ARGS] [KWARGS]\n"
               "\n"
               "Call a function in the sandbox and print its result as one line of JSON. ARGS is\n"
               "a JSON array of positional arguments, KWARGS a JSON object of keyword arguments\n"
               "(either, both in any order, or none; '-' reads one from stdin). Bytes are written\n"
               "{\"$bytes\": \"<base64>\"}, in and out.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --stream             A stream call: print each item as a JSON line\n"
               "     --bidi               A bidi call: each line of stdin is a JSON inbox item\n"
               "                          (EOF closes the inbox); items printed as JSON lines\n"
               "     --deadline=SECONDS   Have the server end the call after this long\n"
               "     --json               Accepted for symmetry; the output is always JSON\n"
               "  -q --quiet              Accepted for symmetry\n"
               "\n"
               "See agentixctl(1).\n");
}

typedef struct Call {
        const char *callable;
        sd_event *event;
        agentix_request *request;
        bool bidi;

        bool done, failed;
        agentix_error error;
        int status;              /* set when something of ours failed */
        int signal;

        StdinReader *stdin_reader;
        Buffer line;
        unsigned line_no;
} Call;

static int parse_json_argument(const char *text, json_t **ret) {
        json_error_t err;
        json_t *j;

        if (streq(text, "-"))
                j = json_loadf(stdin, JSON_DECODE_ANY, &err);
        else
                j = json_loads(text, JSON_DECODE_ANY, &err);
        if (!j)
                return fail_usage("call", "invalid JSON argument: %s (line %d, column %d)", err.text, err.line,
                                  err.column);
        *ret = j;
        return EXIT_OK;
}

static int pack_json(const json_t *j, Buffer *b) {
        msgpack_packer pk;

        mp_packer_init_buffer(&pk, b);
        return json_to_msgpack(j, &pk);
}

static void call_fail_local(Call *c, int status) {
        if (c->status == EXIT_OK)
                c->status = status;
        (void) agentix_request_cancel(c->request);
}

static void on_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Call *c = userdata;
        int status;

        status = print_json(msgpack_to_json(v));
        fflush(stdout);
        if (status != EXIT_OK)
                call_fail_local(c, status);
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Call *c = userdata;

        c->done = true;
        if (e && e->kind != AGENTIX_E_NONE) {
                c->failed = true;
                c->error = *e;
                c->error.type = e->type ? strdup(e->type) : NULL;
                c->error.message = e->message ? strdup(e->message) : NULL;
                c->error.traceback = NULL;
        } else if (result) {
                int status = print_json(msgpack_to_json(result));
                if (status != EXIT_OK && c->status == EXIT_OK)
                        c->status = status;
        }
        sd_event_exit(c->event, 0);
}

/* One line of stdin: a JSON inbox item. -ENOBUFS: not now (the send queue is full), try again. */
static int send_line(Call *c, const char *text, size_t n) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        unsigned line_no = c->line_no + 1;
        json_error_t err;
        json_t *j;
        int r;

        if (strspn(text, " \t\r") == n)
                return 0; /* blank lines are allowed, and skipped */
        j = json_loadb(text, n, JSON_DECODE_ANY, &err);
        if (!j) {
                call_fail_local(c, fail(EXIT_USAGE, "call: stdin line %u: invalid JSON: %s", line_no, err.text));
                return -EINVAL;
        }
        r = pack_json(j, &b);
        json_decref(j);
        if (r < 0) {
                call_fail_local(c, fail(EXIT_USAGE, "call: stdin line %u: invalid $bytes value", line_no));
                return r;
        }
        r = agentix_request_send(c->request, buffer_data(&b), b.len);
        if (r == -ENOBUFS)
                return r;
        if (r < 0 && !agentix_request_is_done(c->request)) {
                call_fail_local(c, fail_errno(EXIT_SOFTWARE, r, "call: cannot send an inbox item: %m"));
                return r;
        }
        return 0;
}

/* Send the complete lines gathered so far; the last one too at EOF. */
static int flush_lines(Call *c, bool eof) {
        char *nl;
        int r;

        while (c->line.len > 0) {
                nl = memchr(buffer_data(&c->line), '\n', c->line.len);
                if (!nl && !eof)
                        break;
                size_t len = nl ? (size_t) (nl - (char *) buffer_data(&c->line)) : c->line.len;

                r = send_line(c, (const char *) buffer_data(&c->line), len);
                if (r < 0)
                        return r;
                c->line_no++;
                buffer_consume(&c->line, nl ? len + 1 : len);
        }
        return 0;
}

static int on_stdin(const void *data, size_t size, void *userdata) {
        Call *c = userdata;
        int r;

        /* What is left from before goes first; while it cannot, this chunk waits (the reader
         * keeps it), so no more than one chunk of lines piles up here. */
        r = flush_lines(c, !data);
        if (r < 0)
                return r;
        if (!data) {
                r = agentix_request_close_inbox(c->request);
                return r == -ENOBUFS ? r : 0;
        }
        if (buffer_append(&c->line, data, size) < 0) {
                call_fail_local(c, fail(EXIT_SOFTWARE, "out of memory"));
                return -ENOMEM;
        }
        r = flush_lines(c, false);
        if (r < 0 && r != -ENOBUFS)
                return r;
        if (c->line.len > INBOX_LINE_MAX) {
                call_fail_local(c, fail(EXIT_USAGE, "call: stdin line %u is too long", c->line_no + 1));
                return -E2BIG;
        }
        return 0;
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Call *c = userdata;

        if (c->signal != 0) {
                sd_event_exit(c->event, 0);
                return 0;
        }
        c->signal = (int) si->ssi_signo;
        (void) agentix_request_cancel(c->request);
        return 0;
}

static void call_done(Call *c) {
        stdin_reader_free(c->stdin_reader);
        agentix_request_unref(c->request);
        agentix_error_done(&c->error);
        buffer_done(&c->line);
}

enum {
        ARG_STREAM = ARG_COMMON_END,
        ARG_BIDI,
        ARG_DEADLINE,
};

int verb_call(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "stream", no_argument, NULL, ARG_STREAM },
                { "bidi", no_argument, NULL, ARG_BIDI },
                { "deadline", required_argument, NULL, ARG_DEADLINE },
                {}
        };
        _cleanup_(call_done) Call call = {};
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        agentix_call_shape shape = AGENTIX_CALL_UNARY;
        double deadline = 0;
        json_t *json_args = NULL, *json_kwargs = NULL;
        agentix_client *client = NULL;
        sd_event *event = NULL;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("call", help, argv);
                case ARG_STREAM:
                        shape = AGENTIX_CALL_STREAM;
                        break;
                case ARG_BIDI:
                        shape = AGENTIX_CALL_BIDI;
                        break;
                case ARG_DEADLINE:
                        if (parse_seconds(optarg, &deadline) < 0)
                                return fail_usage("call", "invalid --deadline '%s': expected seconds", optarg);
                        break;
                }
        }
        if (optind >= argc)
                return fail_usage("call", "no function given (MODULE::FUNCTION)");
        call.callable = argv[optind++];
        if (!strstr(call.callable, "::"))
                return fail_usage("call", "'%s' is not MODULE::FUNCTION", call.callable);
        if (argc - optind > 2)
                return fail_usage("call", "too many arguments: at most one JSON array and one JSON object");

        for (int i = optind; i < argc; i++) {
                json_t *j = NULL;

                if (streq(argv[i], "-") && shape == AGENTIX_CALL_BIDI)
                        return fail_usage("call", "'-' cannot be used with --bidi (stdin is the inbox)");
                status = parse_json_argument(argv[i], &j);
                if (status != EXIT_OK)
                        return status;
                if (json_is_array(j) && !json_args)
                        json_args = j;
                else if (json_is_object(j) && !json_kwargs)
                        json_kwargs = j;
                else {
                        json_decref(j);
                        json_decref(json_args);
                        json_decref(json_kwargs);
                        return fail_usage("call", "'%s': expected a JSON array (positional arguments) or a JSON object "
                                          "(keyword arguments), one of each at most", argv[i]);
                }
        }
        r = 0;
        if (json_args)
                r = pack_json(json_args, &args);
        if (r >= 0 && json_kwargs)
                r = pack_json(json_kwargs, &kwargs);
        json_decref(json_args);
        json_decref(json_kwargs);
        if (r == -ENOMEM)
                return fail(EXIT_SOFTWARE, "out of memory");
        if (r < 0)
                return fail_usage("call", "invalid {\"$bytes\": …} value: expected padded standard base64");

        r = sd_event_new(&event);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "call: cannot set up an event loop: %m");
        call.event = event;
        status = ctl_connect(event, 0, &client);
        if (status != EXIT_OK)
                goto finish;

        ctl_catch_stop_signals(event, on_signal, &call);

        agentix_args a = {
                .args = buffer_data(&args), .args_size = args.len,
                .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len,
        };
        agentix_call_options co = { .shape = shape, .deadline_ms = (uint64_t) (deadline * 1000) };
        agentix_request_handlers h = { .item = on_item, .done = on_done };
        r = agentix_call_async(client, call.callable, &a, &co, &h, &call, &call.request);
        if (r < 0) {
                status = fail_errno(EXIT_SOFTWARE, r, "call: cannot start the call: %m");
                goto finish;
        }
        if (shape == AGENTIX_CALL_BIDI) {
                r = stdin_reader_new(event, on_stdin, &call, &call.stdin_reader);
                if (r < 0) {
                        status = fail_errno(EXIT_IOERR, r, "call: cannot read stdin: %m");
                        goto finish;
                }
        }

        r = sd_event_loop(event);
        if (r < 0)
                status = fail_errno(EXIT_SOFTWARE, r, "call: event loop failed: %m");
        else if (call.signal != 0)
                status = 128 + call.signal;
        else if (call.status != EXIT_OK)
                status = call.status;
        else if (call.failed)
                status = fail_agentix(&call.error, "call %s", call.callable);
        else
                status = EXIT_OK;

finish:
        call_done(&call);
        call = (Call) {};
        agentix_client_unref(client);
        sd_event_unref(event);
        return status;
}
