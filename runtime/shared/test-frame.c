/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "frame.h"

static void make_pair(int fds[2], bool nonblock_reader) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        if (nonblock_reader) {
                int fl = fcntl(fds[0], F_GETFL);
                assert_true(fl >= 0);
                assert_int_equal(fcntl(fds[0], F_SETFL, fl | O_NONBLOCK), 0);
        }
}

/* Header + payload in one malloc()ed block. */
static uint8_t *make_frame(uint8_t kind, const void *payload, size_t size, size_t *ret_len) {
        uint8_t *f = malloc(FRAME_HEADER_SIZE + size);

        assert_non_null(f);
        frame_header_write(f, kind, size);
        if (size > 0)
                memcpy(f + FRAME_HEADER_SIZE, payload, size);
        *ret_len = FRAME_HEADER_SIZE + size;
        return f;
}

static void test_kinds(void **state) {
        static const uint8_t valid[] = { 'C', 'I', 'E', 'X', 'Q', 'R', 'r', 'i', 'e', 'x', 't', 'o' };
        unsigned n_valid = 0;

        for (unsigned k = 0; k < 256; k++)
                if (frame_kind_is_valid((uint8_t) k)) {
                        assert_non_null(memchr(valid, (int) k, sizeof(valid)));
                        n_valid++;
                }
        assert_int_equal(n_valid, sizeof(valid));

        assert_true(frame_kind_is_terminal(FRAME_RESULT));
        assert_true(frame_kind_is_terminal(FRAME_END));
        assert_true(frame_kind_is_terminal(FRAME_ERROR));
        assert_false(frame_kind_is_terminal(FRAME_ITEM));
        assert_false(frame_kind_is_terminal(FRAME_CALL));
        assert_false(frame_kind_is_terminal(FRAME_READY));
        assert_false(frame_kind_is_terminal(FRAME_OUT_CREDIT));
}

static void test_header_round_trip(void **state) {
        static const size_t sizes[] = { 0, 1, 255, 256, 65535, 65536, 0x01020304, UINT32_MAX - 1 };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                uint8_t h[FRAME_HEADER_SIZE];
                uint32_t len;

                frame_header_write(h, FRAME_ITEM, sizes[i]);
                /* Little-endian length that counts the kind byte. */
                len = (uint32_t) h[0] | (uint32_t) h[1] << 8 | (uint32_t) h[2] << 16 | (uint32_t) h[3] << 24;
                assert_int_equal(len, sizes[i] + 1);
                assert_int_equal(h[4], FRAME_ITEM);
        }

        {
                uint8_t h[FRAME_HEADER_SIZE];
                frame_header_write(h, FRAME_CALL, 0x01020304 - 1);
                assert_memory_equal(h, "\x04\x03\x02\x01" "C", 5);
        }

        /* Through the reader: header in front of the payload is parsed back. */
        for (size_t size = 0; size < 300; size += 37) {
                FrameReader r = {};
                uint8_t payload[300], kind;
                const uint8_t *got;
                size_t got_size, flen;
                _cleanup_free_ uint8_t *f = NULL;

                for (size_t j = 0; j < size; j++)
                        payload[j] = (uint8_t) (j * 7);
                f = make_frame(FRAME_RESULT, payload, size, &flen);
                assert_int_equal(buffer_append(&r.buf, f, flen), 0);
                assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 1);
                assert_int_equal(kind, FRAME_RESULT);
                assert_int_equal(got_size, size);
                if (size > 0)
                        assert_memory_equal(got, payload, size);
                frame_reader_consume(&r);
                assert_int_equal(r.buf.len, 0);
                frame_reader_done(&r);
        }
}

