/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "envelope.h"
#include "exec-session.h"
#include "fail.h"
#include "json-msgpack.h"
#include "output.h"
#include "stdin-reader.h"
#include "terminal.h"

/* Items of an exec stream are small (the server sends at most 32 KiB of output per item), and
 * our stdin goes in chunks of at most STDIN_CHUNK. */
#define EXEC_MAX_MESSAGE (4u * 1024 * 1024)

typedef struct Session {
        const char *verb;
        const ExecSpec *spec;
        sd_event *event;
        agentix_client *client;
        agentix_request *request;
        bool bidi;

        bool done;
        bool failed;
        agentix_error error;
        bool have_exit;
        int exit_code;
        bool timed_out, truncated;

        int signal;              /* the signal we cancelled the call for; 0: none */
        bool output_broken;      /* our stdout/stderr went away: the call was cancelled */
        int output_error;

        Buffer out, err;         /* --json: the output, gathered */
        StdinReader *stdin_reader;
} Session;

static void session_done(Session *s) {
        stdin_reader_free(s->stdin_reader);
        agentix_request_unref(s->request);
        agentix_client_unref(s->client);
        sd_event_unref(s->event);
        agentix_error_done(&s->error);
        buffer_done(&s->out);
        buffer_done(&s->err);
}

/* A regular file as stdin, small enough to travel as the call's `stdin` argument: one message
 * instead of a chunk at a time through the bidi inbox, which the server then feeds to the
 * command at the command's pace. */
#define STDIN_ARGUMENT_MAX (64u * 1024 * 1024)

/* Our stdin when it is a regular file of at most STDIN_ARGUMENT_MAX bytes: 1 with its contents
 * in ret, 0 when it is anything else. */
static int read_stdin_file(Buffer *ret) {
        struct stat st;

        if (fstat(STDIN_FILENO, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        off_t pos = lseek(STDIN_FILENO, 0, SEEK_CUR);
        if (pos < 0 || st.st_size - pos > (off_t) STDIN_ARGUMENT_MAX)
                return 0;
        for (;;) {
                ssize_t n;
                int r = buffer_reserve(ret, 64 * 1024);

                if (r < 0)
                        return r;
                n = read(STDIN_FILENO, buffer_data(ret) + ret->len, 64 * 1024);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 1;
                ret->len += (size_t) n;
                if (ret->len > STDIN_ARGUMENT_MAX)
                        return -EFBIG;
        }
}

static int pack_kwargs(const ExecSpec *spec, bool with_size, unsigned rows, unsigned cols, const Buffer *stdin_data,
                       Buffer *b) {
        const char *term = spec->tty ? getenv("TERM") : NULL;
        size_t n_env = 0, n = 4; /* command, timeout, max_output, pty */
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, b);

        for (char **e = spec->env; e && *e; e++) {
                n_env++;
                if (term && strneq(*e, "TERM", 4) && ((*e)[4] == '=' || (*e)[4] == 0))
                        term = NULL; /* the user's own TERM wins */
        }
        if (term)
                n_env++;
        n += !!spec->cwd + !!n_env + !!spec->shell + (with_size ? 2 : 0) + !!stdin_data;

        r |= msgpack_pack_map(&pk, n);
        r |= mp_pack_cstr(&pk, "command");
        r |= mp_pack_cstr(&pk, spec->command);
        r |= mp_pack_cstr(&pk, "timeout");
        r |= msgpack_pack_double(&pk, spec->timeout_sec);
        r |= mp_pack_cstr(&pk, "max_output");
        r |= msgpack_pack_int64(&pk, spec->max_output < 0 ? INT64_MAX : spec->max_output);
        r |= mp_pack_cstr(&pk, "pty");
        r |= spec->tty ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
        if (with_size) {
                r |= mp_pack_cstr(&pk, "rows");
                r |= msgpack_pack_unsigned_int(&pk, rows);
                r |= mp_pack_cstr(&pk, "cols");
                r |= msgpack_pack_unsigned_int(&pk, cols);
        }
        if (stdin_data) {
                r |= mp_pack_cstr(&pk, "stdin");
                r |= msgpack_pack_bin_with_body(&pk, buffer_data(stdin_data), stdin_data->len);
        }
        if (spec->cwd) {
                r |= mp_pack_cstr(&pk, "cwd");
                r |= mp_pack_cstr(&pk, spec->cwd);
        }
        if (spec->shell) {
                r |= mp_pack_cstr(&pk, "shell");
                r |= mp_pack_cstr(&pk, spec->shell);
        }
        if (n_env > 0) {
                r |= mp_pack_cstr(&pk, "env");
                r |= msgpack_pack_map(&pk, n_env);
                for (char **e = spec->env; e && *e; e++) {
                        const char *eq = strchr(*e, '=');

                        r |= mp_pack_str(&pk, *e, eq ? (size_t) (eq - *e) : strlen(*e));
                        r |= eq ? mp_pack_cstr(&pk, eq + 1) : msgpack_pack_nil(&pk);
                }
                if (term) {
                        r |= mp_pack_cstr(&pk, "TERM");
                        r |= mp_pack_cstr(&pk, term);
                }
        }
        return r != 0 ? -ENOMEM : 0;
}

/* Send one inbox item, a map with one key; value packed by `pack`. Urgent items (signals,
 * resizes) go ahead of stdin that waits for the window, so a flood of input never holds up a
 * Ctrl-C. -EAGAIN: the inbox is full, the writable handler says when to go on. */
static int send_item(Session *s, const char *key, int (*pack)(msgpack_packer *pk, const void *p, size_t n),
                     const void *p, size_t n, bool urgent) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_packer pk;
        int r;

        mp_packer_init_buffer(&pk, &b);
        if (msgpack_pack_map(&pk, 1) < 0 || mp_pack_cstr(&pk, key) < 0 || pack(&pk, p, n) < 0)
                return -ENOMEM;
        r = urgent ? agentix_request_send_urgent(s->request, buffer_data(&b), b.len)
                   : agentix_request_send(s->request, buffer_data(&b), b.len);
        /* A call that already ended takes no more input: nothing to worry about. */
        return agentix_request_is_done(s->request) ? 0 : r;
}

