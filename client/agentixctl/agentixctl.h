/* SPDX-License-Identifier: MIT */
#pragma once

/* agentixctl: what every command shares — the global options (systemd-style arg_ variables,
 * set once by main.c), the exit statuses, and the commands main.c dispatches to.
 *
 * Convention: a command, and every helper whose name starts with ctl_ or fail, reports its own
 * errors (one line on stderr) and returns an exit status (0 on success). Other helpers return a
 * negative errno and leave the reporting to their caller. */

#include <stdbool.h>
#include <stdint.h>
#include <sysexits.h>

#include "agentix.h"

/* Exit statuses, documented in agentixctl(1). exec and shell exit with the command's status
 * instead when the command ran. */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,             /* the operation failed: a remote error, a file error */
        EXIT_USAGE = EX_USAGE,       /* 64: bad command line or bad JSON argument */
        EXIT_UNAVAILABLE = EX_UNAVAILABLE, /* 69: cannot connect, or the connection was lost */
        EXIT_SOFTWARE = EX_SOFTWARE, /* 70: internal error (out of memory, …) */
        EXIT_IOERR = EX_IOERR,       /* 74: a local file cannot be read or written */
        EXIT_TIMEOUT = EX_TEMPFAIL,  /* 75: a timeout (connecting, or a call's deadline) */
        EXIT_PROTOCOL = EX_PROTOCOL, /* 76: the server answered something agentixctl cannot use */
        EXIT_NOPERM = EX_NOPERM,     /* 77: the token was refused */
};

/* Global options (main.c). */
extern const char *arg_url;
extern char *arg_token;
extern agentix_transport arg_transport;
extern uint64_t arg_connect_timeout_usec;
extern bool arg_json;
extern bool arg_quiet;
extern const char *arg_sandbox;   /* --sandbox=ID: reach it through agentd */
extern bool arg_user_bus;         /* --user: agentd on the session bus */

/* Options every command takes after its name as well: -h/--help, --json, -q/--quiet. Put
 * COMMON_LONG_OPTIONS in the command's option table and handle the three with
 * common_option(), which returns 1 when it handled c (and printed help for 'h': the command
 * then returns 0 at once), 0 when c is the command's own. */
#define COMMON_OPTIONS "hq"
#define ARG_JSON 0x1000
#define ARG_COMMON_END 0x1001
#define COMMON_LONG_OPTIONS                                     \
        { "help", no_argument, NULL, 'h' },                     \
        { "json", no_argument, NULL, ARG_JSON },                \
        { "quiet", no_argument, NULL, 'q' }

/* Connect to the sandbox the global options name, on `event` (NULL: a private loop).
 * max_message: the largest message either way, 0 for libagentix's default (256 MiB); it also
 * bounds what waits to be sent (twice that), which is how exec keeps stdin from piling up.
 * Returns an exit status. */
int ctl_connect(sd_event *event, size_t max_message, agentix_client **ret);

/* SIGINT, SIGTERM and SIGHUP become events on `event`, handled by handler (stop-signals.c): a
 * command that ends its remote call cleanly on Ctrl-C (call, cp, watch). */
void ctl_catch_stop_signals(sd_event *event, sd_event_signal_handler_t handler, void *userdata);

/* The whole of a local file (or stdin, for "-"), at most max bytes, appended to ret
 * (fs-commands.c). Returns an exit status. */
typedef struct Buffer Buffer;
int ctl_read_local(const char *verb, const char *name, size_t max, Buffer *ret);

/* The commands: argv[0] is the command's name. Each returns an exit status. */
int verb_exec(int argc, char *argv[]);
int verb_shell(int argc, char *argv[]);
int verb_code(int argc, char *argv[]);
int verb_call(int argc, char *argv[]);
int verb_cp(int argc, char *argv[]);
int verb_read(int argc, char *argv[]);
int verb_write(int argc, char *argv[]);
int verb_edit(int argc, char *argv[]);
int verb_ls(int argc, char *argv[]);
int verb_grep(int argc, char *argv[]);
int verb_glob(int argc, char *argv[]);
int verb_watch(int argc, char *argv[]);
int verb_build(int argc, char *argv[]);
int verb_create(int argc, char *argv[]);
int verb_list(int argc, char *argv[]);
int verb_pools(int argc, char *argv[]);
int verb_status(int argc, char *argv[]);
int verb_stats(int argc, char *argv[]);
int verb_usage(int argc, char *argv[]);
int verb_logs(int argc, char *argv[]);
int verb_pause(int argc, char *argv[]);
int verb_port(int argc, char *argv[]);
int verb_resume(int argc, char *argv[]);
int verb_hibernate(int argc, char *argv[]);
int verb_snapshot(int argc, char *argv[]);
int verb_snapshots(int argc, char *argv[]);
int verb_snapshot_delete(int argc, char *argv[]);
int verb_delete(int argc, char *argv[]);
int verb_run(int argc, char *argv[]);

/* Connect to agentd (system bus, or session bus with --user). Returns an exit status. */
int ctl_manager_open(agentix_manager **ret);
