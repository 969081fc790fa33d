/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "error.h"
#include "test-mp.h"

static void check_wire(const char *json, agentix_error_kind kind, int code, const char *type) {
        _cleanup_buffer_ Buffer b;
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked u;

        assert_int_equal(error_from_wire(&e, test_mp(json, &b, &u)), code);
        assert_int_equal(e.kind, kind);
        assert_int_equal(e.code, code);
        if (type)
                assert_string_equal(e.type, type);
        assert_non_null(e.message);
        msgpack_unpacked_destroy(&u);
        agentix_error_done(&e);
        assert_int_equal(e.kind, AGENTIX_E_NONE);
        assert_null(e.message);
}

/* Every stable wire type has its own kind and errno; anything else is a module's error. */
static void test_wire_types(void **state) {
        check_wire("{\"type\":\"Unauthorized\",\"message\":\"m\"}", AGENTIX_E_UNAUTHORIZED, -EACCES, "Unauthorized");
        check_wire("{\"type\":\"BadRequest\",\"message\":\"m\"}", AGENTIX_E_BAD_REQUEST, -EBADMSG, NULL);
        check_wire("{\"type\":\"NoSuchCallable\",\"message\":\"m\"}", AGENTIX_E_NO_SUCH_CALLABLE, -ENOSYS, NULL);
        check_wire("{\"type\":\"ArgumentError\",\"message\":\"m\"}", AGENTIX_E_ARGUMENT, -EINVAL, NULL);
        check_wire("{\"type\":\"Cancelled\",\"message\":\"m\"}", AGENTIX_E_CANCELLED, -ECANCELED, NULL);
        check_wire("{\"type\":\"DeadlineExceeded\",\"message\":\"m\"}", AGENTIX_E_DEADLINE_EXCEEDED, -ETIME, NULL);
        check_wire("{\"type\":\"WorkerDied\",\"message\":\"m\"}", AGENTIX_E_WORKER_DIED, -EOWNERDEAD, NULL);
        check_wire("{\"type\":\"ResultUnavailable\",\"message\":\"m\"}", AGENTIX_E_RESULT_UNAVAILABLE, -ENODATA, NULL);
        check_wire("{\"type\":\"MessageTooLarge\",\"message\":\"m\"}", AGENTIX_E_MESSAGE_TOO_LARGE, -EMSGSIZE, NULL);
        check_wire("{\"type\":\"TooManyCalls\",\"message\":\"m\"}", AGENTIX_E_TOO_MANY_CALLS, -EAGAIN, NULL);
        check_wire("{\"type\":\"ValueError\",\"message\":\"m\"}", AGENTIX_E_REMOTE, -EREMOTEIO, "ValueError");
        /* Prefixes and case do not match a stable type. */
        check_wire("{\"type\":\"Cancelledx\",\"message\":\"m\"}", AGENTIX_E_REMOTE, -EREMOTEIO, "Cancelledx");
        check_wire("{\"type\":\"cancelled\",\"message\":\"m\"}", AGENTIX_E_REMOTE, -EREMOTEIO, "cancelled");
        /* No type: the server is not speaking our protocol. */
        check_wire("{\"message\":\"m\"}", AGENTIX_E_PROTOCOL, -EPROTO, NULL);
        check_wire("{\"type\":\"\",\"message\":\"m\"}", AGENTIX_E_PROTOCOL, -EPROTO, NULL);
        check_wire("{\"type\":3}", AGENTIX_E_PROTOCOL, -EPROTO, NULL);
        check_wire("[1,2]", AGENTIX_E_PROTOCOL, -EPROTO, NULL);
}

