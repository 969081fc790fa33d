/* SPDX-License-Identifier: MIT */
#pragma once

/* D-Bus method handlers counted for agentix_dbus_calls_total (metrics.h): METRICS_COUNTED(NAME,
 * FN) defines FN_counted, which runs FN and counts NAME's call as an error when FN returned one
 * or set one (the answer sent at once). The vtable names FN_counted. Every handler of agentd's
 * gets the Manager as userdata. */

#include <systemd/sd-bus.h>

#include "manager.h"
#include "metrics.h"

#define METRICS_COUNTED(name, fn)                                                                    \
        static int fn##_counted(sd_bus_message *msg, void *userdata, sd_bus_error *error) {          \
                int r_ = fn(msg, userdata, error);                                                    \
                metrics_call(&((Manager *) userdata)->metrics, name, r_ < 0 || sd_bus_error_is_set(error)); \
                return r_;                                                                            \
        }
