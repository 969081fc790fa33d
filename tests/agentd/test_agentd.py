#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd on a private system bus (dbus-daemon with the project's policy file) against a real
dockerd: the D-Bus API with plain busctl and with dbus-python (a stock D-Bus client), sandboxes
from a bundle on a libc-free busybox image reached with python-socketio, the Docker settings
every sandbox gets (limits by default, labels, 127.0.0.1), and every error with nothing left
behind.

Needs: AGENTD, AGENTIXCTL, AGENTIX_RUNTIME_DIR, AGENTIX_INCLUDE_DIR, EXAMPLE_DIR, POLICY (the
bus policy file), BUS_CONF_IN (tests/agentd/bus.conf.in), and a running dockerd."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bundle"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (AGENTD, AGENTIXCTL, BUSYBOX, MANAGER, MANAGER_PATH, NAME, SANDBOX, USERS,  # noqa: E402
                        WORK, bundle, busctl_as, carriers, docker, ensure_users, error_name, managed_containers, remove_users,
                        runtime_url_of, start_dbus_daemon)


class Bus:
    """A private system bus with the project's policy, and agentd on it."""

    def __init__(self):
        self.dbus_daemon, self.address = start_dbus_daemon(WORK)
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self.log = open(os.path.join(WORK, "agentd.log"), "wb")
        self.agentd = subprocess.Popen([AGENTD], env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.conn = dbus.bus.BusConnection(self.address)
        wait_until(lambda: self.conn.name_has_owner(NAME), 10, what="agentd on the bus")

    def kill_and_restart(self):
        """SIGKILL agentd (no chance to clean up), then start a new one."""
        self.agentd.kill()
        self.agentd.wait(10)
        self.agentd = subprocess.Popen([AGENTD], env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.conn = dbus.bus.BusConnection(self.address)
        wait_until(lambda: self.conn.name_has_owner(NAME), 10, what="the new agentd on the bus")

    def manager(self):
        return dbus.Interface(self.conn.get_object(NAME, MANAGER_PATH), MANAGER)

    def busctl(self, *args):
        r = subprocess.run(["busctl", "--system", "--json=short", *args], capture_output=True, text=True,
                           env=self.env)
        return r

    def stop(self):
        self.agentd.send_signal(signal.SIGTERM)
        rc = self.agentd.wait(10)
        self.dbus_daemon.terminate()
        self.dbus_daemon.wait(10)
        self.log.close()
        return rc


BUS = None


def bus():
    global BUS
    if BUS is None:
        BUS = Bus()
    return BUS


def create(**config):
    base = {"image": BUSYBOX, "bundle": bundle()}
    base.update(config)
    return bus().manager().CreateSandbox(dbus.Dictionary(base, signature="sv"), timeout=120)


def properties(path):
    return dbus.Interface(bus().conn.get_object(NAME, path), "org.freedesktop.DBus.Properties").GetAll(SANDBOX)


@test
def introspection_names_every_argument():
    r = bus().busctl("introspect", "--xml-interface", NAME, MANAGER_PATH)
    assert r.returncode == 0, r.stderr
    root = ET.fromstring(r.stdout)
    methods = {m.get("name"): [(a.get("direction"), a.get("name"), a.get("type")) for a in m.findall("arg")]
               for i in root.findall("interface") if i.get("name") == MANAGER for m in i.findall("method")}
    assert methods["CreateSandbox"] == [("in", "config", "a{sv}"), ("out", "sandbox", "o"), ("out", "id", "s")]
    assert methods["GetRuntimeAccess"] == [("in", "id", "s"), ("out", "url", "s"), ("out", "token", "s")]
    assert methods["ListSandboxes"] == [("out", "sandboxes", "a(ssso)")]
    assert methods["Reload"] == []
    assert methods["ListPools"] == [("out", "pools", "a(suu)")]
    assert methods["ListSnapshots"] == [("out", "snapshots", "a(ssutt)")]
    assert methods["DeleteSnapshot"] == [("in", "image", "s")]
    assert methods["GetPortUrl"] == [("in", "id", "s"), ("in", "port", "q"), ("out", "url", "s"), ("out", "token", "s")]
    assert methods["GetUsage"] == [("out", "usage", "a{sv}")]
    assert methods["GetUsageOf"] == [("in", "uid", "u"), ("out", "usage", "a{sv}")]
    assert set(methods) == {"CreateSandbox", "GetSandbox", "ListSandboxes", "DeleteSandbox", "GetRuntimeAccess",
                            "GetPortUrl", "ListPools", "ListSnapshots", "DeleteSnapshot", "GetUsage", "GetUsageOf",
                            "Reload"}


@test
def a_dockerd_without_live_restore_is_warned_about_once():
    """A dockerd restart stops every sandbox unless dockerd runs with live-restore: agentd says
    so once at start (and never when it is set)."""
    path, sid = create()
    bus().manager().DeleteSandbox(str(sid), timeout=60)
    live = json.loads(docker("info", "--format", "{{json .LiveRestoreEnabled}}").stdout)
    with open(os.path.join(WORK, "agentd.log"), errors="replace") as f:
        warnings = [line for line in f if "live-restore" in line]
    assert len(warnings) == (0 if live else 1), (live, warnings)


@test
def logs_give_what_the_runtime_wrote():
    path, sid = create()
    try:
        sandbox = dbus.Interface(bus().conn.get_object(NAME, path), SANDBOX)
        text = str(sandbox.Logs(dbus.UInt64(50), timeout=30))
        assert "agentix-server" in text and "listening on port 8000" in text, text
        assert len(str(sandbox.Logs(dbus.UInt64(1), timeout=30)).strip().splitlines()) == 1
        got, message = error_name(lambda: sandbox.Logs(dbus.UInt64(0)))
        assert got == f"{NAME}.InvalidConfig" and "Logs takes 1 to 100000 lines" in message, message
        # agentixctl logs (libagentix's agentix_sandbox_logs()).
        r = subprocess.run([AGENTIXCTL, "logs", "-n", "5", sid], env=bus().env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and "listening on port 8000" in r.stdout, (r.stdout, r.stderr)
        r = subprocess.run([AGENTIXCTL, "logs", "--lines=0", sid], env=bus().env, capture_output=True, text=True)
        assert r.returncode == 64 and "a number of lines from 1 to 100000" in r.stderr, r.stderr
    finally:
        bus().manager().DeleteSandbox(sid, timeout=60)


@test
def busctl_create_call_and_delete():
    b = bus()
    t0 = time.time()
    r = b.busctl("--timeout=120", "call", NAME, MANAGER_PATH, MANAGER, "CreateSandbox", "a{sv}", "2",
                 "image", "s", BUSYBOX, "bundle", "s", bundle())
    assert r.returncode == 0, r.stderr
    path, sid = json.loads(r.stdout)["data"]
    print(f"    created {sid} in {time.time() - t0:.2f} s")
    assert path == f"{MANAGER_PATH}/sandbox/{sid}", path
    try:
        tree = b.busctl("tree", "--list", NAME)
        assert path in tree.stdout, tree.stdout
        listed = json.loads(b.busctl("call", NAME, MANAGER_PATH, MANAGER, "ListSandboxes").stdout)["data"][0]
        assert [sid, BUSYBOX, "running", path] in listed, listed
        state = json.loads(b.busctl("get-property", NAME, path, SANDBOX, "State").stdout)["data"]
        assert state == "running"
        url, token = json.loads(b.busctl("call", NAME, MANAGER_PATH, MANAGER, "GetRuntimeAccess", "s", sid).stdout)["data"]
        assert url == runtime_url_of(sid), url
        client = RpcClient(url, token, transports=["websocket"])
        try:
            r2 = client.call("sandbox::exec", command="echo hello from $(uname -s); command -v bash")
            assert r2["output"] == "hello from Linux\n/nix/runtime/bin/bash\n", r2
            assert client.call("example::add", 20, 22) == 42
        finally:
            client.close()
    finally:
        r = b.busctl("call", NAME, MANAGER_PATH, MANAGER, "DeleteSandbox", "s", sid)
    assert r.returncode == 0, r.stderr
    assert f"agentix-{sid}" not in managed_containers()
    assert path not in b.busctl("tree", "--list", NAME).stdout


@test
def every_sandbox_is_limited_labelled_and_private():
    path, sid = create()
    try:
        info = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]
        host = info["HostConfig"]
        # Nothing named by the caller: the defaults, never unlimited.
        assert (host["PidsLimit"], host["Memory"], host["NanoCpus"]) == (1024, 2 << 30, 10**9), host
        # Reached at its address on agentd's bridge: no port published (no docker-proxy).
        assert not host["PortBindings"] and host["NetworkMode"] == "agentix-isolated", host
        assert host["VolumesFrom"][0].startswith("agentix-carrier-")
        labels = info["Config"]["Labels"]
        assert labels["org.agentix.managed"] == "1" and labels["org.agentix.sandbox"] == sid
        assert labels["org.agentix.owner"] == "0" and labels["org.agentix.bundle"] == bundle()
        props = properties(path)
        assert props["Id"] == sid and props["Owner"] == 0 and props["Backend"] == "docker"
        assert props["ContainerId"] == info["Id"]
        assert props["ExpiresAt"] - props["CreatedAt"] == 24 * 3600 * 10**6, props
        # The token is the sandbox's own: another does not open it.
        url, token = bus().manager().GetRuntimeAccess(sid)
        assert len(token) == 64 and f"AGENTIX_TOKEN={token}" in info["Config"]["Env"]
    finally:
        bus().manager().DeleteSandbox(sid, timeout=60)


@test
def config_reaches_the_container():
    path, sid = create(cpus=dbus.Double(0.5), memory=dbus.UInt64(256 << 20), pids=dbus.UInt64(100),
                       env=dbus.Dictionary({"GREETING": "hi there"}, signature="ss"), workdir="/tmp",
                       labels=dbus.Dictionary({"team": "evals"}, signature="ss"), ttl=dbus.UInt64(600))
    try:
        host = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]
        assert (host["HostConfig"]["PidsLimit"], host["HostConfig"]["Memory"], host["HostConfig"]["NanoCpus"]) == \
            (100, 256 << 20, 5 * 10**8)
        assert host["Config"]["Labels"]["team"] == "evals" and host["Config"]["WorkingDir"] == "/tmp"
        props = properties(path)
        assert props["ExpiresAt"] - props["CreatedAt"] == 600 * 10**6
        url, token = bus().manager().GetRuntimeAccess(sid)
        client = RpcClient(url, token)
        try:
            r = client.call("sandbox::exec", command='echo "$GREETING"; pwd')
            assert r["output"] == "hi there\n/tmp\n", r
        finally:
            client.close()
        assert dict(props["Labels"]) == {"team": "evals"}, props["Labels"]
        assert (float(props["CPUs"]), int(props["Memory"])) == (0.5, 256 << 20), (props["CPUs"], props["Memory"])
        dbus.Interface(bus().conn.get_object(NAME, path), SANDBOX).Extend(dbus.UInt64(60))
        assert properties(path)["ExpiresAt"] - props["ExpiresAt"] == 60 * 10**6
        # SetTTL: from now, sooner as well as later.
        t0 = time.time()
        dbus.Interface(bus().conn.get_object(NAME, path), SANDBOX).SetTTL(dbus.UInt64(30))
        t1 = time.time()
        assert (t0 + 30) * 10**6 - 10**6 <= properties(path)["ExpiresAt"] <= (t1 + 30) * 10**6 + 10**6
        assert error_name(lambda: dbus.Interface(bus().conn.get_object(NAME, path), SANDBOX).SetTTL(
            dbus.UInt64(0)))[0] == "org.agentix.Agentd1.InvalidConfig"
    finally:
        dbus.Interface(bus().conn.get_object(NAME, path), SANDBOX).Delete(timeout=60)
    assert f"agentix-{sid}" not in managed_containers()
    assert error_name(lambda: bus().manager().GetSandbox(sid))[0] == "org.agentix.Agentd1.NoSuchSandbox"


@test
def errors_are_named_and_leave_nothing_behind():
    before = managed_containers()
    m = bus().manager()
    listed_before = sorted(str(x[0]) for x in m.ListSandboxes())
    cases = [
        (dict(colour="red"), "InvalidConfig", "unknown config key 'colour'"),
        (dict(image=dbus.UInt32(1)), "InvalidConfig", "config key 'image' must be of type 's'"),
        (dict(pids=dbus.UInt64(5)), "InvalidConfig", "config key 'pids' must be from 32"),
        (dict(memory=dbus.UInt64(1000)), "InvalidConfig", "config key 'memory' must be at least 32 MiB"),
        # More than the host has (MaxMemory= defaults to the host's memory).
        (dict(memory=dbus.UInt64(1 << 40)), "InvalidConfig", "(MaxMemory= in agentd.conf)"),
        (dict(network="host"), "InvalidConfig", "the host's network"),
        (dict(platform="amd64"), "InvalidConfig", "is OS/ARCH[/VARIANT]"),
        (dict(workdir="relative"), "InvalidConfig", "must be an absolute path"),
        (dict(env=dbus.Dictionary({"1BAD": "x"}, signature="ss")), "InvalidConfig", "is not a variable name"),
        (dict(labels=dbus.Dictionary({"org.agentix.owner": "0"}, signature="ss")), "InvalidConfig", "agentd's"),
        (dict(backend="podman"), "BackendUnavailable", "No backend 'podman'"),
        (dict(image="agentix-test/no-such-image:1"), "ImageNotFound", "'agentix-test/no-such-image:1' is not in Docker"),
        (dict(bundle="agentix-test/no-such-bundle:1"), "BundleNotFound", "build it with agentixctl build"),
        (dict(bundle=BUSYBOX), "BundleNotFound", "is not an agentix bundle"),
        # The runtime cannot start: the container is removed and the reason given, with the
        # last lines the runtime wrote.
        (dict(env=dbus.Dictionary({"AGENTIX_BIND_PORT": "not-a-port"}, signature="ss")), "StartFailed",
         "stopped (exit status 1) before its runtime answered"),
        (dict(env=dbus.Dictionary({"AGENTIX_BIND_PORT": "not-a-port"}, signature="ss")), "StartFailed",
         "Its last lines: agentix-server: Failed to resolve 0.0.0.0:not-a-port"),
    ]
    for config, name, needle in cases:
        got, message = error_name(lambda: create(**config))
        assert got == f"org.agentix.Agentd1.{name}" and needle in message, (config, got, message)
    got, message = error_name(lambda: m.CreateSandbox(dbus.Dictionary({"bundle": bundle()}, signature="sv")))
    assert got.endswith("InvalidConfig") and "'image' is required" in message, message
    assert error_name(lambda: m.GetSandbox("nosuch"))[0].endswith("NoSuchSandbox")
    assert error_name(lambda: m.DeleteSandbox("nosuch"))[0].endswith("NoSuchSandbox")
    assert error_name(lambda: m.GetRuntimeAccess("nosuch"))[0].endswith("NoSuchSandbox")
    assert managed_containers() == before, managed_containers() - before
    assert sorted(str(x[0]) for x in m.ListSandboxes()) == listed_before


@test
def setup_runs_before_the_reply_and_its_failure_removes_the_sandbox():
    path, sid = create(setup="mkdir -p /work && echo ready > /work/flag && python3 -c 'print(1)'")
    try:
        url, token = bus().manager().GetRuntimeAccess(sid)
        client = RpcClient(url, token)
        try:
            assert client.call("sandbox::exec", command="cat /work/flag")["output"] == "ready\n"
        finally:
            client.close()
    finally:
        bus().manager().DeleteSandbox(sid, timeout=60)
    before = managed_containers()
    name, message = error_name(lambda: create(setup="echo cannot do it >&2; exit 3"))
    assert name.endswith("StartFailed") and "exited with status 3: cannot do it" in message, message
    assert managed_containers() == before


@test
def bind_to_caller_deletes_the_sandbox_when_its_creator_leaves():
    b = bus()
    r = b.busctl("--timeout=120", "call", NAME, MANAGER_PATH, MANAGER, "CreateSandbox", "a{sv}", "3",
                 "image", "s", BUSYBOX, "bundle", "s", bundle(), "bind_to_caller", "b", "true")
    assert r.returncode == 0, r.stderr
    path, sid = json.loads(r.stdout)["data"]
    # busctl has left the bus: the sandbox goes.
    wait_until(lambda: f"agentix-{sid}" not in managed_containers(), 15, what="the bound sandbox to go")
    assert error_name(lambda: bus().manager().GetSandbox(sid))[0].endswith("NoSuchSandbox")


def agentixctl(*args, input=None, timeout=120):
    return subprocess.run([AGENTIXCTL, *args], capture_output=True, text=True, env=bus().env, input=input,
                          timeout=timeout)


@test
def agentixctl_create_list_status_exec_delete():
    r = agentixctl("create", "--image", BUSYBOX, "--bundle", bundle(), "--cpus", "0.5", "--memory", "512M",
                   "-e", "GREETING=hello", "--label", "team=evals", "--ttl", "3600")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        listed = [json.loads(line) for line in agentixctl("--json", "list").stdout.splitlines()]
        mine = [x for x in listed if x["id"] == sid]
        assert mine and mine[0]["state"] == "running" and mine[0]["image"] == BUSYBOX, listed
        assert sid in agentixctl("list", "-q").stdout.split()
        st = json.loads(agentixctl("--json", "status", sid).stdout)
        assert st["expires_at_usec"] - st["created_at_usec"] == 3600 * 10**6 and st["owner"] == 0, st
        assert agentixctl("status", "-q", sid).stdout.strip() == "running"
        host = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]["HostConfig"]
        assert (host["Memory"], host["NanoCpus"]) == (512 << 20, 5 * 10**8)
        # Every runtime command takes the sandbox by id.
        r = agentixctl("--sandbox", sid, "exec", "--", "sh", "-c", 'echo "$GREETING"; exit 4')
        assert r.returncode == 4 and r.stdout == "hello\n", (r.returncode, r.stdout, r.stderr)
        r = agentixctl("-s", sid, "call", "example::add", "[1, 2]")
        assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
        r = agentixctl("-s", sid, "write", "/tmp/note.txt", input="from the host\n")
        assert r.returncode == 0, r.stderr
        assert "from the host" in agentixctl("-s", sid, "read", "/tmp/note.txt").stdout
    finally:
        r = agentixctl("delete", sid)
    assert r.returncode == 0, r.stderr
    assert f"agentix-{sid}" not in managed_containers()
    r = agentixctl("status", sid)
    assert r.returncode == 1 and "No sandbox" in r.stderr, r.stderr
    r = agentixctl("create", "--image", "agentix-test/nope:1", "--bundle", bundle())
    assert r.returncode == 1 and r.stderr.strip() == \
        "agentixctl: cannot create the sandbox: Task image 'agentix-test/nope:1' is not in Docker: pull, build " \
        "or import it first", r.stderr
    r = agentixctl("create", "--image", BUSYBOX)
    assert r.returncode == 64 and "--bundle=BUNDLE is required" in r.stderr, r.stderr


