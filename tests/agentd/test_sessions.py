#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Persistent shell sessions (shell::) in real task containers made through agentd: the busybox
image (no bash of its own: the bundle's runs), under every runtime dockerd offers (runc, and
runsc when registered). State between runs, a hung command timed out and the session still
usable, a prompt answered with shell::input from a second client, a session that outlives the
client that opened it, exit and close.

Needs what agentd_env.py needs, and a running dockerd."""

import json
import os
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
        r = third.call("sandbox::exec", command=f"kill -0 {pid} 2>/dev/null && echo alive || echo gone")
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