static void test_seal(void **state) {
        uint8_t f[FRAME_HEADER_SIZE + 3] = { 0, 0, 0, 0, 0, 'a', 'b', 'c' };
        FrameReader r = {};
        uint8_t kind;
        const uint8_t *got;
        size_t got_size;

        assert_int_equal(frame_seal(f, sizeof(f), FRAME_ITEM), 0);
        assert_int_equal(buffer_append(&r.buf, f, sizeof(f)), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 1);
        assert_int_equal(kind, FRAME_ITEM);
        assert_int_equal(got_size, 3);
        assert_memory_equal(got, "abc", 3);
        frame_reader_done(&r);

        assert_int_equal(frame_seal(f, FRAME_HEADER_SIZE - 1, FRAME_ITEM), -EMSGSIZE);
}

/* Two frames arriving one byte at a time: nothing is reported before a frame is complete. */
static void test_reader_byte_by_byte(void **state) {
        _cleanup_free_ uint8_t *f1 = NULL, *f2 = NULL, *f3 = NULL;
        size_t l1, l2, l3;
        uint8_t stream[256], kind;
        size_t total = 0, frames = 0;
        FrameReader r = {};
        const uint8_t *got;
        size_t got_size;
        int fds[2];

        f1 = make_frame(FRAME_CALL, "\x81\xa7" "call_id\xa1" "a", 11, &l1);
        f2 = make_frame(FRAME_SHUTDOWN, "\x80", 1, &l2);
        f3 = make_frame(FRAME_END, NULL, 0, &l3); /* empty payload is allowed */
        memcpy(stream, f1, l1);
        memcpy(stream + l1, f2, l2);
        memcpy(stream + l1 + l2, f3, l3);
        total = l1 + l2 + l3;

        make_pair(fds, true);
        assert_int_equal(frame_reader_fill(&r, fds[0]), -EAGAIN);

        for (size_t i = 0; i < total; i++) {
                int k;

                assert_int_equal(write(fds[1], stream + i, 1), 1);
                assert_int_equal(frame_reader_fill(&r, fds[0]), 1);

                k = frame_reader_peek(&r, &kind, &got, &got_size);
                assert_true(k >= 0);
                if (i + 1 == l1) {
                        assert_int_equal(k, 1);
                        assert_int_equal(kind, FRAME_CALL);
                        assert_int_equal(got_size, 11);
                        assert_memory_equal(got, "\x81\xa7" "call_id\xa1" "a", 11);
                } else if (i + 1 == l1 + l2) {
                        assert_int_equal(k, 1);
                        assert_int_equal(kind, FRAME_SHUTDOWN);
                        assert_int_equal(got_size, 1);
                        assert_int_equal(got[0], 0x80);
                } else if (i + 1 == total) {
                        assert_int_equal(k, 1);
                        assert_int_equal(kind, FRAME_END);
                        assert_int_equal(got_size, 0);
                } else {
                        assert_int_equal(k, 0);
                        continue;
                }
                frames++;
                frame_reader_consume(&r);
                assert_int_equal(r.buf.len, 0);
        }
        assert_int_equal(frames, 3);

        assert_int_equal(frame_reader_fill(&r, fds[0]), -EAGAIN);
        safe_close(fds[1]);
        assert_int_equal(frame_reader_fill(&r, fds[0]), 0); /* EOF */
        safe_close(fds[0]);
        frame_reader_done(&r);
}

/* Several frames in one read are handed out one by one. */
static void test_reader_batched(void **state) {
        FrameReader r = {};
        uint8_t kind;
        const uint8_t *got;
        size_t got_size;
        int fds[2];

        make_pair(fds, true);
        for (int i = 0; i < 10; i++) {
                uint8_t b = (uint8_t) i;
                assert_int_equal(frame_write(fds[1], FRAME_ITEM, &b, 1), 0);
        }
        assert_int_equal(frame_reader_fill(&r, fds[0]), 10 * (FRAME_HEADER_SIZE + 1));
        for (int i = 0; i < 10; i++) {
                assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 1);
                assert_int_equal(got_size, 1);
                assert_int_equal(got[0], i);
                frame_reader_consume(&r);
        }
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 0);
        safe_close(fds[0]);
        safe_close(fds[1]);
        frame_reader_done(&r);
}

