# SPDX-License-Identifier: MIT
"""What the agentd tests share: a private system bus (dbus-daemon with Debian's policy and the
project's policy file) with an agentd on it, the example bundle built once, and docker.

Needs: AGENTD, AGENTD_BACKEND_DIR, AGENTIXCTL, AGENTIX_RUNTIME_DIR, AGENTIX_INCLUDE_DIR,
EXAMPLE_DIR, POLICY, BUS_CONF_IN, and a running dockerd."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
AGENTD = os.environ["AGENTD"]
AGENTIXCTL = os.environ["AGENTIXCTL"]
EXAMPLE = os.environ["EXAMPLE_DIR"]
BUSYBOX = "agentix-test/busybox:1"
TEST_BUNDLE = "agentix-test/example-bundle:0.1.0"
NAME, MANAGER_PATH = "org.agentix.Agentd1", "/org/agentix/Agentd1"
MANAGER, SANDBOX = "org.agentix.Agentd1.Manager", "org.agentix.Agentd1.Sandbox"
WORK = tempfile.mkdtemp(prefix="agentix-agentd-test-")
# The agentds of this test process are an instance of their own (agentd(8), AGENTD_INSTANCE):
# they label what they make with it, and adopt, expire, prune and count only that, never what
# the demo, dev-env, an earlier run, another test or a user left on the same dockerd. The same
# for every Agentd of the process: a second one adopts the first one's sandboxes.
INSTANCE = os.path.basename(WORK)
INSTANCE_LABEL = "org.agentix.instance"


def docker(*args, check=True, timeout=120):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {r.stderr.strip()}")
    return r


def managed_containers():
    return set(docker("ps", "-a", "--filter", "label=org.agentix.sandbox", "--format", "{{.Names}}").stdout.split())


def carriers():
    return set(docker("ps", "-a", "--filter", "label=org.agentix.carrier", "--format", "{{.Names}}").stdout.split())


def own_containers(*labels):
    """The names of the sandbox containers this process's agentds made (labels: more label
    filters, "org.agentix.pool=small" say), whatever else is on the host."""
    filters = [f for label in ("org.agentix.sandbox", f"{INSTANCE_LABEL}={INSTANCE}", *labels)
               for f in ("--filter", f"label={label}")]
    return set(docker("ps", "-a", *filters, "--format", "{{.Names}}").stdout.split())


def own_carriers():
    """The carriers this process's agentds made. (A carrier is shared by name: one another
    agentd made for the same bundle image is used, and is not this process's.)"""
    return set(docker("ps", "-a", "--filter", "label=org.agentix.carrier", "--filter",
                      f"label={INSTANCE_LABEL}={INSTANCE}", "--format", "{{.Names}}").stdout.split())


