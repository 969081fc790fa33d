/* SPDX-License-Identifier: MIT */
/* agentixctl read, write, edit, ls, grep, glob: thin commands over libagentix's fs helpers,
 * deepagents-style output for people (numbered lines, `ls -l`-like listings, grep -n lines)
 * and the helpers' results as JSON with --json. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "buffer.h"
#include "fail.h"
#include "format-util.h"
#include "json-msgpack.h"
#include "output.h"
#include "parse-util.h"

/* The most `write` sends in one message (the server's default message limit, less room for
 * the envelope); `cp` has no such limit. */
#define WRITE_MAX (255u * 1024u * 1024u)

static int connect_blocking(agentix_client **ret) {
        return ctl_connect(NULL, 0, ret);
}

static inline void agentix_client_unrefp(agentix_client **c) {
        agentix_client_unref(*c);
}
#define _cleanup_client_ _cleanup_(agentix_client_unrefp)

static json_t *json_int_or_null(int64_t v) {
        return v < 0 ? json_null() : json_integer(v);
}

static int check_remote_path(const char *verb, const char *path) {
        if (path[0] != '/')
                return fail_usage(verb, "remote paths are absolute: '%s'", path);
        return EXIT_OK;
}

/* ---- read ---------------------------------------------------------------------------------- */

static void read_help(void) {
        printf("Usage: agentixctl read [OPTIONS] PATH\n"
               "\n"
               "Print lines of a file in the sandbox, numbered (cat -n style).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --offset=N           Start after the first N lines (default 0)\n"
               "     --limit=N            Print at most N lines (default 2000)\n"
               "     --json               Print {path, content, encoding, data, total_lines,\n"
               "                          start_line, end_line, next_offset, truncated}\n"
               "  -q --quiet              Do not say on stderr that more lines follow\n"
               "\n"
               "See agentixctl(1).\n");
}

enum {
        ARG_OFFSET = ARG_COMMON_END,
        ARG_LIMIT,
        ARG_OVERWRITE,
        ARG_REPLACE_ALL,
        ARG_GLOB,
        ARG_MAX_COUNT,
};

int verb_read(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "offset", required_argument, NULL, ARG_OFFSET },
                { "limit", required_argument, NULL, ARG_LIMIT },
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        agentix_read_result res = {};
        agentix_error e = AGENTIX_ERROR_NULL;
        int64_t offset = 0, limit = 2000;
        const char *path;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("read", read_help, argv);
                case ARG_OFFSET:
                        if (parse_int64(optarg, 0, &offset) < 0)
                                return fail_usage("read", "invalid --offset '%s'", optarg);
                        break;
                case ARG_LIMIT:
                        if (parse_int64(optarg, 1, &limit) < 0)
                                return fail_usage("read", "invalid --limit '%s'", optarg);
                        break;
                }
        }
        if (argc - optind != 1)
                return fail_usage("read", "expected one PATH");
        path = argv[optind];
        status = check_remote_path("read", path);
        if (status != EXIT_OK)
                return status;

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_read(client, path, offset, limit, &res, &e);
        if (r < 0) {
                status = fail_agentix(&e, "read");
                agentix_error_done(&e);
                return status;
        }

        if (arg_json) {
                status = print_json(json_pack(
                        "{s:s,s:o,s:s,s:o,s:o,s:I,s:I,s:o,s:b}", "path", path, "content",
                        res.content ? json_string(res.content) : json_null(), "encoding", res.content ? "text" : "bytes",
                        "data", res.content ? json_null() : json_from_bytes(res.data, res.data_size), "total_lines",
                        json_int_or_null(res.total_lines), "start_line", (json_int_t) res.start_line, "end_line",
                        (json_int_t) res.end_line, "next_offset", json_int_or_null(res.next_offset), "truncated",
                        res.truncated));
        } else if (res.content) {
                if (*res.content)
                        printf("%s\n", res.content);
                if (res.next_offset >= 0 && !arg_quiet) {
                        fflush(stdout);
                        fprintf(stderr, "agentixctl: read: more lines follow: --offset=%lld\n",
                                (long long) res.next_offset);
                }
                status = EXIT_OK;
        } else if (isatty(STDOUT_FILENO)) {
                status = fail(EXIT_OK, "read: %s is a binary file (%zu bytes shown with --json, or fetch it with cp)",
                              path, res.data_size);
        } else {
                r = write_all(STDOUT_FILENO, res.data, res.data_size);
                status = r < 0 ? fail_errno(EXIT_IOERR, r, "read: cannot write the output: %m") : EXIT_OK;
        }
        agentix_read_result_done(&res);
        return status;
}