@test
def agentixctl_run_always_deletes_its_sandbox():
    before = managed_containers()
    r = agentixctl("run", "--image", BUSYBOX, "--bundle", bundle(), "--", "sh", "-c", "echo ran; exit 7")
    assert r.returncode == 7 and r.stdout == "ran\n", (r.returncode, r.stdout, r.stderr)
    assert managed_containers() == before
    # Ctrl-C, and even SIGKILL: the sandbox goes all the same.
    for sig in (signal.SIGINT, signal.SIGKILL):
        p = subprocess.Popen([AGENTIXCTL, "run", "--image", BUSYBOX, "--bundle", bundle(), "--", "sleep", "60"],
                             env=bus().env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: managed_containers() - before, 30, what="run's sandbox")
        time.sleep(0.5)
        p.send_signal(sig)
        p.communicate(timeout=30)
        wait_until(lambda: managed_containers() == before, 30, interval=0.1,
                   what=f"run's sandbox to go after {signal.Signals(sig).name}")


@test
def expired_sandboxes_are_deleted():
    path, short = create(ttl=dbus.UInt64(2))
    path2, longer = create(ttl=dbus.UInt64(2))
    dbus.Interface(bus().conn.get_object(NAME, path2), SANDBOX).Extend(dbus.UInt64(600))
    path3, shortened = create(ttl=dbus.UInt64(600))
    dbus.Interface(bus().conn.get_object(NAME, path3), SANDBOX).SetTTL(dbus.UInt64(2))
    wait_until(lambda: f"agentix-{shortened}" not in managed_containers(), 15, interval=0.1,
               what="the sandbox whose TTL was set to 2 s to go")
    t0 = time.time()
    wait_until(lambda: f"agentix-{short}" not in managed_containers(), 15, interval=0.1, what="the expired sandbox to go")
    print(f"    deleted {time.time() - t0:.1f} s after it was created with ttl 2 s")
    assert error_name(lambda: bus().manager().GetSandbox(short))[0].endswith("NoSuchSandbox")
    assert properties(path2)["State"] == "running"  # extended: still there
    bus().manager().DeleteSandbox(longer, timeout=60)


