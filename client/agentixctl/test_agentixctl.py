#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentixctl end to end: the real binary against a real agentix-server.

Usage: test_agentixctl.py [TEST...]   (AGENTIXCTL, AGENTIX_SERVER and AGENTIXCTL_MAN set by meson)

Each test states what a user of the command line relies on: exact output and exit statuses,
live streaming, terminals, byte-exact copies, one-line errors with documented exit codes."""

import hashlib
import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import fcntl
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/interop"))
from harness import RssWatch, Server, free_port, main, test, wait_until  # noqa: E402

CTL = os.environ.get("AGENTIXCTL") or sys.exit("set AGENTIXCTL to the agentixctl binary")
MAN = os.environ.get("AGENTIXCTL_MAN") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "../../man/agentixctl.1")
TOKEN = "test-token-4d1f"

_server = None


def server():
    """One server for the tests that do not need their own (started on first use)."""
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = Server(env={"AGENTIX_TOKEN": TOKEN, "SHELL": "/bin/sh"})
    return _server


def ctl(*args, input=None, env=None, timeout=120, url=True, check_rc=None):
    """Run agentixctl with the test server's URL and token; returns CompletedProcess."""
    cmd = [CTL]
    if url:
        cmd += ["--url", server().url, "--token", TOKEN]
    cmd += list(args)
    e = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")}
    e.update(env or {})
    p = subprocess.run(cmd, input=input, capture_output=True, env=e, timeout=timeout)
    if check_rc is not None:
        assert p.returncode == check_rc, f"{args}: rc {p.returncode} != {check_rc}; stderr: {p.stderr!r}"
    return p


