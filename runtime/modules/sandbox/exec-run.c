/* SPDX-License-Identifier: MIT */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "buffer.h"
#include "exec-spawn.h"
#include "log.h"
#include "pty.h"

/* Read size: one pipe's default capacity. */
#define EXEC_READ_SIZE (64u * 1024u)
/* With coalescing, hand over what was gathered once it reaches this size. */
#define EXEC_COALESCE_MAX (32u * 1024u)
/* How often cancellation is checked while the wait_fd is not watched: a bidi call whose
 * stdin buffer is full, or whose closed inbox keeps the fd readable. (Unary and stream calls
 * have no inbox; their wait_fd turns readable on cancellation only, so they watch it.) */
#define EXEC_CANCEL_CHECK_USEC (10u * 1000u)
/* How often the child is checked for exit when pidfd_open() is unavailable. */
#define EXEC_EXIT_POLL_USEC (2u * 1000u)
/* Inbox items taken per loop iteration, so output keeps flowing under a flood of input. */
#define EXEC_INBOX_BATCH 64

typedef struct ExecOutput {
        int fd;            /* borrowed from the child (ExecChild owns it) */
        ExecStream stream;
} ExecOutput;

struct ExecRun {
        ExecOptions opts;
        ExecChild child;

        ExecOutput outputs[2];
        size_t n_outputs;
        uint8_t *scratch;          /* EXEC_READ_SIZE */

        /* coalescing */
        Buffer pending;
        ExecStream pending_stream;
        uint64_t flush_at;         /* 0: nothing pending */

        uint64_t delivered, produced;

        /* stdin */
        int input_fd;              /* pipe write end or PTY master; -EBADF once closed/none */
        const uint8_t *input_ext;  /* the borrowed stdin_data, written before input_buf */
        size_t input_ext_left;
        Buffer input_buf;
        bool input_eof;            /* EOF requested: end stdin once drained */
        bool input_done;           /* stdin ended (closed, EOF sent, or the child closed it) */
        bool input_last_newline;   /* PTY: last byte written was a newline (or nothing written) */
        bool got_epipe;

        bool inbox_closed;

        /* the child */
        bool exited;
        int wait_status_code;      /* siginfo si_code / si_status of the shell */
        int wait_status;
        bool timed_out;
        bool reaped;
};

const char *exec_stream_to_string(ExecStream s) {
        switch (s) {
        case EXEC_STREAM_STDOUT:
                return "stdout";
        case EXEC_STREAM_STDERR:
                return "stderr";
        case EXEC_STREAM_PTY:
                return "pty";
        }
        return NULL;
}

pid_t exec_run_pid(const ExecRun *run) {
        return run->child.pid;
}

int exec_start(const ExecOptions *o, ExecRun **ret, ExecStage *ret_stage) {
        ExecRun *run;
        int r;

        run = calloc(1, sizeof(*run));
        if (!run) {
                if (ret_stage)
                        *ret_stage = EXEC_STAGE_SETUP;
                return -ENOMEM;
        }
        run->opts = *o;
        run->child = EXEC_CHILD_NULL;
        run->input_fd = -EBADF;
        run->input_last_newline = true;

        run->scratch = malloc(EXEC_READ_SIZE);
        if (!run->scratch) {
                free(run);
                if (ret_stage)
                        *ret_stage = EXEC_STAGE_SETUP;
                return -ENOMEM;
        }

        r = exec_spawn(o, &run->child, ret_stage);
        if (r < 0) {
                free(run->scratch);
                free(run);
                return r;
        }

        if (o->pty) {
                run->outputs[run->n_outputs++] = (ExecOutput) { run->child.pty_fd, EXEC_STREAM_PTY };
                run->input_fd = run->child.pty_fd;
        } else {
                run->outputs[run->n_outputs++] = (ExecOutput) { run->child.stdout_fd, EXEC_STREAM_STDOUT };
                if (run->child.stderr_fd >= 0)
                        run->outputs[run->n_outputs++] = (ExecOutput) { run->child.stderr_fd, EXEC_STREAM_STDERR };
                run->input_fd = run->child.stdin_fd;
        }

        if (o->stdin_mode != EXEC_STDIN_NULL && o->stdin_data) {
                run->input_ext = o->stdin_data;
                run->input_ext_left = o->stdin_size;
        }
        if (o->stdin_mode != EXEC_STDIN_INTERACTIVE)
                run->input_eof = true;
        if (run->input_fd < 0)
                run->input_done = true;

        *ret = run;
        return 0;
}