@test
def a_rebuilt_bundle_gets_a_new_carrier_and_the_old_one_goes():
    project = os.path.join(WORK, "gc-bundle")
    os.makedirs(project, exist_ok=True)

    def build(note):
        with open(os.path.join(project, "note.txt"), "w") as f:
            f.write(note)
        with open(os.path.join(project, "agentix-bundle.conf"), "w") as f:
            f.write("[Bundle]\nName=agentix-test-gc\nVersion=1\n[Tools]\nPackages=bash\n"
                    "[Files]\nCopy=note.txt share/note.txt\n")
        r = subprocess.run([AGENTIXCTL, "build", "--json", "-q", "--cache-dir", os.path.join(WORK, "cache"), project],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["id"]

    first = build("first")
    before = carriers()
    _, one = create(bundle="agentix-test-gc:1")
    old_carrier = f"agentix-carrier-{first[7:19]}"
    assert old_carrier in carriers() - before
    second = build("second")
    assert second != first
    _, two = create(bundle="agentix-test-gc:1")
    new_carrier = f"agentix-carrier-{second[7:19]}"
    assert {old_carrier, new_carrier} <= carriers()
    bus().manager().DeleteSandbox(one, timeout=60)
    # The old bundle image has no tag left and no sandbox uses its carrier: it goes.
    wait_until(lambda: old_carrier not in carriers(), 10, what="the old carrier to go")
    bus().manager().DeleteSandbox(two, timeout=60)
    time.sleep(0.5)
    assert new_carrier in carriers()  # the current build's carrier stays for the next create
    docker("rm", "-f", "-v", new_carrier)
    docker("rmi", "-f", "agentix-test-gc:1", "agentix-test-gc:latest", check=False)


def private_bus(name, env_extra=None, agentd_args=()):
    """Another bus with agentd on it (for a test that needs its own), in a directory every user
    can reach. Returns (env, connection, stop)."""
    d = tempfile.mkdtemp(prefix=f"agentix-{name}-")
    os.chmod(d, 0o755)
    daemon, address = start_dbus_daemon(d)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address, **(env_extra or {}))
    agentd = subprocess.Popen([AGENTD, *agentd_args], env=env, stderr=subprocess.DEVNULL)
    conn = dbus.bus.BusConnection(address)
    wait_until(lambda: conn.name_has_owner(NAME), 10, what="agentd on the bus")

    def stop():
        agentd.terminate()
        agentd.wait(10)
        daemon.terminate()
        daemon.wait(10)
        shutil.rmtree(d, ignore_errors=True)
    return env, conn, stop