def one_line_error(p, rc, *fragments):
    """The failure shape every command promises: exit status rc, one stderr line, our prefix."""
    err = p.stderr.decode()
    assert p.returncode == rc, f"rc {p.returncode} != {rc}; stderr: {err!r}"
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("agentixctl: "), err
    for f in fragments:
        assert f in err, f"{f!r} not in {err!r}"
    return err


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_digest(root):
    """{relative path: sha256 or 'dir'} of a local tree."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out[rel] = "dir"
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.normpath(os.path.join(rel, n))] = sha256(p)
    return out


def remote_tmpdir():
    p = ctl("exec", "--", "mktemp", "-d", check_rc=0)
    return p.stdout.decode().strip()


# ---- exec ------------------------------------------------------------------------------------


@test
def exec_output_and_status():
    p = ctl("exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert p.returncode == 3, p
    assert p.stdout == b"out\n" and p.stderr == b"err\n", p
    assert ctl("exec", "--", "true").returncode == 0
    # Killed by SIGKILL: 128 + 9, the shell convention the server reports.
    p = ctl("exec", "--", "sh", "-c", "kill -9 $$")
    assert p.returncode == 137, p
    # Without "--" the command's own options are still its own.
    p = ctl("exec", "echo", "-n", "x", check_rc=0)
    assert p.stdout == b"x"


@test
def exec_quotes_every_word():
    words = ["a b", "it's", "$HOME", "`id`", "*", "", "x\ny", "FOO=bar", "\\"]
    p = ctl("exec", "--", "printf", "<%s>", *words, check_rc=0)
    assert p.stdout.decode() == "".join(f"<{w}>" for w in words), p.stdout
    # A missing program is the shell's 127, with its message on stderr.
    p = ctl("exec", "--", "no-such-program-xyz")
    assert p.returncode == 127 and b"no-such-program-xyz" in p.stderr, p


@test
def exec_cwd_env_timeout():
    p = ctl("exec", "--cwd=/tmp", "-e", "A=1", "--env", "B=two words", "--", "sh", "-c", 'pwd; echo "$A/$B"',
            check_rc=0)
    assert p.stdout == b"/tmp\n1/two words\n", p.stdout
    t0 = time.time()
    p = ctl("exec", "--timeout=1", "--", "sleep", "30")
    assert p.returncode == 124, p
    assert time.time() - t0 < 10
    assert b"timed out" in p.stderr, p.stderr
    one_line_error(ctl("exec", "--cwd=relative", "--", "true"), 64, "absolute")
    one_line_error(ctl("exec", "--cwd=/no/such/dir", "--", "true"), 1, "/no/such/dir")


@test
def exec_streams_live():
    """The first line arrives while the command is still running."""
    proc = subprocess.Popen([CTL, "--url", server().url, "--token", TOKEN, "exec", "--", "sh", "-c",
                             "echo first; sleep 4; echo second"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.time()
    first = proc.stdout.readline()
    assert first == b"first\n", first
    assert time.time() - t0 < 3, "output was not streamed"
    assert proc.stdout.read() == b"second\n"
    assert proc.wait(10) == 0


@test
def exec_stdin_interactive():
    p = ctl("exec", "-i", "--", "tr", "a-z", "A-Z", input=b"hello\n" * 1000, check_rc=0)
    assert p.stdout == b"HELLO\n" * 1000
    blob = os.urandom(3 * 1024 * 1024 + 17)
    p = ctl("exec", "-i", "--", "sh", "-c", "cat; exit 4", input=blob)
    assert p.returncode == 4 and p.stdout == blob, (p.returncode, len(p.stdout))
    # Stdin from a regular file (epoll cannot watch it).
    with tempfile.TemporaryFile() as f:
        f.write(b"from a file\n")
        f.seek(0)
        r = subprocess.run([CTL, "--url", server().url, "--token", TOKEN, "exec", "-i", "--", "cat"], stdin=f,
                           capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == b"from a file\n", r
    # A slow reader: a file on stdin travels as the call's argument, fed at the command's pace.
    with tempfile.TemporaryFile() as f:
        blob = os.urandom(20 << 20)
        f.write(blob)
        f.seek(0)
        r = subprocess.run([CTL, "--url", server().url, "--token", TOKEN, "exec", "-i", "--", "sh", "-c",
                            "sleep 1; sha256sum"], stdin=f, capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest(), r
    # A pipe streams through the inbox, in chunks that keep a fast reader fed.
    blob = os.urandom(40 << 20)
    p = ctl("exec", "-i", "--", "sha256sum", input=blob, check_rc=0)
    assert p.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest()
    # Without -i, the command reads nothing.
    p = ctl("exec", "--", "cat", input=b"ignored", check_rc=0)
    assert p.stdout == b""


@test
def exec_stdin_flow_control():
    """A pipe into a command that reads slowly: agentixctl stops reading while the call's inbox is
    full, so the producer waits (bounded memory), and every byte arrives — no InboxOverflow."""
    r = subprocess.run(["/bin/sh", "-c", f"yes | head -c 50000000 | {CTL} --url {server().url} --token {TOKEN} "
                        "exec -i -- sh -c 'sleep 2; wc -c'"], capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"50000000\n" and r.stderr == b"", r

    # The producer is held back while the command sleeps: what it gets to write is what the
    # window, the client's queue and a chunk or two hold (~34 MiB), not all of it.
    proc = subprocess.Popen([CTL, "--url", server().url, "--token", TOKEN, "exec", "-i", "--", "sh", "-c",
                             "sleep 3; sha256sum"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    blob = os.urandom(96 << 20)
    written = [0]

    def produce():
        view = memoryview(blob)
        for i in range(0, len(blob), 1 << 16):
            proc.stdin.write(view[i:i + (1 << 16)])
            written[0] = i + (1 << 16)
        proc.stdin.close()

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(2)
    held_back = written[0]
    out = proc.stdout.read()  # (not communicate(): the thread still writes stdin)
    t.join(120)
    err = proc.stderr.read()
    proc.wait(60)
    assert held_back < 48 << 20, f"{held_back} bytes written while the command slept"
    assert proc.returncode == 0 and out.split()[0].decode() == hashlib.sha256(blob).hexdigest(), (proc.returncode, err)

    # SIGINT still reaches a command whose input waits behind a full window: the signal item
    # goes ahead of the waiting stdin (the command takes 1 MB a second, ~30 MB wait).
    proc = subprocess.Popen(["/bin/sh", "-c", f"yes | {CTL} --url {server().url} --token {TOKEN} exec -i -- "
                             "sh -c 'trap \"echo INT; exit 3\" INT; echo started; while :; do head -c 1000000 >/dev/null; sleep 1; done'"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline() == b"started\n"
    time.sleep(1)
    ctl_pid = subprocess.run(["pgrep", "-s", str(proc.pid), "-x", "agentixctl"], capture_output=True).stdout.split()
    t0 = time.time()
    os.kill(int(ctl_pid[0]), signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    # (The outer `sh -c` of the sandbox dies of the SIGINT too: 130.)
    assert out == b"INT\n" and proc.returncode == 130, (out, err, proc.returncode)
    assert time.time() - t0 < 5, time.time() - t0


@test
def exec_json():
    p = ctl("--json", "exec", "--", "sh", "-c", "echo o; echo e >&2; printf '\\377'; exit 5")
    assert p.returncode == 5, p
    j = json.loads(p.stdout)
    assert j["exit_code"] == 5 and j["stderr"] == "e\n" and not j["timed_out"] and not j["truncated"], j
    assert j["stdout"] == {"$bytes": "bwr/"}, j  # "o\n\xff" is not UTF-8: bytes
    p = ctl("exec", "--json", "--max-output=3", "--", "echo", "abcdef")
    j = json.loads(p.stdout)
    assert j["stdout"] == "abc" and j["truncated"], j


@test
def exec_sigint_cancels():
    proc = subprocess.Popen([CTL, "--url", server().url, "--token", TOKEN, "exec", "--", "sh", "-c",
                             "echo started; sleep 60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"started\n"
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 130
    assert time.time() - t0 < 5


@test
def exec_over_polling_and_env_config():
    p = ctl("--transport=polling", "exec", "--", "echo", "polled", check_rc=0)
    assert p.stdout == b"polled\n"
    # AGENTIX_URL / AGENTIX_TOKEN instead of options.
    p = ctl("exec", "--", "echo", "env", url=False, env={"AGENTIX_URL": server().url, "AGENTIX_TOKEN": TOKEN},
            check_rc=0)
    assert p.stdout == b"env\n"
    with tempfile.NamedTemporaryFile("w") as f:
        f.write(TOKEN + "\n")
        f.flush()
        p = ctl("--url", server().url, f"--token-file={f.name}", "exec", "--", "echo", "file", url=False, check_rc=0)
        assert p.stdout == b"file\n"


# ---- shell -----------------------------------------------------------------------------------


class Pty:
    """agentixctl on a pseudo-terminal of our own, like a person at a terminal."""

    def __init__(self, argv, rows=30, cols=100):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.set_size(rows, cols)
        self.out = b""

    def set_size(self, rows, cols):
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.fd, data)

    def expect(self, pattern, timeout=10):
        rx = re.compile(pattern)
        deadline = time.time() + timeout
        while True:
            m = rx.search(self.out)
            if m:
                self.out = self.out[m.end():]
                return m
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; got {self.out[-500:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"EOF waiting for {pattern!r}; got {self.out[-500:]!r}")
                self.out += chunk

    def wait(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                try:
                    while os.read(self.fd, 65536):
                        pass
                except OSError:
                    pass
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:
                if select.select([self.fd], [], [], 0.05)[0]:
                    self.out += os.read(self.fd, 65536)
            except OSError:
                pass
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("agentixctl did not exit")


@test
def shell_interactive():
    t = Pty([CTL, "--url", server().url, "--token", TOKEN, "shell"], rows=30, cols=100)
    t.expect(rb"[#$] ")  # the login shell's prompt
    # Markers are computed by the remote shell, so the echo of what we type never matches.
    t.send(b"echo READY$((40+2))\r")
    t.expect(rb"READY42")
    t.send(b"stty size\r")
    t.expect(rb"30 100")
    # A window size change reaches the remote terminal (SIGWINCH → resize).
    t.set_size(40, 120)
    time.sleep(0.5)
    t.send(b"stty size\r")
    t.expect(rb"40 120")
    # Ctrl-C interrupts the remote foreground program, not agentixctl.
    t.send(b"sleep 30\r")
    time.sleep(1)
    t0 = time.time()
    t.send(b"\x03")
    t.send(b"echo BACK$((1+2))\r")
    t.expect(rb"BACK3", timeout=5)
    assert time.time() - t0 < 5
    t.send(b"exit 7\r")
    assert t.wait() == 7


@test
def shell_session_piped_and_on_a_terminal():
    """shell --session=NAME: a persistent session, from a script (stdin as one run, its status
    ours) and from a terminal (a line at a time; Ctrl-C interrupts the command there, Ctrl-D
    detaches and the session goes on), then --close."""
    name = f"s{os.getpid()}"
    p = ctl("shell", f"--session={name}", input=b"cd /tmp && export AGX_CTL=9\necho first\n", check_rc=0)
    assert p.stdout == b"first\n", p.stdout
    p = ctl("shell", f"--session={name}", input=b"echo $AGX_CTL; pwd\nfalse\n", check_rc=1)
    assert p.stdout == b"9\n/tmp\n", p.stdout

    t = Pty([CTL, "--url", server().url, "--token", TOKEN, "shell", f"--session={name}"])
    t.expect(rb"Attached to session")
    t.expect(name.encode() + rb"\$ ")
    t.send(b"echo T$((2+3)); printf no-newline\r")
    t.expect(rb"T5\r?\nno-newline")
    t.expect(name.encode() + rb"\$ ")
    t.send(b"sleep 30; echo not-shown\r")
    time.sleep(1)
    t.send(b"\x03")  # Ctrl-C: the command there stops, the session and agentixctl go on
    t.expect(name.encode() + rb"\$ ", timeout=20)
    t.send(b"echo $AGX_CTL \\\r")
    t.expect(rb"> ")
    t.send(b"more\r")
    t.expect(rb"9 more")
    t.send(b"\x04")  # Ctrl-D: detach
    t.expect(rb"Detached from session")
    assert t.wait() == 0
    assert b"not-shown" not in t.out

    p = ctl("shell", f"--session={name}", input=b"echo still $AGX_CTL\n", check_rc=0)
    assert p.stdout == b"still 9\n", p.stdout
    ctl("shell", f"--session={name}", "--close", check_rc=0)
    p = ctl("shell", f"--session={name}", "--close", check_rc=1)
    assert b"SessionNotFound" in p.stderr, p.stderr
    p = ctl("shell", "--session=bad name", check_rc=64)


@test
def code_contexts():
    """code: state kept between runs (default context and a new one), output and the last
    line's value printed, a figure saved as a PNG file, an exception's traceback on stderr
    (no colours off a terminal) and status 1, --timeout, --contexts, --delete-context, and
    usage errors."""
    with tempfile.TemporaryDirectory() as d:
        p = ctl("code", "-c", "x = 20\nprint('out')\nx + 1", check_rc=0)
        assert p.stdout == b"out\n21\n", p.stdout
        p = ctl("code", input=b"x * 2\n", check_rc=0)
        assert p.stdout == b"40\n", p.stdout
        figure = ("import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
                  "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1), dpi=50)\nplt.plot([1, 2])\nplt.show()")
        p = ctl("code", f"--output-dir={d}", "-c", figure, check_rc=0)
        saved = os.path.join(d, "agentix-code-1.png")
        assert p.stdout.decode().startswith(f"[image/png saved to {saved}, "), p.stdout
        with open(saved, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        # A kernel that cannot start: its whole error (a Python traceback) under the error line.
        ks = os.path.join(d, "kernels", "broken")
        os.makedirs(ks)
        with open(os.path.join(ks, "kernel.json"), "w") as f:
            json.dump({"argv": ["/bin/sh", "-c", "echo 'Traceback (most recent call last):' >&2; "
                                                 "echo '  File \"x\", line 1' >&2; echo 'ImportError: why' >&2; exit 1",
                                "{connection_file}"], "language": "broken", "display_name": "broken"}, f)
        p = ctl("code", "--new-context", "--language=broken", f"--env=JUPYTER_PATH={d}", check_rc=1)
        err = p.stderr.decode()
        assert "exited while starting: Traceback (most recent call last):" in err and \
            '\n      File "x", line 1\n' in err and "\n    ImportError: why\n" in err, err
        # Without --output-dir: a directory of its own under TMPDIR (0700), printed; nothing in
        # the current directory (a checkout collected agentix-code-1.png).
        tmp = os.path.join(d, "tmp")
        os.mkdir(tmp)
        p = subprocess.run([CTL, "--url", server().url, "--token", TOKEN, "code", "-c", figure], cwd=tmp,
                           capture_output=True, env=dict(os.environ, TMPDIR=tmp), timeout=120)
        assert p.returncode == 0, p.stderr
        m = re.match(r"\[image/png saved to (\S+), \d+ bytes\]", p.stdout.decode())
        assert m and os.path.dirname(os.path.dirname(m.group(1))) == tmp, p.stdout
        made = os.path.dirname(m.group(1))
        assert os.path.basename(made).startswith("agentix-code-") and os.stat(made).st_mode & 0o777 == 0o700
        assert os.listdir(tmp) == [os.path.basename(made)], os.listdir(tmp)
        with open(m.group(1), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        p = ctl("code", "-c", "1/0", check_rc=1)
        err = p.stderr.decode()
        assert "ZeroDivisionError" in err and "\033[" not in err, err

        ctx = ctl("code", "--new-context", "--cwd=/tmp", check_rc=0).stdout.decode().strip()
        p = ctl("code", f"--context={ctx}", "-c", "import os; os.getcwd()", check_rc=0)
        assert p.stdout == b"'/tmp'\n", p.stdout
        p = ctl("code", f"--context={ctx}", "-c", "x", check_rc=1)
        assert b"NameError" in p.stderr, p.stderr
        p = ctl("code", f"--context={ctx}", "--timeout=1", "-c", "while True: pass", check_rc=1)
        assert b"TimeoutError" in p.stderr and b"KeyboardInterrupt" in p.stderr, p.stderr
        ctl("code", f"--context={ctx}", "-c", "kept = 1", check_rc=0)
        ctl("code", f"--restart={ctx}", check_rc=0)
        p = ctl("code", f"--context={ctx}", "-c", "kept", check_rc=1)
        assert b"NameError" in p.stderr, p.stderr
        ctl("code", f"--interrupt={ctx}", check_rc=0)  # nothing running: nothing to do
        listed = json.loads(ctl("code", "--contexts", "--json", check_rc=0).stdout)
        assert {c["id"] for c in listed} >= {ctx, "default-python3"}, listed
        ctl("code", f"--delete-context={ctx}", check_rc=0)
        one_line_error(ctl("code", f"--context={ctx}", "-c", "1"), 1, "ContextNotFound")
        one_line_error(ctl("code", "--language=cobol", "-c", "1"), 1, "KernelNotFound")
        one_line_error(ctl("code", "-c", "1", "file.py"), 64)
        one_line_error(ctl("code", "--contexts", "-c", "1"), 64)
        one_line_error(ctl("code", "--context=a", "--language=python", "-c", "1"), 64)
        ctl("code", "--delete-context=default-python3", check_rc=0)


@test
def shell_restores_the_terminal():
    """The terminal mode after agentixctl is the mode before it, on a normal exit and on SIGTERM."""
    script = (f"stty -g; {CTL} --url {server().url} --token {TOKEN} shell; echo RC=$?; stty -g")
    t = Pty(["/bin/sh", "-c", script])
    before = t.expect(rb"([0-9a-f:]{20,})\r?\n").group(1)
    t.send(b"echo IN$((5+5))\r")
    t.expect(rb"IN10")
    t.send(b"exit\r")
    t.expect(rb"RC=0")
    after = t.expect(rb"([0-9a-f:]{20,})\r?\n").group(1)
    assert before == after, (before, after)
    t.wait()

    # (A background job of a non-interactive sh gets /dev/null as stdin unless told otherwise.)
    script = (f"stty -g; {CTL} --url {server().url} --token {TOKEN} shell </dev/tty & p=$!; sleep 2; "
              "kill -TERM $p; wait $p; echo RC=$?; stty -g")
    t = Pty(["/bin/sh", "-c", script])
    before = t.expect(rb"([0-9a-f:]{20,})\r?\n").group(1)
    t.expect(rb"RC=143", timeout=15)
    after = t.expect(rb"([0-9a-f:]{20,})\r?\n").group(1)
    assert before == after, (before, after)
    t.wait()


@test
def exec_tty():
    t = Pty([CTL, "--url", server().url, "--token", TOKEN, "exec", "-it", "--", "sh", "-c",
             "stty size; read x; echo got:$x; exit 9"], rows=20, cols=60)
    t.expect(rb"20 60")
    t.send(b"typed\r")
    t.expect(rb"got:typed")
    assert t.wait() == 9


# ---- call ------------------------------------------------------------------------------------


@test
def call_args_kwargs_bytes():
    p = ctl("call", "sandbox::echo", '[{"$bytes": "AAEC/w=="}]', check_rc=0)
    assert json.loads(p.stdout) == {"$bytes": "AAEC/w=="}
    value = {"a": [1, 2.5, None, True, "x"], "b": {"c": -7}}
    p = ctl("call", "sandbox::echo", json.dumps({"value": value}), check_rc=0)
    assert json.loads(p.stdout) == value
    # Positional and keyword arguments together, in any order.
    d = remote_tmpdir()
    ctl("write", f"{d}/f", input=b"one\ntwo\nthree\n", check_rc=0)
    p = ctl("call", "fs::read", '{"limit": 1}', json.dumps([f"{d}/f"]), check_rc=0)
    r = json.loads(p.stdout)
    assert r["content"] == "     1\tone" and r["next_offset"] == 1, r
    # JSON from stdin.
    p = ctl("call", "sandbox::echo", "-", input=b'[[1, 2]]', check_rc=0)
    assert json.loads(p.stdout) == [1, 2]
    # Non-UTF-8 strings and binary results come back as $bytes.
    p = ctl("call", "fs::download", json.dumps([[f"{d}/f"]]), check_rc=0)
    assert json.loads(p.stdout)[0]["content"] == {"$bytes": "b25lCnR3bwp0aHJlZQo="}


@test
def call_errors():
    err = one_line_error(ctl("call", "nosuch::fn"), 1, "call nosuch::fn")
    assert "NoSuchCallable" in err or "nosuch" in err, err
    one_line_error(ctl("call", "sandbox::echo", "[1"), 64, "invalid JSON")
    one_line_error(ctl("call", "sandbox::echo", "5"), 64, "JSON array")
    one_line_error(ctl("call", "sandbox::echo", '[{"$bytes": "!!"}]'), 64, "base64")
    one_line_error(ctl("call", "echo"), 64, "MODULE::FUNCTION")
    # A deadline the server enforces: exit status 75 (a timeout).
    p = ctl("call", "--deadline=0.5", "sandbox::exec", '{"command": "sleep 10"}')
    one_line_error(p, 75)


@test
def call_stream_and_bidi():
    p = ctl("call", "--stream", "sandbox::exec", '{"command": "printf ab; printf cd >&2"}', check_rc=0)
    items = [json.loads(l) for l in p.stdout.splitlines()]
    out = b"".join(__import__("base64").b64decode(i["data"]["$bytes"]) for i in items if i.get("stream") == "stdout")
    assert out == b"ab", items
    assert items[-1]["exit_code"] == 0, items
    inbox = b'{"stdin": {"$bytes": "aGVsbG8="}}\n\n{"stdin": " world"}\n'
    p = ctl("call", "--bidi", "sandbox::exec", '{"command": "cat"}', input=inbox, check_rc=0)
    items = [json.loads(l) for l in p.stdout.splitlines()]
    data = b"".join(__import__("base64").b64decode(i["data"]["$bytes"]) for i in items if "data" in i)
    assert data == b"hello world", items
    assert items[-1]["exit_code"] == 0
    one_line_error(ctl("call", "--bidi", "sandbox::exec", '{"command": "cat"}', input=b"{nope\n"), 64, "line 1")


# ---- cp --------------------------------------------------------------------------------------


def make_tree(root, n_files=200):
    """200 files over nested directories: text, binary (all byte values), empty, an
    executable, an empty directory."""
    os.makedirs(root)
    for i in range(n_files):
        d = os.path.join(root, f"d{i % 7}", f"sub{i % 3}")
        os.makedirs(d, exist_ok=True)
        name = os.path.join(d, f"file{i}.bin" if i % 2 else f"file{i}.txt")
        with open(name, "wb") as f:
            if i % 2:
                f.write(bytes(range(256)) * (i % 5) + os.urandom(i * 97))
            elif i % 10 == 0:
                pass  # empty
            else:
                f.write((f"line {i}\n" * (i + 1)).encode())
    with open(os.path.join(root, "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(root, "run.sh"), 0o755)
    os.makedirs(os.path.join(root, "empty", "deeper"))
    with open(os.path.join(root, ".hidden"), "wb") as f:
        f.write(b"\x00secret\x00")


@test
def cp_file_up_and_down():
    d = remote_tmpdir()
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "blob")
        with open(src, "wb") as f:
            f.write(os.urandom(1 << 20) + b"\x00\r\n\xff")
        ctl("cp", src, f":{d}/blob", check_rc=0)
        # Into an existing directory: under the source's name.
        ctl("cp", src, f":{d}/", check_rc=0)
        p = ctl("exec", "--", "sh", "-c", f"sha256sum {d}/blob | cut -d' ' -f1", check_rc=0)
        assert p.stdout.decode().strip() == sha256(src)
        back = os.path.join(local, "back")
        ctl("cp", f":{d}/blob", back, check_rc=0)
        assert sha256(back) == sha256(src)
        # Download into an existing local directory.
        os.mkdir(os.path.join(local, "into"))
        ctl("cp", f":{d}/blob", os.path.join(local, "into"), check_rc=0)
        assert sha256(os.path.join(local, "into", "blob")) == sha256(src)


@test
def cp_tree_up_and_down():
    d = remote_tmpdir()
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "tree")
        make_tree(src)
        want = tree_digest(src)
        assert sum(1 for v in want.values() if v != "dir") == 202

        # DST does not exist: it becomes the copy. Small batches: many calls in flight.
        p = ctl("--json", "cp", "--batch-size=65536", "--jobs=3", src, f":{d}/up", check_rc=0)
        summary = json.loads(p.stdout)
        assert summary["files"] == 202 and summary["failed"] == 0, summary
        p = ctl("exec", "--cwd", f"{d}/up", "--", "sh", "-c",
                "find . -type f | sort | xargs sha256sum; find . -type d -empty; test -x run.sh && echo EXEC",
                check_rc=0)
        lines = p.stdout.decode().splitlines()
        remote = {l.split("  ", 1)[1][2:]: l.split("  ", 1)[0] for l in lines if "  ./" in l}
        assert remote == {k: v for k, v in want.items() if v != "dir"}, "remote tree differs"
        assert "./empty/deeper" in lines and "EXEC" in lines, lines

        # DST exists: the directory goes inside it; SRC/. copies the contents.
        ctl("cp", src, f":{d}/up", check_rc=0)
        ctl("exec", "--", "test", "-f", f"{d}/up/tree/run.sh", check_rc=0)
        ctl("exec", "--", "mkdir", f"{d}/contents", check_rc=0)
        ctl("cp", src + "/.", f":{d}/contents", check_rc=0)
        ctl("exec", "--", "test", "-f", f"{d}/contents/run.sh", check_rc=0)

        # Back down: byte-exact, empty directories included.
        down = os.path.join(local, "down")
        ctl("cp", f":{d}/up", down, check_rc=0)
        got = tree_digest(down)
        got.pop("tree", None)
        got = {k: v for k, v in got.items() if not k.startswith("tree/")}
        assert got == want, set(got.items()) ^ set(want.items())


@test
def cp_symlinks_and_special_files():
    """Links to files travel as files; links to directories and FIFOs are skipped with a note,
    and the copy still succeeds."""
    d = remote_tmpdir()
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "s")
        os.makedirs(os.path.join(src, "dir"))
        with open(os.path.join(src, "dir", "real"), "w") as f:
            f.write("real\n")
        os.symlink("dir/real", os.path.join(src, "link"))
        os.symlink("dir", os.path.join(src, "dirlink"))
        os.symlink("nowhere", os.path.join(src, "dangling"))
        os.mkfifo(os.path.join(src, "fifo"))
        p = ctl("cp", src, f":{d}/s", check_rc=0)
        notes = p.stderr.decode()
        assert notes.count("\n") == 3 and "dirlink" in notes and "dangling" in notes and "fifo" in notes, notes
        p = ctl("exec", "--cwd", f"{d}/s", "--", "sh", "-c", "cat link; test -L link || echo notlink; ls", check_rc=0)
        assert p.stdout.decode().split() == ["real", "notlink", "dir", "link"], p.stdout
        assert ctl("-q", "cp", src, f":{d}/q", check_rc=0).stderr == b""

        # Down: the same rules for links in the sandbox.
        ctl("exec", "--cwd", f"{d}/s", "--", "sh", "-c", "ln -s dir dirlink && ln -s dir/real link2 && mkfifo fifo",
            check_rc=0)
        down = os.path.join(local, "down")
        p = ctl("cp", f":{d}/s", down, check_rc=0)
        assert "dirlink" in p.stderr.decode() and "fifo" in p.stderr.decode(), p.stderr
        assert sorted(os.listdir(down)) == ["dir", "link", "link2"], os.listdir(down)
        with open(os.path.join(down, "link2")) as f:
            assert f.read() == "real\n"


@test
def cp_large_file_in_parts():
    """A file above the batch size is streamed both ways (fs::write_stream, fs::read_stream)."""
    d = remote_tmpdir()
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "big")
        with open(src, "wb") as f:
            for _ in range(140):
                f.write(os.urandom(1 << 20))
            f.write(b"tail")
        ctl("-q", "cp", src, f":{d}/big", check_rc=0, timeout=600)
        p = ctl("exec", "--", "sh", "-c", f"sha256sum {d}/big | cut -d' ' -f1; ls {d}", check_rc=0)
        out = p.stdout.decode().split()
        assert out[0] == sha256(src) and out[1:] == ["big"], out  # no parts left behind
        back = os.path.join(local, "back")
        ctl("-q", "cp", f":{d}/big", back, check_rc=0, timeout=600)
        assert sha256(back) == sha256(src)


@test
def cp_progress_on_a_terminal():
    d = remote_tmpdir()
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "tree")
        os.makedirs(src)
        for i in range(40):
            with open(os.path.join(src, f"f{i}"), "wb") as f:
                f.write(os.urandom(2 << 20))
        srv = server()
        t = Pty([CTL, "--url", srv.url, "--token", TOKEN, "cp", "--batch-size=1048576", "--jobs=1", src,
                 f":{d}/p"])
        # The bar appears only for a transfer that lasts (over 0.3 s); a fast machine copies 80 MiB
        # sooner. Stall the server for a moment, as a slow network would.
        time.sleep(0.05)
        os.kill(srv.proc.pid, signal.SIGSTOP)
        time.sleep(0.6)
        os.kill(srv.proc.pid, signal.SIGCONT)
        t.expect(rb"\d+% \[[#.]+\] .*MiB/s .*files", timeout=60)
        t.expect(rb"Copied 40 files", timeout=120)
        assert t.wait(60) == 0


@test
def cp_errors():
    with tempfile.TemporaryDirectory() as local:
        one_line_error(ctl("cp", os.path.join(local, "missing"), ":/tmp/x"), 74, "missing", "No such file")
        one_line_error(ctl("cp", ":/no/such/remote", os.path.join(local, "x")), 1, "/no/such/remote")
        one_line_error(ctl("cp", "a", "b"), 64, "remote")
        one_line_error(ctl("cp", ":/a", ":/b"), 64, "remote")
        one_line_error(ctl("cp", os.path.join(local), ":relative"), 64, "absolute")
        one_line_error(ctl("cp", local, "sb1:/tmp"), 64, "agentd")


@test
def cp_into_a_missing_directory_follows_docker_cp_unless_parents():
    """docker cp fails when DST's directory does not exist; -p/--parents makes it."""
    with tempfile.TemporaryDirectory() as local:
        src = os.path.join(local, "f")
        with open(src, "w") as f:
            f.write("hello\n")
        d = remote_tmpdir()
        # Upload: nothing is made, one line says why.
        one_line_error(ctl("cp", src, f":{d}/no/such/x"), 1, f"'{d}/no/such' is not a directory", "-p")
        one_line_error(ctl("cp", src, f":{d}/newdir/"), 1, "does not exist", "-p")
        one_line_error(ctl("cp", local, f":{d}/no/such/tree"), 1, f"'{d}/no/such' is not a directory")
        assert ctl("exec", "--", "ls", "-A", d, check_rc=0).stdout == b""
        # With -p (or --parents) the parents are made.
        ctl("-q", "cp", "-p", src, f":{d}/no/such/x", check_rc=0)
        ctl("-q", "cp", "--parents", local, f":{d}/a/b/tree", check_rc=0)
        back = os.path.join(local, "back")
        ctl("-q", "cp", f":{d}/no/such/x", back, check_rc=0)
        assert open(back).read() == "hello\n"
        ctl("-q", "cp", f":{d}/a/b/tree/f", os.path.join(local, "again"), check_rc=0)
        # Download: the same rule on this side.
        one_line_error(ctl("cp", f":{d}/no/such/x", os.path.join(local, "not/here/x")), 1,
                       "not/here' is not a directory")
        assert not os.path.exists(os.path.join(local, "not"))
        ctl("-q", "cp", "-p", f":{d}/no/such/x", os.path.join(local, "not/here/x"), check_rc=0)
        assert open(os.path.join(local, "not/here/x")).read() == "hello\n"


