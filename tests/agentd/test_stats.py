#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sandbox.GetStats() against a real dockerd, under each runtime: the numbers rise with what a
sandbox does (CPU from a busy loop, memory from 200 MiB held, block I/O from dd, network from a
4 MiB file sent in) and agree with the kernel's cgroup files; the owner and root may ask, no one
else; agentixctl stats and status show them.

Needs what agentd_env.py needs and a running dockerd."""

import json
import os
import signal
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, NAME, SANDBOX, Agentd, bundle, busctl_as, cgroup_number,  # noqa: E402
                        cleanup, docker, ensure_users, error_name, exec_ok, remove_users, runtimes)

MiB = 1024 * 1024
STATE = {}


def agentd():
    if "agentd" not in STATE:
        STATE["uids"] = ensure_users()
        STATE["agentd"] = Agentd("stats")
    return STATE["agentd"]


def stats(path):
    s = dbus.Interface(agentd().conn.get_object(NAME, path), SANDBOX).GetStats(timeout=30)
    return {str(k): (float(v) if isinstance(v, dbus.Double) else int(v)) for k, v in s.items()}


def run(sid, command, timeout=60):
    return exec_ok(agentd(), sid, command, timeout)


def send_file(sid, size):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    c = RpcClient(str(url), str(token))
    try:
        r = c.call("fs::upload", files=[["/tmp/incoming.bin", os.urandom(size)]])
        assert r[0]["error"] is None, r
    finally:
        c.close()


def cgroup_file(sid, v1_controller, v1_name, v2_name):
    pid = int(docker("inspect", "-f", "{{.State.Pid}}", f"agentix-{sid}").stdout)
    return cgroup_number(pid, v1_controller, v1_name, v2_name)


def cgroup_io_written(sid):
    """Bytes the kernel counted as written by the container's cgroup (v1 blkio, v2 io.stat)."""
    pid = int(docker("inspect", "-f", "{{.State.Pid}}", f"agentix-{sid}").stdout)
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "blkio" in controllers.split(","):
            for name in ("blkio.throttle.io_service_bytes_recursive", "blkio.throttle.io_service_bytes"):
                try:
                    with open(f"/sys/fs/cgroup/{controllers}{path}/{name}") as f:
                        return sum(int(w[2]) for w in (line.split() for line in f) if len(w) == 3 and w[1] == "Write")
                except FileNotFoundError:
                    continue
    for n, controllers, path in lines:
        if n == "0" and not controllers:
            with open(f"/sys/fs/cgroup{path}/io.stat") as f:
                return sum(int(w[7:]) for line in f for w in line.split() if w.startswith("wbytes="))
    raise AssertionError(f"no blkio or io cgroup for {pid}: {lines}")


def counting_disk():
    """On a cgroup v1 host, the whole disk under Docker's data as /dev/NAME, else None."""
    if not os.path.isdir("/sys/fs/cgroup/blkio"):
        return None
    st = os.stat(docker("info", "-f", "{{.DockerRootDir}}").stdout.strip())
    sys_dir = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sys_dir):
        return None
    sys_dir = os.path.realpath(sys_dir)
    if os.path.exists(f"{sys_dir}/partition"):
        sys_dir = os.path.dirname(sys_dir)
    with open(f"{sys_dir}/uevent") as f:
        name = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)["DEVNAME"]
    return f"/dev/{name}"


def within(got, want, share=0.05):
    return abs(got - want) <= share * max(want, 1)


