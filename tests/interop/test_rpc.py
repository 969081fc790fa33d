# SPDX-License-Identifier: MIT
"""python-socketio (Debian's, via /usr/bin/python3) driving agentix-server's /rpc namespace
over WebSocket and over HTTP long-polling: every event, every error type, auth, cancel,
deadlines, resume after a dropped connection, worker death, seccomp, limits, shutdown."""

import collections
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import msgpack
import socketio

from harness import RpcClient, RpcError, Server, in_order, main, server_binary, test, wait_until

TOKEN = "s3cret-token"
CLAIM = "runtime::claim"
MODULE_DIR = os.environ.get("AGENTIX_TEST_MODULE_DIR", "")
TRANSPORTS = (["websocket"], ["polling"])


class Client(RpcClient):
    """An RpcClient on a test server, with the tests' token by default."""

    def __init__(self, server, transports=None, token=TOKEN):
        super().__init__(server.url, token, transports)


def server(*args, **kw):
    extra = ["--module-dir", MODULE_DIR] if MODULE_DIR else []
    env = {"AGENTIX_TOKEN": TOKEN}
    env.update(kw.pop("env", {}))
    return Server(*extra, *args, env=env, **kw)


def need_testmod():
    assert MODULE_DIR and os.path.exists(os.path.join(MODULE_DIR, "testmod.so")), \
        "AGENTIX_TEST_MODULE_DIR must point at the directory holding testmod.so"


# ---- connecting -------------------------------------------------------------------------------

@test
def health_needs_no_token():
    import json
    import urllib.request
    with server() as s:
        with urllib.request.urlopen(s.url + "/health") as r:
            body = json.loads(r.read())
        assert body["status"] == "ok" and body["version"]


@test
def auth_wrong_and_missing_token_refused():
    with server() as s:
        for transports in TRANSPORTS:
            for token in ("wrong", None):
                try:
                    Client(s, transports, token=token)
                except socketio.exceptions.ConnectionError:
                    pass
                else:
                    raise AssertionError(f"connected with token {token!r} over {transports}")
            c = Client(s, transports)
            c.close()


@test
def a_claim_swaps_the_token_sets_env_and_workdir_and_ends_the_other_connections():
    """runtime::claim, as agentd makes it when a create takes a pooled sandbox."""
    new = "claimed-" + uuid.uuid4().hex
    workdir = tempfile.mkdtemp(prefix="agentix-claim-") + "/made/by/claim"
    with server() as s:  # a runtime not made for a pool refuses
        c = Client(s)
        e = c.error(c.start(CLAIM, kwargs={"token": new}))
        assert e["type"] == "BadRequest" and "not agentd's to claim" in e["message"], e
        c.close()
    with server(env={"AGENTIX_CLAIMABLE": "1"}) as s:
        bystander, claimer = Client(s), Client(s)
        # Taken out of the environment, as the token is.
        assert claimer.call("sandbox::exec", command="echo ${AGENTIX_CLAIMABLE:-unset}")["output"] == "unset\n"
        closed = threading.Event()
        bystander.sio.on("disconnect", lambda *a: closed.set(), namespace="/rpc")
        busy = claimer.start("sandbox::exec", kwargs={"command": "sleep 1"})
        e = claimer.error(claimer.start(CLAIM, kwargs={"token": new}))
        assert e["type"] == "BadRequest" and "no call running" in e["message"], e
        assert claimer.terminal(busy, 15)[0] == "call:result"
        for bad, needle in (({}, "keyword argument 'token'"), ({"token": "short"}, "16 to 256 characters"),
                            ({"token": "with space in it.."}, "printable ASCII")):
            e = claimer.error(claimer.start(CLAIM, kwargs=bad))
            assert e["type"] == "BadRequest" and needle in e["message"], (bad, e)
        e = claimer.error(claimer.start(CLAIM, kwargs={"token": new, "workdir": "relative"}))
        assert e["type"] == "ValueError" and "absolute" in e["message"], e
        assert claimer.call(CLAIM, token=new, env={"AGENTIX_CLAIMED": "yes"}, workdir=workdir) == {}
        # Connections made with the old token end; the old token no longer gets in; the new does.
        assert closed.wait(5), "the bystander's connection stayed"
        try:
            Client(s)
        except socketio.exceptions.ConnectionError:
            pass
        else:
            raise AssertionError("the old token still connects")
        owner = Client(s, token=new)
        got = owner.call("sandbox::exec", command="echo $AGENTIX_CLAIMED; pwd")
        assert got["output"] == f"yes\n{workdir}\n", got
        e = owner.error(owner.start(CLAIM, kwargs={"token": "again-" + uuid.uuid4().hex}))
        assert e["type"] == "BadRequest" and "claimed already" in e["message"], e
        owner.close()
        claimer.close()