# ---- read, write, edit, ls, grep, glob --------------------------------------------------------


@test
def fs_commands_human_and_json():
    d = remote_tmpdir()
    p = ctl("write", f"{d}/a.txt", input=b"alpha\nbeta\ngamma beta\n", check_rc=0)
    assert p.stdout == f"Wrote 22 bytes to {d}/a.txt\n".encode(), p.stdout
    one_line_error(ctl("write", f"{d}/a.txt", input=b"x"), 1, "already exists")
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"from file\n")
        f.flush()
        p = ctl("--json", "write", "--overwrite", f"{d}/b.txt", f.name, check_rc=0)
        assert json.loads(p.stdout) == {"path": f"{d}/b.txt", "bytes_written": 10}

    p = ctl("read", f"{d}/a.txt", check_rc=0)
    assert p.stdout == b"     1\talpha\n     2\tbeta\n     3\tgamma beta\n", p.stdout
    p = ctl("read", "--offset=1", "--limit=1", f"{d}/a.txt", check_rc=0)
    assert p.stdout == b"     2\tbeta\n" and b"--offset=2" in p.stderr, p
    j = json.loads(ctl("read", "--json", f"{d}/a.txt", check_rc=0).stdout)
    assert j["total_lines"] == 3 and j["encoding"] == "text" and j["next_offset"] is None, j

    one_line_error(ctl("edit", f"{d}/a.txt", "beta", "BETA"), 1)  # twice: ambiguous
    p = ctl("edit", "--replace-all", f"{d}/a.txt", "beta", "BETA", check_rc=0)
    assert p.stdout == f"Replaced 2 occurrences in {d}/a.txt\n".encode()
    j = json.loads(ctl("--json", "edit", f"{d}/a.txt", "alpha", "ALPHA", check_rc=0).stdout)
    assert j == {"path": f"{d}/a.txt", "occurrences": 1}
    one_line_error(ctl("edit", f"{d}/a.txt", "zeta", "x"), 1)

    ctl("exec", "--", "mkdir", f"{d}/sub", check_rc=0)
    p = ctl("ls", d, check_rc=0)
    lines = p.stdout.decode().splitlines()
    assert [l.split()[-1] for l in lines] == ["a.txt", "b.txt", "sub/"], lines
    assert lines[0].startswith("-rw") and re.match(r"d[-r][-w][-x]", lines[2]), lines
    ctl("exec", "--", "chmod", "0751", f"{d}/b.txt", check_rc=0)
    assert re.search(r"\s22\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+a\.txt$", lines[0]), lines[0]
    j = json.loads(ctl("ls", "--json", d, check_rc=0).stdout)
    assert [(e["path"], e["is_dir"]) for e in j["entries"]] == [(f"{d}/a.txt", False), (f"{d}/b.txt", False),
                                                                 (f"{d}/sub", True)], j
    assert j["entries"][1]["mode"] == 0o751, j
    assert ctl("ls", d, check_rc=0).stdout.decode().splitlines()[1].startswith("-rwxr-x--x "), "ls mode"

    p = ctl("grep", "BETA", d, check_rc=0)
    assert p.stdout.decode() == f"{d}/a.txt:2:BETA\n{d}/a.txt:3:gamma BETA\n", p.stdout
    j = json.loads(ctl("grep", "--json", "-m", "1", "BETA", d, check_rc=0).stdout)
    assert j["matches"] == [{"path": f"{d}/a.txt", "line": 2, "text": "BETA"}], j
    assert ctl("grep", "nothing-matches-this", d, check_rc=0).stdout == b""
    p = ctl("grep", "--glob=b.*", "file", d, check_rc=0)
    assert p.stdout.decode() == f"{d}/b.txt:1:from file\n", p.stdout

    p = ctl("glob", "*.txt", d, check_rc=0)
    assert p.stdout.decode() == f"{d}/a.txt\n{d}/b.txt\n", p.stdout
    j = json.loads(ctl("--json", "glob", "a*", d, check_rc=0).stdout)
    assert [m["path"] for m in j["matches"]] == [f"{d}/a.txt"] and not j["truncated"], j
    # Directories match too: a trailing / in the listing, is_dir in --json.
    assert ctl("glob", "*", d, check_rc=0).stdout.decode() == f"{d}/a.txt\n{d}/b.txt\n{d}/sub/\n"
    j = json.loads(ctl("--json", "glob", "s*", d, check_rc=0).stdout)
    assert [(m["path"], m["is_dir"]) for m in j["matches"]] == [(f"{d}/sub", True)], j


