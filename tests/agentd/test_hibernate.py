#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sandbox.Hibernate() and Resume() through agentd, against a real dockerd with gVisor (runsc,
through agentix-runsc on gVisor's own network stack): a sandbox's processes, memory, shell
sessions and files come back as they were, twice (by Resume(), then by a call that needs its
runtime: auto-resume), and across a restart of agentd; nothing of it
runs on the host meanwhile; an open TCP connection keeps it from hibernating and it runs on
untouched; a runc sandbox is NotSupported naming runsc; another user is refused; Delete during a
hibernate wins; OnExpiry=hibernate, HibernatedRetention= and MaxHibernated=.

Needs what agentd_env.py needs and a running dockerd with runsc registered (skips without)."""

import json
import os
import socket
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, NAME, SANDBOX, Agentd, bundle, busctl_as, call_as, cleanup,  # noqa: E402
                        docker, ensure_users, error_name, exec_ok, remove_users, runtimes)
from agentd_env import CALL_AS  # noqa: E402

STATE = {}
# A counter the sandbox keeps in memory and writes out, atomically, every 0.2 s.
COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; "
           "sleep 0.2; done")


def agentd():
    if "agentd" not in STATE:
        STATE["uids"] = ensure_users()
        STATE["agentd"] = Agentd("hibernate")
    return STATE["agentd"]


def props(path):
    p = dbus.Interface(agentd().conn.get_object(NAME, path), "org.freedesktop.DBus.Properties")
    return {str(k): v for k, v in p.GetAll(SANDBOX).items()}


def sandbox(path):
    return dbus.Interface(agentd().conn.get_object(NAME, path), SANDBOX)


def client(sid):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    return RpcClient(str(url), str(token))


def run(sid, command, timeout=60):
    return exec_ok(agentd(), sid, command, timeout)


def container(sid):
    return json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]


def host_processes_of(cid):
    """Processes on the host whose command line names the container (runsc's sandbox, gofer,
    containerd's shim)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if cid.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def count(sid):
    return int(run(sid, "cat /tmp/count").strip())


def runsc_or_skip():
    if "runsc" not in runtimes():
        print("SKIP: runsc is not registered with dockerd")
        return False
    return True


def hibernate_and_resume(path, sid, how):
    """Hibernate, check nothing of it runs, and run it again: by Resume(), or by a call that
    needs its runtime (agentixctl exec: GetRuntimeAccess resumes it first)."""
    before = props(path)
    sandbox(path).Hibernate(timeout=300)
    p = props(path)
    assert str(p["State"]) == "hibernated", p["State"]
    info = container(sid)
    assert info["State"]["Running"] is False and info["State"]["Pid"] == 0, info["State"]
    # Its RAM is given back: nothing of it runs on the host.
    assert host_processes_of(info["Id"]) == [], host_processes_of(info["Id"])
    assert int(p["ExpiresAt"]) == int(before["ExpiresAt"]) and dict(p["Labels"]) == dict(before["Labels"])
    if how == "resume":
        sandbox(path).Resume(timeout=300)
    else:
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "echo", "woken"], env=agentd().env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout == "woken\n", (r.returncode, r.stdout, r.stderr)
    assert str(props(path)["State"]) == "running"


