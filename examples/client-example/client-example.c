/* SPDX-License-Identifier: MIT */
/* client-example: libagentix's blocking API in one page. It connects to a runtime server,
 * runs a command, streams another one's output as it comes, writes a file and reads it back,
 * and calls a function with msgpack arguments. Every failure is a typed agentix_error with a
 * message a person can act on.
 *
 *   client-example URL [TOKEN]          (or $AGENTIX_URL and $AGENTIX_TOKEN)
 *
 * Build out of tree:  cc client-example.c $(pkg-config --cflags --libs agentix) -o client-example */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <agentix.h>

static int fail(const char *what, const agentix_error *e) {
        fprintf(stderr, "%s: %s (%s)\n", what, e->message, agentix_error_kind_name(e->kind));
        return EXIT_FAILURE;
}

int main(int argc, char **argv) {
        const char *url = argc > 1 ? argv[1] : getenv("AGENTIX_URL");
        const char *token = argc > 2 ? argv[2] : getenv("AGENTIX_TOKEN");
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_client *c = NULL;
        int ret = EXIT_FAILURE;

        if (!url) {
                fprintf(stderr, "usage: %s URL [TOKEN]\n", argv[0]);
                return EXIT_FAILURE;
        }

        /* 1. Connect. event == NULL: the client runs a private event loop inside its blocking
         *    functions. */
        if (agentix_client_new(&(agentix_options) { .url = url, .token = token }, NULL, &c) < 0 ||
            agentix_client_connect(c, &e) < 0) {
                ret = fail("connect", &e);
                goto finish;
        }
        printf("connected over %s\n", agentix_client_transport(c));

        /* 2. Run a command: the deepagents execute contract. */
        agentix_exec_result x;
        if (agentix_exec(c, "echo hello from $(uname -s); exit 3", &(agentix_exec_options) { .timeout_sec = 30 }, &x,
                         &e) < 0) {
                ret = fail("exec", &e);
                goto finish;
        }
        printf("exec: exit %d, output: %s", x.exit_code, x.output);
        agentix_exec_result_done(&x);

        /* 3. Stream a command's output: sandbox::exec as a stream yields {stream, data} items,
         *    then {exit_code}. Arguments are msgpack: here the array ["for i in 1 2 3; …"]. */
        static const char cmd[] = "for i in 1 2 3; do echo tick $i; sleep 0.1; done";
        char packed[64] = { (char) 0x91, (char) 0xd9, (char) (sizeof(cmd) - 1) }; /* [str8] */
        memcpy(packed + 3, cmd, sizeof(cmd) - 1);

        agentix_request *r;
        msgpack_unpacked item;
        int k;
        if (agentix_call_start(c, "sandbox::exec", &(agentix_args) { .args = packed, .args_size = 3 + sizeof(cmd) - 1 },
                               &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, &r) < 0)
                goto finish;
        while ((k = agentix_request_next(r, &item, 0, &e)) > 0) {
                for (uint32_t i = 0; i < item.data.via.map.size; i++) {
                        const msgpack_object_kv *kv = &item.data.via.map.ptr[i];
                        if (kv->key.via.str.size == 4 && memcmp(kv->key.via.str.ptr, "data", 4) == 0)
                                printf("stream: %.*s", (int) kv->val.via.bin.size, kv->val.via.bin.ptr);
                        else if (kv->key.via.str.size == 9 && memcmp(kv->key.via.str.ptr, "exit_code", 9) == 0)
                                printf("stream: exit %lld\n", (long long) kv->val.via.i64);
                }
                msgpack_unpacked_destroy(&item);
        }
        agentix_request_unref(r);
        if (k < 0) {
                ret = fail("stream", &e);
                goto finish;
        }

        /* 4. Files: write, then read back numbered lines. Per-file problems are AGENTIX_E_FILE
         *    with .type the code ("file_not_found", "already_exists", …). */
        agentix_read_result rd;
        if (agentix_write(c, "/tmp/client-example.txt", "first\nsecond\n", 13, true, &e) < 0 ||
            agentix_read(c, "/tmp/client-example.txt", 0, 100, &rd, &e) < 0) {
                ret = fail("write/read", &e);
                goto finish;
        }
        printf("read:\n%s\n", rd.content);
        agentix_read_result_done(&rd);
        if (agentix_read(c, "/tmp/client-example-missing.txt", 0, 10, &rd, &e) < 0)
                printf("read of a missing file: %s: %s\n", e.type, e.message);

        /* 5. Any function: sandbox::echo gives its argument back. */
        msgpack_unpacked res;
        if (agentix_call(c, "sandbox::echo", &(agentix_args) { .args = "\x91\xa2hi", .args_size = 4 }, NULL, &res,
                         &e) < 0) {
                ret = fail("echo", &e);
                goto finish;
        }
        printf("echo: %.*s\n", (int) res.data.via.str.size, res.data.via.str.ptr);
        msgpack_unpacked_destroy(&res);

        ret = EXIT_SUCCESS;
finish:
        agentix_error_done(&e);
        agentix_client_unref(c);
        return ret;
}
