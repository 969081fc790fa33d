/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "exec-env.h"
#include "exec-plain.h"
#include "macro.h"

/* Words the shell runs itself (the keywords and builtins of dash, bash and busybox ash): a
 * program of the same name in PATH would not be what `sh -c` runs. */
static const char *const shell_words[] = {
        ".", ":", "[", "[[", "]]", "!", "{", "}", "alias", "bg", "bind", "break", "builtin",
        "caller", "case", "cd", "chdir", "command", "compgen", "complete", "compopt", "continue",
        "coproc", "declare", "dirs", "disown", "do", "done", "echo", "elif", "else", "enable",
        "esac", "eval", "exec", "exit", "export", "false", "fc", "fg", "fi", "for", "function",
        "getopts", "hash", "help", "history", "if", "in", "jobs", "kill", "let", "local",
        "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly",
        "return", "select", "set", "shift", "shopt", "source", "suspend", "test", "then", "time",
        "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset",
        "until", "wait", "while",
};

static bool is_shell_word(const char *w) {
        for (size_t i = 0; i < ELEMENTSOF(shell_words); i++)
                if (streq(w, shell_words[i]))
                        return true;
        return false;
}

/* Characters that mean nothing to the shell inside a word (ASCII only: the shell's own
 * multi-byte handling is not worth reproducing). */
static bool is_plain_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("_-./:,+@%=", c);
}

static bool shell_name_is_faithful(const char *shell) {
        _cleanup_free_ char *target = realpath(shell, NULL);
        const char *name;

        if (!target)
                return false;
        name = strrchr(target, '/');
        name = name ? name + 1 : target;
        return streq(name, "dash") || streq(name, "bash");
}

bool exec_plain_shell_is_faithful(const char *shell) {
        /* The shell does not change under a running worker (a package update that moves the
         * /bin/sh link still points it at dash or bash): one realpath() per shell path. */
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static char cached_shell[PATH_MAX];
        static bool cached_answer;
        bool answer;

        if (!shell || strlen(shell) >= sizeof(cached_shell))
                return false;
        pthread_mutex_lock(&lock);
        if (!streq(cached_shell, shell)) {
                cached_answer = shell_name_is_faithful(shell);
                strcpy(cached_shell, shell);
        }
        answer = cached_answer;
        pthread_mutex_unlock(&lock);
        return answer;
}

bool exec_plain_split(const char *command, char ***ret_words) {
        _cleanup_strv_free_ char **words = NULL;

        for (const char *p = command; *p; p++)
                if (*p != ' ' && *p != '\t' && !is_plain_char(*p))
                        return false;

        if (strv_split_extend(&words, command) < 0 || strv_isempty(words))
                return false; /* out of memory or blank: let the shell have it */
        /* A leading NAME=value is an assignment, and a builtin or keyword is not a program. */
        if (strchr(words[0], '=') || is_shell_word(words[0]))
                return false;

        if (ret_words)
                *ret_words = TAKE_PTR(words);
        return true;
}

/* The first regular, executable file named `name` in `path_list`, as the shell searches it.
 * 1 and *ret: found; 0: not found, or anything the shell should judge itself. */
static int find_in_path(const char *name, const char *path_list, char **ret) {
        for (const char *p = path_list;;) {
                size_t n = strcspn(p, ":");
                _cleanup_free_ char *candidate = NULL;
                struct stat st;

                /* An empty entry means the current directory, a relative one depends on it:
                 * the shell's business. */
                if (n == 0 || p[0] != '/')
                        return 0;
                if (asprintf(&candidate, "%.*s/%s", (int) n, p, name) < 0)
                        return -ENOMEM;
                if (stat(candidate, &st) >= 0 && S_ISREG(st.st_mode)) {
                        /* Found but not executable: the shell would go on searching and
                         * report 126 if nothing else matches. Let it. */
                        if (access(candidate, X_OK) < 0)
                                return 0;
                        *ret = TAKE_PTR(candidate);
                        return 1;
                }
                if (!p[n])
                        return 0;
                p += n + 1;
        }
}

static int env_with_pwd(char *const *envp, const char *cwd, char ***ret) {
        _cleanup_free_ char *here = NULL;
        EnvOverride pwd = { .key = "PWD", .key_len = 3 };

        if (!cwd) {
                here = getcwd(NULL, 0);
                if (!here)
                        return errno == ENOMEM ? -ENOMEM : 0;
                cwd = here;
        }
        pwd.value = cwd;
        pwd.value_len = strlen(cwd);
        return env_merge(envp, &pwd, 1, ret) < 0 ? -ENOMEM : 1;
}

int exec_plain_prepare(const char *command, const char *cwd, char *const *envp, ExecPlain *ret) {
        _cleanup_(exec_plain_done) ExecPlain p = EXEC_PLAIN_NULL;
        const char *path_list;
        int r;

        if (!exec_plain_split(command, &p.argv))
                return 0;
        if (env_get(envp, "BASH_ENV") || env_get(envp, "ENV"))
                return 0;

        if (strchr(p.argv[0], '/')) {
                /* Relative to the command's cwd, which the child enters first: exec tells. */
                p.path = strdup(p.argv[0]);
                if (!p.path)
                        return -ENOMEM;
        } else {
                path_list = env_get(envp, "PATH") ?: EXEC_PLAIN_DEFAULT_PATH;
                r = find_in_path(p.argv[0], path_list, &p.path);
                if (r <= 0)
                        return r;
        }

        r = env_with_pwd(envp, cwd, &p.envp);
        if (r <= 0)
                return r;

        *ret = p;
        p = EXEC_PLAIN_NULL;
        return 1;
}

void exec_plain_done(ExecPlain *p) {
        p->path = mfree(p->path);
        p->argv = strv_free(p->argv);
        p->envp = strv_free(p->envp);
}

bool exec_plain_should_fall_back(int error) {
        switch (error) {
        case ENOENT:
        case ENOTDIR:
        case EACCES:
        case EPERM:
        case ENOEXEC:
        case ETXTBSY:
        case ELOOP:
        case ENAMETOOLONG:
        case EISDIR:
                return true;
        default:
                return false;
        }
}
