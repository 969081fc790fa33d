/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "frame.h"
#include "log.h"
#include "worker-link.h"

extern char **environ;

/* The worker finds its frame socket here (fd 3 is free in a fresh exec). */
#define WORKER_FRAME_FD 3

struct WorkerLink {
        sd_event *event;
        WorkerLinkConfig config;
        WorkerLinkCallbacks callbacks;
        void *userdata;

        pid_t pid;
        int fd;
        bool ready;
        bool eof;
        sd_event_source *io;
        sd_event_source *kill_timer;
        FrameReader reader;
        Buffer out;
        size_t out_sent;
};

static void link_close_socket(WorkerLink *w) {
        w->io = sd_event_source_disable_unref(w->io);
        w->fd = safe_close(w->fd);
        frame_reader_done(&w->reader);
        buffer_done(&w->out);
        w->out_sent = 0;
}

static int flush_out(WorkerLink *w) {
        while (w->out_sent < w->out.len) {
                ssize_t k = send(w->fd, buffer_data(&w->out) + w->out_sent, w->out.len - w->out_sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return negative_errno();
                }
                w->out_sent += (size_t) k;
        }
        if (w->out_sent == w->out.len) {
                w->out_sent = 0;
                buffer_clear(&w->out);
                if (w->out.cap > 4 * 1024 * 1024)
                        buffer_done(&w->out);
        }
        if (w->io)
                (void) sd_event_source_set_io_events(w->io, EPOLLIN | (w->out.len > 0 ? EPOLLOUT : 0));
        return 0;
}

/* Process every complete frame in the reader. */
static int drain_frames(WorkerLink *w) {
        for (;;) {
                const uint8_t *payload;
                uint8_t kind;
                size_t size;
                int r;

                r = frame_reader_peek(&w->reader, &kind, &payload, &size);
                if (r <= 0)
                        return r;
                if (kind == FRAME_READY) {
                        w->ready = true;
                        if (w->callbacks.ready)
                                w->callbacks.ready(w, w->userdata);
                } else if (w->callbacks.frame)
                        w->callbacks.frame(w, kind, payload, size, &w->reader, w->userdata);
                frame_reader_consume(&w->reader);
        }
}

