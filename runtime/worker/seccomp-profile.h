/* SPDX-License-Identifier: MIT */
#pragma once

/* Seccomp profiles in Docker's JSON format (the format of moby's profiles/seccomp/default.json):
 *
 *   { "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
 *     "architectures": ["SCMP_ARCH_X86_64", …]  or  "archMap": [{architecture, subArchitectures}],
 *     "syscalls": [ { "names": [...] | "name": "...", "action": "SCMP_ACT_…", "errnoRet": N,
 *                     "args": [ {"index": 0, "value": V, "valueTwo": V2, "op": "SCMP_CMP_…"} ],
 *                     "includes": {"arches": [...], "caps": [...]}, "excludes": {…} } ] }
 *
 * Syscall names this libseccomp does not know are skipped (profiles list syscalls of every
 * architecture and kernel); unknown actions and comparison operators are errors. The worker
 * holds no capabilities as far as a profile is concerned: entries that `includes` caps are
 * skipped, entries that `excludes` caps apply. includes/excludes `arches` compare against the
 * native architecture (Docker's names: amd64, arm64, …); minKernel is ignored.
 *
 * Several entries for the same syscall are ORed (libseccomp semantics); the comparisons of
 * one entry are ANDed. An entry whose action equals the default action is dropped. */

#include <seccomp.h>
#include <stddef.h>

/* The profile compiled into the binary (policy/seccomp/default.json), NUL-terminated. */
extern const char seccomp_default_profile_json[];

/* Build a filter from profile text. On -EINVAL (bad profile), *ret_error (if non-NULL) gets a
 * malloc()ed message naming the entry and what is wrong. Release with seccomp_release(). */
int seccomp_profile_compile(const char *json, size_t size, scmp_filter_ctx *ret, char **ret_error);

/* Same for a file. */
int seccomp_profile_compile_file(const char *path, scmp_filter_ctx *ret, char **ret_error);

/* Compile the profile in `path` (NULL: the built-in default) and load it into the calling
 * process. Needs no_new_privs (or CAP_SYS_ADMIN); must run before the process starts threads,
 * since a filter only covers the thread that loads it and threads it creates later. */
int seccomp_profile_install(const char *path, char **ret_error);
