/* SPDX-License-Identifier: MIT */
#pragma once

/* Jupyter kernelspecs: the kernels installed in the sandbox, found where Jupyter looks for them
 * (each directory of JUPYTER_PATH, then ~/.local/share/jupyter, then
 * /nix/runtime/share/jupyter — a bundle's — then /usr/local/share/jupyter and
 * /usr/share/jupyter; in each, kernels/NAME/kernel.json). The first directory that has a name
 * wins, as in Jupyter. A bundle sets JUPYTER_PATH to its own kernels (runtime-env.c), so its
 * kernels come before the task image's. */

#include <stdbool.h>
#include <stddef.h>

typedef struct KernelSpec {
        char *name;          /* the directory's name: "python3" */
        char *dir;           /* the directory ({resource_dir}) */
        char **argv;         /* as kernel.json says, "{connection_file}" not yet filled in */
        char **env;          /* KEY=VALUE from kernel.json's "env" (may be NULL) */
        char *language;      /* "python" */
        char *display_name;
        bool interrupt_message; /* interrupt_mode "message": interrupt_request on the control
                                 * channel instead of SIGINT */
} KernelSpec;

typedef struct KernelSpecs {
        KernelSpec *specs;
        size_t n;
} KernelSpecs;

/* Every kernelspec found, looking up JUPYTER_PATH and HOME in `env` (NULL: environ). A
 * kernel.json that cannot be read or has no argv is skipped. */
int kernelspecs_find(char *const *env, KernelSpecs *ret);
void kernelspecs_done(KernelSpecs *k);

/* The kernel for `want`: a kernelspec of that name, else one whose language is `want`
 * (case-insensitive; for several, the one whose name is the language followed by a digit —
 * python3 — else the first). NULL when there is none. */
const KernelSpec *kernelspecs_pick(const KernelSpecs *k, const char *want);

/* "python3 (python), ir (R)" or "none": for error messages. malloc()ed. */
char *kernelspecs_describe(const KernelSpecs *k);