/* Kill the whole group. Safe until the shell is reaped: a zombie leader keeps its pid, and so
 * the group id, from being reused. */
static void exec_run_kill(ExecRun *run) {
        if (!run->reaped && run->child.pid > 0)
                (void) kill(-run->child.pid, SIGKILL);
}

static void exec_run_reap(ExecRun *run) {
        int status;

        if (run->reaped || run->child.pid <= 0)
                return;
        for (;;) {
                pid_t p = waitpid(run->child.pid, &status, 0);

                if (p >= 0 || errno != EINTR)
                        break;
        }
        run->reaped = true;
}

ExecRun *exec_run_free(ExecRun *run) {
        if (!run)
                return NULL;
        if (!run->reaped && !run->exited)
                exec_run_kill(run);
        exec_run_reap(run);
        exec_child_close(&run->child);
        buffer_done(&run->pending);
        buffer_done(&run->input_buf);
        free(run->scratch);
        free(run);
        return NULL;
}

int exec_run_write_stdin(ExecRun *run, const void *data, size_t size) {
        if (run->input_done || run->input_eof)
                return 0;
        return buffer_append(&run->input_buf, data, size);
}

void exec_run_close_stdin(ExecRun *run) {
        run->input_eof = true;
}

int exec_run_signal(ExecRun *run, int sig) {
        if (run->reaped)
                return -ESRCH;
        if (kill(-run->child.pid, sig) < 0)
                return negative_errno();
        return 0;
}

int exec_run_resize(ExecRun *run, unsigned rows, unsigned cols) {
        if (run->child.pty_fd < 0)
                return -ENOTTY;
        return pty_resize(run->child.pty_fd, rows, cols);
}

static bool exec_run_input_pending(const ExecRun *run) {
        return run->input_ext_left > 0 || run->input_buf.len > 0;
}

static bool exec_run_input_has_room(const ExecRun *run) {
        return run->input_done || run->input_buf.len < EXEC_STDIN_BUFFER_MAX;
}

/* ---- output ---- */

static int exec_run_flush(ExecRun *run, const ExecHooks *h) {
        int r = 0;

        if (run->pending.len > 0)
                r = h->on_output(h->userdata, run->pending_stream, buffer_data(&run->pending), run->pending.len);
        buffer_clear(&run->pending);
        run->flush_at = 0;
        return r;
}

static int exec_run_deliver(ExecRun *run, const ExecHooks *h, ExecStream stream, const uint8_t *p, size_t n, uint64_t now) {
        uint64_t room;
        int r;

        run->produced += n;
        room = run->opts.max_output - run->delivered;
        if (n > room)
                n = (size_t) room;
        if (n == 0)
                return 0;
        run->delivered += n;

        if (run->opts.coalesce_usec == 0)
                return h->on_output(h->userdata, stream, p, n);

        /* Never reorder: output of the other stream goes out first. */
        if (run->pending.len > 0 && run->pending_stream != stream) {
                r = exec_run_flush(run, h);
                if (r < 0)
                        return r;
        }
        r = buffer_append(&run->pending, p, n);
        if (r < 0)
                return r;
        run->pending_stream = stream;
        if (run->flush_at == 0)
                run->flush_at = now + run->opts.coalesce_usec;
        if (run->pending.len >= EXEC_COALESCE_MAX)
                return exec_run_flush(run, h);
        return 0;
}

/* Read once from output i. Returns 1 if the output is still open, 0 at EOF, <0 if the
 * output hook failed. */
static int exec_run_read(ExecRun *run, const ExecHooks *h, size_t i, uint64_t now) {
        ExecOutput *o = &run->outputs[i];
        ssize_t k;
        int r;

        k = read(o->fd, run->scratch, EXEC_READ_SIZE);
        if (k < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 1;
                /* EIO: the PTY slave has been closed by everyone — that is the PTY's EOF. */
                if (errno != EIO)
                        log_debug_errno(errno, "Reading command output failed, treating as EOF: %m");
                return 0;
        }
        if (k == 0)
                return 0;
        r = exec_run_deliver(run, h, o->stream, run->scratch, (size_t) k, now);
        return r < 0 ? r : 1;
}