@test
def usage_rises_with_what_a_sandbox_does_and_agrees_with_the_kernel_under_each_runtime():
    for rt in runtimes():
        print(f"  runtime {rt}")
        path, sid = agentd().create(runtime=rt, memory=dbus.UInt64(512 * MiB), pids=dbus.UInt64(256))
        try:
            # The Runtime property says which OCI runtime it runs under (the web console shows it).
            assert dbus.Interface(agentd().conn.get_object(NAME, path), "org.freedesktop.DBus.Properties").Get(
                SANDBOX, "Runtime") == rt
            first = stats(path)
            for key in ("time", "cpu_usec", "cpu_percent", "memory_current", "memory_peak", "memory_limit",
                        "pids_current", "pids_limit", "net_rx_bytes", "net_tx_bytes"):
                assert key in first, (key, first)
            assert first["memory_limit"] == 512 * MiB and first["pids_limit"] == 256, first
            assert first["pids_current"] >= 1 and abs(first["time"] / 1e6 - time.time()) < 60, first

            # CPU: a second of busy loop is at least half a second more CPU time, and the
            # interval's cpu_percent shows it.
            before = stats(path)
            run(sid, "python3 -c 'import time\nt = time.time()\nwhile time.time() - t < 1: pass'")
            after = stats(path)
            assert after["cpu_usec"] - before["cpu_usec"] >= 500_000, (before, after)
            assert after["cpu_percent"] > 20, after

            # Memory: 200 MiB written to (so charged) and held.
            run(sid, "nohup python3 -c 'import time\nb = b\"x\" * (200 * 1024 * 1024)\ntime.sleep(600)' "
                     ">/dev/null 2>&1 &")
            wait_until(lambda: stats(path)["memory_current"] >= 200 * MiB, 30, 0.2, what="200 MiB charged")
            held = stats(path)
            assert held["memory_peak"] >= 200 * MiB, held
            if rt == "runc":
                # Against the kernel's own file, read here: the held memory moves little.
                kernel = cgroup_file(sid, "memory", "memory.usage_in_bytes", "memory.current")
                ours = stats(path)["memory_current"]
                assert within(ours, kernel), (ours, kernel)
                kernel = cgroup_file(sid, "pids", "pids.current", "pids.current")
                assert within(stats(path)["pids_current"], kernel, 0.5), kernel

            # Network: a 4 MiB file sent in through the runtime arrives on its interface.
            send_file(sid, 4 * MiB)
            got = stats(path)
            assert got["net_rx_bytes"] - first["net_rx_bytes"] >= 4 * MiB, (first, got)

            # Block I/O: dd writing 32 MiB past the page cache (runc: gVisor's own file I/O is
            # its gofer's, counted where the host puts it). What agentd says is what the kernel
            # counted for the cgroup. cgroup v2's io.stat always counts; v1 counts only on a
            # disk with a blk-throttle rule, so on v1 agentd gives each sandbox one no disk
            # reaches, on the disk under Docker's data.
            if rt == "runc":
                disk = counting_disk()
                rule = json.loads(docker("inspect", "-f", "{{json .HostConfig.BlkioDeviceWriteBps}}",
                                         f"agentix-{sid}").stdout)
                if disk:
                    assert rule == [{"Path": disk, "Rate": 1 << 50}], (disk, rule)
                else:
                    assert not rule, rule
                before = stats(path)
                run(sid, "dd if=/dev/zero of=/tmp/blk bs=1M count=32 oflag=direct 2>/dev/null || "
                         "dd if=/dev/zero of=/tmp/blk bs=1M count=32 conv=fsync 2>/dev/null; rm -f /tmp/blk")
                after = stats(path)
                kernel = cgroup_io_written(sid)
                assert within(after["io_write_bytes"], kernel), (after, kernel)
                if disk or not os.path.isdir("/sys/fs/cgroup/blkio"):
                    assert after["io_write_bytes"] - before["io_write_bytes"] >= 16 * MiB, (before, after)
                else:
                    print(f"  (Docker's data is on no disk; the kernel counted {kernel} bytes of block I/O)")
        finally:
            agentd().manager().DeleteSandbox(sid, timeout=60)


@test
def only_the_owner_and_root_read_a_sandboxs_usage_and_a_stopped_one_uses_nothing():
    a = agentd()
    r = busctl_as("alice", a.address, "call", NAME, "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager",
                  "CreateSandbox", "a{sv}", "2", "image", "s", BUSYBOX, "bundle", "s", bundle())
    assert r.returncode == 0, r.stderr
    path, sid = json.loads(r.stdout)["data"]
    try:
        r = busctl_as("alice", a.address, "call", NAME, path, SANDBOX, "GetStats")
        assert r.returncode == 0 and "memory_current" in r.stdout, r.stderr
        r = busctl_as("bob", a.address, "call", NAME, path, SANDBOX, "GetStats")
        assert r.returncode != 0 and "Unknown object" in r.stderr, r.stderr  # not an object of bob's
        assert "memory_current" in stats(path)  # root
        docker("kill", f"agentix-{sid}")
        wait_until(lambda: str(dbus.Interface(a.conn.get_object(NAME, path), "org.freedesktop.DBus.Properties")
                               .Get(SANDBOX, "State")) == "exited", 10, what="State exited")
        got, message = error_name(lambda: stats(path))
        assert got == f"{NAME}.NotRunning", (got, message)
    finally:
        a.manager().DeleteSandbox(sid, timeout=60)


