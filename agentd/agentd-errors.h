/* SPDX-License-Identifier: MIT */
#pragma once

/* The errors of org.agentix.Agentd1 (org.agentix.Agentd1(5)): each with a message a person can
 * act on. Backends report them too, so they are defined in the public backend header. */

#include "agentix/agentd-backend.h"
