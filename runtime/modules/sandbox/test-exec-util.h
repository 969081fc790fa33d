/* SPDX-License-Identifier: MIT */
#pragma once

/* A stand-in for the worker in tests of the exec core: collects output chunks, plays a scripted
 * inbox (items gated on output, e.g. "send ^C once 'ready' was printed") through an eventfd
 * wait_fd, and cancels from another thread on request. */

#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "buffer.h"
#include "exec.h"

typedef enum TestItemKind {
        TEST_ITEM_STDIN,
        TEST_ITEM_EOF,
        TEST_ITEM_SIGNAL,
        TEST_ITEM_RESIZE,
} TestItemKind;

typedef struct TestItem {
        TestItemKind kind;
        const char *gate;  /* taken only once the output contains this; NULL: at once */
        const char *gate_comm; /* …and once the shell's /proc/PID/comm is this (after an exec) */
        const void *data;  /* TEST_ITEM_STDIN */
        size_t size;
        int sig;           /* TEST_ITEM_SIGNAL */
        unsigned rows, cols;
} TestItem;

typedef struct TestChunk {
        ExecStream stream;
        size_t offset, size; /* into TestRun.out */
        uint64_t at_usec;
} TestChunk;

typedef struct TestRun {
        Buffer out;
        Buffer chunks; /* TestChunk[] */
        int wait_fd;
        atomic_bool cancelled;
        uint64_t cancelled_at;

        const TestItem *items;
        size_t n_items, next_item;
        bool close_inbox;        /* after the last item, report the inbox closed */
        uint64_t window_usec;    /* count the items taken in the first window_usec of the run… */
        size_t items_in_window;  /* …here */

        uint64_t start_usec;
        pid_t pid;
        ExecResult result;
} TestRun;

static inline size_t test_n_chunks(const TestRun *t) {
        return t->chunks.len / sizeof(TestChunk);
}

static inline const TestChunk *test_chunk(const TestRun *t, size_t i) {
        return (const TestChunk *) buffer_data(&t->chunks) + i;
}

static inline bool test_output_contains(const TestRun *t, const char *needle) {
        return t->out.len > 0 && memmem(buffer_data(&t->out), t->out.len, needle, strlen(needle));
}

static inline bool test_comm_is(pid_t pid, const char *comm) {
        char path[64], buf[64] = {};
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return streq(buf, comm);
}

static inline bool test_inbox_ready(const TestRun *t) {
        if (atomic_load(&t->cancelled))
                return true;
        if (t->next_item < t->n_items) {
                const TestItem *it = &t->items[t->next_item];

                if (it->gate && !test_output_contains(t, it->gate))
                        return false;
                return !it->gate_comm || (t->pid > 0 && test_comm_is(t->pid, it->gate_comm));
        }
        return t->close_inbox;
}

/* Make the eventfd readable exactly when there is something for on_inbox (or a cancel). A
 * comm gate has no event to wait for: keep the fd readable, so the loop polls (its guard
 * against a wait_fd that stays readable turns that into a check every few ms). */
static inline void test_update_wait_fd(TestRun *t) {
        uint64_t v = 1;

        if (test_inbox_ready(t) || (t->next_item < t->n_items && t->items[t->next_item].gate_comm))
                assert_int_equal(write(t->wait_fd, &v, sizeof(v)), sizeof(v));
        else {
                (void) !read(t->wait_fd, &v, sizeof(v));
                if (atomic_load(&t->cancelled)) /* raced with the cancelling thread */
                        assert_int_equal(write(t->wait_fd, &v, sizeof(v)), sizeof(v));
        }
}

static inline bool test_is_cancelled(void *userdata) {
        TestRun *t = userdata;
        return atomic_load(&t->cancelled);
}

static inline int test_on_output(void *userdata, ExecStream stream, const void *data, size_t size) {
        TestRun *t = userdata;
        TestChunk c = { .stream = stream, .offset = t->out.len, .size = size, .at_usec = now_usec() };

        assert_true(size > 0);
        assert_int_equal(buffer_append(&t->out, data, size), 0);
        assert_int_equal(buffer_append(&t->chunks, &c, sizeof(c)), 0);
        if (t->items)
                test_update_wait_fd(t);
        return 0;
}

