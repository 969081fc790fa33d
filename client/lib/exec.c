/* SPDX-License-Identifier: MIT */
/* agentix_exec(): sandbox::exec (unary) with C arguments and a C result. */

#include "envelope.h"
#include "error.h"
#include "value.h"

static int pack_exec_kwargs(Buffer *b, const agentix_exec_options *o) {
        msgpack_packer pk;
        uint32_t n = 0;
        int r = 0;

        mp_packer_init_buffer(&pk, b);
        if (!o)
                return msgpack_pack_map(&pk, 0) < 0 ? -ENOMEM : 0;

        n += o->timeout_sec != 0;
        n += !!o->cwd;
        n += !!o->env;
        n += !!o->stdin_data;
        n += o->max_output > 0;
        r |= msgpack_pack_map(&pk, n);
        if (o->timeout_sec != 0) {
                r |= mp_pack_cstr(&pk, "timeout");
                r |= msgpack_pack_double(&pk, o->timeout_sec < 0 ? 0.0 : o->timeout_sec); /* 0: none */
        }
        if (o->cwd) {
                r |= mp_pack_cstr(&pk, "cwd");
                r |= mp_pack_cstr(&pk, o->cwd);
        }
        if (o->env) {
                r |= mp_pack_cstr(&pk, "env");
                if (r == 0)
                        r = value_pack_env(&pk, o->env);
        }
        if (o->stdin_data) {
                r |= mp_pack_cstr(&pk, "stdin");
                r |= msgpack_pack_bin(&pk, o->stdin_size);
                r |= msgpack_pack_bin_body(&pk, o->stdin_data, o->stdin_size);
        }
        if (o->max_output > 0) {
                r |= mp_pack_cstr(&pk, "max_output");
                r |= msgpack_pack_uint64(&pk, o->max_output);
        }
        return r ? -ENOMEM : 0;
}

AGENTIX_API int agentix_exec(agentix_client *c, const char *command, const agentix_exec_options *o,
                             agentix_exec_result *ret, agentix_error *ret_error) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        agentix_exec_result res = {};
        msgpack_unpacked result;
        msgpack_packer pk;
        int64_t exit_code;
        int r;

        if (!command || !ret)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_exec() needs a command and a result");

        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, command) < 0 || pack_exec_kwargs(&kwargs, o) < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");

        r = agentix_call(c, "sandbox::exec",
                         &(agentix_args) { .args = buffer_data(&args), .args_size = args.len,
                                           .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len },
                         &(agentix_call_options) { .deadline_ms = o ? o->deadline_ms : 0 }, &result, ret_error);
        if (r < 0)
                return r;

        if (result.data.type != MSGPACK_OBJECT_MAP ||
            value_get_int(&result.data, "exit_code", -1, &exit_code) < 0 || exit_code < INT32_MIN ||
            exit_code > INT32_MAX || value_get_bool(&result.data, "truncated", false, &res.truncated) < 0 ||
            value_get_bool(&result.data, "timed_out", false, &res.timed_out) < 0 ||
            value_get_bytes(&result.data, "output", &res.output, &res.output_size) < 0) {
                free(res.output);
                msgpack_unpacked_destroy(&result);
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO,
                                 "sandbox::exec returned something other than {exit_code, output, truncated, timed_out}");
        }
        msgpack_unpacked_destroy(&result);
        if (!res.output) {
                res.output = strdup("");
                if (!res.output)
                        return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        }
        res.exit_code = (int) exit_code;
        *ret = res;
        return 0;
}

AGENTIX_API void agentix_exec_result_done(agentix_exec_result *r) {
        if (!r)
                return;
        free(r->output);
        *r = (agentix_exec_result) {};
}
