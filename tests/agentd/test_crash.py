#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd when things die: agentd killed with SIGKILL in the middle of 20 concurrent creates and
running deletes, then started again; and a dockerd restarted under a running agentd (a private
dockerd on a bridge of the test's own, so the host's dockerd is never touched).

Needs what agentd_env.py needs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import health_ok, main, test, wait_until  # noqa: E402
from agentd_env import (BUSYBOX, MANAGER, MANAGER_PATH, NAME, SANDBOX, WORK, Agentd, bundle, docker,  # noqa: E402
                        error_name, main_beside_leftovers, own_carriers, own_containers)


def container_states(names, host=None):
    """{name: Docker's status} of the named containers that exist."""
    if not names:
        return {}
    env = dict(os.environ, DOCKER_HOST=host) if host else None
    r = subprocess.run(["docker", "inspect", "--format", "{{.Name}} {{.State.Status}}", *names], capture_output=True,
                       text=True, env=env)
    return dict(line.lstrip("/").split() for line in r.stdout.splitlines())


def busctl_create(a, bind=False):
    args = ["busctl", "--system", "--json=short", "--timeout=120", "call", NAME, MANAGER_PATH, MANAGER,
            "CreateSandbox", "a{sv}", "3" if bind else "2", "image", "s", BUSYBOX, "bundle", "s", bundle()]
    if bind:
        args += ["bind_to_caller", "b", "true"]
    return subprocess.Popen(args, env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@test
def sigkill_in_the_middle_of_20_creates_and_running_deletes_leaks_nothing():
    ref = bundle()
    before = own_containers()
    a = Agentd("crash")
    try:
        keep = [a.create(labels=dbus.Dictionary({"kept": str(i)}, signature="ss")) for i in range(2)]
        access = {str(sid): tuple(map(str, a.manager().GetRuntimeAccess(sid))) for _, sid in keep}
        doomed = [str(a.create()[1]) for _ in range(2)]
        # A creator bound to its sandbox, that leaves the bus while agentd is dead.
        creator = dbus.bus.BusConnection(a.address)
        bound = str(dbus.Interface(creator.get_object(NAME, MANAGER_PATH), MANAGER).CreateSandbox(
            dbus.Dictionary({"image": BUSYBOX, "bundle": ref, "bind_to_caller": True}, signature="sv"),
            timeout=120)[1])

        creates = [busctl_create(a) for _ in range(20)]
        deletes = [subprocess.Popen(["busctl", "--system", "--timeout=120", "call", NAME, MANAGER_PATH, MANAGER,
                                     "DeleteSandbox", "s", sid], env=a.env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for sid in doomed]
        # Kill it once Docker has some of the new containers, before all are ready.
        start = time.monotonic()
        while len(own_containers() - before) < 5 + 8 and time.monotonic() - start < 10:
            time.sleep(0.02)
        a.agentd.send_signal(signal.SIGKILL)
        a.agentd.wait(10)
        answered = set()
        for p in creates:
            out, _ = p.communicate(timeout=120)
            if p.returncode == 0:
                answered.add(json.loads(out)["data"][1])
        for p in deletes:
            p.wait(120)
        creator.close()
        assert len(answered) < 20, "agentd was killed after every create had finished: the test proves nothing"
        print(f"  killed with {len(answered)} of 20 creates answered, "
              f"{len(own_containers() - before)} containers in Docker")

        a.start()

        def settled():
            mine = own_containers() - before
            states = container_states(sorted(mine))
            listed = {f"agentix-{sid}" for sid in a.ids()}
            return mine == listed and all(st == "running" for st in states.values())
        try:
            wait_until(settled, 30, what="agentd's sandboxes to match Docker's containers, all running")
        except AssertionError:
            mine = own_containers() - before
            listed = {f"agentix-{sid}" for sid in a.ids()}
            raise AssertionError(f"only in Docker: {mine - listed}, only in agentd: {listed - mine}, states: "
                                 f"{container_states(sorted(mine))}") from None
        ids = a.ids()
        log = a.log_text().split("agentd 0.1.0 on the system bus")[-1]
        print(f"  after the restart: {log.count('adopted from docker')} adopted, "
              f"{log.count('its create never finished')} half-made removed")
        # The survivors: same id, object, token; their runtime answers.
        for i, (path, sid) in enumerate(keep):
            assert str(a.manager().GetSandbox(sid)) == str(path)
            labels = dbus.Interface(a.conn.get_object(NAME, path), "org.freedesktop.DBus.Properties").Get(SANDBOX,
                                                                                                          "Labels")
            assert dict(labels) == {"kept": str(i)}, labels
            assert tuple(map(str, a.manager().GetRuntimeAccess(sid))) == access[str(sid)]
        # Every create that was answered is there; the bound one went with its creator.
        assert answered <= ids, answered - ids
        wait_until(lambda: bound not in a.ids() and f"agentix-{bound}" not in own_containers(), 20,
                   what="the sandbox bound to a creator that left to go")
        for sid in a.ids():
            url, _ = a.manager().GetRuntimeAccess(sid)
            # One whose container had just started when agentd was killed is adopted as running
            # while its runtime may still be coming up (slower under ASan): give it the time.
            wait_until(lambda: health_ok(str(url)), 20, interval=0.1, what=f"sandbox {sid}'s runtime to answer")
            props = dbus.Interface(a.conn.get_object(NAME, a.manager().GetSandbox(sid)),
                                   "org.freedesktop.DBus.Properties").GetAll(SANDBOX)
            assert props["State"] == "running", (sid, props["State"])
        # No carrier without a use: one for the bundle (unless another agentd had made it), none
        # left over.
        bundle_id = docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()
        assert own_carriers() <= {f"agentix-carrier-{bundle_id[7:19]}"}, own_carriers()
        for sid in a.ids():
            a.manager().DeleteSandbox(sid, timeout=60)
        assert not own_containers() - before
    finally:
        if a.agentd.poll() is None:
            assert a.stop() == 0, a.log_text()[-3000:]


@test
def a_delete_during_its_create_leaves_no_container():
    """The delete may come at any step of the create, even while Docker is still making the
    container agentd will no longer wait for."""
    bundle()
    before = own_containers()
    a = Agentd("delete-early")
    ids = []
    try:
        for delay in (0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3):
            known = a.ids()
            p = busctl_create(a)
            wait_until(lambda: a.ids() - known, 10, what="the new sandbox in the list")
            (sid,) = a.ids() - known
            ids.append(sid)
            time.sleep(delay)
            a.manager().DeleteSandbox(sid, timeout=60)
            out, err = p.communicate(timeout=60)
            assert p.returncode != 0 and "deleted while it was being created" in err or p.returncode == 0, err
        # agentd removes once more a little later, for a container Docker finished making after
        # the delete.
        time.sleep(6)
        left = {c for c in own_containers() - before if c.removeprefix("agentix-") in ids}
        assert not left, left
        assert a.agentd.poll() is None, a.log_text()[-3000:]
        assert not a.ids() & set(ids)
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]


class PrivateDockerd:
    """A dockerd of the test's own: its data, socket and a bridge the test made."""

    BRIDGE = "agx-test0"

    def __init__(self):
        self.dir = os.path.join(WORK, "dockerd")
        os.makedirs(self.dir, exist_ok=True)
        self.socket = os.path.join(self.dir, "docker.sock")
        self.host = f"unix://{self.socket}"
        subprocess.run(["ip", "link", "del", self.BRIDGE], capture_output=True)
        for cmd in (["ip", "link", "add", self.BRIDGE, "type", "bridge"],
                    ["ip", "addr", "add", "172.31.250.1/24", "dev", self.BRIDGE],
                    ["ip", "link", "set", self.BRIDGE, "up"]):
            subprocess.run(cmd, check=True)
        self.proc = None
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, "dockerd.log"), "ab")
        self.proc = subprocess.Popen(["dockerd", "--data-root", os.path.join(self.dir, "data"), "--exec-root",
                                      os.path.join(self.dir, "exec"), "--pidfile", os.path.join(self.dir, "pid"),
                                      "-H", self.host, "--bridge", self.BRIDGE, "--iptables=false",
                                      "--ip6tables=false"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.docker("version", check=False).returncode == 0, 60, what="the private dockerd")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()

    def docker(self, *args, check=True):
        r = subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)}: {r.stderr.strip()}")
        return r

    def destroy(self):
        if self.proc.poll() is None:
            self.stop()
        subprocess.run(["ip", "link", "del", self.BRIDGE], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


ISOLATED_BRIDGE, EGRESS_BRIDGE = "agentixtest0", "agentixtest1"


@test
def a_dockerd_restart_under_agentd_is_followed():
    ref = bundle()
    d = PrivateDockerd()
    a = None
    try:
        archive = os.path.join(d.dir, "images.tar")
        docker("save", "-o", archive, BUSYBOX, ref, timeout=300)
        d.docker("load", "-q", "-i", archive)
        os.unlink(archive)
        # Its own bridges: the interface names agentix0 and agentix1 are the host dockerd's.
        a = Agentd("dockerd", env_extra={"DOCKER_HOST": d.host, "AGENTIX_ISOLATED_BRIDGE": ISOLATED_BRIDGE,
                                         "AGENTIX_EGRESS_BRIDGE": EGRESS_BRIDGE},
                   args=["--docker-timeout=5"])
        _, one = a.create()
        _, two = a.create()
        one, two = str(one), str(two)

        def state(sid):
            return str(dbus.Interface(a.conn.get_object(NAME, a.manager().GetSandbox(sid)),
                                      "org.freedesktop.DBus.Properties").Get(SANDBOX, "State"))
        d.stop()
        # agentd still answers; a create says Docker is away.
        assert a.ids() >= {one, two}
        name, message = error_name(a.create)
        assert name == f"{NAME}.BackendUnavailable" and "Cannot reach Docker" in message, (name, message)

        d.start()
        # Docker stopped the containers on its way down, and its event history is gone with it:
        # agentd's state must come from looking again.
        wait_until(lambda: state(one) == "exited" and state(two) == "exited", 30,
                   what="agentd to see the containers stopped by the dockerd restart")
        # The event stream is followed again: changes behind agentd's back show.
        d.docker("start", f"agentix-{one}")
        wait_until(lambda: state(one) == "running", 20, what="agentd to see the container started again")
        d.docker("rm", "-f", f"agentix-{two}")
        wait_until(lambda: two not in a.ids(), 20, what="agentd to see the container removed")
        _, three = a.create()
        assert health_ok(str(a.manager().GetRuntimeAccess(three)[0]))
        for sid in (one, three):
            a.manager().DeleteSandbox(sid, timeout=60)
        names = d.docker("ps", "-a", "--filter", "label=org.agentix.sandbox", "--format", "{{.Names}}").stdout.split()
        assert not names, names
        assert "Docker's event stream ended" in a.log_text()
    finally:
        try:
            if a:
                assert a.stop() == 0, a.log_text()[-3000:]
        finally:
            d.destroy()
            for bridge in (ISOLATED_BRIDGE, EGRESS_BRIDGE):
                subprocess.run(["ip", "link", "del", bridge], capture_output=True)
                subprocess.run([os.environ["AGENTIX_FIREWALL"], "remove", bridge], check=True)


if __name__ == "__main__":
    main_beside_leftovers(main)
