/* SPDX-License-Identifier: MIT */
#pragma once

/* What an ELF file needs from the dynamic loader, read with libelf: its interpreter, the
 * libraries it names (DT_NEEDED) and where it says to look for them (DT_RUNPATH/DT_RPATH). */

#include <stdbool.h>
#include <stdint.h>

#include "strv.h"

typedef struct ElfDeps {
        uint16_t machine;    /* EM_X86_64, … */
        uint8_t elf_class;   /* ELFCLASS64, … */
        bool executable;     /* ET_EXEC, or ET_DYN with an interpreter (a PIE) */
        bool dynamic;        /* has a dynamic section: needs patching in a store */
        char *interpreter;   /* PT_INTERP, or NULL */
        char **needed;       /* DT_NEEDED, in order */
        char **search_path;  /* DT_RUNPATH, else DT_RPATH, split on ':' ($ORIGIN kept) */
} ElfDeps;

/* -ENOEXEC when fd is not an ELF object. */
int elf_deps_read(int fd, ElfDeps **ret);
ElfDeps *elf_deps_free(ElfDeps *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(ElfDeps *, elf_deps_free);

/* Does the file start with the ELF magic? (cheap: reads 4 bytes) */
bool fd_is_elf(int fd);