@test
def fs_errors():
    one_line_error(ctl("read", "/no/such/file"), 1, "read: ", "/no/such/file")
    one_line_error(ctl("ls", "/no/such/dir"), 1, "ls: ")
    one_line_error(ctl("read", "relative"), 64, "absolute")
    one_line_error(ctl("write", "/tmp/x", "/no/such/local/file"), 74, "No such file")
    one_line_error(ctl("read"), 64, "PATH")
    one_line_error(ctl("edit", "/tmp/x", "a"), 64)
    one_line_error(ctl("read", "--offset=-1", "/tmp/x"), 64, "--offset")


# ---- connection errors, usage, help -----------------------------------------------------------


@test
def connection_errors():
    one_line_error(ctl("--url=not a url", "ls", url=False), 64, "invalid URL")
    one_line_error(ctl("--url=ftp://x", "ls", url=False), 64, "invalid URL")
    one_line_error(ctl("--url=http://127.0.0.1:99999", "ls", url=False), 64, "invalid URL")
    one_line_error(ctl("ls", url=False), 64, "--url")

    closed = free_port()
    one_line_error(ctl(f"--url=http://127.0.0.1:{closed}", "--token", TOKEN, "ls", url=False), 69,
                   "cannot connect", str(closed))
    one_line_error(ctl("--url", server().url, "--token", "wrong", "ls", url=False), 77, "token was refused")
    one_line_error(ctl("--url", server().url, "ls", url=False), 77, "no token given")
    one_line_error(ctl("--url", server().url, "--token-file=/no/such/token", "ls", url=False), 74, "token file")

    # A server that accepts the connection and never answers: the connect timeout.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        port = s.getsockname()[1]
        t0 = time.time()
        one_line_error(ctl(f"--url=http://127.0.0.1:{port}", "--token", TOKEN, "--timeout=1", "ls", url=False), 75,
                       "timed out")
        assert time.time() - t0 < 15

    # A server that goes away: the next command cannot connect; nothing hangs.
    srv = Server(env={"AGENTIX_TOKEN": TOKEN})
    url = srv.url
    srv.stop()
    one_line_error(ctl("--url", url, "--token", TOKEN, "exec", "--", "true", url=False), 69)


