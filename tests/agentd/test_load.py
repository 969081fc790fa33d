#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd under load, the figures of bench/agentd/load.py at a size the test run affords: 50
creates at once with no failure and nothing left behind, 100 live sandboxes (agentd's RSS
within 12 MiB when it is not built with sanitizers, and listed), and a create/delete churn
after which agentd's RSS (or, built with sanitizers, LeakSanitizer at its exit), fds, Docker's
containers and carriers are where they were.

Needs what agentd_env.py needs; LOAD_CHURN sets the churn's size (default 200)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "agentd"))
from harness import main, test  # noqa: E402
from agentd_env import (AGENTD, BUSYBOX, INSTANCE, INSTANCE_LABEL, Agentd, bundle, docker,  # noqa: E402
                        main_beside_leftovers, own_containers)
from load import Load  # noqa: E402

SANITIZED = b"__asan_init" in open(AGENTD, "rb").read()


@test
def fifty_creates_at_once_a_hundred_live_and_a_churn_leave_agentd_as_it_was():
    ref = bundle()
    a = Agentd("load", env_extra={"GNUTLS_NO_IMPLICIT_INIT": "1"})  # as units/agentd.service runs it
    try:
        # Counting only what this process's agentd makes: whatever else is on the host stays out.
        load = Load(BUSYBOX, ref, a.agentd.pid, a.address, scope=[f"{INSTANCE_LABEL}={INSTANCE}"])
        assert not own_containers()
        # Cold: the 50 creates find no carrier, and all want the same one made. The carrier of
        # the tests' own bundle image (agentix-test/…, which this process built) goes, whoever
        # made it; no other.
        bundle_id = docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()
        for carrier in docker("ps", "-aq", "--filter", f"label=org.agentix.carrier={bundle_id}").stdout.split():
            docker("rm", "-f", "-v", carrier)
        b = load.burst(50, peer=False)
        print(f"  50 creates at once: {b['agentd_s']:.1f} s, RSS {b['agentd_rss_kib'] / 1024:.1f} MiB")
        assert not b["agentd_failed"], b["agentd_failed"][:3]
        assert not b["agentd_leaked"], b["agentd_leaked"]

        lv = load.live(100, 10, list_calls=100)
        print(f"  100 live: RSS {lv['rss_kib'] / 1024:.2f} MiB{' (ASan build)' if SANITIZED else ''}, "
              f"{lv['fds']} fds, ListSandboxes median {lv['list_median_ms']:.2f} ms "
              f"(docker ps {lv['docker_ps_median_ms']:.1f} ms)")
        assert not lv["failed"], lv["failed"][:3]
        assert lv["sandboxes"] == 100
        if not SANITIZED:
            assert lv["rss_kib"] <= 12 * 1024, lv["rss_kib"]

        c = load.churn(int(os.environ.get("LOAD_CHURN", "200")), 10, peer=False)
        print(f"  churn of {c['cycles']}: {c['agentd_s']:.1f} s, before {c['before']}, after {c['after']}")
        assert not c["errors"], c["errors"][:3]
        before, after = c["before"], c["after"]
        assert after["containers"] == before["containers"] == 0
        assert after["carriers"] == before["carriers"]
        # Flat: at most the idle connections to Docker kept for reuse (4, DOCKER_IDLE_CONNECTIONS).
        assert after["fds"] <= before["fds"] + 4, (before, after)
        # Flat: what the heap keeps after the first cycles, not growth with each one. Under
        # AddressSanitizer RSS says nothing (freed memory waits in its quarantine, up to 256 MiB):
        # there LeakSanitizer checks instead, when agentd exits below.
        if not SANITIZED:
            assert after["rss_kib"] - before["rss_kib"] <= 512, (before, after)
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]


if __name__ == "__main__":
    main_beside_leftovers(main)
