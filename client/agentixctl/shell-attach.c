/* SPDX-License-Identifier: MIT */
/* agentixctl shell --session=NAME: a persistent shell session in the sandbox (shell::), opened
 * by that name when it is not open yet. On a terminal, a line at a time: each runs in the
 * session (Ctrl-C interrupts it), Ctrl-D detaches and the session stays. Otherwise the whole
 * of standard input is one run, and its status is ours. */
#include <errno.h>
#include <msgpack.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "envelope.h"
#include "fail.h"
#include "macro.h"
#include "shell-attach.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
        interrupted = 1;
}

/* The session exists (listed) or is opened now. Returns an exit status. */
static int ensure_session(agentix_client *client, const char *name, const ShellAttachOptions *o, bool *ret_opened) {
        _cleanup_free_ char *id = NULL;
        msgpack_unpacked r;
        agentix_error e = {};
        int k;

        msgpack_unpacked_init(&r);
        k = agentix_call(client, "shell::list", NULL, NULL, &r, &e);
        if (k < 0) {
                msgpack_unpacked_destroy(&r);
                k = fail_agentix(&e, "shell: cannot list the sandbox's sessions");
                agentix_error_done(&e);
                return k;
        }
        for (uint32_t i = 0; r.data.type == MSGPACK_OBJECT_ARRAY && i < r.data.via.array.size; i++) {
                const msgpack_object *listed = mp_map_get(&r.data.via.array.ptr[i], "id");

                if (listed && listed->type == MSGPACK_OBJECT_STR && listed->via.str.size == strlen(name) &&
                    memcmp(listed->via.str.ptr, name, listed->via.str.size) == 0) {
                        msgpack_unpacked_destroy(&r);
                        *ret_opened = false;
                        return EXIT_OK;
                }
        }
        msgpack_unpacked_destroy(&r);
        k = agentix_shell_open(client,
                               &(agentix_shell_options) { .cwd = o->cwd, .env = (const char *const *) o->env, .name = name },
                               &id, &e);
        if (k < 0 && !(e.type && streq(e.type, "SessionExists"))) {
                k = fail_agentix(&e, "shell: cannot open session '%s'", name);
                agentix_error_done(&e);
                return k;
        }
        agentix_error_done(&e);
        *ret_opened = k >= 0;
        return EXIT_OK;
}

/* Run command in the session; Ctrl-C meanwhile interrupts it there. Prints the output. Returns
 * an exit status: the command's, or ours on failure; *ret_ended when the session is over. */
static int run(agentix_client *client, const char *name, const char *command, bool *ret_ended) {
        _cleanup_(msgpack_sbuffer_destroy) msgpack_sbuffer args = {};
        agentix_request *req = NULL;
        msgpack_unpacked item;
        msgpack_packer pa;
        agentix_error e = {};
        const msgpack_object *out, *code, *ended;
        int k, status;

        msgpack_packer_init(&pa, &args, msgpack_sbuffer_write);
        msgpack_pack_array(&pa, 2);
        msgpack_pack_str_with_body(&pa, name, strlen(name));
        msgpack_pack_str_with_body(&pa, command, strlen(command));
        k = agentix_call_start(client, "shell::run", &(agentix_args) { .args = args.data, .args_size = args.size }, NULL,
                               &req);
        if (k < 0)
                return fail_errno(EXIT_FAILED, k, "shell: cannot start the command: %m");
        msgpack_unpacked_init(&item);
        for (;;) {
                k = agentix_request_next(req, &item, 100 * 1000, &e);
                if (k != -ETIMEDOUT)
                        break;
                agentix_error_done(&e);
                if (interrupted) {
                        agentix_error ie = {};

                        interrupted = 0;
                        if (agentix_shell_interrupt(client, name, &ie) < 0)
                                (void) fail_agentix(&ie, "shell: cannot interrupt the command");
                        agentix_error_done(&ie);
                }
        }
        agentix_request_unref(req);
        if (k < 0) {
                msgpack_unpacked_destroy(&item);
                status = fail_agentix(&e, "shell: session '%s'", name);
                if (e.type && streq(e.type, "SessionNotFound"))
                        *ret_ended = true;
                agentix_error_done(&e);
                return status;
        }
        out = mp_map_get(&item.data, "output");
        code = mp_map_get(&item.data, "exit_code");
        ended = mp_map_get(&item.data, "ended");
        if (out && out->type == MSGPACK_OBJECT_STR && out->via.str.size > 0) {
                fwrite(out->via.str.ptr, 1, out->via.str.size, stdout);
                if (isatty(STDIN_FILENO) && out->via.str.ptr[out->via.str.size - 1] != '\n')
                        fputc('\n', stdout); /* the next prompt on a line of its own */
                fflush(stdout);
        }
        status = code && code->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int) MIN(code->via.u64, 255u) : EXIT_FAILED;
        *ret_ended = ended && ended->type == MSGPACK_OBJECT_BOOLEAN && ended->via.boolean;
        msgpack_unpacked_destroy(&item);
        return status;
}

