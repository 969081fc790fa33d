/* SPDX-License-Identifier: MIT */
/* The Jupyter client against a real ipykernel (Debian's python3-ipykernel on the build host;
 * skipped, exit 77, when there is no python kernelspec). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jupyter-kernel.h"
#include "macro.h"

static KernelSpecs specs;
static const KernelSpec *python;

/* What a run delivered, as text: "stream:stdout:hi\n" "result:2" "error:ZeroDivisionError" … */
typedef struct Seen {
        char text[8192];
        size_t len;
        int stop_after;  /* on_message fails after this many messages (0: never) */
        int count;
} Seen;

static void seen_add(Seen *s, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        int n = vsnprintf(s->text + s->len, sizeof(s->text) - s->len, fmt, ap);
        va_end(ap);
        if (n > 0)
                s->len = MIN(s->len + (size_t) n, sizeof(s->text) - 1);
}

static int on_message(void *userdata, const JupyterMessage *m) {
        Seen *s = userdata;

        if (streq(m->msg_type, "stream"))
                seen_add(s, "stream:%s:%s|", json_string_value(json_object_get(m->content, "name")),
                         json_string_value(json_object_get(m->content, "text")));
        else if (streq(m->msg_type, "execute_result"))
                seen_add(s, "result:%s|",
                         json_string_value(json_object_get(json_object_get(m->content, "data"), "text/plain")));
        else if (streq(m->msg_type, "error"))
                seen_add(s, "error:%s|", json_string_value(json_object_get(m->content, "ename")));
        else if (streq(m->msg_type, "display_data"))
                seen_add(s, "display:%s|",
                         json_object_get(json_object_get(m->content, "data"), "image/png") ? "png" : "other");
        s->count++;
        return s->stop_after && s->count >= s->stop_after ? -ECANCELED : 0;
}

static int run(JupyterKernel *k, const char *code, uint64_t timeout_usec, Seen *seen, JupyterExecuteResult *res) {
        JupyterExecuteHooks h = { .userdata = seen, .on_message = on_message, .wait_fd = -1 };

        *seen = (Seen) { .stop_after = seen->stop_after };
        return jupyter_kernel_execute(k, code, false, timeout_usec, &h, res);
}

static JupyterKernel *start(void) {
        _cleanup_free_ char *error = NULL;
        JupyterKernel *k = NULL;
        int r;

        r = jupyter_kernel_start(&(JupyterStartOptions) { .spec = python, .cwd = "/tmp" }, &k, &error);
        if (r < 0)
                fail_msg("kernel did not start: %s (%s)", strerror(-r), error ?: "");
        return k;
}

static void test_state_results_and_errors(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        Seen seen = {};

        assert_int_equal(run(k, "x = 1", 0, &seen, &res), 0);
        assert_string_equal(res.status, "ok");
        assert_string_equal(seen.text, "");
        assert_int_equal(run(k, "x + 1", 0, &seen, &res), 0);
        assert_string_equal(seen.text, "result:2|");
        assert_true(res.execution_count >= 2);
        assert_int_equal(run(k, "import os, sys; print('out'); print('err', file=sys.stderr); os.getcwd()", 0, &seen, &res), 0);
        assert_non_null(strstr(seen.text, "stream:stdout:out\n|"));
        assert_non_null(strstr(seen.text, "stream:stderr:err\n|"));
        assert_non_null(strstr(seen.text, "result:'/tmp'|"));
        assert_int_equal(run(k, "1/0", 0, &seen, &res), 0);
        assert_string_equal(res.status, "error");
        assert_string_equal(seen.text, "error:ZeroDivisionError|");
        /* An error does not abort what comes next (stop_on_error is off: runs are queued by us). */
        assert_int_equal(run(k, "x", 0, &seen, &res), 0);
        assert_string_equal(seen.text, "result:1|");
        jupyter_kernel_free(k);
}

static void test_timeout_interrupts_and_kernel_stays(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        Seen seen = {};

        assert_int_equal(run(k, "y = 5\nwhile True: pass", 500 * 1000, &seen, &res), 0);
        assert_true(res.timed_out);
        assert_false(res.died);
        assert_string_equal(seen.text, "error:KeyboardInterrupt|");
        assert_int_equal(run(k, "y * 2", 0, &seen, &res), 0);
        assert_string_equal(seen.text, "result:10|");
        jupyter_kernel_free(k);
}

/* A slow taker of a chatty kernel's output. */
static int on_message_slowly(void *userdata, const JupyterMessage *m) {
        usleep(20 * 1000);
        return 0;
}

static void on_alarm(int sig) {
        static const char msg[] = "the run never ended: its timeout was not looked at\n";

        (void) write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(1);
}

/* The kernel sends faster than the client takes: the run still ends at its timeout (it used to
 * take messages as long as there were any, and there always were). */