static void test_reader_oversized(void **state) {
        FrameReader r = { .max_frame = 10 };
        uint8_t h[FRAME_HEADER_SIZE], kind;
        const uint8_t *got;
        size_t got_size;

        /* Exactly max_frame is fine. */
        frame_header_write(h, FRAME_ITEM, 10);
        assert_int_equal(buffer_append(&r.buf, h, sizeof(h)), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 0);
        assert_int_equal(buffer_append(&r.buf, "0123456789", 10), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 1);
        assert_int_equal(got_size, 10);
        frame_reader_consume(&r);

        /* One more: refused as soon as the length is known, before the payload arrives. */
        frame_header_write(h, FRAME_ITEM, 11);
        assert_int_equal(buffer_append(&r.buf, h, 4), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), -EMSGSIZE);
        frame_reader_done(&r);

        /* The default limit applies when max_frame is 0. */
        r = (FrameReader) {};
        frame_header_write(h, FRAME_ITEM, (size_t) FRAME_DEFAULT_MAX + 1);
        assert_int_equal(buffer_append(&r.buf, h, sizeof(h)), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), -EMSGSIZE);
        frame_reader_done(&r);
        r = (FrameReader) {};
        frame_header_write(h, FRAME_ITEM, FRAME_DEFAULT_MAX);
        assert_int_equal(buffer_append(&r.buf, h, sizeof(h)), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), 0);
        frame_reader_done(&r);
}

static void test_reader_bad(void **state) {
        FrameReader r = {};
        uint8_t h[FRAME_HEADER_SIZE], kind;
        const uint8_t *got;
        size_t got_size;

        frame_header_write(h, 'Z', 1);
        assert_int_equal(buffer_append(&r.buf, h, sizeof(h)), 0);
        assert_int_equal(buffer_append_byte(&r.buf, 0x80), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), -EBADMSG);
        frame_reader_done(&r);

        /* A zero length cannot even hold the kind byte. */
        r = (FrameReader) {};
        assert_int_equal(buffer_append(&r.buf, "\0\0\0\0", 4), 0);
        assert_int_equal(frame_reader_peek(&r, &kind, &got, &got_size), -EBADMSG);
        frame_reader_done(&r);
}

static void test_read_errors(void **state) {
        uint8_t kind, *payload = NULL, h[FRAME_HEADER_SIZE];
        size_t size;
        int fds[2];

        /* Bad kind. */
        make_pair(fds, false);
        frame_header_write(h, 'Z', 0);
        assert_int_equal(write(fds[1], h, sizeof(h)), (ssize_t) sizeof(h));
        assert_int_equal(frame_read(fds[0], 0, &kind, &payload, &size), -EBADMSG);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* Over the limit. */
        make_pair(fds, false);
        assert_int_equal(frame_write(fds[1], FRAME_ITEM, "abcdef", 6), 0);
        assert_int_equal(frame_read(fds[0], 5, &kind, &payload, &size), -EMSGSIZE);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* EOF in the middle of the payload, and before any byte. */
        make_pair(fds, false);
        frame_header_write(h, FRAME_ITEM, 100);
        assert_int_equal(write(fds[1], h, sizeof(h)), (ssize_t) sizeof(h));
        assert_int_equal(write(fds[1], "xyz", 3), 3);
        safe_close(fds[1]);
        assert_int_equal(frame_read(fds[0], 0, &kind, &payload, &size), -EPIPE);
        assert_int_equal(frame_read(fds[0], 0, &kind, &payload, &size), -EPIPE);
        safe_close(fds[0]);
        assert_null(payload);

        /* Exactly at the limit, empty payload too. */
        make_pair(fds, false);
        assert_int_equal(frame_write(fds[1], FRAME_ITEM, "abcde", 5), 0);
        assert_int_equal(frame_write(fds[1], FRAME_END, NULL, 0), 0);
        assert_int_equal(frame_read(fds[0], 5, &kind, &payload, &size), 0);
        assert_int_equal(kind, FRAME_ITEM);
        assert_int_equal(size, 5);
        assert_memory_equal(payload, "abcde", 6); /* NUL-terminated */
        free(payload);
        assert_int_equal(frame_read(fds[0], 5, &kind, &payload, &size), 0);
        assert_int_equal(kind, FRAME_END);
        assert_int_equal(size, 0);
        free(payload);
        safe_close(fds[0]);
        safe_close(fds[1]);
}