@test
def auth_error_message_is_unauthorized():
    with server() as s:
        sio = socketio.Client(reconnection=False)
        got = []
        sio.on("connect_error", lambda data: got.append(data), namespace="/rpc")
        try:
            sio.connect(s.url, namespaces=["/rpc"], auth={"token": "nope"}, transports=["websocket"], wait_timeout=3)
        except socketio.exceptions.ConnectionError:
            pass
        wait_until(lambda: got, what="connect_error")
        assert got[0] == {"message": "unauthorized"}, got


# ---- calls ------------------------------------------------------------------------------------

@test
def unary_fs_round_trip_both_transports():
    with server() as s, tempfile.TemporaryDirectory() as d:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            path = os.path.join(d, f"{transports[0]}.txt")
            r = c.call("fs::write", path=path, content="line one\nline two\n")
            assert r["error"] is None, r
            r = c.call("fs::read", path=path)
            assert "line two" in r["content"] and r["error"] is None, r
            c.close()


@test
def echo_round_trip_both_transports():
    with server() as s:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            value = {"n": 1, "s": "ü", "b": b"\x00\xff", "l": [1.5, None, True]}
            assert c.call("sandbox::echo", value) == value
            assert c.call("sandbox::echo") is None
            c.close()


@test
def binary_round_trip_all_byte_values_and_8mb():
    with server() as s, tempfile.TemporaryDirectory() as d:
        blob = bytes(range(256)) * 4 + b"\x00"
        big = os.urandom(8 * 1024 * 1024)
        for transports in TRANSPORTS:
            c = Client(s, transports)
            p1, p2 = os.path.join(d, "a.bin"), os.path.join(d, "b.bin")
            r = c.call("fs::upload", files=[[p1, blob], [p2, big]])
            assert [x["error"] for x in r] == [None, None], r
            r = c.call("fs::download", paths=[p2, p1, os.path.join(d, "missing")], timeout=60)
            assert r[0]["content"] == big and r[1]["content"] == blob
            assert r[2]["error"] == "file_not_found"
            c.close()


@test
def exec_unary_stream_bidi():
    with server() as s:
        c = Client(s, ["websocket"])
        r = c.call("sandbox::exec", command="echo out; echo err >&2; exit 3")
        assert r["exit_code"] == 3 and "out" in r["output"] and "err" in r["output"], r

        cid = c.start("sandbox::exec", shape="stream", kwargs={"command": "printf a; sleep 0.1; printf b"})
        ev, m = c.terminal(cid)
        assert ev == "call:end", (ev, m)
        items = c.items(cid)
        data = b"".join(i["data"] for i in items if "data" in i)
        assert data == b"ab" and items[-1]["exit_code"] == 0, items

        cid = c.start("sandbox::exec", shape="bidi", kwargs={"command": "cat"})
        c.emit("call:in", {"call_id": cid, "item": {"stdin": b"hello bidi\n"}})
        c.emit("call:end_in", {"call_id": cid})
        ev, m = c.terminal(cid)
        assert ev == "call:end", (ev, m)
        out = b"".join(i.get("data", b"") for i in c.items(cid))
        assert out == b"hello bidi\n", out
        c.close()