static void test_timeout_holds_under_a_flood(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteHooks h = { .on_message = on_message_slowly, .wait_fd = -1 };
        JupyterExecuteResult res;

        signal(SIGALRM, on_alarm);
        alarm(120);
        assert_int_equal(jupyter_kernel_execute(k, "from IPython.display import display\nwhile True: display(1)", false,
                                                1000 * 1000, &h, &res), 0);
        alarm(0);
        assert_true(res.timed_out);
        jupyter_kernel_free(k);
}

static void *interrupt_soon(void *userdata) {
        usleep(300 * 1000);
        assert_int_equal(jupyter_kernel_interrupt(userdata), 0);
        return NULL;
}

static void test_interrupt_from_another_thread(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        Seen seen = {};
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, interrupt_soon, k), 0);
        assert_int_equal(run(k, "import time\nwhile True: time.sleep(0.01)", 0, &seen, &res), 0);
        pthread_join(t, NULL);
        assert_false(res.timed_out);
        assert_string_equal(res.status, "error");
        assert_string_equal(seen.text, "error:KeyboardInterrupt|");
        assert_int_equal(run(k, "'still here'", 0, &seen, &res), 0);
        assert_string_equal(seen.text, "result:'still here'|");
        jupyter_kernel_free(k);
}

static void *ask_interrupt_now(void *userdata) {
        assert_int_equal(jupyter_kernel_ask_interrupt(userdata), 0);
        return NULL;
}

/* The user's ^C as the run starts, before ipykernel listens for SIGINT: lost the first time,
 * repeated until it lands, and one that lands before the code runs still ends the run (the
 * 20 s timeout is only there to end a failing test). */
static void test_interrupt_asked_as_the_run_starts(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        Seen seen = {};
        pthread_t t;

        for (int i = 0; i < 3; i++) {
                assert_int_equal(pthread_create(&t, NULL, ask_interrupt_now, k), 0);
                assert_int_equal(run(k, "import time\nwhile True: time.sleep(0.01)", 20 * 1000 * 1000, &seen, &res), 0);
                pthread_join(t, NULL);
                jupyter_kernel_forget_interrupt(k);
                assert_false(res.timed_out);
                /* In the code, or before it ran: then ipykernel ends the request with no reply. */
                if (!streq(res.status, ""))
                        assert_string_equal(seen.text, "error:KeyboardInterrupt|");
                else
                        assert_string_equal(seen.text, "");
        }
        assert_int_equal(run(k, "'still here'", 0, &seen, &res), 0);
        assert_string_equal(seen.text, "result:'still here'|");
        jupyter_kernel_free(k);
}

static void test_death_is_reported(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        Seen seen = {};

        assert_int_equal(run(k, "print('bye', flush=True)\nimport os; os._exit(1)", 0, &seen, &res), 0);
        assert_true(res.died);
        assert_false(jupyter_kernel_alive(k));
        assert_int_equal(run(k, "1", 0, &seen, &res), -ESRCH);
        jupyter_kernel_free(k);
}

static void test_on_message_stops_the_run(void **state) {
        JupyterKernel *k = start();
        JupyterExecuteResult res;
        /* Stopped at the first 'tick' (message 2, after execute_input): user code runs then.
         * A SIGINT that lands while ipykernel itself is starting the run can wedge it; that
         * case ends with the kernel killed after the grace period, which is not tested here. */
        Seen seen = { .stop_after = 2 };

        assert_int_equal(run(k, "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.05)", 0, &seen, &res), 0);
        assert_true(res.cancelled);
        if (res.died) {
                _cleanup_free_ char *log = jupyter_kernel_log_tail(k);
                fail_msg("the kernel was killed; it said: %s", log);
        }
        seen.stop_after = 0;
        assert_int_equal(run(k, "2 ** 10", 0, &seen, &res), 0);
        /* (IPython may also say that its history database moved: kernels share it.) */
        assert_non_null(strstr(seen.text, "result:1024|"));
        jupyter_kernel_free(k);
}

static void test_missing_interpreter_is_explained(void **state) {
        char *argv[] = { (char *) "/nonexistent/agentix-no-such-python", (char *) "-f", (char *) "{connection_file}", NULL };
        KernelSpec bad = { .name = (char *) "broken", .dir = (char *) "/tmp", .argv = argv, .language = (char *) "python" };
        _cleanup_free_ char *error = NULL;
        JupyterKernel *k = NULL;

        assert_int_equal(jupyter_kernel_start(&(JupyterStartOptions) { .spec = &bad }, &k, &error), -ENOENT);
        assert_null(k);
        assert_non_null(error);
        assert_non_null(strstr(error, "broken"));
}

