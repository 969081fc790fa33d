/* SPDX-License-Identifier: MIT */
#pragma once

/* GET RUNTIME_URL/health, one at a time, on a CurlEvent: what a create waits on before it
 * answers (the docker and swarm backends). One easy handle, made at new and reused by every
 * probe; the caller keeps its own pace and deadline. */

#include <stdbool.h>

#include "curl-event.h"

typedef struct HealthProbe HealthProbe;

/* healthy: the runtime answered 200; false for any other answer, a timeout (2 s) or no answer.
 * The probe may be freed from here. */
typedef void (*health_probe_done_t)(void *userdata, bool healthy);

int health_probe_new(CurlEvent *g, const char *runtime_url, health_probe_done_t done, void *userdata,
                     HealthProbe **ret);
/* Send one probe; done() runs once, from the loop. */
int health_probe_start(HealthProbe *p);
/* A probe in flight is dropped: done() never runs. */
HealthProbe *health_probe_free(HealthProbe *p);
