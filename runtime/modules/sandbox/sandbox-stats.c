/* SPDX-License-Identifier: MIT */
/* sandbox::stats() -> map: what the sandbox uses now, read from inside (cgroup-stats.h). agentd
 * asks it where it cannot read the container's cgroup itself: a backend whose containers run on
 * other machines (Swarm), whose engine has no stats for them. The keys are Sandbox.GetStats()'
 * (org.agentix.Agentd1(5)) but cpu_percent, which takes two readings: nil where the files do not
 * tell. */
#include <errno.h>
#include <stddef.h>

#include "agentix-module.h"
#include "cgroup-stats.h"
#include "macro.h"
#include "sandbox-stats.h"

#define KEY(name) { #name, offsetof(CgroupStats, name) }
static const struct {
        const char *key;
        size_t offset;
} keys[] = {
        KEY(time),         KEY(cpu_usec),     KEY(memory_current), KEY(memory_peak),   KEY(memory_limit),
        KEY(pids_current), KEY(pids_limit),   KEY(net_rx_bytes),   KEY(net_tx_bytes),  KEY(io_read_bytes),
        KEY(io_write_bytes),
};

int sandbox_stats(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        CgroupStats s;

        if (cgroup_stats_read_own("", &s) < 0)
                return agentix_call_raise(call, "OSError", "No cgroup files are mounted at /sys/fs/cgroup here");
        if (msgpack_pack_map(pk, ELEMENTSOF(keys)) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                uint64_t v = *(const uint64_t *) ((const uint8_t *) &s + keys[i].offset);

                if (agentix_pack_cstr(pk, keys[i].key) < 0 ||
                    (v == CGROUP_STATS_UNKNOWN ? msgpack_pack_nil(pk) : msgpack_pack_uint64(pk, v)) < 0)
                        return -ENOMEM;
        }
        return 0;
}