static void test_early_exit_shows_log(void **state) {
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) "echo 'no module named ipykernel' >&2; exit 1", NULL };
        KernelSpec bad = { .name = (char *) "dies", .dir = (char *) "/tmp", .argv = argv, .language = (char *) "python" };
        _cleanup_free_ char *error = NULL;
        JupyterKernel *k = NULL;

        assert_int_equal(jupyter_kernel_start(&(JupyterStartOptions) { .spec = &bad }, &k, &error), -ESRCH);
        assert_non_null(error);
        assert_non_null(strstr(error, "exited while starting"));
        assert_non_null(strstr(error, "no module named ipykernel"));
}

/* Another account (nobody) subscribes to a root kernel's iopub channel, where it could find it
 * (its port on 127.0.0.1, or its socket), and listens while the kernel prints a secret. Over
 * TCP it heard everything: a PUB socket serves any subscriber, signatures or not. */
static const char attacker[] =
        "import sys, time, zmq\n"
        "s = zmq.Context().socket(zmq.SUB)\n"
        "s.setsockopt(zmq.SUBSCRIBE, b'')\n"
        "s.connect(sys.argv[1])\n"
        "end = time.time() + 8\n"
        "while time.time() < end:\n"
        "    if s.poll(200) and any(b'secret-7f3a' in f for f in s.recv_multipart()):\n"
        "        print('heard the secret', flush=True)\n"
        "        sys.exit(2)\n";

static void test_iopub_is_not_for_other_accounts(void **state) {
        JupyterKernel *k;
        JupyterExecuteResult res;
        Seen seen = {};
        char path[64], cmdline[4096], endpoint[512];
        const char *file = NULL;
        json_t *conn;
        ssize_t n;
        pid_t pid;
        int fd, status;

        if (geteuid() != 0 || access("/usr/bin/python3", X_OK) < 0)
                skip();
        k = start();
        /* The connection file, from the kernel's command line (-f FILE). */
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) jupyter_kernel_pid(k));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        n = read(fd, cmdline, sizeof(cmdline) - 1);
        close(fd);
        assert_true(n > 0);
        cmdline[n] = 0;
        for (const char *a = cmdline; a < cmdline + n; a += strlen(a) + 1)
                if (streq(a, "-f"))
                        file = a + strlen(a) + 1;
        assert_non_null(file);
        conn = json_load_file(file, 0, NULL);
        assert_non_null(conn);
        if (streq(json_string_value(json_object_get(conn, "transport")) ?: "", "ipc"))
                snprintf(endpoint, sizeof(endpoint), "ipc://%s-%d", json_string_value(json_object_get(conn, "ip")),
                         (int) json_integer_value(json_object_get(conn, "iopub_port")));
        else
                snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%d",
                         (int) json_integer_value(json_object_get(conn, "iopub_port")));
        json_decref(conn);

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setgid(65534) < 0 || setuid(65534) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                        _exit(1);
                execl("/usr/bin/python3", "python3", "-c", attacker, endpoint, (char *) NULL);
                _exit(1);
        }
        sleep(1); /* its subscription reaches the kernel */
        assert_int_equal(run(k, "import time\nfor i in range(30):\n    print('secret-7f3a', flush=True)\n    time.sleep(0.1)",
                             30 * 1000000ULL, &seen, &res), 0);
        assert_non_null(strstr(seen.text, "secret-7f3a")); /* we heard it */
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0); /* 2: the other account heard it too */
        jupyter_kernel_free(k);
}

static void test_pick(void **state) {
        assert_ptr_equal(kernelspecs_pick(&specs, "python"), python);
        assert_ptr_equal(kernelspecs_pick(&specs, "PYTHON"), python);
        assert_null(kernelspecs_pick(&specs, "cobol"));
        _cleanup_free_ char *d = kernelspecs_describe(&specs);
        assert_non_null(strstr(d, "python3 (python)"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pick),
                cmocka_unit_test(test_state_results_and_errors),
                cmocka_unit_test(test_timeout_interrupts_and_kernel_stays),
                cmocka_unit_test(test_interrupt_from_another_thread),
                cmocka_unit_test(test_interrupt_asked_as_the_run_starts),
                cmocka_unit_test(test_death_is_reported),
                cmocka_unit_test(test_on_message_stops_the_run),
                cmocka_unit_test(test_missing_interpreter_is_explained),
                cmocka_unit_test(test_early_exit_shows_log),
                cmocka_unit_test(test_iopub_is_not_for_other_accounts),
                cmocka_unit_test(test_timeout_holds_under_a_flood),
        };
        int r;

        if (kernelspecs_find(NULL, &specs) < 0)
                return 1;
        python = kernelspecs_pick(&specs, "python3");
        if (!python) {
                fprintf(stderr, "no python3 kernelspec (apt-get install python3-ipykernel): skipped\n");
                return 77;
        }
        r = cmocka_run_group_tests(tests, NULL, NULL);
        kernelspecs_done(&specs);
        return r;
}
