#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentix-runsc (policy/runsc/agentix-runsc, agentix-runsc(8)).

  test_agentix_runsc.py decision   no container: the choice of network stack read from fake
                                   bundles (AGENTIX_RUNSC_DRY_RUN=1), above all the refusal of
                                   gVisor's stack in the host's network namespace; the flag
                                   later subcommands get; delete's work-around against a fake
                                   runsc
  test_agentix_runsc.py docker     against the running dockerd, whose runtime "runsc" must be
                                   this checkout's wrapper (scripts/dockerd.sh start): gVisor's
                                   stack on a bridge network of the test's own (HTTP from the
                                   host, docker exec, /proc/net/tcp), the host's kernel's without
                                   AGENTIX_CHECKPOINT=1, --network=host and
                                   --network=container:X refused (the host, X keep their
                                   addresses), and a busybox loop checkpointed and restored
                                   three times, then removed

Skips (77) without runsc, without a dockerd, or when dockerd's runsc is not agentix-runsc.
Every container and network the docker mode makes carries the label org.agentix.test.runsc=RUN
and is removed at the end, whatever happened."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import _tests, run_tests, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPER = os.path.normpath(os.path.join(HERE, "..", "..", "policy", "runsc", "agentix-runsc"))
MAKE_IMAGES = os.path.normpath(os.path.join(HERE, "..", "bundle", "make-task-images.sh"))
BUSYBOX = "agentix-test/busybox:1"
RUN = uuid.uuid4().hex[:12]
LABEL = f"org.agentix.test.runsc={RUN}"
UNSHARE = ["unshare", "--mount", "--propagation", "private", "--"]

# ---- decision: no container ----

def dry(*args, cwd=None, env=None):
    """The wrapper's (argv it would exec, its note on standard error)."""
    e = dict(os.environ, AGENTIX_RUNSC_DRY_RUN="1", AGENTIX_RUNSC="/usr/bin/runsc")
    e.update(env or {})
    r = subprocess.run([WRAPPER, *args], capture_output=True, text=True, cwd=cwd, env=e, timeout=30)
    assert r.returncode == 0, (args, r.returncode, r.stderr)
    return r.stdout.splitlines(), r.stderr


def network_of(argv):
    """'sandbox' (under unshare, with the tmpfs) or 'host'; checks the flag's place and the rest."""
    flags = [a for a in argv if a.startswith("--network=")]
    assert flags, argv
    # runsc's last --network= counts: the wrapper's is the last of the global flags.
    net = flags[-1].split("=", 1)[1]
    if net == "sandbox":
        assert argv[:len(UNSHARE)] == UNSHARE, argv
        assert "/proc/sys/net" in argv[len(UNSHARE) + 2], argv
    else:
        assert net == "host", argv
        assert argv[0] == "/usr/bin/runsc", argv
    return net


def bundle(tmp, name, spec):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(spec if isinstance(spec, str) else json.dumps(spec))
    return d


def spec(env=("AGENTIX_CHECKPOINT=1",), namespaces=({"type": "network"},)):
    return {"ociVersion": "1.0.2-dev", "process": {"args": ["/bin/sh"], "env": ["PATH=/bin", *env]},
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, *namespaces]}}


GLOBALS = ["--platform=ptrace", "--root", "/nonexistent/agentix-runsc-test", "--log",
           "/nonexistent/log.json", "--log-format", "json"]


def create(bundle_dir, *extra_globals, sub="create", cid="c1"):
    return dry(*GLOBALS, *extra_globals, sub, "--bundle", bundle_dir, "--pid-file", "/x/pid", cid)


@test
def the_host_network_namespace_always_gets_hostinet():
    """Docker's --network=host (no network namespace in the spec), and a namespace path that is
    the host's: never gVisor's stack, which would take the host's addresses over."""
    with tempfile.TemporaryDirectory() as tmp:
        b = bundle(tmp, "hostnet", spec(namespaces=()))
        argv, note = create(b)
        assert network_of(argv) == "host", (argv, note)
        assert "no network namespace" in note, note
        for path in ("/proc/self/ns/net", f"/proc/{os.getpid()}/ns/net"):
            b = bundle(tmp, f"path{len(os.listdir(tmp))}", spec(namespaces=({"type": "network", "path": path},)))
            argv, note = create(b)
            assert network_of(argv) == "host", (path, argv, note)
            assert "is the host's" in note, note
        # Even with a --network=sandbox among runsc's flags from daemon.json: the wrapper's is last.
        argv, _ = create(bundle(tmp, "hostnet2", spec(namespaces=())), "--network=sandbox")
        assert network_of(argv) == "host", argv


