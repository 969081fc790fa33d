/* SPDX-License-Identifier: MIT */
/* The floor under any round trip on this machine: two processes bouncing one byte, over a
 * socketpair and over a loopback TCP connection. An /rpc call crosses four such hops
 * (client → server → worker → server → client), so its latency cannot be below about twice
 * the numbers this prints. Prints one JSON line per transport. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 20000

static double now_us(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void bounce(int fd) {
        char c;
        while (read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1)
                ;
        _exit(0);
}

static void measure(const char *label, int fd) {
        static double d[N];
        char c = 'x';

        for (int i = 0; i < N; i++) {
                double t = now_us();
                if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1) {
                        perror("pingpong");
                        exit(1);
                }
                d[i] = now_us() - t;
        }
        qsort(d, N, sizeof(d[0]), cmp);
        printf("{\"label\":\"%s\",\"mode\":\"pingpong\",\"calls\":%d,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f}\n",
               label, N, d[N / 2], d[N * 9 / 10], d[N * 99 / 100]);
        fflush(stdout);
}

int main(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);
        int sv[2], l, c, one = 1;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
                return 1;
        pid = fork();
        if (pid == 0) {
                close(sv[0]);
                bounce(sv[1]);
        }
        close(sv[1]);
        measure("floor-socketpair", sv[0]);
        close(sv[0]);
        waitpid(pid, NULL, 0);

        l = socket(AF_INET, SOCK_STREAM, 0);
        if (l < 0 || bind(l, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *) &a, &al) < 0)
                return 1;
        pid = fork();
        if (pid == 0) {
                int s = accept(l, NULL, NULL);
                setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                bounce(s);
        }
        c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *) &a, sizeof(a)) < 0)
                return 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        measure("floor-tcp-loopback", c);
        close(c);
        waitpid(pid, NULL, 0);
        return 0;
}