static void test_wire_fields(void **state) {
        _cleanup_buffer_ Buffer b;
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked u;

        error_from_wire(&e, test_mp("{\"type\":\"WorkerDied\",\"message\":\"the worker was killed by SIGKILL\","
                                    "\"traceback\":null,\"cancelled\":false,\"returncode\":-9}",
                                    &b, &u));
        msgpack_unpacked_destroy(&u);
        buffer_done(&b);
        assert_true(e.has_returncode);
        assert_int_equal(e.returncode, -9);
        assert_false(e.cancelled);
        assert_null(e.traceback);
        assert_string_equal(e.message, "the worker was killed by SIGKILL");

        /* Filling an error again releases what it held (ASan's leak check watches). */
        error_from_wire(&e, test_mp("{\"type\":\"Cancelled\",\"message\":\"remote call cancelled\","
                                    "\"traceback\":\"Traceback:\\n  here\",\"cancelled\":true}",
                                    &b, &u));
        msgpack_unpacked_destroy(&u);
        buffer_done(&b);
        assert_false(e.has_returncode);
        assert_true(e.cancelled);
        assert_string_equal(e.traceback, "Traceback:\n  here");

        /* A message with a NUL byte stays whole; no message: the type stands in. */
        error_from_wire(&e, test_mp("{\"type\":\"OSError\",\"message\":\"a\\u0000b\",\"returncode\":\"x\"}", &b, &u));
        msgpack_unpacked_destroy(&u);
        buffer_done(&b);
        assert_string_equal(e.message, "a?b");
        assert_false(e.has_returncode);
        error_from_wire(&e, test_mp("{\"type\":\"OSError\"}", &b, &u));
        msgpack_unpacked_destroy(&u);
        assert_string_equal(e.message, "OSError");
        agentix_error_done(&e);
        buffer_done(&b);

        /* A NULL error only gets the errno. */
        assert_int_equal(error_from_wire(NULL, test_mp("{\"type\":\"WorkerDied\"}", &b, &u)), -EOWNERDEAD);
        msgpack_unpacked_destroy(&u);
}

static void test_file_codes(void **state) {
        static const struct {
                const char *code;
                int errnum;
        } t[] = {
                { "file_not_found", -ENOENT },   { "permission_denied", -EACCES }, { "is_directory", -EISDIR },
                { "not_a_directory", -ENOTDIR }, { "invalid_path", -EINVAL },      { "already_exists", -EEXIST },
                { "too_large", -EFBIG },         { "io_error", -EIO },             { "something_new", -EIO },
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_buffer_ Buffer b;
                agentix_error e = AGENTIX_ERROR_NULL;
                char json[256];
                msgpack_unpacked u;
                const msgpack_object *m;

                snprintf(json, sizeof(json), "{\"error\":\"%s\",\"message\":\"Error: File '/x' is bad\"}", t[i].code);
                m = test_mp(json, &b, &u);
                assert_int_equal(error_from_file(&e, mp_map_get(m, "error"), mp_map_get(m, "message")), t[i].errnum);
                assert_int_equal(e.kind, AGENTIX_E_FILE);
                assert_int_equal(e.code, t[i].errnum);
                assert_string_equal(e.type, t[i].code);
                assert_string_equal(e.message, "Error: File '/x' is bad");
                msgpack_unpacked_destroy(&u);
                agentix_error_done(&e);
        }
}

static void test_kind_names(void **state) {
        for (int k = AGENTIX_E_NONE; k <= AGENTIX_E_SANDBOX; k++) {
                const char *n = agentix_error_kind_name(k);
                assert_string_not_equal(n, "Unknown");
                for (int j = AGENTIX_E_NONE; j < k; j++)
                        assert_string_not_equal(n, agentix_error_kind_name(j));
        }
        assert_string_equal(agentix_error_kind_name(AGENTIX_E_WORKER_DIED), "WorkerDied");
        assert_string_equal(agentix_error_kind_name(AGENTIX_E_SANDBOX), "SandboxError");
        assert_string_equal(agentix_error_kind_name(AGENTIX_E_SANDBOX + 1), "Unknown");
        assert_string_equal(agentix_error_kind_name(-1), "Unknown");
}

static void test_set_and_copy(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL, c = AGENTIX_ERROR_NULL;

        assert_int_equal(error_set(&e, AGENTIX_E_CONNECTION, -ECONNREFUSED, "cannot connect to %s: %s",
                                   "http://127.0.0.1:9", "Connection refused"),
                         -ECONNREFUSED);
        assert_string_equal(e.message, "cannot connect to http://127.0.0.1:9: Connection refused");
        assert_null(e.type);
        assert_int_equal(error_set_typed(&e, AGENTIX_E_UNAUTHORIZED, -EACCES, "Unauthorized", "no"), -EACCES);
        e.has_returncode = true;
        e.returncode = 3;
        assert_int_equal(error_copy(&c, &e), -EACCES);
        assert_ptr_not_equal(c.message, e.message);
        assert_string_equal(c.message, "no");
        assert_string_equal(c.type, "Unauthorized");
        assert_int_equal(c.returncode, 3);
        agentix_error_done(&e);
        agentix_error_done(&c);
        assert_int_equal(error_set(NULL, AGENTIX_E_TIMEOUT, -ETIMEDOUT, "x"), -ETIMEDOUT);
        agentix_error_done(NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_wire_types), cmocka_unit_test(test_wire_fields),
                cmocka_unit_test(test_file_codes), cmocka_unit_test(test_kind_names),
                cmocka_unit_test(test_set_and_copy),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