@test
def usage_errors():
    one_line_error(ctl("frobnicate"), 64, "unknown command")
    one_line_error(ctl(), 64, "no command")
    one_line_error(ctl("--bogus", url=False), 64, "--bogus")
    one_line_error(ctl("exec", "--bogus", "--", "true"), 64, "exec", "--bogus")
    one_line_error(ctl("exec", "--timeout"), 64, "needs an argument")
    one_line_error(ctl("exec"), 64, "no command")
    one_line_error(ctl("--transport=carrier-pigeon", "ls", url=False), 64, "transport")


def long_options(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))


@test
def help_for_every_command():
    with open(MAN) as f:
        man = f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fI", "").replace("\\fR", "")
    top = ctl("--help", url=False, check_rc=0).stdout.decode()
    assert ctl("--version", url=False, check_rc=0).stdout.startswith(b"agentixctl ")
    for cmd in ["exec", "shell", "call", "cp", "read", "write", "edit", "ls", "grep", "glob"]:
        assert re.search(rf"^  {cmd}\b", top, re.M), f"{cmd} missing from --help"
        assert re.search(rf'^\.SS "{cmd}\b', man, re.M), f"{cmd} missing from agentixctl(1)"
        h = ctl(cmd, "--help", url=False, check_rc=0).stdout.decode()
        assert h.startswith(f"Usage: agentixctl {cmd}"), h
        assert h == ctl("help", cmd, url=False, check_rc=0).stdout.decode()
        opts = long_options(h)
        assert opts - long_options(man) == set(), f"{cmd}: {opts - long_options(man)} not in the man page"
        assert opts - long_options(top) == set(), f"{cmd}: {opts - long_options(top)} not in agentixctl --help"
    one_line_error(ctl("help", "nope", url=False), 64)


