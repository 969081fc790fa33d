/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "test-server.h"

uint16_t test_free_port(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 ||
            getsockname(fd, (struct sockaddr *) &a, &len) < 0)
                return 0;
        return ntohs(a.sin_port);
}

/* GET /health answers 200 with "status":"ok". */
static int health_ok(uint16_t port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char buf[1024];
        size_t n = 0;

        if (fd < 0 || connect(fd, (struct sockaddr *) &a, sizeof(a)) < 0)
                return 0;
        if (loop_write(fd, req, STRLEN(req)) < 0)
                return 0;
        while (n < sizeof(buf) - 1) {
                ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = 0;
        return strneq(buf, "HTTP/1.1 200", 12) && strstr(buf, "\"status\":\"ok\"");
}

void test_server_print_log(const TestServer *s) {
        _cleanup_fclose_ FILE *f = fopen(s->log_path, "re");
        char line[1024];

        if (!f)
                return;
        fprintf(stderr, "---- %s ----\n", s->log_path);
        while (fgets(line, sizeof(line), f))
                fputs(line, stderr);
        fprintf(stderr, "----\n");
}

int test_server_start(TestServer *s, const char *token) {
        const char *server = getenv("AGENTIX_SERVER");
        char port[16];
        pid_t pid;

        if (!server) {
                fprintf(stderr, "set AGENTIX_SERVER to the agentix-server binary\n");
                return -EINVAL;
        }
        *s = (TestServer) {};
        s->port = test_free_port();
        if (s->port == 0)
                return -EADDRNOTAVAIL;
        snprintf(port, sizeof(port), "%u", s->port);
        snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u", s->port);
        snprintf(s->log_path, sizeof(s->log_path), "/tmp/agentix-test-client-%u.log", s->port);

        pid_t parent = getpid();
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                /* A test that crashes must not leave its server running. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
                int fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                if (token)
                        setenv("AGENTIX_TOKEN", token, 1);
                else
                        unsetenv("AGENTIX_TOKEN");
                execl(server, server, "--host", "127.0.0.1", "--port", port, (char *) NULL);
                _exit(127);
        }
        s->pid = pid;

        for (int i = 0; i < 1000; i++) { /* 10 s */
                int status;

                if (waitpid(pid, &status, WNOHANG) == pid) {
                        fprintf(stderr, "agentix-server exited at start (status %d)\n", status);
                        test_server_print_log(s);
                        s->pid = 0;
                        return -ECHILD;
                }
                if (health_ok(s->port))
                        return 0;
                usleep(10000);
        }
        fprintf(stderr, "agentix-server did not answer /health within 10 s\n");
        test_server_print_log(s);
        (void) test_server_stop(s);
        return -ETIMEDOUT;
}

int test_server_stop(TestServer *s) {
        int status;

        if (s->pid <= 0)
                return -1;
        (void) kill(s->pid, SIGTERM);
        for (int i = 0; i < 1000; i++) {
                if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
                        s->pid = 0;
                        status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                        if (status == 0)
                                (void) unlink(s->log_path); /* kept for a look when it failed */
                        return status;
                }
                usleep(10000);
        }
        fprintf(stderr, "agentix-server did not exit within 10 s of SIGTERM\n");
        (void) kill(s->pid, SIGKILL);
        (void) waitpid(s->pid, &status, 0);
        s->pid = 0;
        return -1;
}