/* Wait for a line on stdin while the client's loop runs (its heartbeats keep the connection).
 * 1: readable, 0: interrupted (Ctrl-C at the prompt). */
static int wait_input(agentix_client *client) {
        sd_event *event = agentix_client_get_event(client);

        for (;;) {
                struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

                if (poll(&p, 1, 0) > 0)
                        return 1;
                if (interrupted) {
                        interrupted = 0;
                        return 0;
                }
                (void) sd_event_run(event, 100 * 1000);
        }
}

int shell_attach(agentix_client *client, const char *name, const ShellAttachOptions *o) {
        _cleanup_buffer_ Buffer line = BUFFER_NULL;
        struct sigaction sa = { .sa_handler = on_sigint };
        bool opened = false, ended = false;
        int status;

        status = ensure_session(client, name, o, &opened);
        if (status != EXIT_OK)
                return status;
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);

        if (!isatty(STDIN_FILENO)) {
                /* A script: all of it, one run. */
                _cleanup_buffer_ Buffer all = BUFFER_NULL;
                char buf[65536];
                ssize_t n;

                while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
                        if (buffer_append(&all, buf, (size_t) n) < 0)
                                return fail(EXIT_SOFTWARE, "out of memory");
                if (n < 0)
                        return fail_errno(EXIT_IOERR, errno, "shell: cannot read standard input: %m");
                if (buffer_append_byte(&all, 0) < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                return run(client, name, (const char *) buffer_data(&all), &ended);
        }

        if (!arg_quiet)
                fprintf(stderr, "%s session '%s' (Ctrl-C interrupts a command, Ctrl-D detaches)\n",
                        opened ? "Opened" : "Attached to", name);
        status = EXIT_OK;
        for (;;) {
                char *text = NULL;
                size_t size = 0;
                ssize_t n;
                int w;

                if (line.len)
                        fputs("> ", stderr);
                else
                        fprintf(stderr, "%s$ ", name);
                w = wait_input(client);
                if (w == 0) {
                        fputs("^C\n", stderr);
                        buffer_done(&line);
                        continue;
                }
                n = getline(&text, &size, stdin);
                if (n < 0) {
                        free(text);
                        break;
                }
                if (buffer_append(&line, text, (size_t) n) < 0) {
                        free(text);
                        return fail(EXIT_SOFTWARE, "out of memory");
                }
                free(text);
                /* A line ending in a backslash goes on on the next one. */
                if (line.len >= 2 && ((char *) buffer_data(&line))[line.len - 2] == '\\')
                        continue;
                if (buffer_append_byte(&line, 0) < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                if (strspn((const char *) buffer_data(&line), " \t\n") != line.len - 1)
                        status = run(client, name, (const char *) buffer_data(&line), &ended);
                buffer_done(&line);
                if (ended) {
                        if (!arg_quiet)
                                fprintf(stderr, "The session '%s' has ended.\n", name);
                        return status;
                }
        }
        fputc('\n', stderr);
        if (!arg_quiet)
                fprintf(stderr, "Detached from session '%s'; it goes on (agentixctl shell --session=%s attaches again, "
                        "--close ends it).\n", name, name);
        return EXIT_OK;
}

int shell_close(agentix_client *client, const char *name) {
        agentix_error e = {};
        int k;

        k = agentix_shell_close(client, name, &e);
        if (k < 0) {
                k = fail_agentix(&e, "shell: cannot close session '%s'", name);
                agentix_error_done(&e);
                return k;
        }
        return EXIT_OK;
}