@test
def output_to_a_closed_pipe():
    """`agentixctl … | head -1`: no error message, the SIGPIPE status."""
    d = remote_tmpdir()
    ctl("exec", "--", "sh", "-c", f"for i in $(seq 200000); do echo line $i; done > {d}/many", check_rc=0)
    r = subprocess.run(f"{CTL} --url {server().url} --token {TOKEN} -q read --limit=100000 {d}/many | head -1",
                       shell=True, capture_output=True, timeout=60)
    assert r.stdout.startswith(b"     1\tline 1\n"), r.stdout[:100]
    assert r.stderr == b"", r.stderr
    p = subprocess.run(["/bin/bash", "-c", f"{CTL} --url {server().url} --token {TOKEN} exec -- "
                        "sh -c 'yes | head -c 50000000' | head -c 10 > /dev/null; echo ${PIPESTATUS[0]}"],
                       capture_output=True, timeout=60)
    assert p.stdout.strip() == b"141" and p.stderr == b"", p


# ---- cp with nothing but agentix-server in the sandbox -----------------------------------------


def ctl_at(srv, *args, **kw):
    """agentixctl against a server of the test's own."""
    return ctl("--url", srv.url, "--token", TOKEN, *args, url=False, **kw)


def file_modes(root):
    """{relative path: permission bits} of every file below root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.lstat(p).st_mode & 0o7777
    return out


def temp_files(root):
    """Names below root that look like a write in progress (".#<name>.<random>")."""
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in fs + ds if n.startswith(".#")]


@test
def cp_needs_nothing_in_the_sandbox():
    """cp against a server whose PATH holds no programs at all (so sandbox::exec could not run
    cat, mkdir or chmod) and whose messages hold at most 1 MiB: a tree with an empty directory,
    executable, private, read-only and world-writable files and files larger than one message
    arrives byte-exact with every file's mode, both ways; so do single large files."""
    with Server("--max-message", str(1 << 20), env={"AGENTIX_TOKEN": TOKEN, "PATH": "/nonexistent"}) as srv, \
            tempfile.TemporaryDirectory() as local, tempfile.TemporaryDirectory() as remote:
        # The sandbox has nothing to run: a command is not found.
        p = ctl_at(srv, "exec", "--", "cat", "/dev/null")
        assert p.returncode == 127, (p.returncode, p.stdout, p.stderr)

        src = os.path.join(local, "src")
        files = {
            "bin/tool": (os.urandom(5000), 0o755),
            "bin/script.sh": (b"#!/bin/sh\necho hi\n", 0o750),
            "private.key": (os.urandom(100), 0o600),
            "shared.txt": (b"everyone\n", 0o666),  # not 0644: no umask on the way
            "read-only.txt": (b"ro\n", 0o444),
            "empty-file": (b"", 0o640),
            "data/big.bin": (os.urandom(3 << 20) + b"tail", 0o640),  # several messages' worth
            "huge.bin": (os.urandom(5 << 20), 0o700),
        }
        for i in range(40):
            files[f"data/small/s{i}"] = (os.urandom(i * 1000), 0o644 if i % 2 else 0o604)
        for rel, (data, mode) in files.items():
            path = os.path.join(src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, mode)
        os.makedirs(os.path.join(src, "empty", "deeper"))
        want_modes = {rel: mode for rel, (data, mode) in files.items()}
        assert file_modes(src) == want_modes

        up = os.path.join(remote, "up")
        p = ctl_at(srv, "--json", "cp", "--batch-size=262144", src, ":" + up, check_rc=0, timeout=300)
        summary = json.loads(p.stdout)
        assert summary["files"] == len(files) and summary["failed"] == 0, summary
        assert tree_digest(up) == tree_digest(src), set(tree_digest(up).items()) ^ set(tree_digest(src).items())
        assert file_modes(up) == want_modes, file_modes(up)
        assert os.path.isdir(os.path.join(up, "empty", "deeper"))
        assert temp_files(remote) == [], temp_files(remote)

        # Modes changed in the sandbox come back as they are there.
        os.chmod(os.path.join(up, "shared.txt"), 0o604)
        os.chmod(os.path.join(up, "data", "big.bin"), 0o751)
        down = os.path.join(local, "down")
        p = ctl_at(srv, "--json", "cp", "--batch-size=262144", ":" + up, down, check_rc=0, timeout=300)
        assert json.loads(p.stdout)["files"] == len(files), p.stdout
        assert tree_digest(down) == tree_digest(up)
        assert file_modes(down) == file_modes(up)
        assert file_modes(down)["shared.txt"] == 0o604 and file_modes(down)["data/big.bin"] == 0o751
        assert os.path.isdir(os.path.join(down, "empty", "deeper"))

        # Single files larger than a message, both ways, with their modes.
        one = os.path.join(remote, "one.bin")
        ctl_at(srv, "cp", "--batch-size=262144", os.path.join(src, "huge.bin"), ":" + one, check_rc=0, timeout=300)
        assert sha256(one) == sha256(os.path.join(src, "huge.bin")) and file_modes(remote)["one.bin"] == 0o700
        os.chmod(one, 0o755)
        back = os.path.join(local, "one.bin")
        ctl_at(srv, "cp", "--batch-size=262144", ":" + one, back, check_rc=0, timeout=300)
        assert sha256(back) == sha256(one) and os.stat(back).st_mode & 0o7777 == 0o755
        assert temp_files(remote) == [], temp_files(remote)