static inline int test_on_inbox(void *userdata, ExecRun *run) {
        TestRun *t = userdata;
        const TestItem *it;

        if (!test_inbox_ready(t) || atomic_load(&t->cancelled)) {
                test_update_wait_fd(t);
                return EXEC_INBOX_EMPTY;
        }
        if (t->next_item >= t->n_items)
                return EXEC_INBOX_CLOSED;

        it = &t->items[t->next_item++];
        if (now_usec() - t->start_usec < t->window_usec)
                t->items_in_window = t->next_item;
        switch (it->kind) {
        case TEST_ITEM_STDIN:
                assert_int_equal(exec_run_write_stdin(run, it->data, it->size), 0);
                break;
        case TEST_ITEM_EOF:
                exec_run_close_stdin(run);
                break;
        case TEST_ITEM_SIGNAL:
                assert_int_equal(exec_run_signal(run, it->sig), 0);
                break;
        case TEST_ITEM_RESIZE:
                assert_int_equal(exec_run_resize(run, it->rows, it->cols), 0);
                break;
        }
        test_update_wait_fd(t);
        return EXEC_INBOX_ITEM;
}

static inline void test_run_init(TestRun *t) {
        *t = (TestRun) {};
        t->wait_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        assert_true(t->wait_fd >= 0);
}

static inline void test_run_done(TestRun *t) {
        buffer_done(&t->out);
        buffer_done(&t->chunks);
        t->wait_fd = safe_close(t->wait_fd);
}

/* Run o to the end. Returns exec_run_loop()'s return value. */
static inline int test_run(TestRun *t, const ExecOptions *o) {
        _cleanup_exec_run_ ExecRun *run = NULL;
        ExecHooks h = {
                .userdata = t,
                .wait_fd = t->wait_fd,
                .is_cancelled = test_is_cancelled,
                .on_output = test_on_output,
                .on_inbox = t->items || t->close_inbox ? test_on_inbox : NULL,
        };
        int r;

        t->start_usec = now_usec();
        r = exec_start(o, &run, NULL);
        if (r < 0)
                return r;
        t->pid = exec_run_pid(run);
        if (h.on_inbox)
                test_update_wait_fd(t);
        return exec_run_loop(run, &h, &t->result);
}

/* Output as a NUL-terminated string (the buffer keeps a spare byte for the NUL). */
static inline const char *test_output(TestRun *t) {
        assert_int_equal(buffer_reserve(&t->out, 1), 0);
        buffer_data(&t->out)[t->out.len] = 0;
        return (const char *) buffer_data(&t->out);
}

typedef struct TestCanceller {
        pthread_t thread;
        TestRun *t;
        uint64_t delay_usec;
} TestCanceller;

static inline void *test_canceller_thread(void *p) {
        TestCanceller *c = p;
        uint64_t v = 1;

        usleep((useconds_t) c->delay_usec);
        c->t->cancelled_at = now_usec();
        atomic_store(&c->t->cancelled, true);
        assert_int_equal(write(c->t->wait_fd, &v, sizeof(v)), sizeof(v));
        return NULL;
}

static inline void test_cancel_after(TestCanceller *c, TestRun *t, uint64_t delay_usec) {
        *c = (TestCanceller) { .t = t, .delay_usec = delay_usec };
        assert_int_equal(pthread_create(&c->thread, NULL, test_canceller_thread, c), 0);
}

/* Is anything left in the process group? */
static inline bool test_group_alive(pid_t pgid) {
        return kill(-pgid, 0) >= 0 || errno != ESRCH;
}

/* Wait (up to 2 s) for every process of the group to die. SIGKILL is not instantaneous, and a
 * dead orphan stays visible to kill() until its parent reaps it: tests make themselves a child
 * subreaper (test_become_subreaper()) so that orphans are reaped right here. */
static inline bool test_group_gone(pid_t pgid) {
        for (int i = 0; i < 2000; i++) {
                while (waitpid(-pgid, NULL, WNOHANG) > 0)
                        ;
                if (!test_group_alive(pgid))
                        return true;
                usleep(1000);
        }
        return false;
}

static inline void test_become_subreaper(void) {
        assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}