static int pack_bin(msgpack_packer *pk, const void *p, size_t n) {
        return msgpack_pack_bin_with_body(pk, p, n);
}

static int pack_str(msgpack_packer *pk, const void *p, size_t n) {
        return mp_pack_cstr(pk, p);
}

static int pack_size(msgpack_packer *pk, const void *p, size_t n) {
        const unsigned *size = p;

        if (msgpack_pack_array(pk, 2) < 0 || msgpack_pack_unsigned_int(pk, size[0]) < 0)
                return -ENOMEM;
        return msgpack_pack_unsigned_int(pk, size[1]);
}

static void send_resize(Session *s) {
        unsigned size[2];

        if (terminal_get_size(STDIN_FILENO, &size[0], &size[1]) < 0)
                return;
        (void) send_item(s, "resize", pack_size, size, sizeof(size), true);
}

/* A chunk of our stdin. When the call's inbox is full (-EAGAIN) the reader keeps the chunk and
 * stops reading until on_writable(): a producer piping into us waits for the command. */
static int on_stdin(const void *data, size_t size, void *userdata) {
        Session *s = userdata;
        int r;

        if (!data) {
                r = agentix_request_close_inbox(s->request);
                return r == -ENOBUFS ? r : 0;
        }
        return send_item(s, "stdin", pack_bin, data, size, false);
}

static void on_writable(agentix_request *r, void *userdata) {
        Session *s = userdata;

        stdin_reader_resume(s->stdin_reader);
}

static const char *signal_name(int sig) {
        return sig == SIGINT ? "INT" : sig == SIGQUIT ? "QUIT" : sig == SIGTERM ? "TERM" : "HUP";
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Session *s = userdata;
        int sig = (int) si->ssi_signo;

        if (sig == SIGWINCH) {
                send_resize(s);
                return 0;
        }
        /* Interrupts are the command's business when it has our input (like a terminal would
         * pass them on); anything else means the user wants out. */
        if (s->bidi && (sig == SIGINT || sig == SIGQUIT)) {
                (void) send_item(s, "signal", pack_str, signal_name(sig), 0, true);
                return 0;
        }
        if (s->signal != 0) {
                /* Asked twice: stop waiting for the cancellation to come back. */
                sd_event_exit(s->event, 0);
                return 0;
        }
        s->signal = sig;
        (void) agentix_request_cancel(s->request);
        return 0;
}

static void output_write(Session *s, int fd, const void *data, size_t n) {
        int r;

        if (s->output_broken)
                return;
        if (arg_json)
                r = buffer_append(fd == STDERR_FILENO ? &s->err : &s->out, data, n);
        else
                r = write_all(fd, data, n);
        if (r < 0) {
                /* Like `cmd | head`: the reader is gone, so the command may go too. */
                s->output_broken = true;
                s->output_error = r;
                (void) agentix_request_cancel(s->request);
        }
}

static bool map_get_bool(const msgpack_object *map, const char *key) {
        const msgpack_object *v = mp_map_get(map, key);

        return v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
}

static void on_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Session *s = userdata;
        const msgpack_object *stream = mp_map_get(v, "stream"), *data = mp_map_get(v, "data");
        int64_t code;

        if (stream && data && (data->type == MSGPACK_OBJECT_BIN || data->type == MSGPACK_OBJECT_STR)) {
                int fd = mp_str_eq(stream, "stderr") ? STDERR_FILENO : STDOUT_FILENO;

                output_write(s, fd, data->via.bin.ptr, data->via.bin.size);
                return;
        }
        if (mp_map_get_int(v, "exit_code", &code) >= 0) {
                s->have_exit = true;
                s->exit_code = (int) code;
                s->timed_out = map_get_bool(v, "timed_out");
                s->truncated = map_get_bool(v, "truncated");
        }
}

static char *strdup_or_null(const char *p) {
        return p ? strdup(p) : NULL;
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Session *s = userdata;

        s->done = true;
        if (e && e->kind != AGENTIX_E_NONE) {
                s->failed = true;
                s->error = *e;
                s->error.type = strdup_or_null(e->type);
                s->error.message = strdup_or_null(e->message);
                s->error.traceback = NULL;
        }
        sd_event_exit(s->event, 0);
}

