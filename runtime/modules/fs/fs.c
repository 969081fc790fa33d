/* SPDX-License-Identifier: MIT */
/* Built-in module "fs" (placeholder table; functions land here). */
#include "agentix-module.h"

static const agentix_function fs_functions[] = {
        {},
};

const agentix_module agentix_builtin_fs = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "fs",
        .functions = fs_functions,
};
