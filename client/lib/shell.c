/* SPDX-License-Identifier: MIT */
/* agentix_shell_*(): persistent shell sessions (shell::) with C arguments and C results. */

#include "envelope.h"
#include "error.h"
#include "value.h"

/* Pack [id] or [id, text (size bytes, as str)] and {} and call shell::FUNCTION. */
static int shell_call(agentix_client *c, const char *function, const char *id, const void *text, size_t size,
                      const void *kwargs, size_t kwargs_size, msgpack_unpacked *ret, agentix_error *ret_error) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        msgpack_packer pk;
        char callable[32];
        int r = 0;

        if (!id)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "shell::%s needs a session id", function);
        mp_packer_init_buffer(&pk, &args);
        r |= msgpack_pack_array(&pk, text ? 2 : 1);
        r |= mp_pack_cstr(&pk, id);
        if (text)
                r |= mp_pack_str(&pk, text, size);
        if (r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        snprintf(callable, sizeof(callable), "shell::%s", function);
        return agentix_call(c, callable,
                            &(agentix_args) { .args = buffer_data(&args), .args_size = args.len, .kwargs = kwargs,
                                              .kwargs_size = kwargs_size },
                            NULL, ret, ret_error);
}

AGENTIX_API int agentix_shell_open(agentix_client *c, const agentix_shell_options *o, char **ret_id,
                                   agentix_error *ret_error) {
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL;
        msgpack_unpacked result;
        msgpack_packer pk;
        size_t size;
        int r = 0;

        if (!ret_id)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_shell_open() needs ret_id");
        mp_packer_init_buffer(&pk, &kwargs);
        r |= msgpack_pack_map(&pk, o ? !!o->cwd + !!o->env + !!o->name : 0);
        if (o && o->cwd) {
                r |= mp_pack_cstr(&pk, "cwd");
                r |= mp_pack_cstr(&pk, o->cwd);
        }
        if (o && o->env) {
                r |= mp_pack_cstr(&pk, "env");
                if (r == 0)
                        r = value_pack_env(&pk, o->env);
        }
        if (o && o->name) {
                r |= mp_pack_cstr(&pk, "name");
                r |= mp_pack_cstr(&pk, o->name);
        }
        if (r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r = agentix_call(c, "shell::open",
                         &(agentix_args) { .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len }, NULL, &result,
                         ret_error);
        if (r < 0)
                return r;
        if (result.data.type != MSGPACK_OBJECT_STR || value_dup_bytes(&result.data, ret_id, &size) < 0) {
                msgpack_unpacked_destroy(&result);
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO, "shell::open returned no session id");
        }
        msgpack_unpacked_destroy(&result);
        return 0;
}

AGENTIX_API int agentix_shell_run(agentix_client *c, const char *id, const char *command, double timeout_sec,
                                  agentix_shell_result *ret, agentix_error *ret_error) {
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL;
        agentix_shell_result res = {};
        msgpack_unpacked result;
        msgpack_packer pk;
        int64_t exit_code;
        int r;

        if (!command || !ret)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_shell_run() needs a command and a result");
        mp_packer_init_buffer(&pk, &kwargs);
        r = msgpack_pack_map(&pk, timeout_sec > 0);
        if (timeout_sec > 0) {
                r |= mp_pack_cstr(&pk, "timeout");
                r |= msgpack_pack_double(&pk, timeout_sec);
        }
        if (r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r = shell_call(c, "run", id, command, strlen(command), buffer_data(&kwargs), kwargs.len, &result, ret_error);
        if (r < 0)
                return r;
        if (result.data.type != MSGPACK_OBJECT_MAP || value_get_int(&result.data, "exit_code", -1, &exit_code) < 0 ||
            exit_code < -1 || exit_code > 255 || value_get_bool(&result.data, "timed_out", false, &res.timed_out) < 0 ||
            value_get_bool(&result.data, "truncated", false, &res.truncated) < 0 ||
            value_get_bool(&result.data, "ended", false, &res.ended) < 0 ||
            value_get_bytes(&result.data, "output", &res.output, &res.output_size) < 0) {
                free(res.output);
                msgpack_unpacked_destroy(&result);
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO,
                                 "shell::run returned something other than {output, exit_code, timed_out, truncated, ended}");
        }
        msgpack_unpacked_destroy(&result);
        if (!res.output && !(res.output = strdup("")))
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        res.exit_code = (int) exit_code;
        *ret = res;
        return 0;
}

AGENTIX_API void agentix_shell_result_done(agentix_shell_result *r) {
        if (!r)
                return;
        free(r->output);
        *r = (agentix_shell_result) {};
}

/* A call whose value is None: only whether it failed matters. */
static int shell_call_none(agentix_client *c, const char *function, const char *id, const void *text, size_t size,
                           agentix_error *ret_error) {
        static const uint8_t empty_map = 0x80;
        msgpack_unpacked result;
        int r;

        r = shell_call(c, function, id, text, size, &empty_map, 1, &result, ret_error);
        if (r < 0)
                return r;
        msgpack_unpacked_destroy(&result);
        return 0;
}

AGENTIX_API int agentix_shell_input(agentix_client *c, const char *id, const void *data, size_t size,
                                    agentix_error *ret_error) {
        if (!data && size > 0)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_shell_input() needs data");
        return shell_call_none(c, "input", id, data ?: "", size, ret_error);
}

AGENTIX_API int agentix_shell_interrupt(agentix_client *c, const char *id, agentix_error *ret_error) {
        return shell_call_none(c, "interrupt", id, NULL, 0, ret_error);
}

AGENTIX_API int agentix_shell_close(agentix_client *c, const char *id, agentix_error *ret_error) {
        return shell_call_none(c, "close", id, NULL, 0, ret_error);
}