@test
def cp_interrupted_leaves_nothing_behind():
    """Ctrl-C in the middle of streaming a large file: agentixctl cancels its calls, the sandbox
    removes the half-written temporary file (the old file stays as it was), a half-downloaded
    local file is removed, and the status is 130."""
    with Server(env={"AGENTIX_TOKEN": TOKEN}) as srv, tempfile.TemporaryDirectory() as local, \
            tempfile.TemporaryDirectory() as remote:
        src = os.path.join(local, "big")
        with open(src, "wb") as f:
            f.write(os.urandom(96 << 20))
        target = os.path.join(remote, "big")
        with open(target, "wb") as f:
            f.write(b"the old content\n")

        def interrupt(argv, started):
            proc = subprocess.Popen([CTL, "--url", srv.url, "--token", TOKEN, "-q"] + argv, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            wait_until(started, timeout=60, what="the transfer to start")
            # Hold the server so that the copy cannot finish meanwhile, then interrupt it.
            os.kill(srv.proc.pid, signal.SIGSTOP)
            try:
                proc.send_signal(signal.SIGINT)
                time.sleep(0.3)
            finally:
                os.kill(srv.proc.pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=60)
            return proc.returncode, err

        # 64 KiB chunks: many items, so the copy is still going when it is interrupted.
        rc, err = interrupt(["cp", "--batch-size=65536", src, ":" + target], lambda: temp_files(remote))
        assert rc == 130 and err == b"", (rc, err)
        wait_until(lambda: temp_files(remote) == [], timeout=30, what="the temporary file to go")
        with open(target, "rb") as f:
            assert f.read() == b"the old content\n"

        # Down: the partial local file goes.
        ctl_at(srv, "cp", src, ":" + target, check_rc=0, timeout=300)
        back = os.path.join(local, "back")
        rc, err = interrupt(["cp", "--batch-size=65536", ":" + target, back],
                            lambda: os.path.exists(back) and os.path.getsize(back) > 0)
        assert rc == 130 and err == b"", (rc, err)
        assert not os.path.exists(back)
        wait_until(lambda: srv.proc.poll() is None, what="the server to stay up")


def small_asan_quarantine():
    """Sanitizer builds keep freed memory in a quarantine (256 MB by default), which would count
    as the server's memory here: make it small. No effect on other builds."""
    opts = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (opts + ":" if opts else "") + "quarantine_size_mb=8"}