/* ---- input ---- */

static void exec_run_input_end(ExecRun *run) {
        run->input_done = true;
        run->input_ext_left = 0;
        buffer_clear(&run->input_buf);
        /* The PTY master is also the output; it stays open. */
        if (run->input_fd == run->child.stdin_fd) {
                run->child.stdin_fd = safe_close(run->child.stdin_fd);
        }
        run->input_fd = -EBADF;
}

/* On a PTY, EOF is the VEOF character, which only ends input at the start of a line; mid-line
 * it just pushes the partial line out, so send a second one. */
static void exec_run_pty_send_eof(ExecRun *run) {
        unsigned char eof[2];
        ssize_t k;

        if (pty_eof_char(run->input_fd, &eof[0]) < 0)
                eof[0] = 4; /* ^D */
        eof[1] = eof[0];
        k = write(run->input_fd, eof, run->input_last_newline ? 1 : 2);
        (void) k; /* a full or hung-up terminal: nothing more to do */
}

static int exec_run_write_some(ExecRun *run, const uint8_t *p, size_t n, size_t *ret_written) {
        ssize_t k = write(run->input_fd, p, n);

        if (k < 0) {
                if (errno == EAGAIN || errno == EINTR) {
                        *ret_written = 0;
                        return 0;
                }
                if (errno == EPIPE)
                        run->got_epipe = true;
                return negative_errno();
        }
        *ret_written = (size_t) k;
        if (k > 0 && run->opts.pty)
                run->input_last_newline = p[k - 1] == '\n' || p[k - 1] == '\r';
        return 0;
}

/* Write what is queued; when drained and EOF was asked for, end stdin. */
static void exec_run_pump_input(ExecRun *run) {
        size_t w;
        int r;

        if (run->input_done)
                return;

        while (run->input_ext_left > 0) {
                r = exec_run_write_some(run, run->input_ext, run->input_ext_left, &w);
                if (r < 0)
                        return exec_run_input_end(run); /* EPIPE: the child does not want it */
                if (w == 0)
                        return;
                run->input_ext += w;
                run->input_ext_left -= w;
        }
        while (run->input_buf.len > 0) {
                r = exec_run_write_some(run, buffer_data(&run->input_buf), run->input_buf.len, &w);
                if (r < 0)
                        return exec_run_input_end(run);
                if (w == 0)
                        return;
                buffer_consume(&run->input_buf, w);
        }

        if (run->input_eof) {
                if (run->opts.pty)
                        exec_run_pty_send_eof(run);
                exec_run_input_end(run);
        }
}

/* ---- the child ---- */

