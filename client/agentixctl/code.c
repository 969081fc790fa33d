/* SPDX-License-Identifier: MIT */
/* agentixctl code: run code in a stateful code context (code::, a Jupyter kernel in the
 * sandbox) and show what it gave: output as it comes, results as text, images saved to files. */
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "fail.h"
#include "json-msgpack.h"
#include "output.h"
#include "parse-util.h"

#define CODE_MAX (16u * 1024u * 1024u)

typedef struct Run {
        sd_event *event;
        agentix_request *request;
        const char *images;      /* directory images go to (--output-dir); NULL: a temporary one */
        bool no_images;
        char *made_dir;          /* the temporary directory made for them, at the first image */
        unsigned n_images;
        bool raised, stopped, failed;
        int status;              /* a local failure's exit status (saving an image) */
        agentix_error error;
} Run;

static void code_help(void) {
        printf("Usage: agentixctl code [OPTIONS] [-c CODE | FILE | -]\n"
               "       agentixctl code --new-context [--language=LANG] [--cwd=DIR] [-e KEY=VALUE]...\n"
               "       agentixctl code --contexts | --interrupt=ID | --restart=ID | --delete-context=ID\n"
               "\n"
               "Run code in a code context of the sandbox: a Jupyter kernel whose variables,\n"
               "imports and figures stay for the next run (code::, agentix-server(8)). Without a\n"
               "context, the language's default context is used (made on first use). The code is\n"
               "CODE, or FILE's content, or standard input. Output is printed as it comes; the\n"
               "value of the last line is printed as text; images (a matplotlib figure, …) are\n"
               "saved as files and their names printed; an exception prints its traceback on\n"
               "stderr and the exit status is 1. Ctrl-C stops the run (the kernel gets ^C).\n"
               "\n"
               "  -h --help               Show this help\n"
               "  -c --code=CODE          The code to run\n"
               "     --context=ID         The context to run in (default: the language's default)\n"
               "     --language=LANG      A kernel's name or language (default python)\n"
               "  -e --env=KEY=VALUE      A variable for this run only (python kernels); with\n"
               "                          --new-context, for the context's kernel; repeatable\n"
               "     --timeout=SECONDS    Interrupt the run after this long (the context stays)\n"
               "     --output-dir=DIR     Where images are saved (default: a new directory under\n"
               "                          $TMPDIR or /tmp, made at the first image)\n"
               "     --no-images          Do not save images\n"
               "     --json               Print each item as JSON, one per line\n"
               "     --new-context        Start a new context; print its id\n"
               "     --cwd=DIR            With --new-context: its working directory\n"
               "     --contexts           List the contexts\n"
               "     --interrupt=ID       ^C to the run in context ID\n"
               "     --restart=ID         A fresh kernel for context ID (its state is gone)\n"
               "     --delete-context=ID  End context ID and its kernel\n"
               "  -q --quiet              No notes on stderr\n"
               "\n"
               "See agentixctl(1).\n");
}

/* The file name for an image of type mime ("image/png" → png). */
static const char *image_suffix(const char *mime) {
        const char *slash = strchr(mime, '/');

        return streq(mime, "image/svg+xml") ? "svg" : slash ? slash + 1 : "bin";
}

/* Where images go: --output-dir, else a directory of their own made now (0700: what a run
 * shows is the user's), never the current directory (a checkout would collect them). */
