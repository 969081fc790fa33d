/* SPDX-License-Identifier: MIT */
#pragma once

/* Running a plain command without the shell in between.
 *
 * `sh -c 'ls -l /tmp'` costs the shell's own start-up plus a fork on top of ls (dash does not
 * exec its last command in place): 0.6–0.9 ms on a 2-vCPU VM, more than ls itself. A command
 * made only of plain words — letters, digits and `_-./:,+@%=` separated by blanks; no quotes,
 * escapes, expansions, globs, redirections, operators, comments, newlines or a leading
 * assignment — whose first word is no shell keyword or builtin means exactly "run the program
 * the first word names, found in PATH as the shell finds it, with the words as its argv". Such
 * a command runs directly, with PWD set to the working directory as the shell sets it.
 *
 * Only with a shell known to do the same (exec_plain_shell_is_faithful(): dash, bash).
 * Everything else goes to the shell: any other character, a builtin, a PATH entry that is
 * empty or relative, BASH_ENV or ENV in the environment (a shell would read those files), a
 * program not found or not executable (the shell reports it as always: 127/126 and its
 * message), or an exec that fails (no #! line, …: see exec_plain_should_fall_back()).
 *
 * What a caller can tell apart: no shell process in the tree, and when the program dies of a
 * signal, no "Segmentation fault"-style line from the shell on stderr (exit_code is 128+N
 * either way). */

#include <stdbool.h>

typedef struct ExecPlain {
        char *path;   /* the program: found in PATH, or the first word when it has a '/' */
        char **argv;  /* the words */
        char **envp;  /* the environment with PWD */
} ExecPlain;

#define EXEC_PLAIN_NULL ((ExecPlain) {})

/* The shell's search path when PATH is unset (dash's default). */
#define EXEC_PLAIN_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Whether `shell` (a path) runs a plain command's program as found in PATH. dash and bash do;
 * busybox's ash may run its own applet of that name instead (FEATURE_PREFER_APPLETS: in a
 * busybox image `sh -c 'stat x'` is busybox's stat even when PATH names another), and an
 * unknown shell may do anything: commands for those keep going through the shell. Decided by
 * the name the path resolves to (remembered per path). */
bool exec_plain_shell_is_faithful(const char *shell);

/* Whether `command` is plain words only (see above) and its first word no builtin; on true
 * and with ret_words, the words (free with strv_free()). Pure: no file system access. */
bool exec_plain_split(const char *command, char ***ret_words);

/* 1 with *ret filled: run ret->path directly; 0: use the shell; <0: -ENOMEM.
 * cwd: the command's working directory (NULL: the worker's). envp: its environment. */
int exec_plain_prepare(const char *command, const char *cwd, char *const *envp, ExecPlain *ret);

void exec_plain_done(ExecPlain *p);

/* Whether a posix_spawn() error of a direct run means "hand the command to the shell": the
 * program could not be executed (ENOENT, EACCES, ENOEXEC, …), and the shell will say why. */
bool exec_plain_should_fall_back(int error);