class Leftovers:
    """What the demo, dev-env, an earlier run or another agentd leaves on the host, made on
    purpose before a test: a running sandbox and a carrier of an agentd that names no instance
    (as the demo's and dev-env's; the carrier's bundle image is tagged, so no agentd prunes it),
    and, of another named agentd that is not running, an expired ready member of pool "small"
    (an agentd that adopted it would remove it at once) and a carrier of a bundle image that is
    gone (an agentd that pruned others' carriers would remove it). None is this process's: the
    test's assertions must not count them, and check() at its end says what was removed or
    changed. (An agentd without an instance on the same dockerd may adopt the first two: they
    stay as they are.)"""

    OTHER = "agentix-another-agentd"

    def __init__(self):
        bundle()  # the busybox task image
        now = int(time.time())
        busybox_id = docker("image", "inspect", "--format", "{{.Id}}", BUSYBOX).stdout.strip()
        self.sandbox, self.member = secrets.token_hex(8), secrets.token_hex(8)
        self.names = [f"agentix-{self.sandbox}", f"agentix-{self.member}", f"agentix-carrier-{secrets.token_hex(6)}",
                      f"agentix-carrier-{secrets.token_hex(6)}"]
        common = ["--label", "org.agentix.managed=1", "--label", "org.agentix.owner=0", "--label",
                  f"org.agentix.created={now - 7200}", "--label", f"org.agentix.image={BUSYBOX}", "--label",
                  "org.agentix.bundle=example-bundle:0.1.0", "--label", "org.agentix.bundle.id=sha256:" + "0" * 64,
                  "--label", "org.agentix.egress=*", "-e", "AGENTIX_TOKEN=leftover", "--network", "none",
                  "--entrypoint", "/bin/sleep"]
        try:
            docker("run", "-d", "--name", self.names[0], *common, "--label", f"org.agentix.sandbox={self.sandbox}",
                   "--label", f"org.agentix.expires={now + 3600}", BUSYBOX, "3600")
            docker("run", "-d", "--name", self.names[1], *common, "--label", f"org.agentix.sandbox={self.member}",
                   "--label", f"org.agentix.expires={now - 3600}", "--label", "org.agentix.pool=small", "--label",
                   f"{INSTANCE_LABEL}={self.OTHER}", "-e", "AGENTIX_CLAIMABLE=1", BUSYBOX, "3600")
            docker("create", "--name", self.names[2], "--label", "org.agentix.managed=1", "--label",
                   f"org.agentix.carrier={busybox_id}", "--entrypoint", "/bin/true", BUSYBOX)
            docker("create", "--name", self.names[3], "--label", "org.agentix.managed=1", "--label",
                   "org.agentix.carrier=sha256:" + "1" * 64, "--label", f"{INSTANCE_LABEL}={self.OTHER}",
                   "--entrypoint", "/bin/true", BUSYBOX)
        except BaseException:
            self.remove()
            raise
        self.states = self.state()

    def state(self):
        r = docker("inspect", "--format", "{{.Name}} {{.State.Status}}", *self.names, check=False)
        return dict(line.lstrip("/").split() for line in r.stdout.splitlines() if line.strip())

    def check(self):
        """What happened to them (empty: nothing)."""
        now = self.state()
        problems = [f"{n} was removed" for n in self.names if n not in now]
        problems += [f"{n} went from {self.states.get(n)} to {now[n]}" for n in now if now[n] != self.states.get(n)]
        return problems

    def remove(self):
        docker("rm", "-f", "-v", *self.names, check=False)


def main_beside_leftovers(main, cleanup_first=None):
    """The harness's main() with Leftovers on the host, then cleanup_first() and cleanup(); the
    test fails when it failed, or when it changed what it did not make. Exits."""
    leftovers = Leftovers()
    status = 1
    try:
        main()
    except SystemExit as e:
        status = e.code
    finally:
        try:
            if cleanup_first:
                status = cleanup_first(status) or status
        finally:
            problems = leftovers.check()
            leftovers.remove()
            cleanup()
    if problems:
        print("changed what this test did not make:", "; ".join(problems))
    sys.exit(status or (1 if problems else 0))


