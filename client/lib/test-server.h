/* SPDX-License-Identifier: MIT */
#pragma once

/* Tests: a real agentix-server ($AGENTIX_SERVER; it finds agentix-worker next to itself) on a
 * free port of 127.0.0.1, with a token; up once /health answers. Its output goes to a log
 * file that is printed when it does not come up or does not exit cleanly. */

#include <stdint.h>
#include <sys/types.h>

typedef struct TestServer {
        pid_t pid;
        uint16_t port;
        char url[64];
        char log_path[128];
} TestServer;

/* A port nothing listens on (bound and released). */
uint16_t test_free_port(void);

int test_server_start(TestServer *s, const char *token);
/* SIGTERM, wait (10 s at most, then SIGKILL): the exit status (0 for a clean exit, and the
 * log is removed), or -1. */
int test_server_stop(TestServer *s);
void test_server_print_log(const TestServer *s);
