/* SPDX-License-Identifier: MIT */
/* The registry with the modules compiled into the worker. Apart from the rest of the registry
 * because the built-ins call the worker's agentix_call_* API: only programs that run calls
 * link this (and with it libmod_sandbox, libmod_fs, libmod_runtime and the worker's call code). */

#include "macro.h"
#include "module-registry.h"

int module_registry_new(const char *module_dir, ModuleRegistry **ret) {
        static const agentix_module *const builtins[] = {
                &agentix_builtin_sandbox,
                &agentix_builtin_fs,
                &agentix_builtin_runtime,
                &agentix_builtin_shell,
                &agentix_builtin_code,
        };

        return module_registry_new_with(module_dir, builtins, ELEMENTSOF(builtins), ret);
}

void module_builtins_shutdown(void) {
        code_module_shutdown();
}
