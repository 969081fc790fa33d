/* SPDX-License-Identifier: MIT */
#include <signal.h>

#include "agentixctl.h"

void ctl_catch_stop_signals(sd_event *event, sd_event_signal_handler_t handler, void *userdata) {
        static const int stop[] = { SIGINT, SIGTERM, SIGHUP };
        sigset_t mask;

        sigemptyset(&mask);
        for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
                sigaddset(&mask, stop[i]);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
                (void) sd_event_add_signal(event, NULL, stop[i], handler, userdata);
}