@test
def module_stream_and_bidi():
    need_testmod()
    with server() as s:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            cid = c.start("testmod::count", shape="stream", args=[50])
            assert c.terminal(cid)[0] == "call:end"
            assert c.items(cid) == list(range(50))
            cid = c.start("testmod::upper", shape="bidi")
            for w in ("a", "bc", "def"):
                c.emit("call:in", {"call_id": cid, "item": w})
            c.emit("call:end_in", {"call_id": cid})
            assert c.terminal(cid)[0] == "call:end"
            assert c.items(cid) == ["A", "BC", "DEF"]
            c.close()


# ---- errors -----------------------------------------------------------------------------------

@test
def bad_requests():
    with server() as s:
        c = Client(s, ["websocket"])
        # No call_id: answered with call_id "".
        c.emit("call", {"callable": "fs::ls", "shape": "unary"})
        assert c.error("")["type"] == "BadRequest"
        # Not binary: a JSON argument.
        c.sio.emit("call", {"call_id": "x"}, namespace="/rpc")
        wait_until(lambda: len(c.events[""]) >= 2, what="second BadRequest")
        assert c.events[""][1][1]["error"]["type"] == "BadRequest"
        # Bad shape, bad callable.
        assert c.error(c.start("fs::ls", shape="sideways"))["type"] == "BadRequest"
        assert c.error(c.start("nosuchmodule::f"))["type"] == "NoSuchCallable"
        assert c.error(c.start("fs::nosuchfunction"))["type"] == "NoSuchCallable"
        assert c.error(c.start("fs::ls", shape="bidi"))["type"] == "BadRequest"
        e = c.error(c.start("fs::read", kwargs={"path": "/etc/hostname", "offset": "zero"}))
        assert e["type"] == "ArgumentError" and "offset" in e["message"], e
        e = c.error(c.start("fs::read", kwargs={}))
        assert e["type"] == "ArgumentError" and "path" in e["message"], e
        c.close()


@test
def module_raised_error_keeps_its_type():
    need_testmod()
    with server() as s:
        c = Client(s, ["websocket"])
        e = c.error(c.start("testmod::raise_error", args=["ValueError", "bad value 7"]))
        assert (e["type"], e["message"], e["cancelled"]) == ("ValueError", "bad value 7", False), e
        c.close()


@test
def cancel_is_prompt_and_cancelled():
    with server() as s:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            cid = c.start("sandbox::exec", kwargs={"command": "sleep 30"})
            time.sleep(0.2)
            c.emit("cancel", {"call_id": cid})
            e = c.error(cid)  # (waits less than the command's 30 s: the cancel ended it)
            assert e["type"] == "Cancelled" and e["cancelled"] is True, e
            c.close()


@test
def deadline_exceeded():
    with server() as s:
        c = Client(s, ["websocket"])
        cid = c.start("sandbox::exec", kwargs={"command": "sleep 10"}, deadline_ms=300)
        e = c.error(cid, timeout=9)  # before the command's own end
        assert e["type"] == "DeadlineExceeded" and e["cancelled"] is True, e
        # A deadline that is met changes nothing.
        cid = c.start("sandbox::exec", kwargs={"command": "echo quick"}, deadline_ms=10000)
        assert c.terminal(cid)[0] == "call:result"
        c.close()


@test
def worker_death_fails_in_flight_calls_and_respawns():
    need_testmod()
    with server() as s:
        c = Client(s, ["websocket"])
        slow = c.start("sandbox::exec", kwargs={"command": "sleep 20"})
        time.sleep(0.2)
        e = c.error(c.start("testmod::crash", kwargs={"signal": 9}))
        assert e["type"] == "WorkerDied" and e["returncode"] == -9, e
        e = c.error(slow)
        assert e["type"] == "WorkerDied" and e["returncode"] == -9, e
        # The next call gets a fresh worker.
        r = c.call("sandbox::exec", command="echo alive")
        assert r["output"] == "alive\n", r
        c.close()


