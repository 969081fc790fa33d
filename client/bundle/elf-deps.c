/* SPDX-License-Identifier: MIT */
#include <gelf.h>
#include <libelf.h>

#include "elf-deps.h"

ElfDeps *elf_deps_free(ElfDeps *e) {
        if (!e)
                return NULL;
        free(e->interpreter);
        strv_free(e->needed);
        strv_free(e->search_path);
        free(e);
        return NULL;
}

static inline void elf_endp(Elf **e) {
        if (*e)
                elf_end(*e);
}

bool fd_is_elf(int fd) {
        char magic[SELFMAG];

        return pread(fd, magic, SELFMAG, 0) == SELFMAG && memcmp(magic, ELFMAG, SELFMAG) == 0;
}

static int split_search_path(const char *s, char ***l) {
        while (*s) {
                size_t n = strcspn(s, ":");
                int r;

                if (n > 0) {
                        r = strv_consume(l, strndup(s, n));
                        if (r < 0)
                                return r;
                }
                s += n;
                s += strspn(s, ":");
        }
        return 0;
}

static int read_interpreter(Elf *elf, int fd, ElfDeps *d) {
        size_t n_phdrs;

        if (elf_getphdrnum(elf, &n_phdrs) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < n_phdrs; i++) {
                GElf_Phdr ph;
                char *s;

                if (!gelf_getphdr(elf, i, &ph))
                        return -EBADMSG;
                if (ph.p_type != PT_INTERP)
                        continue;
                if (ph.p_filesz == 0 || ph.p_filesz > 4096)
                        return -EBADMSG;
                s = calloc(1, ph.p_filesz + 1);
                if (!s)
                        return -ENOMEM;
                if (pread(fd, s, ph.p_filesz, ph.p_offset) != (ssize_t) ph.p_filesz) {
                        free(s);
                        return -EBADMSG;
                }
                d->interpreter = s;
                return 0;
        }
        return 0;
}

static int read_dynamic(Elf *elf, ElfDeps *d) {
        Elf_Scn *scn = NULL;
        _cleanup_strv_free_ char **rpath = NULL, **runpath = NULL;
        int r;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *data;

                if (!gelf_getshdr(scn, &sh))
                        return -EBADMSG;
                if (sh.sh_type != SHT_DYNAMIC)
                        continue;
                d->dynamic = true;
                data = elf_getdata(scn, NULL);
                if (!data)
                        return -EBADMSG;
                for (size_t i = 0; sh.sh_entsize > 0 && i < sh.sh_size / sh.sh_entsize; i++) {
                        GElf_Dyn dyn;
                        const char *s;

                        if (!gelf_getdyn(data, i, &dyn))
                                return -EBADMSG;
                        if (dyn.d_tag == DT_NULL)
                                break;
                        if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RUNPATH && dyn.d_tag != DT_RPATH)
                                continue;
                        s = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
                        if (!s)
                                return -EBADMSG;
                        if (dyn.d_tag == DT_NEEDED)
                                r = strv_extend(&d->needed, s);
                        else
                                r = split_search_path(s, dyn.d_tag == DT_RUNPATH ? &runpath : &rpath);
                        if (r < 0)
                                return r;
                }
        }
        /* ld.so ignores DT_RPATH when DT_RUNPATH is there. */
        d->search_path = runpath ? TAKE_PTR(runpath) : TAKE_PTR(rpath);
        return 0;
}

int elf_deps_read(int fd, ElfDeps **ret) {
        _cleanup_(elf_deps_freep) ElfDeps *d = NULL;
        _cleanup_(elf_endp) Elf *elf = NULL;
        GElf_Ehdr eh;
        int r;

        if (!fd_is_elf(fd))
                return -ENOEXEC;
        if (elf_version(EV_CURRENT) == EV_NONE)
                return -EIO;
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
                return -ENOEXEC;

        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->machine = eh.e_machine;
        d->elf_class = eh.e_ident[EI_CLASS];
        r = read_interpreter(elf, fd, d);
        if (r < 0)
                return r;
        d->executable = eh.e_type == ET_EXEC || (eh.e_type == ET_DYN && d->interpreter);
        r = read_dynamic(elf, d);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(d);
        return 0;
}
