/* SPDX-License-Identifier: MIT */
#include "agentd-bus.h"
#include "manager.h"
#include "sandbox-state.h"

void sandbox_set_state(Sandbox *s, SandboxState state) {
        if (s->state == state)
                return;
        log_sandbox_info(s, "Sandbox %s: %s -> %s.", s->id, sandbox_state_to_string(s->state),
                         sandbox_state_to_string(state));
        s->state = state;
        (void) sd_bus_emit_properties_changed(s->manager->bus, s->path, SANDBOX_INTERFACE, "State", "RuntimeUrl",
                                              "ContainerId", NULL);
}