@test
def message_too_large_keeps_connection():
    with server("--max-message", "1048576") as s:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            cid = uuid.uuid4().hex
            c.emit("call", {"call_id": cid, "callable": "fs::upload", "shape": "unary", "args": [],
                            "kwargs": {"files": [["/tmp/x", b"x" * (2 * 1024 * 1024)]]}})
            e = c.error(cid)
            assert e["type"] == "MessageTooLarge", e
            assert c.call("fs::ls", path="/")["error"] is None
            c.close()


@test
def too_many_calls():
    with server("--max-calls", "2") as s:
        c = Client(s, ["websocket"])
        a = c.start("sandbox::exec", kwargs={"command": "sleep 5"})
        b = c.start("sandbox::exec", kwargs={"command": "sleep 5"})
        time.sleep(0.2)
        e = c.error(c.start("fs::ls", kwargs={"path": "/"}))
        assert e["type"] == "TooManyCalls", e
        for cid in (a, b):
            c.emit("cancel", {"call_id": cid})
            c.error(cid)
        # Slots free up once the worker confirms the cancelled calls ended.
        wait_until(lambda: c.terminal(c.start("fs::ls", kwargs={"path": "/"}), 5)[0] == "call:result",
                   what="a free slot")
        c.close()


# ---- protocol guarantees ----------------------------------------------------------------------

@test
def exactly_one_terminal_per_call():
    with server() as s:
        c = Client(s, ["websocket"])
        ids = [c.start("fs::ls", kwargs={"path": "/"}) for _ in range(300)]
        for cid in ids:
            c.terminal(cid)
        time.sleep(0.3)
        for cid in ids:
            terms = [e for e, _ in c.events[cid] if e in ("call:result", "call:end", "call:error")]
            assert terms == ["call:result"], (cid, terms)
        c.close()


@test
def repeated_call_id_runs_once():
    with server() as s, tempfile.TemporaryDirectory() as d:
        c = Client(s, ["websocket"])
        log = os.path.join(d, "runs")
        cid = uuid.uuid4().hex
        c.start("sandbox::exec", kwargs={"command": f"echo run >> {log}"}, call_id=cid)
        c.start("sandbox::exec", kwargs={"command": f"echo run >> {log}"}, call_id=cid)
        c.terminal(cid)
        time.sleep(0.3)
        c.emit("ack", {"call_id": cid})
        time.sleep(0.1)
        c.start("sandbox::exec", kwargs={"command": f"echo run >> {log}"}, call_id=cid)
        time.sleep(0.5)
        with open(log) as f:
            assert f.read() == "run\n"
        c.close()


@test
def resume_after_dropped_connection():
    with server() as s:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            running = c.start("sandbox::exec", kwargs={"command": "sleep 1; echo done"})
            finished = c.start("sandbox::exec", kwargs={"command": "echo early"})
            c.terminal(finished)
            c.sio.eio.disconnect(abort=True)  # drop the transport without a goodbye
            time.sleep(0.2)

            c2 = Client(s, transports)
            c2.emit("resume", {"call_ids": [running, finished, "never-seen"]})
            ev, m = c2.terminal(finished)
            assert ev == "call:result" and m["value"]["output"] == "early\n"
            ev, m = c2.terminal(running, timeout=10)
            assert ev == "call:result" and m["value"]["output"] == "done\n", m
            assert c2.error("never-seen")["type"] == "ResultUnavailable"
            # After ack the result is gone.
            c2.emit("ack", {"call_id": finished})
            time.sleep(0.1)
            c3 = Client(s, transports)
            c3.emit("resume", {"call_ids": [finished]})
            assert c3.error(finished)["type"] == "ResultUnavailable"
            for x in (c2, c3):
                x.close()


