/* SPDX-License-Identifier: MIT */
/* Built-in module "sandbox" (placeholder table; functions land here). */
#include "agentix-module.h"

static const agentix_function sandbox_functions[] = {
        {},
};

const agentix_module agentix_builtin_sandbox = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "sandbox",
        .functions = sandbox_functions,
};