@test
def users_see_and_reach_only_their_own_sandboxes():
    """Real users made here: two in the group agentix, one outside it."""
    uid = ensure_users()
    bundle()  # built as root
    env, conn, stop = private_bus("users")  # the bus reads the group when it starts: after it exists
    made = []
    try:
        def as_user(who, *args):
            return busctl_as(who, env["DBUS_SYSTEM_BUS_ADDRESS"], *args)

        def call(who, method, *args):
            return as_user(who, "call", NAME, MANAGER_PATH, MANAGER, method, *args)

        ids = {}
        for who in ("alice", "bob"):
            r = call(who, "CreateSandbox", "a{sv}", "2", "image", "s", BUSYBOX, "bundle", "s", bundle())
            assert r.returncode == 0, (who, r.stderr)
            ids[who] = json.loads(r.stdout)["data"][1]
            made.append(ids[who])
        a, b = ids["alice"], ids["bob"]
        labels = json.loads(docker("inspect", f"agentix-{a}").stdout)[0]["Config"]["Labels"]
        assert labels["org.agentix.owner"] == str(uid["alice"])
        # Each sees only their own; root sees both.
        for who, mine in (("alice", a), ("bob", b)):
            listed = [x[0] for x in json.loads(call(who, "ListSandboxes").stdout)["data"][0]]
            assert listed == [mine], (who, listed)
        mgr = dbus.Interface(conn.get_object(NAME, MANAGER_PATH), MANAGER)
        assert {str(x[0]) for x in mgr.ListSandboxes()} >= {a, b}
        tree = as_user("bob", "tree", "--list", NAME).stdout
        assert b in tree and a not in tree, tree
        # Another's sandbox: NotOwner, and nothing of it is reached.
        for method in ("GetRuntimeAccess", "GetSandbox", "DeleteSandbox"):
            r = call("bob", method, "s", a)
            # NotOwner names no one: not the owner's uid.
            assert r.returncode != 0 and "is not yours" in r.stderr, (method, r.stderr)
            assert "uid" not in r.stderr, (method, r.stderr)
        r = as_user("bob", "get-property", NAME, f"{MANAGER_PATH}/sandbox/{a}", SANDBOX, "State")
        assert r.returncode != 0, r.stdout
        r = call("alice", "GetRuntimeAccess", "s", a)
        assert r.returncode == 0 and json.loads(r.stdout)["data"][0] == runtime_url_of(a), r.stderr
        # Only root reloads agentd.conf.
        # (busctl prints any AccessDenied as "Access denied": ask with dbus-python to see agentd's.)
        r = subprocess.run(["runuser", "-u", USERS["alice"], "--", "/usr/bin/python3", "-c",
                            "import dbus, sys\n"
                            "try:\n"
                            f"    dbus.bus.BusConnection(sys.argv[1]).call_blocking('{NAME}', '{MANAGER_PATH}', "
                            f"'{MANAGER}', 'Reload', '', [])\n"
                            "except dbus.DBusException as e:\n"
                            "    print(e.get_dbus_name(), e.get_dbus_message())\n",
                            env["DBUS_SYSTEM_BUS_ADDRESS"]], capture_output=True, text=True, timeout=30)
        assert r.stdout.strip() == ("org.freedesktop.DBus.Error.AccessDenied Only root may reload agentd (you are uid "
                                    f"{uid['alice']})."), (r.stdout, r.stderr)
        # Outside the group: the bus itself says no.
        r = call("carol", "ListSandboxes")
        assert r.returncode != 0 and "Access denied" in r.stderr, r.stderr
        r = call("alice", "DeleteSandbox", "s", a)
        assert r.returncode == 0, r.stderr
        made.remove(a)
    finally:
        mgr = dbus.Interface(conn.get_object(NAME, MANAGER_PATH), MANAGER)
        for sid in made:
            try:
                mgr.DeleteSandbox(sid, timeout=60)
            except dbus.DBusException:
                pass
        stop()
        remove_users()


