/* SPDX-License-Identifier: MIT */
/* Reaching the sandbox the global options name: directly (--url/--token), or by id through
 * agentd's GetRuntimeAccess() (--sandbox), so that every command works on both without knowing
 * which. */
#include <string.h>

#include "agentixctl.h"
#include "fail.h"

/* scheme://host[:port][/path]: catch the obvious mistakes here, with a message that says what
 * is expected, rather than as a connection failure. */
static bool url_is_plausible(const char *url) {
        static const char *const schemes[] = { "http://", "https://", "ws://", "wss://" };
        const char *host = NULL, *end, *colon;

        for (size_t i = 0; i < ELEMENTSOF(schemes); i++)
                if (strneq(url, schemes[i], strlen(schemes[i]))) {
                        host = url + strlen(schemes[i]);
                        break;
                }
        if (!host)
                return false;
        end = host + strcspn(host, "/?#");
        if (end == host || memchr(host, '@', (size_t) (end - host)))
                return false;
        /* A port, when given, is 1-65535 (an IPv6 literal's colons sit inside brackets). */
        colon = memrchr(host, ':', (size_t) (end - host));
        if (colon && !(host[0] == '[' && colon < (const char *) memchr(host, ']', (size_t) (end - host)))) {
                unsigned long port = 0;

                if (colon + 1 == end || colon + 6 < end)
                        return false;
                for (const char *p = colon + 1; p < end; p++) {
                        if (*p < '0' || *p > '9')
                                return false;
                        port = port * 10 + (unsigned long) (*p - '0');
                }
                if (port == 0 || port > 65535)
                        return false;
        }
        return true;
}

int ctl_manager_open(agentix_manager **ret) {
        agentix_error e = AGENTIX_ERROR_NULL;
        int r = agentix_manager_open(arg_user_bus, ret, &e);

        if (r < 0) {
                r = fail_agentix(&e, "cannot reach agentd");
                agentix_error_done(&e);
                return r;
        }
        return EXIT_OK;
}

/* agentd's runtime CA, for a sandbox whose runtime serves TLS. */
static char *sandbox_ca_pem = NULL;

/* --sandbox=ID: its runtime's URL and token (and CA), from agentd. */
static int resolve_sandbox(void) {
        static char *url = NULL;
        agentix_manager *m = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        char *token = NULL;
        int r, status;

        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_access(m, arg_sandbox, &url, &token, &e);
        if (r >= 0 && (strneq(url, "https://", 8) || strneq(url, "wss://", 6)) && !getenv("AGENTIX_CA_FILE")) {
                r = agentix_manager_runtime_ca(m, &sandbox_ca_pem, &e);
                if (r < 0)
                        token = mfree(token);
        }
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot reach sandbox %s", arg_sandbox);
                agentix_error_done(&e);
                return status;
        }
        arg_url = url;
        free(arg_token);
        arg_token = token;
        return EXIT_OK;
}

int ctl_connect(sd_event *event, size_t max_message, agentix_client **ret) {
        agentix_client *c = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        int r, status;

        if (arg_sandbox) {
                status = resolve_sandbox();
                if (status != EXIT_OK)
                        return status;
        }
        if (!arg_url)
                return fail(EXIT_USAGE, "no sandbox given: use --sandbox=ID (or AGENTIX_SANDBOX), or --url=URL (or "
                                        "AGENTIX_URL) (see 'agentixctl --help')");
        if (!url_is_plausible(arg_url))
                return fail(EXIT_USAGE, "invalid URL '%s': expected http://HOST:PORT (or https://, ws://, wss://)", arg_url);

        agentix_options o = {
                .url = arg_url,
                .token = arg_token,
                .transport = arg_transport,
                .connect_timeout_usec = arg_connect_timeout_usec,
                .max_message = max_message,
                .ca_pem = sandbox_ca_pem,
        };
        r = agentix_client_new(&o, event, &c);
        /* Reached by id: its runtime's certificate must name this sandbox, not only its address
         * (a neighbour on the same swarm node has that too). */
        if (r >= 0 && arg_sandbox) {
                r = agentix_client_set_sandbox_id(c, arg_sandbox);
                if (r < 0)
                        c = agentix_client_unref(c);
        }
        if (r == -ENOKEY)
                return fail(EXIT_USAGE, "cannot connect to %s: an https:// runtime is verified against agentd's runtime "
                            "CA: give it with --ca-file=FILE (or AGENTIX_CA_FILE), or reach the sandbox with "
                            "--sandbox=ID", arg_url);
        if (r < 0)
                return fail_errno(r == -ENOMEM ? EXIT_SOFTWARE : EXIT_USAGE, r, "cannot connect to %s: %m", arg_url);

        r = agentix_client_connect(c, &e);
        if (r >= 0) {
                *ret = c;
                return EXIT_OK;
        }

        if (e.kind == AGENTIX_E_UNAUTHORIZED)
                status = fail(EXIT_NOPERM, "cannot connect to %s: the token was refused (unauthorized)%s", arg_url,
                              arg_token ? "" : "; no token given: use --token, --token-file or AGENTIX_TOKEN");
        else {
                char why[2048];
                const char *reason = error_reason(&e, why, sizeof(why));

                /* A connection attempt that ran out of time is a timeout, whichever layer saw it. */
                status = e.kind == AGENTIX_E_TIMEOUT || e.code == -ETIMEDOUT ? EXIT_TIMEOUT
                       : e.kind == AGENTIX_E_NONE                            ? EXIT_UNAVAILABLE
                                                                             : exit_status_from_error(&e);
                if (e.kind == AGENTIX_E_NONE)
                        status = fail_errno(status, r, "cannot connect to %s: %m", arg_url);
                else if (status == EXIT_TIMEOUT)
                        status = fail(status, "cannot connect to %s: timed out after %g s", arg_url,
                                      (double) (arg_connect_timeout_usec ?: 10 * 1000000ULL) / 1e6);
                /* libagentix says "cannot connect to URL: why" itself; do not say it twice. */
                else if (strneq(reason, "cannot connect to ", STRLEN("cannot connect to ")))
                        status = fail(status, "%s", reason);
                else
                        status = fail(status, "cannot connect to %s: %s", arg_url, reason);
        }
        agentix_error_done(&e);
        agentix_client_unref(c);
        return status;
}