@test
def stream_items_survive_a_drop():
    """Items the call produces while no client is attached are kept and sent on resume. An item
    in flight at the moment of the drop is lost with the connection (there are no per-item
    acks), so the command waits at a gate until the old connection is surely gone."""
    need_testmod()
    with server() as s, tempfile.TemporaryDirectory() as tmp:
        gate = os.path.join(tmp, "go")
        c = Client(s, ["websocket"])
        cid = c.start("sandbox::exec", shape="stream",
                      kwargs={"command": f"echo 1; while [ ! -e {gate} ]; do sleep 0.02; done; "
                                         "for i in 2 3 4 5; do echo $i; done"})
        wait_until(lambda: c.items(cid), what="the first item")
        c.sio.eio.disconnect(abort=True)
        time.sleep(0.5)  # the server notices the aborted connection (no duration is asserted)
        open(gate, "w").close()
        time.sleep(0.3)  # items 2..5 are produced with no client attached
        c2 = Client(s, ["websocket"])
        c2.emit("resume", {"call_ids": [cid]})
        assert c2.terminal(cid)[0] == "call:end"
        seen = b"".join(i.get("data", b"") for i in c.items(cid) + c2.items(cid))
        assert seen == b"1\n2\n3\n4\n5\n", seen
        c2.close()


@test
def fs_watch_reports_changes_below_a_path_until_cancelled():
    with server() as s, tempfile.TemporaryDirectory() as tmp:
        c = Client(s, ["websocket"])
        cid = c.start("fs::watch", shape="stream", kwargs={"path": tmp})

        def seen():
            return [(i["path"], i["event"]) for i in c.items(cid)]

        # The watch is in place once a change is reported: touch a file until one is.
        ready = os.path.join(tmp, "ready")
        wait_until(lambda: open(ready, "w").close() or (ready, "created") in seen() or
                   (ready, "modified") in seen(), what="the watch to report")
        f = os.path.join(tmp, "a.txt")
        with open(f, "w") as fh:
            fh.write("x")
        os.mkdir(os.path.join(tmp, "sub"))
        deep = os.path.join(tmp, "sub", "b.txt")
        wait_until(lambda: (os.path.join(tmp, "sub"), "created") in seen(), what="the new directory")
        open(deep, "w").close()  # in a directory made after the watch began
        os.rename(f, os.path.join(tmp, "c.txt"))
        os.unlink(os.path.join(tmp, "c.txt"))
        want = [(f, "created"), (f, "modified"), (deep, "created"), (f, "moved_from"),
                (os.path.join(tmp, "c.txt"), "moved_to"), (os.path.join(tmp, "c.txt"), "deleted")]
        wait_until(lambda: all(w in seen() for w in want), what=f"the changes {want}")
        got = seen()
        assert [g for g in got if g in want] == want, got  # in the order they happened
        c.emit("cancel", {"call_id": cid})
        e = c.error(cid)
        assert e["cancelled"] is True, e

        # Not recursive: a subdirectory's changes are not reported.
        cid = c.start("fs::watch", shape="stream", kwargs={"path": tmp, "recursive": False})
        wait_until(lambda: open(ready, "w").close() or any(i["path"] == ready for i in c.items(cid)),
                   what="the second watch to report")
        open(os.path.join(tmp, "sub", "unseen"), "w").close()
        open(os.path.join(tmp, "seen"), "w").close()
        wait_until(lambda: any(i["path"].endswith("/seen") for i in c.items(cid)), what="the top-level file")
        assert not any(i["path"].endswith("unseen") for i in c.items(cid)), c.items(cid)
        c.emit("cancel", {"call_id": cid})
        c.error(cid)

        # A path that does not exist; a watched path that is deleted ends the stream.
        assert c.error(c.start("fs::watch", shape="stream", kwargs={"path": tmp + "/nope"}))["type"] == \
            "file_not_found"
        gone = os.path.join(tmp, "gone")
        os.mkdir(gone)
        cid = c.start("fs::watch", shape="stream", kwargs={"path": gone})
        wait_until(lambda: open(gone + "/x", "w").close() or c.items(cid), what="the third watch to report")
        subprocess.run(["rm", "-rf", gone], check=True)
        assert c.terminal(cid)[0] == "call:end"
        assert (gone, "deleted") in [(i["path"], i["event"]) for i in c.items(cid)]
        c.close()


