/* SPDX-License-Identifier: MIT */
#pragma once

/* Test helpers: a real agentix-server run as a child process, and an in-loop TCP relay that
 * refuses WebSocket upgrades (to make AUTO fall back to polling honestly). */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

typedef struct TestServer {
        pid_t pid;
        unsigned port;
        char url[64];
} TestServer;

/* A TCP port on 127.0.0.1 that was free a moment ago. */
unsigned test_free_port(void);

/* Start $AGENTIX_SERVER (AGENTIX_TOKEN=t) on 127.0.0.1:port (0: a free one) with the extra
 * arguments (NULL-terminated, may be NULL) and wait until GET /health answers. */
void test_server_start(TestServer *s, unsigned port, const char *const *extra);
/* SIGTERM, wait, and check it exits 0. */
void test_server_stop(TestServer *s);
/* SIGKILL every server still running (after a failed test: none may outlive it, or they would
 * hold the test's output pipe open). Fits a cmocka teardown. */
int test_server_kill_all(void **state);

typedef struct TestRelay TestRelay;

/* Listen on a free port and forward every connection to 127.0.0.1:target_port, except that a
 * request asking for a WebSocket upgrade is answered 400 and closed. */
TestRelay *test_relay_new(sd_event *event, unsigned target_port);
unsigned test_relay_port(const TestRelay *r);
unsigned test_relay_refused(const TestRelay *r);
void test_relay_free(TestRelay *r);
