/* SPDX-License-Identifier: MIT */
#pragma once

/* agentix-firewall (policy/firewall): the program that sets the rules of agentd's networks on
 * the host and a sandbox's egress rules in its network namespace. agentd runs it only when it
 * holds the capabilities the rules need; firewall-helper.c. */

#include <stdbool.h>
#include <systemd/sd-event.h>

/* $AGENTIX_FIREWALL, else the installed one. */
const char *firewall_helper_path(void);

/* CAP_NET_ADMIN in our effective set; with namespaces, CAP_SYS_ADMIN too (to enter a
 * sandbox's network namespace). */
bool firewall_helper_allowed(bool namespaces);

/* Run it with args (argv[1]…, NULL-terminated) and wait: only at start, before the loop runs.
 * Its output goes to ours (agentd's log). Returns its exit status (0: done), or a negative
 * errno when it could not run. */
int firewall_helper_run(char *const *args);

typedef struct FirewallJob FirewallJob;

/* status: its exit status (128+N for signal N, -errno if it could not run); output: what it
 * printed (at most 4 KiB, NUL-terminated, "" if nothing). */
typedef void (*firewall_done_t)(void *userdata, int status, const char *output);

/* Run it with args on the loop; done() once it exits (never before this returns), unless
 * cancelled. Killed after 30 s. */
int firewall_helper_start(sd_event *event, char *const *args, firewall_done_t done, void *userdata,
                          FirewallJob **ret);
/* agentix-egress.socket's path ($AGENTIX_EGRESS_SOCKET, else /run/agentix/egress.sock) when a
 * socket is there: the privileged helper service that runs `agentix-firewall egress` for us. */
const char *firewall_egress_socket(void);
/* Ask that service with args (one line: "egress NETNS CIDR..."); done() with status 0 when it
 * answered "ok", 1 with what it said otherwise, or -errno. */
int firewall_helper_ask(sd_event *event, const char *socket_path, char *const *args, firewall_done_t done,
                        void *userdata, FirewallJob **ret);
/* Can a sandbox's egress rules be set: the service's socket is there, or we hold the
 * capabilities to run the helper ourselves? */
bool firewall_egress_possible(void);
/* Set them for the network namespace file netns (allowing cidrs, NULL-terminated; none: no
 * network): through the service when its socket is there, else as our own child; -EPERM when
 * neither can. */
int firewall_egress_start(sd_event *event, const char *netns, char *const *cidrs, firewall_done_t done,
                          void *userdata, FirewallJob **ret);
/* Kill it (if still running), reap it, never call done(). NULL is fine. */
void firewall_job_cancel(FirewallJob *j);