/* Record the shell's exit without reaping it (WNOWAIT), so the group id stays ours. */
static int exec_run_check_exit(ExecRun *run) {
        siginfo_t si = {};

        if (waitid(P_PID, (id_t) run->child.pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
                if (errno == EINTR)
                        return 0;
                return negative_errno();
        }
        if (si.si_pid == 0)
                return 0; /* still running */
        run->exited = true;
        run->wait_status_code = si.si_code;
        run->wait_status = si.si_status;
        return 1;
}

static void exec_run_result(const ExecRun *run, ExecResult *ret) {
        *ret = (ExecResult) {
                .timed_out = run->timed_out,
                .truncated = run->produced > run->delivered,
                .output_size = run->produced,
        };
        if (run->wait_status_code == CLD_EXITED)
                ret->exit_code = run->wait_status;
        else {
                ret->signal = run->wait_status;
                ret->exit_code = 128 + run->wait_status;
        }
        if (run->timed_out)
                ret->exit_code = EXEC_EXIT_TIMEOUT;
}

static uint64_t min_deadline(uint64_t a, uint64_t b) {
        if (a == 0)
                return b;
        if (b == 0)
                return a;
        return MIN(a, b);
}

/* Take the urgent items (signals, resizes) waiting at the head of the inbox, even while the
 * stdin buffer is full. Returns <0 to stop the run. */
static int exec_run_pump_urgent(ExecRun *run, const ExecHooks *h) {
        if (!h->on_inbox_urgent || run->inbox_closed)
                return 0;
        for (unsigned i = 0; i < EXEC_INBOX_BATCH; i++) {
                int r = h->on_inbox_urgent(h->userdata, run);

                if (r < 0)
                        return r;
                if (r != EXEC_INBOX_ITEM)
                        break;
        }
        return 0;
}

/* Whether output may be read now (see ExecHooks.output_ready): past max_output it is read
 * and dropped, and after a timeout the rest is small and must not keep the call waiting. */
static bool exec_run_output_ready(const ExecRun *run, const ExecHooks *h) {
        return !h->output_ready || run->timed_out || run->delivered >= run->opts.max_output ||
               h->output_ready(h->userdata);
}

/* Run the inbox hook while there is room. Returns <0 to stop the run. */
static int exec_run_pump_inbox(ExecRun *run, const ExecHooks *h, bool *ret_progress) {
        *ret_progress = false;
        for (unsigned i = 0; i < EXEC_INBOX_BATCH && !run->inbox_closed && exec_run_input_has_room(run); i++) {
                int r = h->on_inbox(h->userdata, run);

                if (r < 0)
                        return r;
                if (r == EXEC_INBOX_EMPTY)
                        break;
                *ret_progress = true;
                if (r == EXEC_INBOX_CLOSED) {
                        run->inbox_closed = true;
                        exec_run_close_stdin(run);
                }
        }
        return 0;
}

static int exec_run_loop_inner(ExecRun *run, const ExecHooks *h) {
        uint64_t deadline = 0, grace_until = 0, now = now_usec(), park_until = 0;
        unsigned spurious = 0;
        int r;

        if (run->opts.timeout_usec > 0)
                deadline = now + run->opts.timeout_usec;

        for (;;) {
                struct pollfd p[6];
                size_t n = 0, i_pid = SIZE_MAX, i_in = SIZE_MAX, i_wait = SIZE_MAX, i_out[2] = { SIZE_MAX, SIZE_MAX };
                uint64_t wake = 0;
                bool watch_wait, inbox_wanted, output_ok;

                exec_run_pump_input(run);

                now = now_usec();
                if (deadline > 0 && now >= deadline && !run->timed_out) {
                        /* The shell already exited: the deadline only cuts the grace short. */
                        if (run->exited)
                                return 0;
                        /* Timed out: kill the group, then collect what is left as usual. */
                        exec_run_kill(run);
                        run->timed_out = true;
                }
                /* The client is behind: leave the output in the pipes (the child blocks when they
                 * are full) until the call may send again. */
                output_ok = exec_run_output_ready(run, h);
                if (output_ok && run->flush_at > 0 && now >= run->flush_at) {
                        r = exec_run_flush(run, h);
                        if (r < 0)
                                return r;
                }
                /* The exit grace is for background jobs that keep the pipes open, not for output
                 * we hold back ourselves: it starts over once we read again. */
                if (!output_ok && grace_until > 0)
                        grace_until = now + run->opts.exit_grace_usec;
                if (run->exited && (run->n_outputs == 0 || (grace_until > 0 && now >= grace_until)))
                        return 0;

                if (!run->exited && run->child.pidfd >= 0) {
                        i_pid = n;
                        p[n++] = (struct pollfd) { .fd = run->child.pidfd, .events = POLLIN };
                }
                for (size_t i = 0; output_ok && i < run->n_outputs; i++) {
                        i_out[i] = n;
                        p[n++] = (struct pollfd) { .fd = run->outputs[i].fd, .events = POLLIN };
                }
                if (!output_ok)
                        p[n++] = (struct pollfd) { .fd = h->output_fd, .events = POLLIN };
                if (!run->input_done && exec_run_input_pending(run)) {
                        i_in = n;
                        p[n++] = (struct pollfd) { .fd = run->input_fd, .events = POLLOUT };
                }

                /* The wait_fd means "cancelled, or the inbox has something". Watch it only when
                 * we would take an item; otherwise it may stay readable while we don't want
                 * it, and we check for cancellation on a timer instead. */
                inbox_wanted = h->on_inbox && !run->inbox_closed && !run->exited && exec_run_input_has_room(run);
                watch_wait = h->wait_fd >= 0 && now >= park_until && (inbox_wanted || !h->on_inbox);
                if (watch_wait) {
                        i_wait = n;
                        p[n++] = (struct pollfd) { .fd = h->wait_fd, .events = POLLIN };
                } else if (h->is_cancelled || h->on_inbox_urgent)
                        wake = now + MIN(EXEC_CANCEL_CHECK_USEC, EXEC_URGENT_CHECK_USEC);

                if (!run->exited && run->child.pidfd < 0)
                        wake = min_deadline(wake, now + EXEC_EXIT_POLL_USEC);
                if (!run->timed_out)
                        wake = min_deadline(wake, deadline);
                if (output_ok) {
                        wake = min_deadline(wake, run->flush_at);
                        wake = min_deadline(wake, grace_until);
                }

                struct timespec ts, *tsp = NULL;
                if (wake > 0) {
                        uint64_t d = wake > now ? wake - now : 0;
                        ts = (struct timespec) { .tv_sec = (time_t) (d / 1000000), .tv_nsec = (long) (d % 1000000) * 1000 };
                        tsp = &ts;
                }

                if (ppoll(p, n, tsp, NULL) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "ppoll() failed: %m");
                }
                now = now_usec();

                /* Cancellation first: it must win over everything else. */
                if (h->is_cancelled &&
                    ((i_wait != SIZE_MAX && p[i_wait].revents) || !watch_wait) &&
                    h->is_cancelled(h->userdata))
                        return -ECANCELED;

                /* A signal or a resize must not wait behind stdin the child does not read. */
                if (!watch_wait) {
                        r = exec_run_pump_urgent(run, h);
                        if (r < 0)
                                return r;
                }

                /* Output before the exit status, so nothing written just before exit is lost. */
                for (size_t i = 0, n_open = output_ok ? run->n_outputs : 0; i < n_open; i++) {
                        if (!p[i_out[i]].revents)
                                continue;
                        r = exec_run_read(run, h, i, now);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                run->outputs[i].fd = -EBADF; /* compacted below; ExecChild closes it */
                }
                for (size_t i = 0; i < run->n_outputs;)
                        if (run->outputs[i].fd < 0) {
                                memmove(run->outputs + i, run->outputs + i + 1, (run->n_outputs - i - 1) * sizeof(ExecOutput));
                                run->n_outputs--;
                        } else
                                i++;
                if (i_in != SIZE_MAX && (p[i_in].revents & (POLLERR | POLLHUP)) && !run->opts.pty) {
                        /* The child closed its stdin: drop what is queued. */
                        run->got_epipe = true;
                        exec_run_input_end(run);
                }

                if (!run->exited &&
                    ((i_pid != SIZE_MAX && p[i_pid].revents) || run->child.pidfd < 0 || run->n_outputs == 0)) {
                        r = exec_run_check_exit(run);
                        if (r < 0)
                                return log_error_errno(r, "waitid() failed: %m");
                        if (r > 0)
                                grace_until = now + run->opts.exit_grace_usec;
                }

                if (i_wait != SIZE_MAX && p[i_wait].revents && inbox_wanted) {
                        bool progress;

                        r = exec_run_pump_inbox(run, h, &progress);
                        if (r < 0)
                                return r;
                        /* A wait_fd that stays readable with nothing to take would spin us. */
                        spurious = progress ? 0 : spurious + 1;
                        if (spurious >= 3) {
                                park_until = now + EXEC_CANCEL_CHECK_USEC;
                                spurious = 0;
                        }
                } else if (i_wait != SIZE_MAX && p[i_wait].revents && !h->on_inbox)
                        park_until = now + EXEC_CANCEL_CHECK_USEC; /* readable, not cancelled */
        }
}

int exec_run_loop(ExecRun *run, const ExecHooks *h, ExecResult *ret) {
        sigset_t pipe_set, saved;
        int r;

        /* A write to a pipe whose reader is gone raises SIGPIPE in this thread; block it for
         * the run and take any pending one back afterwards, so the worker is never killed by
         * a child that closed its stdin. */
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        (void) pthread_sigmask(SIG_BLOCK, &pipe_set, &saved);

        r = exec_run_loop_inner(run, h);
        if (r >= 0)
                r = exec_run_flush(run, h);

        if (r < 0 || !run->exited) {
                /* Cancelled or a hook failed: kill the group and reap at once. */
                exec_run_kill(run);
                exec_run_reap(run);
        } else {
                exec_run_result(run, ret);
                exec_run_reap(run);
        }

        if (run->got_epipe) {
                static const struct timespec zero = {};
                (void) sigtimedwait(&pipe_set, NULL, &zero);
        }
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        return r < 0 ? r : 0;
}