@test
def exec_output_flow_control():
    """Output faster than the reader (`exec … | slow`): the command is held back at the reader's
    pace — the server keeps a window per call, not the whole output — and every byte arrives. The
    server used to buffer it all (1 GB RSS) and fail the call after ~670 MB."""
    size = 1000000000
    with Server(env={"AGENTIX_TOKEN": TOKEN, **small_asan_quarantine()}) as srv:
        watch = RssWatch(srv.proc.pid)
        t0 = time.time()
        r = subprocess.run(["/bin/sh", "-c", f"{CTL} --url {srv.url} --token {TOKEN} exec -- "
                            f"sh -c 'head -c {size} /dev/zero' | (sleep 4; wc -c)"],
                           capture_output=True, timeout=120)
        rss = watch.stop()
        assert r.returncode == 0 and r.stdout.strip() == str(size).encode() and r.stderr == b"", r
        assert rss < 200 << 20, f"server VmRSS reached {rss >> 20} MiB"
        assert time.time() - t0 < 60

        # Over polling too (the queue drains with each GET), with the reader paused at the start.
        watch = RssWatch(srv.proc.pid)
        size = 100000000
        r = subprocess.run(["/bin/sh", "-c", f"{CTL} --url {srv.url} --token {TOKEN} --transport=polling exec -- "
                            f"sh -c 'head -c {size} /dev/zero' | (sleep 2; wc -c)"],
                           capture_output=True, timeout=120)
        rss = watch.stop()
        assert r.returncode == 0 and r.stdout.strip() == str(size).encode() and r.stderr == b"", r
        assert rss < 200 << 20, f"server VmRSS reached {rss >> 20} MiB (polling)"


if __name__ == "__main__":
    try:
        main()
    finally:
        if _server is not None:
            _server.stop()