@test
def agentixctl_stats_and_status_show_the_numbers():
    a = agentd()
    path, sid = a.create(memory=dbus.UInt64(256 * MiB))
    try:
        def ctl(*args):
            r = subprocess.run([AGENTIXCTL, *args], env=a.env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, (args, r.stderr)
            return r.stdout

        rows = json.loads(ctl("stats", "--json", sid))
        assert len(rows) == 1 and rows[0]["id"] == sid and rows[0]["memory_limit"] == 256 * MiB, rows
        table = ctl("stats", "--no-stream", sid)
        assert table.splitlines()[0].split()[:3] == ["ID", "CPU", "%"], table
        assert sid in table and "256.0 MiB" in table, table
        # Without ids: every running sandbox of the caller (root: all), this one among them.
        assert sid in ctl("stats", "--no-stream", "-q").split()
        status = ctl("status", sid)
        assert "Memory: " in status and "of 256.0 MiB" in status and "Processes: " in status, status
        assert json.loads(ctl("status", "--json", sid))["stats"]["memory_limit"] == 256 * MiB
        r = subprocess.run([AGENTIXCTL, "stats", "--no-stream", "bffffffffffffff0"], env=a.env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0 and "bffffffffffffff0" in r.stderr, (r.returncode, r.stderr)
    finally:
        a.manager().DeleteSandbox(sid, timeout=60)


@test
def an_agentd_that_does_not_see_the_engines_processes_reads_usage_from_the_runtime():
    """agentd in a PID namespace of its own (as in a container, or under systemd-nspawn): the pid
    Docker gives is no process agentd sees, so the docker backend cannot read the cgroup, and
    GetStats asks the sandbox's runtime instead of answering that it stopped."""
    if "agentd" in STATE:  # one agentd at a time on this Docker: the other adopts what it sees
        assert STATE.pop("agentd").stop() == 0
    a = Agentd("stats-pidns", wrapper=["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"])
    try:
        path, sid = a.create(memory=dbus.UInt64(300 * MiB))
        try:
            # The namespace is real: agentd is its PID 1 and the container's init is not there.
            assert subprocess.run(["nsenter", "-t", str(pidns_child(a.agentd.pid)), "-p", "-m", "--",
                                   "cat", "/proc/1/comm"], capture_output=True, text=True).stdout.strip() == "agentd"
            s = dbus.Interface(a.conn.get_object(NAME, path), SANDBOX).GetStats(timeout=30)
            s = {str(k): int(v) if not isinstance(v, dbus.Double) else float(v) for k, v in s.items()}
            # The runtime's reading of its own cgroup: the limit it was made with, something in use.
            assert s["memory_limit"] == 300 * MiB and 0 < s["memory_current"] < 300 * MiB, s
            assert s["cpu_usec"] > 0 and s["pids_current"] >= 1, s
        finally:
            a.manager().DeleteSandbox(sid, timeout=60)
    finally:
        # unshare waits for its child and leaves SIGTERM to it: agentd gets it, unshare gives
        # back its status.
        if a.agentd.poll() is None:
            os.kill(pidns_child(a.agentd.pid), signal.SIGTERM)
            a.agentd.wait(20)
        assert a.stop() == 0, a.log_text()


def pidns_child(pid):
    """The process unshare --fork started (agentd, PID 1 of its namespace), seen from here."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return int(f.read().split()[0])


if __name__ == "__main__":
    try:
        main()
    finally:
        if "agentd" in STATE:
            STATE["agentd"].stop()
        remove_users()
        cleanup()