/* ---- write --------------------------------------------------------------------------------- */

static void write_help(void) {
        printf("Usage: agentixctl write [OPTIONS] PATH [FILE]\n"
               "\n"
               "Write a file in the sandbox (parents are created) with the contents of the local\n"
               "FILE, or of stdin when FILE is '-' or absent. An existing file is an error unless\n"
               "--overwrite is given.\n"
               "\n"
               "  -h --help               Show this help\n"
               "  -f --overwrite          Replace the file when it exists\n"
               "     --json               Print {path, bytes_written}\n"
               "  -q --quiet              Print nothing on success\n"
               "\n"
               "See agentixctl(1).\n");
}

/* The whole of a local file (or stdin, for "-"), bounded. Returns an exit status. */
int ctl_read_local(const char *verb, const char *name, size_t max, Buffer *ret) {
        _cleanup_close_ int fd = -EBADF;
        int in = STDIN_FILENO;

        if (!streq(name, "-")) {
                fd = open(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return fail_errno(EXIT_IOERR, errno, "%s: cannot open '%s': %m", verb, name);
                in = fd;
        }
        for (;;) {
                ssize_t n;

                if (buffer_reserve(ret, 64 * 1024) < 0)
                        return fail(EXIT_SOFTWARE, "out of memory");
                n = read(in, buffer_data(ret) + ret->len, 64 * 1024);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return fail_errno(EXIT_IOERR, errno, "%s: cannot read '%s': %m", verb,
                                          streq(name, "-") ? "stdin" : name);
                }
                if (n == 0)
                        return EXIT_OK;
                ret->len += (size_t) n;
                if (ret->len > max)
                        return fail(EXIT_IOERR, "%s: '%s' is larger than %zu bytes (use cp)", verb, name, max);
        }
}

int verb_write(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "overwrite", no_argument, NULL, 'f' },
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        _cleanup_buffer_ Buffer content = BUFFER_NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        bool overwrite = false;
        const char *path;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "f", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("write", write_help, argv);
                case 'f':
                        overwrite = true;
                        break;
                }
        }
        if (argc - optind < 1 || argc - optind > 2)
                return fail_usage("write", "expected PATH [FILE]");
        path = argv[optind];
        status = check_remote_path("write", path);
        if (status != EXIT_OK)
                return status;
        /* Read first: a missing local file should not cost a connection. */
        status = ctl_read_local("write", argc - optind == 2 ? argv[optind + 1] : "-", WRITE_MAX, &content);
        if (status != EXIT_OK)
                return status;

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_write(client, path, buffer_data(&content) ?: (uint8_t *) "", content.len, overwrite, &e);
        if (r < 0) {
                status = fail_agentix(&e, "write");
                agentix_error_done(&e);
                return status;
        }
        if (arg_json)
                return print_json(json_pack("{s:s,s:I}", "path", path, "bytes_written", (json_int_t) content.len));
        if (!arg_quiet)
                printf("Wrote %zu bytes to %s\n", content.len, path);
        return EXIT_OK;
}

/* ---- edit ---------------------------------------------------------------------------------- */