@test
def gvisors_stack_only_with_the_variable_in_a_namespace_of_its_own():
    with tempfile.TemporaryDirectory() as tmp:
        argv, note = create(bundle(tmp, "own", spec()))
        assert network_of(argv) == "sandbox" and note.strip().endswith("netstack"), (argv, note)
        # The order runsc needs: global flags (theirs, then --network), the subcommand, its own.
        i = argv.index("--network=sandbox")
        assert argv[i - len(GLOBALS):i] == GLOBALS and argv[i + 1] == "create" and argv[-1] == "c1", argv
        argv, _ = create(bundle(tmp, "restore", spec()), sub="restore")
        assert network_of(argv) == "sandbox" and "restore" in argv, argv
        for name, s in [("noenv", spec(env=())), ("zero", spec(env=("AGENTIX_CHECKPOINT=0",))),
                        ("overridden", spec(env=("AGENTIX_CHECKPOINT=1", "AGENTIX_CHECKPOINT="))),
                        ("spaced", spec(env=("AGENTIX_CHECKPOINT=1 ",))),
                        ("missingpath", spec(namespaces=({"type": "network", "path": "/nonexistent/ns"},))),
                        ("two", spec(namespaces=({"type": "network"}, {"type": "network"}))),
                        ("badjson", '{"process": {"env": ["AGENTIX_CHECKPOINT=1"'),
                        ("notobject", "[]"),
                        ("badenv", {"process": {"env": "AGENTIX_CHECKPOINT=1"},
                                    "linux": {"namespaces": [{"type": "network"}]}})]:
            argv, note = create(bundle(tmp, name, s))
            assert network_of(argv) == "host", (name, argv, note)
        argv, _ = create(os.path.join(tmp, "nothing-here"))
        assert network_of(argv) == "host", argv
        # A container id that cannot name a file beside runsc's state.
        argv, _ = create(bundle(tmp, "badid", spec()), cid="../x")
        assert network_of(argv) == "host", argv
        # No --bundle: the current directory, as runsc; --bundle=DIR.
        b = bundle(tmp, "cwd", spec())
        argv, _ = dry(*GLOBALS, "create", "c1", cwd=b)
        assert network_of(argv) == "sandbox", argv
        argv, _ = dry("--root=/nonexistent", "--debug", "create", f"--bundle={b}", "c1")
        assert network_of(argv) == "sandbox", argv
        # The dry run wrote nothing.
        assert not os.path.exists("/nonexistent/agentix-runsc-test")


