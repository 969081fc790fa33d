#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Persistent shell sessions (shell::) in real task containers made through agentd: the busybox
image (no bash of its own: the bundle's runs), under every runtime dockerd offers (runc, and
runsc when registered). State between runs, a hung command timed out and the session still
usable, a prompt answered with shell::input from a second client, a session that outlives the
client that opened it, exit and close.

From the attacker's side, in the e2b-base image (an account `user` beside root), under runc and
runsc: a caller's max_output beyond int64 (2^64-1, 2^63) or below 0 is refused with
ArgumentError and the runtime goes on serving; and `user`, another account in the sandbox, who
takes the name of a root session's command directory once a command of the session removed it
and keeps putting its own `command` file there, never gets its command run by the root session
(a marker file the attacker's command would write stays absent, every run's output is root's).

Needs what agentd_env.py needs, and a running dockerd."""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, RpcError, main, test  # noqa: E402
from agentd_env import Agentd, cleanup, docker  # noqa: E402


def runtimes():
    info = json.loads(docker("info", "--format", "{{json .Runtimes}}").stdout)
    return [r for r in ("runc", "runsc") if r in info]


AGENTD = None


def agentd():
    global AGENTD
    if AGENTD is None:
        AGENTD = Agentd("sessions")
    return AGENTD


def client(sid):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    return RpcClient(str(url), str(token), transports=["websocket"])


def sessions_in(runtime):
    _, sid = agentd().create(runtime=runtime)
    sid = str(sid)
    try:
        sessions_in_sandbox(runtime, sid)
    finally:
        # Also when something failed: a sandbox left running would be adopted by the next
        # test's agentd and counted against its limits.
        agentd().manager().DeleteSandbox(sid, timeout=60)


def sessions_in_sandbox(runtime, sid):
    first = client(sid)
    try:
        s = first.call("shell::open", cwd="/")
        r = first.call("shell::run", s, "cd /tmp && export GREETING=hello && count() { echo $#; }")
        assert r == {"output": "", "exit_code": 0, "timed_out": False, "truncated": False, "ended": False}, r
        # The image has no bash: the bundle's is the session's.
        r = first.call("shell::run", s, "pwd; echo $GREETING; count a b c; echo bash ${BASH_VERSION%%.*}")
        assert r["output"].splitlines() == ["/tmp", "hello", "3", "bash 5"], (runtime, r)

        # A command that never ends: interrupted at the timeout, and the session goes on.
        # (shell::run's own timeout is its third argument; the client's `timeout=` is its wait.)
        r = first.call("shell::run", s, "echo before; sleep 600", 1, timeout=30)
        assert r["timed_out"] and r["output"].startswith("before\n") and not r["ended"], (runtime, r)
        assert first.call("shell::run", s, "echo after; echo $GREETING")["output"] == "after\nhello\n", runtime

        # A prompt, answered from a second client while the first waits for its run.
        second = client(sid)
        try:
            out = {}
            t = threading.Thread(target=lambda: out.update(first.call("shell::run", s, "read -r x; echo \"got $x\"",
                                                                      30, timeout=40)))
            t.start()
            for _ in range(100):
                listed = second.call("shell::list")
                if any(e["id"] == s and e["running"] for e in listed):
                    break
                time.sleep(0.05)
            second.call("shell::input", s, "an answer\n")
            t.join(40)
            assert out.get("output") == "got an answer\n" and out.get("exit_code") == 0, (runtime, out)
        finally:
            second.close()
    finally:
        first.close()

    twenty_at_once(runtime, sid)

    # The session outlives the client that opened it: a new one finds it as it was left.
    third = client(sid)
    try:
        listed = third.call("shell::list")
        assert [e["id"] for e in listed] == [s] and listed[0]["cwd"] == "/tmp", (runtime, listed)
        assert third.call("shell::run", s, "echo $GREETING")["output"] == "hello\n", runtime
        r = third.call("shell::run", s, "exit 5")
        assert r["ended"] and r["exit_code"] == 5, (runtime, r)
        try:
            third.call("shell::run", s, "true")
            raise AssertionError("a run in an ended session did not fail")
        except RpcError as e:
            assert e.error["type"] == "SessionNotFound", (runtime, str(e))
        # close: the shell and its jobs go.
        s2 = third.call("shell::open")
        pid = int(third.call("shell::run", s2, "sleep 600 & echo $!")["output"].split()[-1])
        third.call("shell::close", s2)
        assert third.call("shell::list") == []
        # Killed: gone, or a zombie for the moment its reaper (the runtime: the job was orphaned)
        # takes to collect it, which kill -0 still sees; bounded.
        r = third.call("sandbox::exec", command=(
            f"for i in $(seq 50); do kill -0 {pid} 2>/dev/null || {{ echo gone; exit; }}; "
            f"[ \"$(cut -d' ' -f3 /proc/{pid}/stat 2>/dev/null)\" = Z ] && {{ echo gone; exit; }}; "
            f"sleep 0.1; done; echo alive"))
        assert r["output"].strip() == "gone", (runtime, r)
    finally:
        third.close()


def twenty_at_once(runtime, sid):
    """20 sessions, each with its own state, running at the same time."""
    c = client(sid)
    try:
        ids = [c.call("shell::open", cwd="/tmp") for _ in range(20)]
        for n, s in enumerate(ids):
            c.call("shell::run", s, f"export N={n}")
        calls = [c.start("shell::run", args=[s, "sleep 1; echo $N"]) for s in ids]
        for n, call_id in enumerate(calls):
            ev, m = c.terminal(call_id, 60)
            assert ev == "call:result" and m["value"]["output"] == f"{n}\n", (runtime, n, ev, m)
        listed = c.call("shell::list")
        assert set(ids) <= {e["id"] for e in listed}, (runtime, listed)
        for s in ids:
            c.call("shell::close", s)
    finally:
        c.close()


E2B_BASE = "agentix-test/e2b-base:1"  # tests/bundle/make-task-images.sh e2b: root and `user` (1000)

# Run by `user` in the sandbox: whenever the name of the root session's first command directory
# is free, make it (open to all), and keep renaming a `command` of its own into every session
# directory it can write to, until the stop file appears.
ATTACKER = r"""
import glob, os, sys, time
old, marker, stop = sys.argv[1:4]
evil = "echo taken > %s\n" % marker
end = time.time() + 300
while time.time() < end and not os.path.exists(stop):
    try:
        os.mkdir(old)
        os.chmod(old, 0o777)
    except OSError:
        pass
    for d in glob.glob("/tmp/agentix-shell-*"):
        for _ in range(50):
            try:
                with open(d + "/.evil", "w") as f:
                    f.write(evil)
                os.rename(d + "/.evil", d + "/command")
            except OSError:
                break
"""


def exec_out(c, command, **kwargs):
    r = c.call("sandbox::exec", command=command, timeout=60, **kwargs)
    assert r["exit_code"] == 0, (command, r)
    return r["output"]


def attacks_in(runtime):
    r = subprocess.run([os.path.join(os.path.dirname(__file__), "..", "bundle", "make-task-images.sh"), "e2b"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _, sid = agentd().create(runtime=runtime, image=E2B_BASE)
    sid = str(sid)
    try:
        c = client(sid)
        try:
            huge_max_output(runtime, c)
            swapped_command_directory(runtime, c, sid)
        finally:
            c.close()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


def huge_max_output(runtime, c):
    """max_output beyond int64 used to wrap to a negative int64 that passed the upper bound:
    2^64-1 wrote a byte before the output buffer, 2^63 lifted the cap."""
    s = c.call("shell::open")
    for bad in (2**64 - 1, 2**63, 2**63 + 12345, -1, -2**63, 64 * 1024 * 1024 + 1):
        try:
            # Output read before the command ends: the trim that used to go wrong runs.
            r = c.call("shell::run", s, "printf '%0300d' 0; sleep 0.3", None, bad, timeout=30)
            raise AssertionError(f"{runtime}: max_output={bad} was taken: {r}")
        except RpcError as e:
            assert e.error["type"] == "ArgumentError" and "max_output" in e.error["message"], (runtime, bad, e.error)
    # The runtime (and its worker: the session is still there) goes on serving.
    r = c.call("shell::run", s, "printf '%0300d' 0; sleep 0.3", None, 10, timeout=30)
    assert r["output"] == "0" * 10 and r["truncated"], (runtime, r)
    assert c.call("shell::run", s, "echo alive")["output"] == "alive\n", runtime
    c.call("shell::close", s)


def swapped_command_directory(runtime, c, sid):
    s = c.call("shell::open")
    assert c.call("shell::run", s, "echo first")["output"] == "first\n", runtime
    dirs = exec_out(c, "ls -d /tmp/agentix-shell-*").split()
    assert len(dirs) == 1, (runtime, dirs)
    old = dirs[0]
    assert exec_out(c, f"stat -c '%U %a' {old}").split() == ["root", "700"], runtime
    marker, stop = "/tmp/attacker-was-here", "/tmp/attacker-stop"
    c.call("fs::write", "/tmp/attack.py", ATTACKER)
    # A command of the session's own removes its directory (an agent cleaning /tmp).
    c.call("shell::run", s, f"rm -rf {old}")

    attacker = client(sid)
    try:
        call_id = attacker.start("sandbox::exec", shape="stream",
                                 kwargs={"command": f"python3 /tmp/attack.py {old} {marker} {stop}", "user": "user",
                                         "timeout": 300})
        for _ in range(300):
            owner = c.call("sandbox::exec", command=f"stat -c %U {old} 2>/dev/null")["output"].strip()
            if owner == "user":
                break
            ev = [e for e, _ in attacker.events.get(call_id, []) if e in ("call:end", "call:error")]
            assert not ev, (runtime, attacker.events.get(call_id))
            time.sleep(0.1)
        assert owner == "user", (runtime, "the attacker never made the directory")

        outputs = []
        for i in range(20):
            try:
                outputs.append(c.call("shell::run", s, f"echo root-{i}", 10, timeout=30)["output"])
            except RpcError as e:
                outputs.append(f"error {e.error['type']}: {e.error['message']}")
        taken = exec_out(c, f"test -e {marker} && echo taken || echo clean").strip()
        assert taken == "clean", (runtime, "the attacker's command ran in the root session", outputs)
        assert outputs == [f"root-{i}\n" for i in range(20)], (runtime, outputs)
        # The session works in a directory of its own, made anew: root's, 0700.
        now = exec_out(c, "stat -c '%n %U %a' /tmp/agentix-shell-*").splitlines()
        assert any(line.split()[1:] == ["root", "700"] and line.split()[0] != old for line in now), (runtime, now)
    finally:
        exec_out(c, f"touch {stop}")
        attacker.close()
    c.call("shell::close", s)


@test
def attacks_on_sessions_under_runc():
    attacks_in("runc")


@test
def attacks_on_sessions_under_runsc():
    if "runsc" not in runtimes():
        print("    skipped: dockerd has no runsc")
        return
    attacks_in("runsc")


@test
def shell_sessions_under_runc():
    sessions_in("runc")


@test
def shell_sessions_under_runsc():
    if "runsc" not in runtimes():
        print("    skipped: dockerd has no runsc")
        return
    sessions_in("runsc")


if __name__ == "__main__":
    try:
        main()
    finally:
        if AGENTD:
            AGENTD.stop()
        cleanup()
