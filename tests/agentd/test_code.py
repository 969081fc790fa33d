#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Code contexts (code::) on real Jupyter kernels in real task containers made through agentd:
the busybox image (no Python of its own) with the python-data bundle (python3, ipykernel,
numpy, pandas, matplotlib from Debian, closed into /nix), under every runtime dockerd offers
(runc, and runsc when registered). The kernel runs under the worker's seccomp filter and the
sandbox's limits, as everything the worker starts.

State between runs, a figure as a PNG of the right size, a DataFrame as HTML, an endless loop
interrupted (by its timeout, and by code::interrupt from a second client) with the context
still usable, a kernel that exits and is started again, two contexts apart, a context that
outlives its client, and bad input: an unknown context, code that is not a string, a kernel
that is not there, 100 MB of output, a flood of runs on one context. On an image with a python3
of its own (most task images have one), the bundle's kernel starts all the same.

From the attacker's side, in the e2b-base image (an account `user` beside root), under runc and
runsc: `user` subscribes to every channel of root's kernel it can find (each port listening on
127.0.0.1, and the kernels' sockets) while root's code prints a secret, and hears nothing (over
TCP, iopub served any subscriber); a caller's max_output beyond int64 is an ArgumentError and
the runtime goes on serving.

Needs what agentd_env.py needs, and a running dockerd."""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, RpcError, main, test  # noqa: E402
from agentd_env import Agentd, cleanup, python_data_bundle, remove_python_data_carriers, runtimes  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


AGENTD = None


def agentd():
    global AGENTD
    if AGENTD is None:
        AGENTD = Agentd("code")
    return AGENTD


def client(sid):
    url, token = agentd().manager().GetRuntimeAccess(sid)
    return RpcClient(str(url), str(token), transports=["websocket"])


def run(c, code, wait=60, **kwargs):
    """code::run to its end (waiting at most `wait` s; kwargs are code::run's): (items, terminal
    event, its message)."""
    call_id = c.start("code::run", shape="stream", args=[code], kwargs=kwargs)
    ev, m = c.terminal(call_id, wait)
    return c.items(call_id), ev, m


def run_ok(c, code, **kwargs):
    items, ev, m = run(c, code, **kwargs)
    assert ev == "call:end", (code, ev, m)
    errors = [i for i in items if i["type"] == "error"]
    assert not errors, (code, errors)
    return items


def text_of(items, kind="stdout"):
    return "".join(i["text"] for i in items if i["type"] == kind)


def main_result(items):
    results = [i for i in items if i["type"] == "result" and i["is_main_result"]]
    assert len(results) == 1, items
    return results[0]["data"]


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    assert data[12:16] == b"IHDR", data[:32]
    return struct.unpack(">II", data[16:24])


def code_in(runtime):
    _, sid = agentd().create(runtime=runtime, bundle=python_data_bundle())
    sid = str(sid)
    try:
        contexts_in_sandbox(runtime, sid)
    finally:
        # Also when something failed: a sandbox left running would be adopted by the next
        # test's agentd and counted against its limits.
        agentd().manager().DeleteSandbox(sid, timeout=60)


def contexts_in_sandbox(runtime, sid):
    first = client(sid)
    try:
        # State in the default context: the image has no Python, the bundle's kernel runs.
        items = run_ok(first, "x = 1\nimport sys; print(sys.executable)")
        assert text_of(items).startswith("/nix/"), (runtime, items)
        items = run_ok(first, "x + 1")
        assert main_result(items)["text/plain"] == "2", (runtime, items)
        assert [i["execution_count"] for i in items if i["type"] == "execution_count"] == [2], (runtime, items)

        # A figure comes back as a PNG of the size asked for (no tight bounding box: the
        # figure's own size at its dpi).
        items = run_ok(first, "\n".join([
            "%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}",
            "import matplotlib.pyplot as plt",
            "fig = plt.figure(figsize=(4, 3), dpi=100)",
            "plt.plot([1, 2, 3], [1, 4, 9])",
            "plt.show()"]), wait=120)
        images = [i["data"]["image/png"] for i in items if i["type"] == "result" and "image/png" in i["data"]]
        assert len(images) == 1, (runtime, items)
        assert isinstance(images[0], bytes) and png_size(images[0]) == (400, 300), (runtime, png_size(images[0]))

        # A DataFrame has an HTML form beside its text.
        items = run_ok(first, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", wait=120)
        data = main_result(items)
        assert "<table" in data["text/html"] and "a" in data["text/plain"], (runtime, data)

        # An endless loop ends at its timeout with KeyboardInterrupt; the context keeps its state.
        items, ev, m = run(first, "while True: pass", timeout=2)
        errors = [i for i in items if i["type"] == "error"]
        assert ev == "call:end" and errors, (runtime, ev, m, items)
        assert errors[0]["name"] in ("KeyboardInterrupt", "TimeoutError"), (runtime, errors)
        assert main_result(run_ok(first, "x"))["text/plain"] == "1", runtime

        # A context of its own, interrupted from a second client while the first waits.
        ctx = first.call("code::create_context", language="python", cwd="/tmp", timeout=60)
        assert text_of(run_ok(first, "import os; print(os.getcwd())", context=ctx)) == "/tmp\n", runtime
        # Two contexts do not share variables.
        items, ev, m = run(first, "x", context=ctx)
        assert [i["name"] for i in items if i["type"] == "error"] == ["NameError"], (runtime, items)

        second = client(sid)
        try:
            call_id = first.start("code::run", shape="stream", args=["import time\nwhile True: time.sleep(0.1)"],
                                  kwargs={"context": ctx})
            for _ in range(200):
                listed = {c["id"]: c for c in second.call("code::contexts")}
                if listed[ctx]["running"]:
                    break
                time.sleep(0.05)
            assert listed[ctx]["running"], (runtime, listed)
            second.call("code::interrupt", ctx)
            ev, m = first.terminal(call_id, 30)
            errors = [i for i in first.items(call_id) if i["type"] == "error"]
            assert ev == "call:end" and [e["name"] for e in errors] == ["KeyboardInterrupt"], (runtime, ev, errors)
        finally:
            second.close()
        assert main_result(run_ok(first, "6 * 7", context=ctx))["text/plain"] == "42", runtime

        # A kernel that exits: an error for that run, a new kernel for the next.
        run_ok(first, "y = 5", context=ctx)
        items, ev, m = run(first, "import os; os._exit(1)", context=ctx)
        assert ev == "call:end" and [i["name"] for i in items if i["type"] == "error"] == ["DeadKernelError"], \
            (runtime, ev, m, items)
        items, ev, m = run(first, "y", context=ctx)
        assert [i["name"] for i in items if i["type"] == "error"] == ["NameError"], (runtime, items)
        assert main_result(run_ok(first, "1 + 1", context=ctx))["text/plain"] == "2", runtime

        # restart: a fresh kernel, the same id.
        run_ok(first, "z = 3", context=ctx)
        first.call("code::restart", ctx, timeout=60)
        items, ev, m = run(first, "z", context=ctx)
        assert [i["name"] for i in items if i["type"] == "error"] == ["NameError"], (runtime, items)

        bad_input(runtime, first, ctx)
    finally:
        first.close()

    # The contexts outlive the client that made them: a new one finds them as they were left.
    third = client(sid)
    try:
        ids = sorted(c["id"] for c in third.call("code::contexts"))
        assert ids == sorted([ctx, "default-python3"]), (runtime, ids)
        assert main_result(run_ok(third, "x"))["text/plain"] == "1", runtime
        third.call("code::delete_context", ctx)
        assert [c["id"] for c in third.call("code::contexts")] == ["default-python3"], runtime
        # The kernel's processes went with the context.
        r = third.call("sandbox::exec", command="ps -o args 2>/dev/null | grep -c '[i]pykernel' || true")
        assert r["output"].strip() == "1", (runtime, r)
    finally:
        third.close()


def bad_input(runtime, c, ctx):
    # An unknown context, code that is not a string, a kernel that is not there.
    _, ev, m = run(c, "1", context="no-such-context")
    assert ev == "call:error" and m["error"]["type"] == "ContextNotFound", (runtime, m)
    call_id = c.start("code::run", shape="stream", args=[42])
    e = c.error(call_id)
    assert e["type"] == "ArgumentError" and "'code'" in e["message"], (runtime, e)
    try:
        c.call("code::create_context", language="cobol", timeout=30)
        raise AssertionError("a context for a kernel that is not there was made")
    except RpcError as e:
        assert e.error["type"] == "KernelNotFound" and "python3" in e.error["message"], (runtime, str(e))

    # 100 MB of output: cut at the cap, flagged, the run ends and the context goes on.
    items, ev, m = run(c, "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))",
                       context=ctx, wait=300, max_output=1 << 20)
    assert ev == "call:end", (runtime, ev, m)
    out = text_of(items)
    notices = [i for i in items if i.get("truncated")]
    assert len(out) <= 1 << 20 and len(notices) == 1, (runtime, len(out), notices)
    assert main_result(run_ok(c, "'still here'", context=ctx))["text/plain"] == "'still here'", runtime

    # A flood of runs on one context: they run in the order they came; past the queue's bound
    # the rest are refused with ContextBusy, none lost or reordered.
    calls = [c.start("code::run", shape="stream", args=[f"import time; time.sleep(0.01); print({n})"],
                     kwargs={"context": ctx}) for n in range(50)]
    done, busy = [], 0
    for n, call_id in enumerate(calls):
        ev, m = c.terminal(call_id, 120)
        if ev == "call:error":
            assert m["error"]["type"] == "ContextBusy", (runtime, m)
            busy += 1
        else:
            assert ev == "call:end", (runtime, ev, m)
            assert text_of(c.items(call_id)) == f"{n}\n", (runtime, n, c.items(call_id))
            done.append(n)
    assert busy > 0 and len(done) >= 32, (runtime, busy, done)
    # The order in which they ran: each printed its number; the kernel's counter rose with them.
    counts = [next(i["execution_count"] for i in c.items(calls[n]) if i["type"] == "execution_count") for n in done]
    assert counts == sorted(counts), (runtime, counts)


E2B_BASE = "agentix-test/e2b-base:1"  # tests/bundle/make-task-images.sh e2b: root and `user` (1000)

# Run by `user`: a ZeroMQ subscriber on every TCP port listening on 127.0.0.1 (but the
# runtime's) and every kernel socket it can reach, for `seconds`; says whether it heard the secret.
EAVESDROPPER = r"""
import glob, sys, time, zmq
secret, seconds = sys.argv[1].encode(), float(sys.argv[2])
ports = set()
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(name).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if f[3] == "0A":
            ports.add(int(f[1].split(":")[1], 16))