@test
def fs_watch_says_when_inotify_runs_out():
    """The watch limit is an error naming the setting, at start and when new directories push a
    watch over it; never a silent gap. The server runs in a user namespace of its own, where the
    limit is set low (the host's stays as it is)."""
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = os.path.join(tmp, "server")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec unshare -Ur sh -c 'echo 8 > /proc/sys/user/max_inotify_watches && "
                    f"exec \"$0\" \"$@\"' {server_binary()} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        tree = os.path.join(tmp, "tree")
        for i in range(12):
            os.makedirs(os.path.join(tree, f"d{i}"))
        old = os.environ.get("AGENTIX_SERVER")
        os.environ["AGENTIX_SERVER"] = wrapper
        try:
            with server() as s:
                c = Client(s, ["websocket"])
                e = c.error(c.start("fs::watch", shape="stream", kwargs={"path": tree}))
                assert e["type"] == "io_error" and "max_user_watches" in e["message"], e
                # Within the limit at first, over it once new directories appear.
                small = os.path.join(tree, "d0")
                cid = c.start("fs::watch", shape="stream", kwargs={"path": small})
                wait_until(lambda: open(small + "/r", "w").close() or c.items(cid), what="the watch to report")
                for i in range(10):
                    os.mkdir(os.path.join(small, f"n{i}"))
                e = c.error(cid)
                assert e["type"] == "io_error" and "max_user_watches" in e["message"], e
                c.close()
        finally:
            if old is None:
                del os.environ["AGENTIX_SERVER"]
            else:
                os.environ["AGENTIX_SERVER"] = old


# ---- confinement ------------------------------------------------------------------------------

@test
def seccomp_denies_dangerous_syscalls():
    need_testmod()
    with server() as s:
        c = Client(s, ["websocket"])
        r = c.call("testmod::syscalls")
        for name in ("mount", "bpf", "kexec_load", "unshare", "keyctl"):
            assert r[name] == 1, (name, r)  # EPERM
        for name in ("getpid", "open", "read"):
            assert r[name] == 0, (name, r)
        # Children of exec inherit the filter.
        out = c.call("sandbox::exec", command="unshare -U true; echo rc=$?")["output"]
        assert "rc=0" not in out, out
        c.close()


@test
def worker_fds_are_private():
    with server() as s:
        c = Client(s, ["websocket"])
        out = c.call("sandbox::exec", command="ls /proc/self/fd | sort -n | tr '\\n' ' '")["output"]
        # The shell's own 0-2 plus the fd ls opens for the directory; never the frame socket.
        assert len(out.split()) <= 4, out
        c.close()


def zombies_of(pid):
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == pid:
            found.append(int(d))
    return found


@test
def orphans_are_reaped():
    with server() as s:
        c = Client(s, ["websocket"])
        for _ in range(5):
            r = c.call("sandbox::exec", command="(sleep 0.2 &) ; echo started")
            assert r["exit_code"] == 0
        time.sleep(0.6)
        assert zombies_of(s.proc.pid) == [], zombies_of(s.proc.pid)
        c.close()


# ---- shutdown ---------------------------------------------------------------------------------

@test
def sigterm_cancels_in_flight_and_exits_cleanly():
    s = server()
    c = Client(s, ["websocket"])
    cid = c.start("sandbox::exec", kwargs={"command": "sleep 30"})
    time.sleep(0.2)
    s.proc.send_signal(signal.SIGTERM)
    e = c.error(cid, timeout=5)
    assert e["type"] == "Cancelled" and e["cancelled"] is True, e
    assert s.proc.wait(5) == 0
    s.log.close()
    c.sio.disconnect()


# ---- containment without a container --------------------------------------------------------

