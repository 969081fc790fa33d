# SPDX-License-Identifier: MIT
"""What the agentd tests share: a private system bus (dbus-daemon with Debian's policy and the
project's policy file) with an agentd on it, the example bundle built once, and docker.

Needs: AGENTD, AGENTD_BACKEND_DIR, AGENTIXCTL, AGENTIX_RUNTIME_DIR, AGENTIX_INCLUDE_DIR,
EXAMPLE_DIR, POLICY, BUS_CONF_IN, and a running dockerd."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

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


def docker(*args, check=True, timeout=120):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {r.stderr.strip()}")
    return r


def managed_containers():
    return set(docker("ps", "-a", "--filter", "label=org.agentix.sandbox", "--format", "{{.Names}}").stdout.split())


def carriers():
    return set(docker("ps", "-a", "--filter", "label=org.agentix.carrier", "--format", "{{.Names}}").stdout.split())


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
    environment, in a directory every user can reach."""

    def __init__(self, name, config="", env_extra=None, args=(), wait=True, wrapper=()):
        self.dir = tempfile.mkdtemp(prefix=f"agentix-{name}-", dir=WORK)
        os.chmod(WORK, 0o755)
        os.chmod(self.dir, 0o755)
        self.config = os.path.join(self.dir, "agentd.conf")
        with open(self.config, "w") as f:
            f.write(config)
        self.dbus_daemon, self.address = start_dbus_daemon(self.dir)
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address, **(env_extra or {}))
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
    """The carrier agentd made for python-data's volume: the other tests count carriers and know
    only the example bundle's."""
    names = docker("ps", "-a", "--filter", "label=org.agentix.bundle=python-data", "--filter",
                   "label=org.agentix.carrier", "--format", "{{.Names}}", check=False).stdout.split()
    if names:
        docker("rm", "-f", "-v", *names, check=False)


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