@test
def a_runsc_sandbox_hibernates_and_resumes_with_its_processes_memory_and_sessions():
    if not runsc_or_skip():
        return
    path, sid = agentd().create(runtime="runsc", labels=dbus.Dictionary({"purpose": "hibernate"}, signature="ss"))
    sid = str(sid)
    try:
        # Memory: 64 MiB of random bytes in gVisor's memory-backed /dev/shm, and its sum.
        run(sid, "head -c 67108864 /dev/urandom > /dev/shm/blob")
        blob_sum = run(sid, "md5sum /dev/shm/blob").split()[0]
        # A process counting in its own memory.
        counter_pid = int(run(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $!").strip())
        wait_until(lambda: count(sid) >= 3, 30, what="the counter")
        # A shell session with its own state.
        c = client(sid)
        try:
            session = c.call("shell::open", cwd="/")
            c.call("shell::run", session, "cd /tmp && export KEPT=across-hibernation")
        finally:
            c.close()
        token_before = str(agentd().manager().GetRuntimeAccess(sid)[1])

        for round_trip, how in ((1, "resume"), (2, "access")):
            counted = count(sid)
            hibernate_and_resume(path, sid, how)
            # The same process goes on counting from where it was (not from 1: not started afresh).
            assert run(sid, f"kill -0 {counter_pid} && echo alive").strip() == "alive", round_trip
            first = count(sid)
            assert first >= counted, (round_trip, first, counted)
            wait_until(lambda: count(sid) > first, 30, what="the counter going on")
            assert run(sid, "md5sum /dev/shm/blob").split()[0] == blob_sum, round_trip
            c = client(sid)
            try:
                r = c.call("shell::run", session, "pwd; echo $KEPT")
                assert r["output"] == "/tmp\nacross-hibernation\n", (round_trip, r)
            finally:
                c.close()
            assert str(agentd().manager().GetRuntimeAccess(sid)[1]) == token_before
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=120)
    assert subprocess.run(["docker", "inspect", f"agentix-{sid}"], capture_output=True).returncode != 0


@test
def a_hibernated_sandbox_stays_hibernated_across_an_agentd_restart():
    if not runsc_or_skip():
        return
    path, sid = agentd().create(runtime="runsc")
    sid = str(sid)
    try:
        run(sid, "echo kept > /tmp/file")
        sandbox(path).Hibernate(timeout=300)
        agentd().kill_and_restart()
        wait_until(lambda: sid in agentd().ids(), 30, what="the sandbox adopted")
        assert str(props(path)["State"]) == "hibernated"
        sandbox(path).Resume(timeout=300)
        assert str(props(path)["State"]) == "running"
        assert run(sid, "cat /tmp/file") == "kept\n"
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def an_open_tcp_connection_keeps_it_from_hibernating_and_it_runs_on():
    if not runsc_or_skip():
        return
    path, sid = agentd().create(runtime="runsc")
    sid = str(sid)
    try:
        run(sid, "mkdir -p /tmp/www && httpd -p 9000 -h /tmp/www")
        address = str(props(path)["RuntimeUrl"]).split("//")[1].rsplit(":", 1)[0]
        counter_pid = int(run(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $!").strip())
        conn = socket.create_connection((address, 9000), timeout=10)
        try:
            # The server has it (accepted): then the hold must see it.
            wait_until(lambda: ":2328 " in run(sid, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
                                                    "awk '$4 == \"01\"'"), 10, what="the connection")
            name, message = error_name(lambda: sandbox(path).Hibernate(timeout=300))
            assert name.endswith(".CheckpointFailed"), (name, message)
            assert ":9000" in message and "runs on untouched" in message, message
            # Untouched: running, the same processes, calls answered.
            assert str(props(path)["State"]) == "running"
            assert run(sid, f"kill -0 {counter_pid} && echo alive").strip() == "alive"
        finally:
            conn.close()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def nobody_in_a_sandbox_listens_on_the_runtimes_port_beside_it():
    """gVisor's stack lets a second socket listen on a port with SO_REUSEADDR when the first has
    it too: the runtime's listener has none there, so no program in the sandbox (root's, here,
    with busybox nc, which sets SO_REUSEADDR) can take requests meant for the runtime; under runc
    and runsc."""
    for rt in runtimes():
        path, sid = agentd().create(runtime=rt)
        try:
            out = run(str(sid), "timeout 3 nc -l -p 8000 </dev/null >/tmp/nc.out 2>&1; echo rc=$?; cat /tmp/nc.out")
            assert "rc=1" in out and "in use" in out, (rt, out)
        finally:
            agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def a_runc_sandbox_is_not_supported_and_names_runsc():
    path, sid = agentd().create(runtime="runc")
    try:
        name, message = error_name(lambda: sandbox(path).Hibernate(timeout=60))
        assert name.endswith(".NotSupported"), (name, message)
        assert "runsc" in message, message
        assert str(props(path)["State"]) == "running"
        # agentixctl says the same, with a non-zero status.
        r = subprocess.run([AGENTIXCTL, "hibernate", str(sid)], env=agentd().env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode != 0 and "runsc" in r.stderr, (r.returncode, r.stderr)
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def only_its_owner_and_root_hibernate_it_and_delete_during_one_wins():
    if not runsc_or_skip():
        return
    path, sid = agentd().create(runtime="runsc")
    sid = str(sid)
    try:
        # Another user's sandbox is not there for bob (agentd shows a user their own objects).
        r = busctl_as("bob", agentd().address, "call", NAME, str(path), SANDBOX, "Hibernate")
        assert r.returncode != 0 and ("NotOwner" in r.stderr or "Unknown object" in r.stderr), (r.returncode, r.stderr)
        assert str(props(path)["State"]) == "running"
        # agentixctl hibernate, then a Delete while it is on its way (or just after).
        hib = subprocess.Popen([AGENTIXCTL, "hibernate", sid], env=agentd().env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        agentd().manager().DeleteSandbox(sid, timeout=120)
        hib.communicate(timeout=300)
        assert sid not in agentd().ids()
        wait_until(lambda: subprocess.run(["docker", "inspect", f"agentix-{sid}"],
                                          capture_output=True).returncode != 0, 60, what="the container gone")
        assert agentd().agentd.poll() is None, agentd().log_text()
    finally:
        if sid in agentd().ids():
            agentd().manager().DeleteSandbox(sid, timeout=120)


@test
def hibernated_sandboxes_hold_no_memory_quota_until_they_run_again():
    """alice's MaxMemory=600M: a second 512M sandbox may be made while her first is hibernated,
    but of the two resumed at once only one runs (a wake counts from its start)."""
    if not runsc_or_skip():
        return
    a = agentd()
    with open(a.config, "w") as f:
        f.write("[Quotas]\nMaxMemory=600M\n")
    a.manager().Reload()
    made = []
    try:
        for _ in range(2):
            got = call_as("alice", a.address, "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager", "CreateSandbox",
                          [["image", "s", BUSYBOX], ["bundle", "s", bundle()], ["runtime", "s", "runsc"],
                           ["memory", "t", str(512 << 20)]])
            assert "ok" in got, got
            made.append(got["ok"])
            sandbox(got["ok"][0]).Hibernate(timeout=300)  # root may: its memory is alice's no more
        resumes = [subprocess.Popen(["runuser", "-u", "agx-alice", "--", "/usr/bin/python3", "-c", CALL_AS,
                                     a.address, path, SANDBOX, "Resume", "[]"], stdout=subprocess.PIPE, text=True)
                   for path, _ in made]
        answers = [json.loads(p.communicate(timeout=300)[0]) for p in resumes]
        refused = [x for x in answers if "error" in x]
        assert len(refused) == 1 and refused[0]["error"].endswith("QuotaExceeded"), answers
        assert "MaxMemory=600M" in refused[0]["message"], refused
        assert sorted(str(props(path)["State"]) for path, _ in made) == ["hibernated", "running"]
    finally:
        for _, sid in made:
            a.manager().DeleteSandbox(sid, timeout=120)
        with open(a.config, "w") as f:
            f.write("")
        a.manager().Reload()


@test
def on_expiry_a_sandbox_hibernates_within_max_hibernated_and_goes_after_its_retention():
    """agentd.conf: OnExpiry=hibernate, HibernatedRetention=, MaxHibernated= (last: it replaces
    this test's agentd with one so configured)."""
    if not runsc_or_skip():
        return
    agentd()
    STATE["agentd"].stop()
    STATE["agentd"] = Agentd("hibernate-policy", "[Sandboxes]\nOnExpiry=hibernate\nHibernatedRetention=6s\n"
                                                 "MaxHibernated=1\n")
    m = agentd().manager()
    first_path, first = agentd().create(runtime="runsc")
    second_path, second = agentd().create(runtime="runsc")
    first, second = str(first), str(second)
    try:
        sandbox(first_path).Hibernate(timeout=300)
        name, message = error_name(lambda: sandbox(second_path).Hibernate(timeout=300))
        assert name.endswith(".TooManySandboxes") and "MaxHibernated=" in message, (name, message)
        assert str(props(second_path)["State"]) == "running"
        usage = {str(k): v for k, v in m.GetUsage(timeout=30).items()}
        assert int(usage["hibernated"]) == 1, usage
        # The host's one hibernated place is taken: the second one, expiring, is deleted.
        sandbox(second_path).SetTTL(dbus.UInt64(1))
        wait_until(lambda: second not in agentd().ids(), 60, what="the expired sandbox deleted")
        # Once the place is free, an expiring sandbox hibernates, its expiry moved by the retention,
        m.DeleteSandbox(first, timeout=120)
        third_path, third = agentd().create(runtime="runsc")
        third = str(third)
        run(third, "echo kept > /tmp/file")
        sandbox(third_path).SetTTL(dbus.UInt64(1))
        wait_until(lambda: str(props(third_path)["State"]) == "hibernated", 60, what="hibernated at its expiry")
        expires = int(props(third_path)["ExpiresAt"]) / 1e6
        assert time.time() + 2 < expires <= time.time() + 7, (expires, time.time())
        # and it goes once the retention is over.
        wait_until(lambda: third not in agentd().ids(), 60, what="deleted after its retention")
        wait_until(lambda: subprocess.run(["docker", "inspect", f"agentix-{third}"],
                                          capture_output=True).returncode != 0, 60, what="its container gone")
    finally:
        for sid in agentd().ids():
            m.DeleteSandbox(sid, timeout=120)


if __name__ == "__main__":
    try:
        main()
    finally:
        if "agentd" in STATE:
            rc = STATE["agentd"].stop()
            if rc not in (0, None):
                print(STATE["agentd"].log_text()[-4000:])
        remove_users()
        cleanup()