@test
def a_namespace_that_is_there_already_gets_hostinet():
    """A path (Docker's --network=container:NAME): another container's namespace, whose
    addresses gVisor's stack would take over from it."""
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        print("  (skipped: cannot make a network namespace here)")
        return
    # A network namespace of its own (empty: only lo), held by a sleep; the host's stays untouched.
    p = subprocess.Popen(["unshare", "--net", "sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        path = f"/proc/{p.pid}/ns/net"
        for _ in range(100):
            try:
                if os.stat(path).st_ino != os.stat("/proc/self/ns/net").st_ino:
                    break
            except OSError:
                pass
            time.sleep(0.02)
        with tempfile.TemporaryDirectory() as tmp:
            argv, note = create(bundle(tmp, "other", spec(namespaces=({"type": "network", "path": path},))))
            assert network_of(argv) == "host", (argv, note)
            assert "not the container's own" in note, note
    finally:
        p.kill()
        p.wait()


@test
def later_subcommands_follow_the_containers_file():
    with tempfile.TemporaryDirectory() as root:
        open(os.path.join(root, "agentix-netstack-ns1"), "w").close()
        for args in (["start", "ns1"], ["kill", "ns1", "9"], ["delete", "--force", "ns1"],
                     ["checkpoint", "--image-path", "/x", "--work-path", "/y", "ns1"],
                     ["exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/x", "ns1"]):
            argv, _ = dry("--platform=ptrace", "--root", root, "--log", "/x/l", *args)
            assert network_of(argv) == "sandbox", (args, argv)
            assert argv[-len(args):] == args, argv
        argv, _ = dry(f"-root={root}", "state", "ns1")
        assert network_of(argv) == "sandbox", argv
        for args in (["state", "other"], ["start", "ns2"], ["kill", "9", "ns"]):
            argv, _ = dry("--root", root, *args)
            assert network_of(argv) == "host", (args, argv)
        # Another root: another dockerd's containers.
        argv, _ = dry("--root", "/nonexistent", "state", "ns1")
        assert network_of(argv) == "host", argv
        # No subcommand: runsc as it is.
        argv, _ = dry("--version")
        assert argv == ["/usr/bin/runsc", "--version"], argv


FAKE_RUNSC = r"""#!/bin/bash
# A runsc whose delete fails as runsc 20221219's does for a container left paused.
log=$(dirname "$0")/calls
echo "$*" >>"$log"
root=; for a; do case $a in --root=*) root=${a#--root=} ;; esac; done
id=${@: -1}
case " $* " in
*" state "*) printf '{\n  "id": "%s",\n  "status": "%s",\n  "pid": %s\n}\n' "$id" "$FAKE_STATUS" "$FAKE_PID" ;;
*" delete --force "*) rm -f "$root"/*_sandbox:"$id".*; echo "panic: invalid state transition" >&2; exit 2 ;;
*" delete "*) echo "cannot delete container that is not stopped without --force flag" >&2; exit 128 ;;
esac
"""


@test
def delete_of_a_paused_container_without_its_sandbox_succeeds():
    if os.geteuid() != 0:
        print("  (skipped: gVisor's stack runs under unshare --mount, which needs root)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "runsc")
        with open(fake, "w") as f:
            f.write(FAKE_RUNSC)
        os.chmod(fake, 0o755)
        root = os.path.join(tmp, "root")
        os.mkdir(root)

        def attempt(cid, status, pid, netstack=True):
            files = [os.path.join(root, f"{cid}_sandbox:{cid}.{x}") for x in ("state", "lock")]
            for p in files:
                open(p, "w").close()
            if netstack:
                open(os.path.join(root, f"agentix-netstack-{cid}"), "w").close()
            env = dict(os.environ, AGENTIX_RUNSC=fake, FAKE_STATUS=status, FAKE_PID=str(pid))
            env.pop("AGENTIX_RUNSC_DRY_RUN", None)
            r = subprocess.run([WRAPPER, f"--root={root}", "--log-format", "json", "delete", cid],
                               capture_output=True, text=True, env=env, timeout=30)
            return r, [p for p in files if os.path.exists(p)], os.path.exists(
                os.path.join(root, f"agentix-netstack-{cid}"))

        # Paused, its sandbox gone: cleaned up, delete succeeds, the choice's file goes too.
        r, left, marker = attempt("c1", "paused", 999999999)
        assert r.returncode == 0 and not left and not marker, (r, left, marker)
        assert "left paused" in r.stderr, r.stderr
        with open(os.path.join(tmp, "calls")) as f:
            calls = f.read()
        assert "--network=sandbox delete c1" in calls and "delete --force c1" in calls, calls
        # Running (any status but paused): runsc's failure stands, nothing is removed.
        r, left, marker = attempt("c2", "running", 999999999)
        assert r.returncode == 128 and len(left) == 2 and marker, (r, left, marker)
        # Paused with its sandbox alive: the same.
        # (its own process group, killed whole: no sleep left holding the test's output open)
        sandbox = subprocess.Popen(["runsc-sandbox", "-c", "sleep 30; :", "boot", "c3"], executable="/bin/sh",
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            for _ in range(100):
                with open(f"/proc/{sandbox.pid}/cmdline", "rb") as f:
                    if b"c3" in f.read():
                        break
                time.sleep(0.02)
            r, left, marker = attempt("c3", "paused", sandbox.pid, netstack=False)
            assert r.returncode == 128 and len(left) == 2, (r, left)
        finally:
            os.killpg(sandbox.pid, signal.SIGKILL)
            sandbox.wait()


# ---- docker: against the running dockerd ----

def docker(*args, check=True, timeout=120):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {r.stderr.strip()}")
    return r


def timed(what, *args):
    t0 = time.monotonic()
    r = docker(*args)
    print(f"  {what}: {time.monotonic() - t0:.2f} s")
    return r


def sandbox_cmdline(name):
    """The runsc-sandbox process of a running container (Docker's State.Pid under runsc)."""
    pid = docker("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode().split("\0")
    assert argv[0] == "runsc-sandbox", argv
    return argv


def runsc_root(argv):
    return next(a.split("=", 1)[1] for a in argv if a.startswith("--root="))


def http_get(url, deadline=15):
    end = time.monotonic() + deadline
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def host_addresses():
    r = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True)
    return sorted(" ".join(line.split()[1:4]) for line in r.stdout.splitlines())


def run_container(name, *args):
    return docker("run", "-d", "--name", name, "--label", LABEL, "--runtime=runsc", *args).stdout.strip()


def ip_on(name, network):
    return docker("inspect", "--format", f'{{{{(index .NetworkSettings.Networks "{network}").IPAddress}}}}',
                  name).stdout.strip()


NETWORK = f"agentix-runsc-test-{RUN}"
HTTPD = [BUSYBOX, "/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/etc"]


def httpd_answers(name, network=NETWORK):
    ip = ip_on(name, network)
    assert ip, name
    assert "root:x:0:0" in http_get(f"http://{ip}:8080/passwd")
    r = docker("exec", name, "cat", "/proc/net/tcp")
    assert r.stdout.startswith("  sl"), r.stdout


@test
def gvisors_stack_on_a_bridge_network():
    name = f"agentix-runsc-test-ns-{RUN}"
    t0 = time.monotonic()
    cid = run_container(name, "-e", "AGENTIX_CHECKPOINT=1", f"--network={NETWORK}", *HTTPD)
    print(f"  docker run (gVisor's stack): {time.monotonic() - t0:.2f} s")
    httpd_answers(name)
    # gVisor's own stack: its socket table has the listener (hostinet's shows none).
    tcp6 = docker("exec", name, "cat", "/proc/net/tcp6").stdout
    assert ":1F90 " in tcp6, tcp6
    argv = sandbox_cmdline(name)
    assert "--network=host" not in argv, argv
    assert os.path.exists(os.path.join(runsc_root(argv), f"agentix-netstack-{cid}"))


@test
def hostinet_without_the_variable():
    name = f"agentix-runsc-test-host-{RUN}"
    cid = run_container(name, f"--network={NETWORK}", *HTTPD)
    httpd_answers(name)
    argv = sandbox_cmdline(name)
    assert "--network=host" in argv, argv
    assert not os.path.exists(os.path.join(runsc_root(argv), f"agentix-netstack-{cid}"))


@test
def another_containers_namespace_is_refused_gvisors_stack():
    """--network=container:X: gVisor's stack would take X's address from it."""
    x = f"agentix-runsc-test-x-{RUN}"
    docker("run", "-d", "--name", x, "--label", LABEL, f"--network={NETWORK}", BUSYBOX,
           "/bin/busybox", "sleep", "60")
    ip = ip_on(x, NETWORK)

    def x_has_its_address():
        return f"inet {ip}/" in docker("exec", x, "/bin/busybox", "ip", "-4", "addr").stdout

    assert x_has_its_address()
    y = f"agentix-runsc-test-y-{RUN}"
    run_container(y, "-e", "AGENTIX_CHECKPOINT=1", f"--network=container:{x}", BUSYBOX,
                  "/bin/busybox", "sleep", "60")
    assert "--network=host" in sandbox_cmdline(y)
    assert x_has_its_address()
    docker("rm", "-f", y, x)


@test
def docker_network_host_is_refused_gvisors_stack():
    # The decision first, without a container: a spec as --network=host gives it.
    with tempfile.TemporaryDirectory() as tmp:
        argv, _ = create(bundle(tmp, "hostnet", spec(namespaces=())))
        assert network_of(argv) == "host", argv
    before = host_addresses()
    name = f"agentix-runsc-test-hostnet-{RUN}"
    run_container(name, "--network=host", "-e", "AGENTIX_CHECKPOINT=1", BUSYBOX,
                  "/bin/busybox", "sleep", "30")
    try:
        argv = sandbox_cmdline(name)
        assert "--network=host" in argv, argv
    finally:
        docker("rm", "-f", name)
    assert host_addresses() == before, (before, host_addresses())


def counter(name):
    return int(docker("exec", name, "cat", "/tmp/c").stdout)


@test
def checkpoint_and_restore_three_times():
    if not json.loads(docker("info", "--format", "{{json .ExperimentalBuild}}").stdout):
        print("  (skipped: dockerd runs without \"experimental\": true; restart it)")
        return
    name = f"agentix-runsc-test-loop-{RUN}"
    t0 = time.monotonic()
    cid = run_container(name, "-e", "AGENTIX_CHECKPOINT=1", BUSYBOX, "/bin/sh", "-c",
                        "i=0; while true; do i=$((i+1)); echo $i > /tmp/c; sleep 0.2; done")
    print(f"  docker run: {time.monotonic() - t0:.2f} s")
    root = runsc_root(sandbox_cmdline(name))
    end = time.monotonic() + 10
    while counter(name) < 5:
        assert time.monotonic() < end
        time.sleep(0.2)
    for n in (1, 2, 3):
        # The second checkpoint of a restored container is where runsc leaves it "paused".
        before = counter(name)
        timed(f"docker checkpoint create cp{n}", "checkpoint", "create", name, f"cp{n}")
        end = time.monotonic() + 10
        while docker("inspect", "--format", "{{.State.Running}}", name).stdout.strip() != "false":
            assert time.monotonic() < end, n
            time.sleep(0.1)
        timed(f"docker start --checkpoint cp{n}", "start", "--checkpoint", f"cp{n}", name)
        after = counter(name)
        # Going on from where it was: not from 1 (before is 5 or more), and not a second of
        # counting past it.
        assert before <= after <= before + 5, (n, before, after)
        time.sleep(0.5)
        assert counter(name) > after, n
    timed("docker rm -f", "rm", "-f", name)
    left = [f for f in os.listdir(root) if cid in f]
    assert not left, left


def dockerd_runsc():
    """Why the docker mode cannot run, or None."""
    if not shutil.which("runsc"):
        return "runsc is not installed"
    r = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True)
    if r.returncode != 0:
        return "no dockerd answers"
    path = (json.loads(r.stdout).get("runsc") or {}).get("path", "")
    if os.path.basename(path) != "agentix-runsc":
        return f"dockerd's runtime runsc is {path or 'not registered'}, not agentix-runsc " \
               "(scripts/dockerd.sh start registers it)"
    with open(path, "rb") as a, open(WRAPPER, "rb") as b:
        assert a.read() == b.read(), f"{path} is not this checkout's {WRAPPER}: scripts/dockerd.sh start"
    return None


def cleanup():
    for c in docker("ps", "-aq", "--filter", f"label={LABEL}", check=False).stdout.split():
        docker("rm", "-f", c, check=False)
    for n in docker("network", "ls", "-q", "--filter", f"label={LABEL}", check=False).stdout.split():
        docker("network", "rm", n, check=False)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "decision"
    decision = _tests[:_tests.index(delete_of_a_paused_container_without_its_sandbox_succeeds) + 1]
    if mode == "decision":
        sys.exit(1 if run_tests(decision) else 0)
    assert mode == "docker", mode
    why = dockerd_runsc()
    if why:
        print(f"skipped: {why}")
        sys.exit(77)
    status = 1
    try:
        subprocess.run([MAKE_IMAGES, "busybox"], check=True)
        docker("network", "create", "--driver", "bridge", "--label", LABEL, NETWORK)
        status = 1 if run_tests(_tests[len(decision):]) else 0
    finally:
        cleanup()
        left = docker("ps", "-aq", "--filter", f"label={LABEL}", check=False).stdout.split() + \
            docker("network", "ls", "-q", "--filter", f"label={LABEL}", check=False).stdout.split()
        if left:
            print(f"FAIL: left behind: {left}")
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