#define BIG (10u * 1024u * 1024u)

static uint8_t *big_payload(void) {
        uint8_t *p = malloc(BIG);

        assert_non_null(p);
        for (size_t i = 0; i < BIG; i++)
                p[i] = (uint8_t) (i * 2654435761u >> 13);
        return p;
}

/* A child writes frames with frame_write(); the socket buffer is far smaller than the
 * payload, so both sides have to loop over partial writes and reads. */
static pid_t spawn_writer(int fd, const uint8_t *payload) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                int r = frame_write(fd, FRAME_RESULT, payload, BIG);
                if (r >= 0)
                        r = frame_write(fd, FRAME_END, "\x80", 1);
                _exit(r < 0 ? 1 : 0);
        }
        return pid;
}

static void wait_writer(pid_t pid) {
        int status;

        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_big_frame_read(void **state) {
        _cleanup_free_ uint8_t *payload = big_payload(), *got = NULL;
        uint8_t kind;
        size_t size;
        int fds[2];
        pid_t pid;

        make_pair(fds, false);
        pid = spawn_writer(fds[1], payload);

        assert_int_equal(frame_read(fds[0], 16u * 1024u * 1024u, &kind, &got, &size), 0);
        assert_int_equal(kind, FRAME_RESULT);
        assert_int_equal(size, BIG);
        assert_memory_equal(got, payload, BIG);
        free(got);
        got = NULL;
        assert_int_equal(frame_read(fds[0], 0, &kind, &got, &size), 0);
        assert_int_equal(kind, FRAME_END);
        assert_int_equal(size, 1);

        wait_writer(pid);
        safe_close(fds[0]);
        safe_close(fds[1]);
}

static void test_big_frame_reader(void **state) {
        _cleanup_free_ uint8_t *payload = big_payload();
        FrameReader r = { .max_frame = 16u * 1024u * 1024u };
        const uint8_t *got;
        size_t got_size;
        uint8_t kind;
        int fds[2], frames = 0;
        pid_t pid;

        make_pair(fds, true);
        pid = spawn_writer(fds[1], payload);

        while (frames < 2) {
                struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
                ssize_t k;
                int q;

                q = frame_reader_peek(&r, &kind, &got, &got_size);
                assert_true(q >= 0);
                if (q == 1) {
                        if (frames == 0) {
                                assert_int_equal(kind, FRAME_RESULT);
                                assert_int_equal(got_size, BIG);
                                assert_memory_equal(got, payload, BIG);
                        } else {
                                assert_int_equal(kind, FRAME_END);
                                assert_int_equal(got_size, 1);
                        }
                        frame_reader_consume(&r);
                        frames++;
                        continue;
                }

                assert_int_equal(poll(&pfd, 1, 10000), 1);
                k = frame_reader_fill(&r, fds[0]);
                assert_true(k > 0 || k == -EAGAIN);
        }
        /* The reader lets go of the big allocation once the frame is consumed. */
        assert_int_equal(r.buf.len, 0);
        assert_true(r.buf.cap <= 4u * 1024u * 1024u);

        wait_writer(pid);
        frame_reader_done(&r);
        safe_close(fds[0]);
        safe_close(fds[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test(test_header_round_trip),
                cmocka_unit_test(test_seal),
                cmocka_unit_test(test_reader_byte_by_byte),
                cmocka_unit_test(test_reader_batched),
                cmocka_unit_test(test_reader_oversized),
                cmocka_unit_test(test_reader_bad),
                cmocka_unit_test(test_read_errors),
                cmocka_unit_test(test_big_frame_read),
                cmocka_unit_test(test_big_frame_reader),
        };

        /* A writer child dying must show up as a failure, not as SIGPIPE in the parent. */
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