static void edit_help(void) {
        printf("Usage: agentixctl edit [OPTIONS] PATH OLD NEW\n"
               "\n"
               "Replace the text OLD with NEW in a file in the sandbox. OLD must occur exactly\n"
               "once, unless --replace-all is given.\n"
               "\n"
               "  -h --help               Show this help\n"
               "  -a --replace-all        Replace every occurrence\n"
               "     --json               Print {path, occurrences}\n"
               "  -q --quiet              Print nothing on success\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_edit(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "replace-all", no_argument, NULL, 'a' },
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        bool replace_all = false;
        unsigned occurrences = 0;
        const char *path;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "a", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("edit", edit_help, argv);
                case 'a':
                        replace_all = true;
                        break;
                }
        }
        if (argc - optind != 3)
                return fail_usage("edit", "expected PATH OLD NEW");
        path = argv[optind];
        status = check_remote_path("edit", path);
        if (status != EXIT_OK)
                return status;
        if (!*argv[optind + 1])
                return fail_usage("edit", "OLD must not be empty");

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_edit(client, path, argv[optind + 1], argv[optind + 2], replace_all, &occurrences, &e);
        if (r < 0) {
                status = fail_agentix(&e, "edit");
                agentix_error_done(&e);
                return status;
        }
        if (arg_json)
                return print_json(json_pack("{s:s,s:I}", "path", path, "occurrences", (json_int_t) occurrences));
        if (!arg_quiet)
                printf("Replaced %u occurrence%s in %s\n", occurrences, occurrences == 1 ? "" : "s", path);
        return EXIT_OK;
}

/* ---- ls, glob ------------------------------------------------------------------------------ */

static json_t *entries_json(const agentix_entries *es, const char *list_key) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < es->n_entries; i++) {
                const agentix_entry *en = &es->entries[i];
                json_t *mode = en->mode >= 0 ? json_integer(en->mode) : json_null();
                json_t *o = json_pack("{s:s,s:b,s:I,s:s?,s:o}", "path", en->path, "is_dir", en->is_dir, "size",
                                      (json_int_t) en->size, "modified_at", en->modified_at, "mode", mode);
                if (json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        if (!a)
                return NULL;
        return json_pack("{s:o,s:b}", list_key, a, "truncated", es->truncated);
}

static void note_truncated(const char *verb, bool truncated) {
        if (truncated && !arg_quiet) {
                fflush(stdout);
                fprintf(stderr, "agentixctl: %s: the list is incomplete (the server's limit was reached)\n", verb);
        }
}

static void ls_help(void) {
        printf("Usage: agentixctl ls [OPTIONS] [PATH]\n"
               "\n"
               "List a directory in the sandbox (default /): type and mode, size, modification\n"
               "time (UTC) and name, sorted by name; directories end in '/'.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               Print {entries: [{path, is_dir, size, modified_at, mode}],\n"
               "                          truncated}\n"
               "  -q --quiet              Do not say on stderr that the list is incomplete\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_ls(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        agentix_entries es = {};
        agentix_error e = AGENTIX_ERROR_NULL;
        const char *path = "/";
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("ls", ls_help, argv);
                }
        }
        if (argc - optind > 1)
                return fail_usage("ls", "expected at most one PATH");
        if (argc - optind == 1)
                path = argv[optind];
        status = check_remote_path("ls", path);
        if (status != EXIT_OK)
                return status;

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_ls(client, path, &es, &e);
        if (r < 0) {
                status = fail_agentix(&e, "ls");
                agentix_error_done(&e);
                return status;
        }

        if (arg_json)
                status = print_json(entries_json(&es, "entries"));
        else {
                int width = 1;

                for (size_t i = 0; i < es.n_entries; i++) {
                        int w = snprintf(NULL, 0, "%llu", (unsigned long long) es.entries[i].size);
                        width = MAX(width, w);
                }
                for (size_t i = 0; i < es.n_entries; i++) {
                        const agentix_entry *en = &es.entries[i];
                        const char *slash = strrchr(en->path, '/');
                        char t[FORMAT_TIME_MAX], m[FORMAT_MODE_MAX];

                        printf("%s %*llu  %s  %s%s\n", format_mode(en->is_dir, en->mode, m), width,
                               (unsigned long long) en->size,
                               format_timestamp(en->modified_at, t), slash && slash[1] ? slash + 1 : en->path,
                               en->is_dir ? "/" : "");
                }
                note_truncated("ls", es.truncated);
                status = EXIT_OK;
        }
        agentix_entries_done(&es);
        return status;
}

