/* SPDX-License-Identifier: MIT */
/* sandbox::stats() -> map: what the sandbox uses now, read from inside (cgroup-stats.h). agentd
 * asks it where it cannot read the container's cgroup itself: a backend whose containers run on
 * other machines (Swarm), whose engine has no stats for them. The keys are Sandbox.GetStats()'
 * (org.agentix.Agentd1(5)) but cpu_percent, which takes two readings: nil where the files do not
 * tell. */
#include <errno.h>

#include "agentix-module.h"
#include "cgroup-stats.h"
#include "sandbox-stats.h"

static int pack_number(msgpack_packer *pk, const char *key, uint64_t value) {
        if (agentix_pack_cstr(pk, key) < 0)
                return -ENOMEM;
        if (value == CGROUP_STATS_UNKNOWN)
                return msgpack_pack_nil(pk) < 0 ? -ENOMEM : 0;
        return msgpack_pack_uint64(pk, value) < 0 ? -ENOMEM : 0;
}

int sandbox_stats(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        CgroupStats s;
        int r;

        r = cgroup_stats_read_own("", &s);
        if (r < 0)
                return agentix_call_raise(call, "OSError", "No cgroup files are mounted at /sys/fs/cgroup here");
        if (msgpack_pack_map(pk, 11) < 0)
                return -ENOMEM;
        r = pack_number(pk, "time", s.time);
        if (r >= 0)
                r = pack_number(pk, "cpu_usec", s.cpu_usec);
        if (r >= 0)
                r = pack_number(pk, "memory_current", s.memory_current);
        if (r >= 0)
                r = pack_number(pk, "memory_peak", s.memory_peak);
        if (r >= 0)
                r = pack_number(pk, "memory_limit", s.memory_limit);
        if (r >= 0)
                r = pack_number(pk, "pids_current", s.pids_current);
        if (r >= 0)
                r = pack_number(pk, "pids_limit", s.pids_limit);
        if (r >= 0)
                r = pack_number(pk, "net_rx_bytes", s.net_rx_bytes);
        if (r >= 0)
                r = pack_number(pk, "net_tx_bytes", s.net_tx_bytes);
        if (r >= 0)
                r = pack_number(pk, "io_read_bytes", s.io_read_bytes);
        if (r >= 0)
                r = pack_number(pk, "io_write_bytes", s.io_write_bytes);
        return r;
}