static int image_dir(Run *run, const char **ret) {
        const char *tmp = getenv("TMPDIR");

        if (run->images) {
                *ret = run->images;
                return EXIT_OK;
        }
        if (!run->made_dir) {
                if (asprintf(&run->made_dir, "%s/agentix-code-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                if (!mkdtemp(run->made_dir)) {
                        int e = errno;
                        run->made_dir = mfree(run->made_dir);
                        return fail_errno(EXIT_IOERR, e, "code: cannot make a directory for the images: %m");
                }
        }
        *ret = run->made_dir;
        return EXIT_OK;
}

static int save_image(Run *run, const agentix_code_data *d) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *dir = NULL;
        int status;

        status = image_dir(run, &dir);
        if (status != EXIT_OK)
                return status;
        for (;;) {
                free(path);
                path = NULL;
                if (asprintf(&path, "%s/agentix-code-%u.%s", dir, ++run->n_images, image_suffix(d->mime)) < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
                if (fd >= 0)
                        break;
                if (errno != EEXIST)
                        return fail_errno(EXIT_IOERR, errno, "code: cannot save an image as '%s': %m", path);
        }
        if (write_all(fd, d->data, d->size) < 0)
                return fail_errno(EXIT_IOERR, errno, "code: cannot write '%s': %m", path);
        printf("[%s saved to %s, %zu bytes]\n", d->mime, path, d->size);
        return EXIT_OK;
}

/* A result: its images saved, then its text. */
static int show_result(Run *run, const agentix_code_item *item) {
        const agentix_code_data *text = agentix_code_item_get(item, "text/plain");
        bool saved = false;

        for (size_t i = 0; i < item->n_data && !run->no_images; i++) {
                const agentix_code_data *d = &item->data[i];
                int status;

                if (strncmp(d->mime, "image/", 6) != 0 || !d->data)
                        continue;
                status = save_image(run, d);
                if (status != EXIT_OK)
                        return status;
                saved = true;
        }
        /* A figure's text is "<Figure size 640x480 with 1 Axes>": of no use beside its file. */
        if (text && text->data && !(saved && !item->is_main_result))
                printf("%s\n", text->data);
        return EXIT_OK;
}

/* IPython colours its tracebacks with SGR sequences (ESC [ … m): keep them for a terminal only. */
static void strip_colors(char *s) {
        char *out = s;

        for (const char *p = s; *p;) {
                if (p[0] == '\033' && p[1] == '[') {
                        const char *q = p + 2;

                        q += strspn(q, "0123456789;");
                        if (*q == 'm') {
                                p = q + 1;
                                continue;
                        }
                }
                *out++ = *p++;
        }
        *out = 0;
}

static void on_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Run *run = userdata;
        agentix_code_item item = {};
        int status = EXIT_OK;

        if (arg_json) {
                (void) print_json(msgpack_to_json(v));
                fflush(stdout);
                if (v->type == MSGPACK_OBJECT_MAP) {
                        const msgpack_object *t = NULL;

                        for (uint32_t i = 0; i < v->via.map.size; i++)
                                if (v->via.map.ptr[i].key.type == MSGPACK_OBJECT_STR &&
                                    v->via.map.ptr[i].key.via.str.size == 4 &&
                                    memcmp(v->via.map.ptr[i].key.via.str.ptr, "type", 4) == 0)
                                        t = &v->via.map.ptr[i].val;
                        if (t && t->type == MSGPACK_OBJECT_STR && t->via.str.size == 5 &&
                            memcmp(t->via.str.ptr, "error", 5) == 0)
                                run->raised = true;
                }
                return;
        }
        if (agentix_code_item_parse(v, &item, &run->error) < 0) {
                run->failed = true;
                (void) agentix_request_cancel(run->request);
                return;
        }
        switch (item.type) {
        case AGENTIX_CODE_STDOUT:
                (void) write_all(STDOUT_FILENO, item.text ?: "", item.text_size);
                break;
        case AGENTIX_CODE_STDERR:
                fflush(stdout);
                (void) write_all(STDERR_FILENO, item.text ?: "", item.text_size);
                break;
        case AGENTIX_CODE_RESULT:
                status = show_result(run, &item);
                break;
        case AGENTIX_CODE_ERROR:
                run->raised = true;
                fflush(stdout);
                if (item.traceback && item.traceback[0]) {
                        if (!isatty(STDERR_FILENO))
                                strip_colors(item.traceback);
                        fprintf(stderr, "%s\n", item.traceback);
                }
                else
                        fprintf(stderr, "%s: %s\n", strna(item.name), strna(item.text));
                break;
        case AGENTIX_CODE_EXECUTION_COUNT:
                break;
        }
        fflush(stdout);
        agentix_code_item_done(&item);
        if (status != EXIT_OK) {
                run->status = status;
                run->stopped = true;
                (void) agentix_request_cancel(run->request);
        }
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Run *run = userdata;

        if (e && e->kind != AGENTIX_E_NONE && !run->stopped && !run->failed) {
                run->failed = true;
                run->error = *e;
                run->error.type = e->type ? strdup(e->type) : NULL;
                run->error.message = e->message ? strdup(e->message) : NULL;
                run->error.traceback = NULL;
        }
        sd_event_exit(run->event, 0);
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Run *run = userdata;

        if (run->stopped) {
                sd_event_exit(run->event, 0); /* a second Ctrl-C: do not wait for the server */
                return 0;
        }
        run->stopped = true;
        run->status = 128 + (int) si->ssi_signo;
        (void) agentix_request_cancel(run->request);
        return 0;
}

/* The error line says the first line of the message; a kernel that could not start says why in
 * the lines after it (its own output: a Python traceback, say). Shown whole, indented. */