static void glob_help(void) {
        printf("Usage: agentixctl glob [OPTIONS] PATTERN [PATH]\n"
               "\n"
               "Print the regular files and directories (with a trailing /) below PATH (default\n"
               "/) that match PATTERN, one per line.\n"
               "A pattern without '/' matches file names at any depth; with '/' it matches the\n"
               "path below PATH ('**' for any number of directories).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               Print {matches: [{path, is_dir, size, modified_at,\n"
               "                          mode}], truncated}\n"
               "  -q --quiet              Do not say on stderr that the list is incomplete\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_glob(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        agentix_entries es = {};
        agentix_error e = AGENTIX_ERROR_NULL;
        const char *path = "/";
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("glob", glob_help, argv);
                }
        }
        if (argc - optind < 1 || argc - optind > 2)
                return fail_usage("glob", "expected PATTERN [PATH]");
        if (argc - optind == 2)
                path = argv[optind + 1];
        status = check_remote_path("glob", path);
        if (status != EXIT_OK)
                return status;

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_glob(client, argv[optind], path, &es, &e);
        if (r < 0) {
                status = fail_agentix(&e, "glob");
                agentix_error_done(&e);
                return status;
        }
        if (arg_json)
                status = print_json(entries_json(&es, "matches"));
        else {
                for (size_t i = 0; i < es.n_entries; i++)
                        printf("%s%s\n", es.entries[i].path, es.entries[i].is_dir ? "/" : "");
                note_truncated("glob", es.truncated);
                status = EXIT_OK;
        }
        agentix_entries_done(&es);
        return status;
}

/* ---- grep ---------------------------------------------------------------------------------- */

static void grep_help(void) {
        printf("Usage: agentixctl grep [OPTIONS] PATTERN [PATH]\n"
               "\n"
               "Search files below PATH (a directory or one file; default: the sandbox's working\n"
               "directory) for the literal text PATTERN (not a regular expression), printing\n"
               "PATH:LINE:TEXT for each matching line, like grep -rnF.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --glob=PATTERN       Only search files matching PATTERN (as in 'glob')\n"
               "  -m --max-count=N        Stop after N matches\n"
               "     --json               Print {matches: [{path, line, text}], truncated}\n"
               "  -q --quiet              Do not say on stderr that the list is incomplete\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_grep(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "glob", required_argument, NULL, ARG_GLOB },
                { "max-count", required_argument, NULL, 'm' },
                {}
        };
        _cleanup_client_ agentix_client *client = NULL;
        agentix_matches ms = {};
        agentix_error e = AGENTIX_ERROR_NULL;
        const char *path = NULL, *glob = NULL;
        int64_t max_count = -1;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "m:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("grep", grep_help, argv);
                case ARG_GLOB:
                        glob = optarg;
                        break;
                case 'm':
                        if (parse_int64(optarg, 1, &max_count) < 0)
                                return fail_usage("grep", "invalid --max-count '%s'", optarg);
                        break;
                }
        }
        if (argc - optind < 1 || argc - optind > 2)
                return fail_usage("grep", "expected PATTERN [PATH]");
        if (!*argv[optind])
                return fail_usage("grep", "PATTERN must not be empty");
        if (argc - optind == 2) {
                path = argv[optind + 1];
                status = check_remote_path("grep", path);
                if (status != EXIT_OK)
                        return status;
        }

        status = connect_blocking(&client);
        if (status != EXIT_OK)
                return status;
        r = agentix_grep(client, argv[optind], path, glob, max_count, &ms, &e);
        if (r < 0) {
                status = fail_agentix(&e, "grep");
                agentix_error_done(&e);
                return status;
        }
        if (arg_json) {
                json_t *a = json_array();

                for (size_t i = 0; a && i < ms.n_matches; i++)
                        if (json_array_append_new(a, json_pack("{s:s,s:I,s:o}", "path", ms.matches[i].path, "line",
                                                               (json_int_t) ms.matches[i].line, "text",
                                                               json_from_bytes(ms.matches[i].text,
                                                                               strlen(ms.matches[i].text)))) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                status = print_json(a ? json_pack("{s:o,s:b}", "matches", a, "truncated", ms.truncated) : NULL);
        } else {
                for (size_t i = 0; i < ms.n_matches; i++)
                        printf("%s:%llu:%s\n", ms.matches[i].path, (unsigned long long) ms.matches[i].line,
                               ms.matches[i].text);
                note_truncated("grep", ms.truncated);
                status = EXIT_OK;
        }
        agentix_matches_done(&ms);
        return status;
}