def process_gone(pid):
    """True when pid no longer runs (gone, or a zombie waiting for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def group_gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    # Members may be zombies not yet reaped: look at each.
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid and not process_gone(int(d)):
                    return False
            except OSError:
                pass
    return True


@test
def client_gone_for_good_cancels_its_calls_and_kills_the_group():
    with server("--orphan-timeout", "1") as s, tempfile.TemporaryDirectory() as tmp:
        for transports in TRANSPORTS:
            c = Client(s, transports)
            cid = c.start("sandbox::exec", kwargs={"command": f"echo $$ > {tmp}/pgid; sleep 5 & sleep 300"})
            wait_until(lambda: os.path.exists(f"{tmp}/pgid") and open(f"{tmp}/pgid").read().strip())
            pgid = int(open(f"{tmp}/pgid").read())
            os.unlink(f"{tmp}/pgid")
            c.sio.eio.disconnect(abort=True)
            time.sleep(0.5)
            assert not group_gone(pgid), "the call must outlive a short drop"
            wait_until(lambda: group_gone(pgid), timeout=5, what="the orphaned command's group to end")
            # A client coming back later learns what happened.
            c2 = Client(s, transports)
            c2.emit("resume", {"call_ids": [cid]})
            e = c2.error(cid)
            assert e["type"] == "Cancelled" and e["cancelled"] is True, e
            c2.close()


@test
def a_resumed_call_is_not_orphaned():
    with server("--orphan-timeout", "1") as s:
        c = Client(s, ["websocket"])
        cid = c.start("sandbox::exec", kwargs={"command": "sleep 2; echo done"})
        time.sleep(0.2)
        c.sio.eio.disconnect(abort=True)
        time.sleep(0.3)
        c2 = Client(s, ["websocket"])
        c2.emit("resume", {"call_ids": [cid]})
        ev, m = c2.terminal(cid, timeout=10)
        assert ev == "call:result" and m["value"]["output"] == "done\n", m
        c2.close()


@test
def background_jobs_end_with_the_server():
    s = server()
    c = Client(s, ["websocket"])
    # A job in the command's group, and one that left it (its own session), both outliving
    # the call.
    r = c.call("sandbox::exec", command="sleep 300 >/dev/null 2>&1 & a=$!; "
                                        "setsid sleep 301 >/dev/null 2>&1 & echo $a $!")
    pids = [int(x) for x in r["output"].split()]
    assert r["exit_code"] == 0 and len(pids) == 2, r
    time.sleep(0.3)
    assert not any(process_gone(p) for p in pids), "background jobs outlive their call"
    c.close()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(10) == 0
    s.log.close()
    wait_until(lambda: all(process_gone(p) for p in pids), timeout=3, what="the background jobs to end")
    assert "left running by commands" in s.read_log(), s.read_log()


def pids_cgroup_available():
    with open("/proc/self/cgroup") as f:
        if any(line.split(":")[1] == "pids" for line in f if line.count(":") >= 2):
            return os.access("/sys/fs/cgroup/pids", os.W_OK)
    return False


@test
def max_processes_bounds_the_workers_descendants():
    if not pids_cgroup_available():
        print("  (no writable pids cgroup here: --max-processes must refuse to start)")
        p = subprocess.run([server_binary(), "--max-processes", "20", "--port", "0"], capture_output=True, text=True,
                           timeout=10)
        assert p.returncode != 0 and "pids" in p.stderr, p.stderr
        return
    with server("--max-processes", "24") as s:
        c = Client(s, ["websocket"])
        # 40 background sleeps against a bound of 24 (the worker's threads count too): some
        # forks must fail, and the shell says so.
        r = c.call("sandbox::exec", command="for i in $(seq 40); do sleep 2 & done 2>&1; wait", timeout=30)
        print("  " + r["output"].strip().splitlines()[0])
        assert "fork" in r["output"].lower(), r
        cg = [l for l in open(f"/proc/{s.proc.pid}/cgroup") if ":pids:" in l]
        # The server itself is outside the bound: it keeps serving.
        wait_until(lambda: c.call("sandbox::exec", command="echo ok")["output"] == "ok\n", timeout=10)
        c.close()
        assert cg and "agentix-worker" not in cg[0], cg


if __name__ == "__main__":
    main()