@test
def a_killed_agentd_comes_back_to_its_sandboxes():
    """SIGKILL agentd: the new one adopts the live sandboxes (same id, object, token; the
    runtime reached), removes the expired one and a container whose create never finished."""
    path, live = create(ttl=dbus.UInt64(600))
    url, token = bus().manager().GetRuntimeAccess(live)
    _, expiring = create(ttl=dbus.UInt64(2))
    now = int(time.time())
    half = "agentix-" + "f" * 16
    docker("create", "--name", half, "--label", "org.agentix.managed=1", "--label", "org.agentix.sandbox=" + "f" * 16,
           "--label", "org.agentix.owner=0", "--label", f"org.agentix.created={now}", "--label",
           f"org.agentix.expires={now + 600}", "-e", "AGENTIX_TOKEN=x", "--entrypoint", "/bin/sh", BUSYBOX)
    bus().kill_and_restart()
    time.sleep(2.5)  # the expiring sandbox's time is up while no agentd watches
    try:
        # agentd owns its name only once it has adopted: the first answer already has it.
        assert live in [str(x[0]) for x in bus().manager().ListSandboxes()]
        assert str(bus().manager().GetSandbox(live)) == path
        assert properties(path)["State"] == "running"
        assert tuple(map(str, bus().manager().GetRuntimeAccess(live))) == (url, token)
        client = RpcClient(url, token)
        try:
            assert client.call("sandbox::exec", command="echo still mine")["output"] == "still mine\n"
        finally:
            client.close()
        wait_until(lambda: f"agentix-{expiring}" not in managed_containers() and half not in managed_containers(), 15,
                   what="the expired and the half-made containers to go")
    finally:
        docker("rm", "-f", half, check=False)
        bus().manager().DeleteSandbox(live, timeout=60)
    assert f"agentix-{live}" not in managed_containers()