ports.discard(8000)
s = zmq.Context().socket(zmq.SUB)
s.setsockopt(zmq.SUBSCRIBE, b"")
for p in sorted(ports):
    s.connect("tcp://127.0.0.1:%d" % p)
for path in glob.glob("/tmp/agentix-kernel-*/kernel-*"):
    s.connect("ipc://" + path)
print("listening on", sorted(ports), flush=True)
end = time.time() + seconds
while time.time() < end:
    if s.poll(200) and any(secret in f for f in s.recv_multipart()):
        print("heard", flush=True)
        sys.exit(0)
print("nothing", flush=True)
"""


def attacks_in(runtime):
    r = subprocess.run([os.path.join(HERE, "..", "bundle", "make-task-images.sh"), "e2b"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _, sid = agentd().create(runtime=runtime, image=E2B_BASE, bundle=python_data_bundle())
    sid = str(sid)
    try:
        c = client(sid)
        try:
            # max_output beyond int64 used to wrap to a negative int64 that lifted the cap.
            for bad in (2**64 - 1, 2**63, -1):
                items, ev, m = run(c, "print('x' * 300)", max_output=bad)
                assert ev == "call:error" and m["error"]["type"] == "ArgumentError", (runtime, bad, ev, m)
                assert "max_output" in m["error"]["message"], (runtime, m)
            assert text_of(run_ok(c, "print('x' * 300)", max_output=10)) == "x" * 10, runtime

            # Root's kernel is up; `user` listens on whatever it can reach while it prints.
            run_ok(c, "secret = 'secret-' + 'b7c1'", wait=120)
            c.call("fs::write", "/tmp/eavesdrop.py", EAVESDROPPER)
            eve = client(sid)
            try:
                call_id = eve.start("sandbox::exec", kwargs={"command": "python3 /tmp/eavesdrop.py secret-b7c1 10",
                                                             "user": "user", "timeout": 60})
                time.sleep(3)  # its subscriptions reach the kernel
                run_ok(c, "import time\nfor i in range(40):\n    print(secret, flush=True)\n    time.sleep(0.1)",
                       wait=60)
                ev, m = eve.terminal(call_id, 60)
                assert ev == "call:result", (runtime, ev, m)
                out = m["value"]["output"]
                assert "listening on" in out, (runtime, out)
                assert out.strip().endswith("nothing"), (runtime, "another account heard root's kernel", out)
            finally:
                eve.close()
        finally:
            c.close()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


@test
def attacks_on_kernels_under_runc():
    attacks_in("runc")


@test
def attacks_on_kernels_under_runsc():
    if "runsc" not in runtimes():
        print("    skipped: dockerd has no runsc")
        return
    attacks_in("runsc")


IMAGE_WITH_PYTHON = "agentix-test/busybox-own-python3:1"

# What a task image's own python3 does when run with the bundle's PYTHONPATH: Debian's
# python3-minimal has no json module, and ipykernel's first import fails.
OWN_PYTHON3 = """#!/bin/sh
echo 'Traceback (most recent call last):' >&2
echo "ModuleNotFoundError: No module named 'json' (the image's own python3 ran: $0)" >&2
exit 1
"""


def image_with_its_own_python3():
    """The busybox image with a python3 of its own at /usr/bin and /usr/local/bin (most task
    images have one), which is not the bundle's."""
    if subprocess.run(["docker", "image", "inspect", IMAGE_WITH_PYTHON], capture_output=True).returncode == 0:
        return IMAGE_WITH_PYTHON
    with tempfile.TemporaryDirectory() as root:
        for d in ("bin", "etc", "tmp", "usr/bin", "usr/local/bin"):
            os.makedirs(os.path.join(root, d))
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
        for applet in ("sh", "ls", "cat", "echo"):
            os.symlink("busybox", os.path.join(root, "bin", applet))
        with open(os.path.join(root, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/sh\n")
        for d in ("usr/bin", "usr/local/bin"):
            path = os.path.join(root, d, "python3")
            with open(path, "w") as f:
                f.write(OWN_PYTHON3)
            os.chmod(path, 0o755)
        tar = subprocess.run(["tar", "-C", root, "-c", "."], capture_output=True, check=True).stdout
        subprocess.run(["docker", "import", "-", IMAGE_WITH_PYTHON], input=tar, capture_output=True, check=True)
    return IMAGE_WITH_PYTHON


def own_python3_in(runtime):
    """A bundle's kernel starts on a task image that has a python3 of its own (issue 46: the
    kernelspec's /usr/bin/python3 ran the image's, which failed with the bundle's packages)."""
    _, sid = agentd().create(runtime=runtime, image=image_with_its_own_python3(), bundle=python_data_bundle())
    sid = str(sid)
    try:
        c = client(sid)
        try:
            assert main_result(run_ok(c, "6 * 7", wait=120))["text/plain"] == "42", runtime
            items = run_ok(c, "import sys; print(sys.executable)")
            assert text_of(items).startswith("/nix/"), (runtime, items)
            # The image's python3 stays the image's for the caller's own commands by path.
            r = c.call("sandbox::exec", command="/usr/bin/python3; echo rc=$?")
            assert "the image's own python3 ran" in r["output"] and "rc=1" in r["output"], (runtime, r)
        finally:
            c.close()
    finally:
        agentd().manager().DeleteSandbox(sid, timeout=60)


@test
def a_task_image_with_its_own_python3_under_runc():
    own_python3_in("runc")


@test
def a_task_image_with_its_own_python3_under_runsc():
    if "runsc" not in runtimes():
        print("    skipped: dockerd has no runsc")
        return
    own_python3_in("runsc")


@test
def code_contexts_under_runc():
    code_in("runc")


@test
def code_contexts_under_runsc():
    if "runsc" not in runtimes():
        print("    skipped: dockerd has no runsc")
        return
    code_in("runsc")


if __name__ == "__main__":
    try:
        main()
    finally:
        if AGENTD:
            AGENTD.stop()
        remove_python_data_carriers()
        cleanup()