def start_dbus_daemon(directory):
    """dbus-daemon with Debian's system policy and the project's policy file, its socket in
    directory. Returns (process, address)."""
    sock, conf = os.path.join(directory, "bus"), os.path.join(directory, "bus.conf")
    with open(os.environ["BUS_CONF_IN"]) as f:
        text = f.read().replace("@SOCKET@", sock).replace("@POLICY@", os.environ["POLICY"])
    with open(conf, "w") as f:
        f.write(text)
    # Its output must not hold the test's: a daemon a failed test leaves behind would keep meson
    # waiting for the end of the test's output.
    proc = subprocess.Popen(["dbus-daemon", "--config-file", conf, "--nofork"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def accepting():
        # The socket file appears at bind(), before listen(): connect to be sure.
        import socket
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(sock)
            except OSError:
                return False
        return True
    wait_until(accepting, 10, what="dbus-daemon's socket")
    return proc, f"unix:path={sock}"


def bundle():
    """The example bundle, built once (agentixctl build is the user's way to make one), and the
    busybox task image."""
    if not hasattr(bundle, "ref"):
        # Under a tag of the tests' own: example-bundle:0.1.0 stays the user's (this one carries
        # the runtime under test, a sanitizer build say).
        r = subprocess.run([AGENTIXCTL, "build", "--json", "-q", "--cache-dir", os.path.join(WORK, "cache"),
                            "--tag", TEST_BUNDLE, EXAMPLE], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        b = json.loads(r.stdout)
        assert b["tags"] == [TEST_BUNDLE], b
        bundle.ref = TEST_BUNDLE
        r = subprocess.run([os.path.join(HERE, "..", "bundle", "make-task-images.sh"), "busybox"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    return bundle.ref


def error_name(fn):
    try:
        fn()
    except dbus.DBusException as e:
        return e.get_dbus_name(), e.get_dbus_message()
    raise AssertionError("the call did not fail")


class Agentd:
    """agentd on a bus of its own, with its own agentd.conf (config: the file's text) and
    environment, in a directory every user can reach; this process's instance (INSTANCE)
    unless env_extra names another AGENTD_INSTANCE."""

    def __init__(self, name, config="", env_extra=None, args=(), wait=True, wrapper=()):
        self.dir = tempfile.mkdtemp(prefix=f"agentix-{name}-", dir=WORK)
        os.chmod(WORK, 0o755)
        os.chmod(self.dir, 0o755)
        self.config = os.path.join(self.dir, "agentd.conf")
        with open(self.config, "w") as f:
            f.write(config)
        self.dbus_daemon, self.address = start_dbus_daemon(self.dir)
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address, AGENTD_INSTANCE=INSTANCE)
        self.env.update(env_extra or {})
        self.args = [*wrapper, AGENTD, f"--config={self.config}", *args]  # wrapper: setpriv, say
        self.log_path = os.path.join(self.dir, "agentd.log")
        self.log = open(self.log_path, "ab")
        self.agentd = None
        try:
            self.start(wait)
        except BaseException:
            self.stop()
            raise

    def start(self, wait=True):
        self.agentd = subprocess.Popen(self.args, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.conn = dbus.bus.BusConnection(self.address)
        if wait:
            wait_until(lambda: self.conn.name_has_owner(NAME) or self.agentd.poll() is not None, 10,
                       what="agentd on the bus")
            assert self.agentd.poll() is None, self.log_text()

    def kill_and_restart(self):
        """SIGKILL agentd (no chance to clean up), then start a new one."""
        self.agentd.kill()
        self.agentd.wait(10)
        self.start()

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def manager(self):
        return dbus.Interface(self.conn.get_object(NAME, MANAGER_PATH), MANAGER)

    def manager_property(self, name):
        return dbus.Interface(self.conn.get_object(NAME, MANAGER_PATH),
                              "org.freedesktop.DBus.Properties").Get(MANAGER, name)

    def create(self, **config):
        base = {"image": BUSYBOX, "bundle": bundle()}
        base.update(config)
        return self.manager().CreateSandbox(dbus.Dictionary(base, signature="sv"), timeout=120)

    def ids(self):
        return {str(s[0]) for s in self.manager().ListSandboxes(timeout=30)}

    def stop(self):
        rc = None
        try:
            if self.agentd and self.agentd.poll() is None:
                self.agentd.terminate()
                try:
                    rc = self.agentd.wait(20)
                except subprocess.TimeoutExpired:
                    self.agentd.kill()  # (and the test fails: agentd did not stop on SIGTERM)
                    raise
            elif self.agentd:
                rc = self.agentd.returncode
        finally:
            self.dbus_daemon.terminate()
            self.dbus_daemon.wait(10)
            self.log.close()
        return rc


USERS = {"alice": "agx-alice", "bob": "agx-bob", "carol": "agx-carol"}


def ensure_users():
    """Real users: alice and bob in the group agentix, carol outside it. Returns their uids.
    (A bus reads the groups when it starts: start it after this.)"""
    subprocess.run(["groupadd", "-f", "agentix"], check=True)
    for who, name in USERS.items():
        if subprocess.run(["id", name], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name], check=True)
        if who != "carol":
            subprocess.run(["usermod", "-a", "-G", "agentix", name], check=True)
    return {who: int(subprocess.run(["id", "-u", name], capture_output=True, text=True).stdout) for who, name in
            USERS.items()}


def remove_users():
    for name in USERS.values():
        subprocess.run(["userdel", name], capture_output=True)


def busctl_as(who, address, *args):
    """busctl on the bus at address as one of USERS."""
    return subprocess.run(["runuser", "-u", USERS[who], "--", "env", f"DBUS_SYSTEM_BUS_ADDRESS={address}", "busctl",
                           "--system", "--json=short", "--timeout=120", *args], capture_output=True, text=True)


# A D-Bus call as one of USERS, through dbus-python run as them: busctl shows an error's
# message, not its name.
CALL_AS = r"""
import json, sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
path, iface, method, args = sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
conv = {"s": dbus.String, "d": dbus.Double, "t": dbus.UInt64, "u": dbus.UInt32}
try:
    if method == "Snapshot":
        out = bus.get_object("org.agentix.Agentd1", path).get_dbus_method(method, iface)(
            dbus.Dictionary({}, signature="sv"), timeout=120)
    elif method == "CreateSandbox":
        out = bus.get_object("org.agentix.Agentd1", path).get_dbus_method(method, iface)(
            dbus.Dictionary({k: conv[t](v) for k, t, v in args}, signature="sv"), timeout=120)
    else:
        out = bus.get_object("org.agentix.Agentd1", path).get_dbus_method(method, iface)(
            *[conv[t](v) for t, v in args], timeout=120)
    print(json.dumps({"ok": [str(x) for x in out] if isinstance(out, tuple) else str(out)}))
except dbus.DBusException as e:
    print(json.dumps({"error": e.get_dbus_name(), "message": e.get_dbus_message()}))
"""


def call_as(who, address, path, iface, method, args):
    """A call as one of USERS on the bus at address ({"ok": [...]} or {"error", "message"}); args
    as [[key, type, value], ...] for CreateSandbox, else [[type, value], ...]."""
    r = subprocess.run(["runuser", "-u", USERS[who], "--", "/usr/bin/python3", "-c", CALL_AS, address, path,
                        iface, method, json.dumps(args)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def exec_ok(a, sid, command, timeout=60):
    """sandbox::exec of command in sandbox sid of Agentd a, which must exit 0: its output."""
    from harness import RpcClient

    url, token = a.manager().GetRuntimeAccess(sid)
    c = RpcClient(str(url), str(token))
    try:
        r = c.call("sandbox::exec", command=command, timeout=timeout)
        assert r["exit_code"] == 0, r
        return r["output"]
    finally:
        c.close()


def runtimes():
    info = json.loads(docker("info", "--format", "{{json .Runtimes}}").stdout)
    return [r for r in ("runc", "runsc") if r in info]


PYTHON_DATA = os.path.join(HERE, "..", "..", "examples", "python-data")
PYTHON_DATA_TAG = "agentix-test/python-data:0.1.0"


def python_data_bundle():
    """examples/python-data, built once with the runtime under test (agentixctl build, as a user
    would)."""
    if not hasattr(python_data_bundle, "ref"):
        r = subprocess.run([AGENTIXCTL, "build", "--json", "-q", "--cache-dir", os.path.join(WORK, "cache"),
                            "--tag", PYTHON_DATA_TAG, PYTHON_DATA], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["tags"] == [PYTHON_DATA_TAG], r.stdout
        python_data_bundle.ref = PYTHON_DATA_TAG
    return python_data_bundle.ref


def remove_python_data_carriers():
    """The carrier this process's agentds made for python-data's volume (a carrier takes its
    bundle image's labels): the other tests count carriers and know only the example bundle's.
    The demo's or a user's python-data carrier stays."""
    names = docker("ps", "-a", "--filter", "label=org.agentix.bundle=python-data", "--filter",
                   "label=org.agentix.carrier", "--filter", f"label={INSTANCE_LABEL}={INSTANCE}", "--format",
                   "{{.Names}}", check=False).stdout.split()
    if names:
        docker("rm", "-f", "-v", *names, check=False)


def remove_test_bundle():
    """A test file that built the bundle under a tag of its run's own (TEST_BUNDLE set to it):
    that bundle's carriers, then the bundle."""
    carriers = docker("ps", "-a", "-q", "--filter", f"ancestor={TEST_BUNDLE}", check=False).stdout.split()
    if carriers:
        docker("rm", "-f", "-v", *carriers, check=False)
    docker("rmi", TEST_BUNDLE, check=False)


def cleanup():
    shutil.rmtree(WORK, ignore_errors=True)


def cgroup_number(pid, v1_controller, v1_name, v2_name):
    """The kernel's number for the cgroup a process is in, read without agentd (v1: the
    controller's hierarchy; v2: the unified one): a file's first number, or cpu.stat's
    usage_usec in ns as v1's cpuacct.usage has it."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if v1_controller in controllers.split(","):
            with open(f"/sys/fs/cgroup/{controllers}{path}/{v1_name}") as f:
                return int(f.read().split()[0])
    for n, controllers, path in lines:
        if n == "0" and not controllers:
            with open(f"/sys/fs/cgroup{path}/{v2_name}") as f:
                words = f.read().split()
            return int(words[1]) * 1000 if words[0] == "usage_usec" else int(words[0])
    raise AssertionError(f"no {v1_controller} cgroup for {pid}: {lines}")


def runtime_url_of(sid):
    """Where agentd reaches a sandbox on its isolated network: the container's address on the
    bridge, port 8000 (no port published, no docker-proxy)."""
    info = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]
    network = info["HostConfig"]["NetworkMode"]
    assert network.startswith("agentix-isolated"), network
    return f"http://{info['NetworkSettings']['Networks'][network]['IPAddress']}:8000"