static void print_error_detail(const agentix_error *e) {
        const char *nl = e->message ? strchr(e->message, '\n') : NULL;

        if (!nl || arg_quiet)
                return;
        for (const char *line = nl + 1; *line;) {
                size_t n = strcspn(line, "\n");

                fprintf(stderr, "    %.*s\n", (int) n, line);
                line += n + (line[n] == '\n');
        }
}

static int run_code(const char *code, const agentix_code_run_options *o, const char *images, bool no_images) {
        agentix_client *client = NULL;
        sd_event *event = NULL;
        Run run = { .images = images, .no_images = no_images };
        int r, status;

        r = sd_event_new(&event);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "code: cannot set up an event loop: %m");
        run.event = event;
        status = ctl_connect(event, 0, &client);
        if (status != EXIT_OK)
                goto finish;
        ctl_catch_stop_signals(event, on_signal, &run);
        r = agentix_code_run_async(client, code, o, &(agentix_request_handlers) { .item = on_item, .done = on_done },
                                   &run, &run.request, &run.error);
        if (r < 0) {
                status = fail_agentix(&run.error, "code: cannot run");
                goto finish;
        }
        r = sd_event_loop(event);
        if (r < 0)
                status = fail_errno(EXIT_SOFTWARE, r, "code: event loop failed: %m");
        else if (run.status != EXIT_OK)
                status = run.status;
        else if (run.failed) {
                status = fail_agentix(&run.error, "code: the run failed");
                print_error_detail(&run.error);
        }
        else
                status = run.raised ? EXIT_FAILED : EXIT_OK;
finish:
        free(run.made_dir);
        agentix_request_unref(run.request);
        agentix_error_done(&run.error);
        agentix_client_unref(client);
        sd_event_unref(event);
        return status;
}

/* --contexts: a table, or the list as JSON. */
static int list_contexts(agentix_client *client) {
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked result;
        json_t *list, *c;
        size_t i;

        if (agentix_call(client, "code::contexts", NULL, NULL, &result, &e) < 0) {
                int status = fail_agentix(&e, "code: cannot list the contexts");
                agentix_error_done(&e);
                return status;
        }
        list = msgpack_to_json(&result.data);
        msgpack_unpacked_destroy(&result);
        if (!json_is_array(list)) {
                json_decref(list);
                return fail(EXIT_PROTOCOL, "code::contexts returned something other than a list");
        }
        if (arg_json)
                return print_json(list) < 0 ? EXIT_IOERR : EXIT_OK;
        printf("%-24s %-10s %-10s %7s %-7s %6s  %s\n", "ID", "LANGUAGE", "KERNEL", "PID", "RUNNING", "QUEUED", "CWD");
        json_array_foreach(list, i, c)
                printf("%-24s %-10s %-10s %7" JSON_INTEGER_FORMAT " %-7s %6" JSON_INTEGER_FORMAT "  %s\n",
                       strna(json_string_value(json_object_get(c, "id"))),
                       strna(json_string_value(json_object_get(c, "language"))),
                       strna(json_string_value(json_object_get(c, "kernel"))),
                       json_integer_value(json_object_get(c, "pid")),
                       json_is_true(json_object_get(c, "running")) ? "yes" : "no",
                       json_integer_value(json_object_get(c, "queued")),
                       json_string_value(json_object_get(c, "cwd")) ?: "-");
        json_decref(list);
        return EXIT_OK;
}

enum {
        ARG_CONTEXT = ARG_COMMON_END,
        ARG_LANGUAGE,
        ARG_TIMEOUT,
        ARG_IMAGES,
        ARG_NO_IMAGES,
        ARG_NEW_CONTEXT,
        ARG_CWD,
        ARG_CONTEXTS,
        ARG_INTERRUPT,
        ARG_RESTART,
        ARG_DELETE_CONTEXT,
};