static int read_available(WorkerLink *w) {
        for (int i = 0; i < 64 && !w->eof; i++) {
                ssize_t k = frame_reader_fill(&w->reader, w->fd);
                if (k == -EAGAIN)
                        break;
                if (k < 0)
                        return (int) k;
                if (k == 0) {
                        w->eof = true;
                        break;
                }
                int r = drain_frames(w);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        WorkerLink *w = userdata;
        int r;

        if (revents & EPOLLOUT) {
                r = flush_out(w);
                if (r < 0)
                        log_debug_errno(r, "Writing to the worker failed: %m");
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                r = read_available(w);
                if (r < 0) {
                        /* A worker speaking garbage is as good as dead. */
                        log_error_errno(r, "Bad frame from the worker, killing it: %m");
                        w->eof = true;
                }
                if (w->eof) {
                        w->io = sd_event_source_disable_unref(w->io);
                        if (w->pid > 0)
                                (void) kill(w->pid, SIGKILL);
                }
        }
        return 0;
}

bool worker_link_child_exited(WorkerLink *w, pid_t pid, int status) {
        int returncode;

        if (!w || w->pid <= 0 || pid != w->pid)
                return false;

        /* Deliver whatever the worker managed to write before it died. */
        if (w->fd >= 0 && !w->eof)
                (void) read_available(w);

        returncode = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        log_full_errno(returncode == 0 ? LOG_INFO : LOG_WARNING, 0, "Worker %d %s %d.", (int) w->pid,
                       WIFEXITED(status) ? "exited with status" : "was killed by signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));

        w->kill_timer = sd_event_source_disable_unref(w->kill_timer);
        w->pid = 0;
        w->ready = false;
        w->eof = false;
        link_close_socket(w);

        if (w->callbacks.died)
                w->callbacks.died(w, returncode, w->userdata);
        return true;
}

int worker_link_start(WorkerLink *w) {
        _cleanup_close_ int parent_fd = -EBADF, child_fd = -EBADF;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        char fd_arg[32], max_arg[64];
        char *argv[64];
        size_t n = 0;
        sigset_t empty;
        pid_t pid;
        int pair[2], r;

        if (w->pid > 0)
                return 0;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
                return log_error_errno(errno, "Failed to create the worker socket pair: %m");
        parent_fd = pair[0];
        child_fd = pair[1];
        /* Only our end: the worker does blocking I/O on its own (separate) open file. */
        if (fcntl(parent_fd, F_SETFL, O_NONBLOCK) < 0)
                return log_error_errno(errno, "Failed to make the worker socket non-blocking: %m");

        snprintf(fd_arg, sizeof(fd_arg), "--frame-fd=%d", WORKER_FRAME_FD);
        snprintf(max_arg, sizeof(max_arg), "--max-frame=%zu", w->config.max_frame);
        argv[n++] = (char *) "agentix-worker";
        argv[n++] = fd_arg;
        argv[n++] = max_arg;
        for (char **a = w->config.extra_args; a && *a && n < ELEMENTSOF(argv) - 1; a++)
                argv[n++] = *a;
        argv[n] = NULL;

        posix_spawn_file_actions_init(&fa);
        /* dup2 onto a fixed number clears CLOEXEC there; every other fd of ours stays closed. */
        posix_spawn_file_actions_adddup2(&fa, child_fd, WORKER_FRAME_FD);
        posix_spawnattr_init(&attr);
        sigemptyset(&empty);
        posix_spawnattr_setsigmask(&attr, &empty);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        {
                sigset_t all;
                sigfillset(&all);
                posix_spawnattr_setsigdefault(&attr, &all);
        }

        r = posix_spawn(&pid, w->config.executable, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r != 0)
                return log_error_errno(r, "Failed to spawn the worker (%s): %m", w->config.executable);
        if (w->config.on_spawn) {
                r = w->config.on_spawn(pid, w->config.on_spawn_userdata);
                if (r < 0) {
                        (void) kill(pid, SIGKILL);
                        (void) waitpid(pid, NULL, 0);
                        return r;
                }
        }

        w->pid = pid;
        w->fd = TAKE_FD(parent_fd);
        w->eof = false;
        w->ready = false;
        w->reader.max_frame = w->config.max_frame;

        r = sd_event_add_io(w->event, &w->io, w->fd, EPOLLIN | (w->out.len ? EPOLLOUT : 0), on_io, w);
        if (r < 0)
                goto fail;
        log_debug("Spawned worker %d.", (int) pid);
        return 0;
fail:
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        w->pid = 0;
        link_close_socket(w);
        return log_error_errno(r, "Failed to watch the worker: %m");
}

int worker_link_send(WorkerLink *w, uint8_t kind, const void *payload, size_t size) {
        uint8_t hdr[FRAME_HEADER_SIZE];
        int r;

        if (w->fd < 0)
                return -ENOTCONN;
        if (size > (w->config.max_frame ?: FRAME_DEFAULT_MAX))
                return -EMSGSIZE;
        frame_header_write(hdr, kind, size);
        r = buffer_append(&w->out, hdr, sizeof(hdr));
        if (r >= 0)
                r = buffer_append(&w->out, payload, size);
        if (r < 0)
                return r;
        /* Try right away: the common case is an idle socket, and waiting for EPOLLOUT costs a
         * loop iteration on the latency-critical path. */
        return flush_out(w);
}

bool worker_link_running(const WorkerLink *w) {
        return w->pid > 0;
}

bool worker_link_ready(const WorkerLink *w) {
        return w->ready;
}

pid_t worker_link_pid(const WorkerLink *w) {
        return w->pid;
}

static int on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        WorkerLink *w = userdata;

        if (w->pid > 0) {
                log_warning("Worker %d did not exit in time, killing it.", (int) w->pid);
                (void) kill(w->pid, SIGKILL);
        }
        return 0;
}

void worker_link_stop(WorkerLink *w, uint64_t timeout_usec) {
        uint64_t now;

        if (w->pid <= 0)
                return;
        (void) worker_link_send(w, FRAME_SHUTDOWN, "\x80", 1); /* payload: empty msgpack map */
        if (sd_event_now(w->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        w->kill_timer = sd_event_source_disable_unref(w->kill_timer);
        (void) sd_event_add_time(w->event, &w->kill_timer, CLOCK_MONOTONIC, now + timeout_usec, 1, on_kill_timer, w);
}

int worker_link_new(sd_event *event, const WorkerLinkConfig *config, const WorkerLinkCallbacks *callbacks,
                    void *userdata, WorkerLink **ret) {
        WorkerLink *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->event = sd_event_ref(event);
        w->config = *config;
        w->callbacks = *callbacks;
        w->userdata = userdata;
        w->fd = -EBADF;
        *ret = w;
        return 0;
}

WorkerLink *worker_link_free(WorkerLink *w) {
        if (!w)
                return NULL;
        if (w->pid > 0) {
                (void) kill(w->pid, SIGKILL);
                (void) waitpid(w->pid, NULL, 0);
        }
        sd_event_source_disable_unref(w->kill_timer);
        link_close_socket(w);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}
