/* SPDX-License-Identifier: MIT */
/* agentixctl port: the address of a port inside a sandbox, through its runtime's proxy. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "agentixctl.h"
#include "fail.h"
#include "output.h"

static void port_help(void) {
        printf("Usage: agentixctl port [OPTIONS] ID PORT\n"
               "\n"
               "Print the address of PORT inside the sandbox, through its runtime's proxy\n"
               "(HTTP and WebSocket), then the port's token: requests carry it as\n"
               "'Authorization: Bearer TOKEN'. Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --link               Print one address with the token in it, for a browser\n"
               "                          (the first request turns it into a cookie)\n"
               "     --json               Print {url, token}\n"
               "\n"
               "See agentixctl(1).\n");
}

#define ARG_LINK ARG_COMMON_END

int verb_port(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, { "link", no_argument, NULL, ARG_LINK }, {} };
        _cleanup_free_ char *url = NULL, *token = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        unsigned long port;
        bool link = false;
        char *end;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("port", port_help, argv);
                case ARG_LINK:
                        link = true;
                        break;
                }
        if (optind + 2 != argc)
                return fail_usage("port", "takes a sandbox id and a port");
        errno = 0;
        port = strtoul(argv[optind + 1], &end, 10);
        if (errno || *end || port < 1 || port > 65535)
                return fail_usage("port", "'%s' is not a port (1 to 65535)", argv[optind + 1]);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_port_url(m, argv[optind], (uint16_t) port, &url, &token, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot reach port %lu of sandbox %s", port, argv[optind]);
                agentix_error_done(&e);
                return status;
        }
        if (arg_json)
                return print_json(json_pack("{s:s, s:s}", "url", url, "token", token));
        if (link)
                printf("%s?agentix_token=%s\n", url, token);
        else
                printf("%s\n%s\n", url, token);
        return EXIT_OK;
}
