/* SPDX-License-Identifier: MIT */
/* Built-in module "runtime": what agentd does to a runtime it keeps warm in a pool.
 *
 *   claim(token: str, env: map = {}, workdir: str? = None) -> map
 *
 * The worker's half of a claim: env (names to values) becomes the environment of every later
 * call and command, and workdir (absolute; made when missing, as Docker makes WorkingDir) their
 * working directory, as if the sandbox had been created with them. The server's half swaps the
 * token (the server never hands this call to the worker twice, nor while another call runs:
 * that is what makes changing the process's environment and directory safe here). Returns {}. */
#include <ctype.h>
#include <unistd.h>

#include "agentix-module.h"
#include "fs-path.h"
#include "macro.h"

static bool env_name_ok(const char *s) {
        if (!*s || isdigit((unsigned char) *s))
                return false;
        for (; *s; s++)
                if (!(isalnum((unsigned char) *s) || *s == '_'))
                        return false;
        return true;
}

static int runtime_claim(agentix_call *call, const msgpack_object *argv, size_t argc) {
        const msgpack_object *env = &argv[1];
        _cleanup_free_ char *workdir = agentix_arg_strdup(&argv[2]);
        int r;

        if (!workdir && !agentix_arg_is_nil(&argv[2]))
                return -errno;
        if (workdir && workdir[0] != '/')
                return agentix_call_raise(call, "ValueError", "claim() argument 'workdir' must be an absolute path, got '%s'",
                                          workdir);
        for (uint32_t i = 0; i < env->via.map.size; i++) {
                const msgpack_object_kv *kv = &env->via.map.ptr[i];
                _cleanup_free_ char *name = NULL, *value = NULL;

                if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type != MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "TypeError", "claim() argument 'env' maps names to strings");
                name = agentix_arg_strdup(&kv->key);
                value = agentix_arg_strdup(&kv->val);
                if (!name || !value)
                        return agentix_call_raise(call, "ValueError", "claim() argument 'env': a NUL byte in a name or value");
                if (!env_name_ok(name))
                        return agentix_call_raise(call, "ValueError", "claim() argument 'env': '%s' is not a variable name",
                                                  name);
                if (setenv(name, value, 1) < 0)
                        return -errno;
        }
        if (workdir) {
                r = fs_mkdir_parents(workdir);
                if (r < 0)
                        return agentix_call_raise(call, "OSError", "claim() workdir '%s': %s", workdir, strerror(-r));
                if (chdir(workdir) < 0)
                        return agentix_call_raise(call, "OSError", "claim() workdir '%s': %m", workdir);
        }
        msgpack_pack_map(agentix_call_result(call), 0);
        return 0;
}

static const agentix_function runtime_functions[] = {
        {
                .name = "claim",
                .shape = AGENTIX_SHAPE_UNARY,
                .signature = "(token: str, env: map = {}, workdir: str? = None) -> map",
                .impl = runtime_claim,
                .doc = "agentd's claim of a pooled sandbox: a new token, and the environment and working directory of "
                       "later calls.",
        },
        {},
};

const agentix_module agentix_builtin_runtime = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "runtime",
        .doc = "What agentd does to a runtime it keeps warm in a pool (claim).",
        .functions = runtime_functions,
};