class Monitor:
    """busctl monitor on the bus: the signals agentd sends, as JSON lines."""

    def __init__(self, b):
        self.proc = subprocess.Popen(["busctl", "--system", "--json=short", "monitor", NAME], env=b.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines = []
        import threading
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()
        time.sleep(0.3)  # the monitor is in place

    def read(self):
        for line in self.proc.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def signals(self, member):
        return [m for m in self.lines if m.get("type") == "signal" and m.get("member") == member]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(5)


@test
def state_follows_docker_events():
    b = bus()
    mon = Monitor(b)
    try:
        path, sid = create()
        assert any(s["payload"]["data"] == [sid, path] for s in mon.signals("SandboxNew"))
        # The container dies on its own: State goes to exited, with PropertiesChanged.
        docker("kill", f"agentix-{sid}")
        wait_until(lambda: properties(path)["State"] == "exited", 10, what="State exited")
        wait_until(lambda: any(m["path"] == path and "exited" in json.dumps(m["payload"])
                               for m in mon.signals("PropertiesChanged")), 5, what="PropertiesChanged exited")
        docker("start", f"agentix-{sid}")
        wait_until(lambda: properties(path)["State"] == "running", 10, what="State running again")
        # Removed behind agentd's back: the sandbox goes too.
        docker("rm", "-f", f"agentix-{sid}")
        wait_until(lambda: any(s["payload"]["data"] == [sid, path] for s in mon.signals("SandboxRemoved")), 10,
                   what="SandboxRemoved")
        assert error_name(lambda: bus().manager().GetSandbox(sid))[0].endswith("NoSuchSandbox")
    finally:
        mon.stop()


@test
def a_hung_docker_stalls_nothing_else():
    """Docker accepts and never answers: agentd still answers every other call at once, and the
    pending create fails with a clear timeout error."""
    import socket as so
    import threading
    path = os.path.join(WORK, "hung-docker.sock")
    srv = so.socket(so.AF_UNIX)
    srv.bind(path)
    srv.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    threading.Thread(target=accept, daemon=True).start()
    env, conn, stop_bus = private_bus("hung", {"DOCKER_HOST": f"unix://{path}"}, ["--docker-timeout=3"])
    try:
        create_call = subprocess.Popen(["busctl", "--system", "--timeout=30", "call", NAME, MANAGER_PATH, MANAGER,
                                        "CreateSandbox", "a{sv}", "2", "image", "s", BUSYBOX, "bundle", "s", "b:1"],
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        mgr = dbus.Interface(conn.get_object(NAME, MANAGER_PATH), MANAGER)
        for _ in range(5):
            listed = mgr.ListSandboxes()
            dbus.Interface(conn.get_object(NAME, MANAGER_PATH), "org.freedesktop.DBus.Introspectable").Introspect()
            # Answered while the create still waits on the hung Docker: nothing else stalls.
            assert create_call.poll() is None, "the create ended before the other calls were answered"
        assert len(listed) == 1 and listed[0][2] == "creating", listed
        out, err = create_call.communicate(timeout=30)
        assert create_call.returncode != 0 and "Docker did not answer in time" in err, err
    finally:
        stop.set()
        stop_bus()
        srv.close()
        for c in held:
            c.close()


def oom_kills(container_id):
    """How many processes the container's memory limit killed, cgroup v1 or v2."""
    import glob
    for pattern, name in ((f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control", "oom_kill"),
                          (f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events", "oom_kill"),
                          (f"/sys/fs/cgroup/docker/{container_id}/memory.events", "oom_kill")):
        for path in glob.glob(pattern):
            with open(path) as f:
                return int(dict(line.split() for line in f).get(name, 0))
    raise AssertionError(f"no memory events for container {container_id}")


def pids_refused(container_id):
    """How many forks the container's pids controller refused (pids.events "max"), cgroup v1
    or v2."""
    import glob
    for pattern in (f"/sys/fs/cgroup/pids/docker/{container_id}/pids.events",
                    f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/pids.events",
                    f"/sys/fs/cgroup/docker/{container_id}/pids.events"):
        for path in glob.glob(pattern):
            with open(path) as f:
                return int(dict(line.split() for line in f)["max"])
    raise AssertionError(f"no pids.events for container {container_id}")


def runsc_registered():
    return "runsc" in json.loads(docker("info", "--format", "{{json .Runtimes}}").stdout)


@test
def a_fork_bomb_and_a_memory_hog_stay_in_their_sandbox():
    """Under runc, and under gVisor when dockerd has it."""
    for runtime in ["runc"] + (["runsc"] if runsc_registered() else []):
        print(f"    {runtime}:")
        bomb_and_hog(runtime)


def bomb_and_hog(runtime):
    """A fork bomb and a memory hog in one sandbox (limits from its config) while a second
    sandbox keeps answering within 100 ms and the host can still start processes; the bombed
    sandbox is then deleted cleanly."""
    bomb_path, bomb = create(pids=dbus.UInt64(128), memory=dbus.UInt64(128 << 20), cpus=dbus.Double(0.5),
                             runtime=runtime)
    calm_path, calm = create(runtime=runtime)
    try:
        url, token = bus().manager().GetRuntimeAccess(bomb)
        bomber = RpcClient(url, token)
        url, token = bus().manager().GetRuntimeAccess(calm)
        client = RpcClient(url, token)
        try:
            bomber.start("sandbox::exec", kwargs={
                "command": "python3 -c 'a = [bytearray(1 << 20) for _ in range(1024)]' & f(){ f|f & }; f; sleep 60",
                "timeout": 60})
            time.sleep(1)
            worst = 0.0
            for _ in range(50):
                t0 = time.perf_counter()
                assert client.call("sandbox::echo", "still here") == "still here"
                worst = max(worst, time.perf_counter() - t0)
                time.sleep(0.02)
            print(f"    slowest call beside the bomb: {worst * 1000:.1f} ms")
            # (how slow it got is reported, not asserted: a test asserts no duration)
            assert subprocess.run(["true"]).returncode == 0
            # The bomb did run, into its sandbox's pids limit: forks were refused there.
            info = json.loads(docker("inspect", f"agentix-{bomb}").stdout)[0]
            cid = info["Id"]
            if runtime == "runsc" and not info["State"]["Running"]:
                # Under gVisor the bomb's tasks live in the sandbox's own kernel (the sentry): its
                # memory limit ended the whole sandbox, and nothing else.
                print(f"    gVisor's sandbox ended, the other one and the host untouched (OOMKilled {info['State']['OOMKilled']}, "
                      f"exit status {info['State']['ExitCode']})")
                assert info["State"]["OOMKilled"] or info["State"]["ExitCode"] != 0, info["State"]
            else:
                # The hog competes with the bomb for half a CPU: give it time to reach its limit.
                wait_until(lambda: oom_kills(cid) > 0, 30, interval=0.2, what="the memory hog to be killed")
                refused, killed = pids_refused(cid), oom_kills(cid)
                print(f"    forks refused by the bombed sandbox's pids limit: {refused}; killed by its memory limit: "
                      f"{killed}")
                assert killed > 0 and (refused > 0 or runtime == "runsc")
        finally:
            bomber.sio.disconnect()
            client.close()
        t0 = time.time()
        bus().manager().DeleteSandbox(bomb, timeout=60)
        print(f"    the bombed sandbox was deleted in {time.time() - t0:.2f} s")
        assert f"agentix-{bomb}" not in managed_containers()
    finally:
        for sid in (bomb, calm):
            try:
                bus().manager().DeleteSandbox(sid, timeout=60)
            except dbus.DBusException:
                pass


@test
def agentd_stops_cleanly():
    b = bus()
    rc = b.stop()
    with open(os.path.join(WORK, "agentd.log")) as f:
        log = f.read()
    assert rc == 0, f"agentd exited with {rc}: {log[-4000:]}"
    assert "ERROR" not in log.upper().replace("ERRORS", ""), log


if __name__ == "__main__":
    try:
        main()
    finally:
        if BUS and BUS.agentd.poll() is None:
            BUS.stop()
        shutil.rmtree(WORK, ignore_errors=True)