int verb_code(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "code", required_argument, NULL, 'c' },
                { "context", required_argument, NULL, ARG_CONTEXT },
                { "language", required_argument, NULL, ARG_LANGUAGE },
                { "env", required_argument, NULL, 'e' },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "output-dir", required_argument, NULL, ARG_IMAGES },
                { "images", required_argument, NULL, ARG_IMAGES }, /* its first name */
                { "no-images", no_argument, NULL, ARG_NO_IMAGES },
                { "new-context", no_argument, NULL, ARG_NEW_CONTEXT },
                { "cwd", required_argument, NULL, ARG_CWD },
                { "contexts", no_argument, NULL, ARG_CONTEXTS },
                { "interrupt", required_argument, NULL, ARG_INTERRUPT },
                { "restart", required_argument, NULL, ARG_RESTART },
                { "delete-context", required_argument, NULL, ARG_DELETE_CONTEXT },
                {}
        };
        _cleanup_buffer_ Buffer file = BUFFER_NULL;
        _cleanup_free_ char **env = NULL;
        const char *code = NULL, *images = NULL, *cwd = NULL, *target = NULL;
        bool no_images = false;
        agentix_code_run_options o = {};
        size_t n_env = 0;
        int c, action = 0, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "c:e:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("code", code_help, argv);
                case 'c':
                        code = optarg;
                        break;
                case ARG_CONTEXT:
                        o.context = optarg;
                        break;
                case ARG_LANGUAGE:
                        o.language = optarg;
                        break;
                case 'e':
                        if (env_append(&env, &n_env, optarg) < 0)
                                return fail_usage("code", "invalid --env '%s': expected KEY=VALUE or KEY", optarg);
                        break;
                case ARG_TIMEOUT:
                        if (parse_seconds(optarg, &o.timeout_sec) < 0)
                                return fail_usage("code", "--timeout=%s: a number of seconds", optarg);
                        break;
                case ARG_IMAGES:
                        images = optarg;
                        break;
                case ARG_NO_IMAGES:
                        no_images = true;
                        break;
                case ARG_CWD:
                        cwd = optarg;
                        break;
                case ARG_NEW_CONTEXT:
                case ARG_CONTEXTS:
                case ARG_INTERRUPT:
                case ARG_RESTART:
                case ARG_DELETE_CONTEXT:
                        if (action)
                                return fail_usage("code", "give one of --new-context, --contexts, --interrupt, "
                                                  "--restart, --delete-context");
                        action = c;
                        target = optarg;
                        break;
                }
        }
        if (action && (code || optind < argc || o.context || o.timeout_sec > 0))
                return fail_usage("code", "--new-context, --contexts, --interrupt, --restart and --delete-context "
                                  "run no code (and take no --context or --timeout)");
        if (cwd && action != ARG_NEW_CONTEXT)
                return fail_usage("code", "--cwd goes with --new-context (a context keeps its directory)");
        if (cwd && cwd[0] != '/')
                return fail_usage("code", "--cwd must be an absolute path: %s", cwd);
        if (action && action != ARG_NEW_CONTEXT && (o.language || env))
                return fail_usage("code", "--language and --env go with a run or --new-context");

        if (action) {
                agentix_error e = AGENTIX_ERROR_NULL;
                agentix_client *client = NULL;
                _cleanup_free_ char *id = NULL;
                int r;

                status = ctl_connect(NULL, 0, &client);
                if (status != EXIT_OK)
                        return status;
                switch (action) {
                case ARG_NEW_CONTEXT:
                        r = agentix_code_create_context(
                                client,
                                &(agentix_code_context_options) { .language = o.language, .cwd = cwd,
                                                                  .env = (const char *const *) env },
                                &id, &e);
                        if (r >= 0)
                                printf(arg_json ? "\"%s\"\n" : "%s\n", id);
                        break;
                case ARG_CONTEXTS:
                        status = list_contexts(client);
                        r = 0;
                        break;
                case ARG_INTERRUPT:
                        r = agentix_code_interrupt(client, target, &e);
                        break;
                case ARG_RESTART:
                        r = agentix_code_restart(client, target, &e);
                        break;
                default:
                        r = agentix_code_delete_context(client, target, &e);
                        break;
                }
                if (r < 0) {
                        status = fail_agentix(&e, "code: %s failed", argv[0]);
                        print_error_detail(&e); /* a kernel that would not start: why */
                }
                agentix_error_done(&e);
                agentix_client_unref(client);
                return status;
        }

        if (code && optind < argc)
                return fail_usage("code", "give the code once: -c CODE or FILE");
        if (optind + 1 < argc)
                return fail_usage("code", "takes one FILE");
        if (!code) {
                const char *name = optind < argc ? argv[optind] : "-";

                if (streq(name, "-") && isatty(STDIN_FILENO))
                        return fail_usage("code", "no code: give -c CODE, a FILE, or the code on standard input");
                status = ctl_read_local("code", name, CODE_MAX, &file);
                if (status != EXIT_OK)
                        return status;
                if (buffer_append(&file, "", 1) < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                if (strlen((const char *) buffer_data(&file)) + 1 != file.len)
                        return fail_usage("code", "'%s' holds a NUL byte: not code", name);
                code = (const char *) buffer_data(&file);
        }
        if (o.context && o.language)
                return fail_usage("code", "--context and --language do not go together: a context has its language");
        o.env = (const char *const *) env;
        return run_code(code, &o, images, no_images);
}
