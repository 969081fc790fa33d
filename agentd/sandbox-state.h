/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's state changes: logged, and said on the bus (PropertiesChanged of State, with
 * RuntimeUrl and ContainerId, which change with it). For the lifecycle and hibernation alike. */

#include "sandbox.h"

void sandbox_set_state(Sandbox *s, SandboxState state);