static int print_json_result(Session *s) {
        return print_json(json_pack("{s:i,s:o,s:o,s:b,s:b}", "exit_code", s->exit_code, "stdout",
                                    json_from_bytes(buffer_data(&s->out), s->out.len), "stderr",
                                    json_from_bytes(buffer_data(&s->err), s->err.len), "timed_out", s->timed_out,
                                    "truncated", s->truncated));
}

static int session_status(Session *s) {
        if (s->output_broken)
                return s->output_error == -EPIPE    ? 128 + SIGPIPE
                     : s->output_error == -ENOMEM ? fail(EXIT_SOFTWARE, "out of memory")
                                                  : fail_errno(EXIT_IOERR, s->output_error, "%s: cannot write the output: %m", s->verb);
        if (s->signal != 0 && (!s->done || (s->failed && s->error.kind == AGENTIX_E_CANCELLED)))
                return 128 + s->signal;
        if (s->failed)
                return fail_agentix(&s->error, "%s", s->verb);
        if (!s->have_exit)
                return fail(EXIT_PROTOCOL, "%s: the call ended without an exit status", s->verb);

        if (s->timed_out && !arg_quiet)
                fprintf(stderr, "agentixctl: %s: timed out after %g s\n", s->verb, s->spec->timeout_sec);
        if (s->truncated && !arg_quiet)
                fprintf(stderr, "agentixctl: %s: output cut after %lld bytes (--max-output)\n", s->verb,
                        (long long) s->spec->max_output);
        if (arg_json) {
                int r = print_json_result(s);
                if (r != EXIT_OK)
                        return r;
        }
        /* Statuses beyond 255 cannot be exit statuses: keep them non-zero at least. */
        return s->exit_code >= 0 && s->exit_code <= 255 ? s->exit_code : EXIT_FAILED;
}

int exec_session_run(const char *verb, const ExecSpec *spec) {
        _cleanup_(session_done) Session s = {
                .verb = verb,
                .spec = spec,
                .bidi = spec->interactive || spec->tty,
        };
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL, stdin_file = BUFFER_NULL;
        unsigned rows = 0, cols = 0;
        bool with_size, stdin_as_argument = false;
        sigset_t mask;
        int r, status;

        r = sd_event_new(&s.event);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "%s: cannot set up an event loop: %m", verb);
        if (spec->interactive && !spec->tty) {
                r = read_stdin_file(&stdin_file);
                if (r < 0)
                        return fail_errno(r == -ENOMEM ? EXIT_SOFTWARE : EXIT_IOERR, r, "%s: cannot read stdin: %m", verb);
                if (r > 0) {
                        stdin_as_argument = true;
                        s.bidi = false; /* nothing left to forward: a stream call */
                }
        }

        /* With stdin as an argument, the call itself is as large as that. */
        status = ctl_connect(s.event, stdin_as_argument ? 0 : EXEC_MAX_MESSAGE, &s.client);
        if (status != EXIT_OK)
                return status;

        with_size = spec->tty && terminal_get_size(STDIN_FILENO, &rows, &cols) >= 0;
        if (pack_kwargs(spec, with_size, rows, cols, stdin_as_argument ? &stdin_file : NULL, &kwargs) < 0)
                return fail(EXIT_SOFTWARE, "out of memory");
        buffer_done(&stdin_file);

        /* Our signals become events, so that every way out restores the terminal and ends the
         * remote command. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        if (spec->tty)
                sigaddset(&mask, SIGWINCH);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                if (sigismember(&mask, sig) > 0) {
                        r = sd_event_add_signal(s.event, NULL, sig, on_signal, &s);
                        if (r < 0)
                                return fail_errno(EXIT_SOFTWARE, r, "%s: cannot watch signals: %m", verb);
                }

        agentix_args args = { .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len };
        agentix_call_options co = { .shape = s.bidi ? AGENTIX_CALL_BIDI : AGENTIX_CALL_STREAM };
        agentix_request_handlers h = { .item = on_item, .done = on_done };
        r = agentix_call_async(s.client, "sandbox::exec", &args, &co, &h, &s, &s.request);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "%s: cannot start the call: %m", verb);

        if (s.bidi && spec->interactive) {
                agentix_request_set_writable_handler(s.request, on_writable, &s);
                r = stdin_reader_new(s.event, on_stdin, &s, &s.stdin_reader);
                if (r < 0)
                        return fail_errno(EXIT_IOERR, r, "%s: cannot read stdin: %m", verb);
        }
        if (spec->tty && spec->interactive)
                (void) terminal_make_raw(STDIN_FILENO); /* -ENOTTY: not a terminal, nothing to do */

        r = sd_event_loop(s.event);
        terminal_restore();
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "%s: event loop failed: %m", verb);
        if (!s.done && s.signal == 0)
                return fail(EXIT_SOFTWARE, "%s: the call did not finish", verb);

        return session_status(&s);
}
