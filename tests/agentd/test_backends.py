#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd's configuration and backends, each test with an agentd of its own on a private bus:
agentd.conf and its drop-ins, limits per user and in total, the Backends property and a
backend that cannot load, the podman backend against a real `podman system service`, and an
out-of-tree backend built only against the installed header and pkg-config file.

Needs what agentd_env.py needs, plus MESON_BUILD_ROOT (to install into a staging directory),
and podman (Debian's, with runc)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import free_port, main, test, wait_healthy, wait_until  # noqa: E402
from agentd_env import (AGENTD, AGENTIXCTL, BUSYBOX, MANAGER, MANAGER_PATH, NAME, SANDBOX, WORK, Agentd,  # noqa: E402
                        bundle, busctl_as, cleanup, docker, ensure_users, error_name, managed_containers,
                        remove_users)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BACKEND_DIR = os.environ["AGENTD_BACKEND_DIR"]


def show_config(config, dropins=()):
    d = os.path.join(WORK, f"show-{time.monotonic_ns()}")
    os.makedirs(os.path.join(d, "agentd.conf.d"))
    with open(os.path.join(d, "agentd.conf"), "w") as f:
        f.write(config)
    for name, text in dropins:
        with open(os.path.join(d, "agentd.conf.d", name), "w") as f:
            f.write(text)
    return subprocess.run([AGENTD, f"--config={d}/agentd.conf", "--show-config"], capture_output=True, text=True)


@test
def agentd_conf_and_its_drop_ins_are_read_and_a_bad_one_is_one_clear_line():
    r = show_config("[Sandboxes]\nDefaultTTL=2h\nMaxSandboxes=10\n\n[Limits]\nDefaultMemory=512M\nMaxMemory=4G\n",
                    [("50-site.conf", "[Sandboxes]\nMaxSandboxesPerUser=3\nDefaultTTL=30min\n"),
                     ("10-early.conf", "[Sandboxes]\nMaxSandboxesPerUser=9\n"),
                     ("README", "not a drop-in: ignored")])
    assert r.returncode == 0, r.stderr
    for line in ("DefaultTTL=1800s", "MaxSandboxes=10", "MaxSandboxesPerUser=3", "DefaultMemory=512M",
                 "MaxMemory=4G", "DefaultPids=1024", "Load=docker"):
        assert line in r.stdout.splitlines(), (line, r.stdout)
    # Unset, MaxMemory= is the host's memory (a sandbox asking for more is InvalidConfig);
    # infinity must be said.
    host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE")
    lines = show_config("").stdout.splitlines()
    max_memory = [x for x in lines if x.startswith("MaxMemory=")]
    spellings = {f"MaxMemory={host}", f"MaxMemory={host >> 20}M" if host % (1 << 20) == 0 else "",
                 f"MaxMemory={host >> 30}G" if host % (1 << 30) == 0 else ""}
    assert max_memory and max_memory[0] in spellings, (host, lines)
    assert "MaxMemory=infinity" in show_config("[Limits]\nMaxMemory=infinity\n").stdout.splitlines()
    swarm = show_config("[Swarm]\nHost=tcp://10.0.0.1:2376\nCertPath=/etc/agentix/tls\nRegistry=reg:5000\n").stdout
    assert "[Swarm]\nHost=tcp://10.0.0.1:2376\nCertPath=/etc/agentix/tls\nRegistry=reg:5000" in swarm, swarm
    cases = [
        ("[Sandboxes]\nMaxSandbox=3\n", "agentd.conf:2: unknown key MaxSandbox= in [Sandboxes]"),
        ("[Limit]\nDefaultPids=64\n", "agentd.conf:2: unknown section [Limit]"),
        ("[Limits]\nDefaultMemory=lots\n", "agentd.conf:2: DefaultMemory=lots is not a size"),
        ("[Limits]\nDefaultMemory=infinity\n", "a default is never unlimited"),
        ("[Limits]\nDefaultPids=8\n", "DefaultPids=8 is not a number of processes from 32"),
        ("[Sandboxes]\nDefaultTTL=0\n", "DefaultTTL=0 is not a time span of at least 1 s"),
        ("[Limits]\nDefaultMemory=4G\nMaxMemory=1G\n", "DefaultMemory= is above MaxMemory="),
        ("[Backends]\nLoad=docker\nDefault=podman\n", "Default= names a backend that Load= does not load"),
        ("[Backends]\nLoad=../evil\n", "'../evil' is not a backend name"),
        ("[Docker]\nSocket=docker.sock\n", "Socket=docker.sock is not an absolute path"),
        ("[Swarm]\nHost=manager:2376\n", "Host=manager:2376 is not unix:///PATH or tcp://HOST:PORT"),
        ("[Swarm]\nCertPath=tls\n", "CertPath=tls is not an absolute path"),
        ("[Swarm]\nRegistry=reg/x\n", "Registry=reg/x is not a registry's HOST[:PORT]"),
        ("[Swarm]\nPort=1\n", "unknown key Port= in [Swarm] (Host, CertPath, Registry)"),
        ("Key=1\n", "Key= comes before any [Section]"),
    ]
    for text, expected in cases:
        r = show_config(text)
        assert r.returncode == 1, (text, r.stdout)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (text, r.stderr)
    r = show_config("", [("20-bad.conf", "[Limits]\nMaxMemery=1G\n")])
    assert r.returncode == 1 and "agentd.conf.d/20-bad.conf:2: unknown key MaxMemery=" in r.stderr, r.stderr


@test
def limits_per_user_and_in_total_come_from_the_configuration():
    uid = ensure_users()
    bundle()
    a = Agentd("limits", "[Sandboxes]\nMaxSandboxes=3\nMaxSandboxesPerUser=2\nMaxTTL=1h\nDefaultTTL=10min\n"
                         "[Limits]\nDefaultMemory=256M\nMaxMemory=1G\nDefaultPids=100\nMaxCPUs=1.5\n")
    made = []
    try:
        for _ in range(2):
            made.append(str(a.create()[1]))
        name, message = error_name(a.create)
        assert name == f"{NAME}.TooManySandboxes" and "MaxSandboxesPerUser=" in message, (name, message)
        r = busctl_as("alice", a.address, "call", NAME, MANAGER_PATH, MANAGER, "CreateSandbox", "a{sv}", "2", "image",
                      "s", BUSYBOX, "bundle", "s", bundle())
        assert r.returncode == 0, r.stderr
        made.append(json.loads(r.stdout)["data"][1])
        r = busctl_as("bob", a.address, "call", NAME, MANAGER_PATH, MANAGER, "CreateSandbox", "a{sv}", "2", "image",
                      "s", BUSYBOX, "bundle", "s", bundle())
        assert r.returncode != 0 and "MaxSandboxes=" in r.stderr and "agentd runs 3" in r.stderr, r.stderr
        # The defaults reach the container; asking above the maxima is InvalidConfig naming the key.
        host = json.loads(docker("inspect", f"agentix-{made[0]}").stdout)[0]["HostConfig"]
        assert host["Memory"] == 256 << 20 and host["PidsLimit"] == 100, host
        a.manager().DeleteSandbox(made.pop(0), timeout=60)
        for config, key in ((dict(memory=dbus.UInt64(2 << 30)), "MaxMemory="), (dict(cpus=2.0), "MaxCPUs="),
                            (dict(ttl=dbus.UInt64(7200)), "MaxTTL=")):
            name, message = error_name(lambda: a.create(**config))
            assert name == f"{NAME}.InvalidConfig" and key in message, (config, name, message)
        sandbox = dbus.Interface(a.conn.get_object(NAME, a.manager().GetSandbox(made[0])), SANDBOX)
        name, message = error_name(lambda: sandbox.Extend(dbus.UInt64(3600)))
        assert name == f"{NAME}.InvalidConfig" and "MaxTTL=" in message, (name, message)
        sandbox.Extend(dbus.UInt64(600))  # within an hour from now
        r = busctl_as("alice", a.address, "get-property", NAME, MANAGER_PATH, MANAGER, "Backends")
        assert r.returncode == 0 and json.loads(r.stdout)["data"][0][:2] == ["docker", "loaded"], r.stdout
        assert uid["alice"] != 0
    finally:
        for sid in made:
            a.manager().DeleteSandbox(sid, timeout=60)
        assert a.stop() == 0, a.log_text()
        remove_users()
    assert not any(c.endswith(tuple(made)) for c in managed_containers())


@test
def a_backend_that_cannot_load_is_listed_with_why_and_the_rest_serve():
    a = Agentd("backends", "[Backends]\nLoad=docker podman nosuch\n",
               env_extra={"CONTAINER_HOST": "unix:///nonexistent/podman.sock"})
    try:
        backends = {str(n): (str(s), str(why)) for n, s, why in a.manager_property("Backends")}
        assert backends["docker"][0] == "loaded", backends
        assert backends["podman"][0] == "failed" and "CONTAINER_HOST" in backends["podman"][1] and \
            "/nonexistent/podman.sock" in backends["podman"][1], backends
        assert backends["nosuch"][0] == "failed" and "nosuch.so" in backends["nosuch"][1], backends
        assert a.manager_property("DefaultBackend") == "docker"
        name, message = error_name(lambda: a.create(backend="podman"))
        assert name == f"{NAME}.BackendUnavailable" and "CONTAINER_HOST" in message, message
        name, message = error_name(lambda: a.create(backend="kubernetes"))
        assert name == f"{NAME}.BackendUnavailable" and "docker, podman, nosuch" in message, message
        _, sid = a.create()  # docker still serves
        a.manager().DeleteSandbox(sid, timeout=60)
    finally:
        assert a.stop() == 0, a.log_text()
    # Nothing to run sandboxes on: agentd does not start.
    r = subprocess.run([AGENTD, "--config=/dev/null"], env=dict(os.environ, AGENTD_BACKEND_DIR="/nonexistent",
                                                                   DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "No backend could be loaded" in r.stderr, r.stderr


@test
def reload_takes_a_good_file_keeps_the_old_one_for_a_bad_one_and_names_what_waits_for_a_restart():
    """Manager.Reload() and SIGHUP (tests/systemd does the same through systemctl)."""
    a = Agentd("reload", "[Sandboxes]\nMaxSandboxesPerUser=4\n[Backends]\nLoad=docker podman\n",
               env_extra={"CONTAINER_HOST": "unix:///nonexistent/podman.sock"})
    monitor = subprocess.Popen(["busctl", "--system", "--json=short", "monitor", NAME], env=a.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    threading.Thread(target=lambda: seen.extend(monitor.stdout), daemon=True).start()
    time.sleep(0.3)  # the monitor is in place
    _, kept = a.create()
    try:
        def write(text):
            with open(a.config, "w") as f:
                f.write(text)

        write("[Sandboxes]\nMaxSandboxesPerUser=1\n[Runtimes]\nDefault=runc\n[Backends]\nLoad=docker podman\n"
              "Timeout=7s\n")
        a.manager().Reload()
        assert a.manager_property("DefaultRuntime") == "runc"
        name, message = error_name(a.create)  # the one kept counts: 1 is the most now
        assert name == f"{NAME}.TooManySandboxes" and "MaxSandboxesPerUser=" in message, (name, message)
        assert "Reload: [Backends] Timeout= changed; agentd takes it at its next start." in a.log_text()
        # A bad file, a default backend that did not load: nothing changes, and the error names it.
        write("[Sandboxes]\nMaxSandboxesPerUser=9\n\n[Runtimes]\nDefault=runsc\nAllowed=runc runsc\nBogus=1\n")
        name, message = error_name(a.manager().Reload)
        assert name == f"{NAME}.InvalidConfig" and message == (
            f"Reload failed, the configuration in effect is unchanged: {a.config}:7: unknown key Bogus= in [Runtimes] "
            "(Allowed, Default)"), message
        write("[Backends]\nLoad=docker podman\nDefault=podman\n")
        name, message = error_name(a.manager().Reload)
        assert name == f"{NAME}.InvalidConfig" and "Default=podman is not a backend this agentd has loaded" in message, \
            message
        assert a.manager_property("DefaultRuntime") == "runc" and a.manager_property("DefaultBackend") == "docker"
        assert a.log_text().count("Reload failed, the configuration in effect is unchanged") == 2, a.log_text()
        # SIGHUP reloads too; the sandbox made before lives on through all of it.
        write("")
        a.agentd.send_signal(signal.SIGHUP)
        wait_until(lambda: a.manager_property("DefaultRuntime") == "", 10, what="the reload SIGHUP asked for")
        assert kept in a.ids()
        _, second = a.create()
        a.manager().DeleteSandbox(second, timeout=60)
        # PropertiesChanged told watchers what the good reloads changed (runc, then "" again).
        def said():
            return [json.loads(line)["payload"]["data"] for line in list(seen)
                    if '"member":"PropertiesChanged"' in line and MANAGER_PATH + '"' in line]

        def runtimes():
            return [d[1]["DefaultRuntime"]["data"] for d in said() if d[0] == MANAGER and "DefaultRuntime" in d[1]]
        try:
            wait_until(lambda: len(runtimes()) >= 2, 10, what="the monitor to see both changes")
        except AssertionError:
            pass  # said below
        assert runtimes() == ["runc", ""], said()
    finally:
        monitor.kill()
        a.manager().DeleteSandbox(kept, timeout=60)
        assert a.stop() == 0, a.log_text()


# ---- an out-of-tree backend --------------------------------------------------------------------

def install_staging():
    """meson install of this build into a staging directory: the header and .pc file a backend
    author has."""
    stage = os.path.join(WORK, "stage")
    r = subprocess.run(["meson", "install", "-C", os.environ["MESON_BUILD_ROOT"], "--no-rebuild", "--quiet", "--destdir", stage],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
    pcs = subprocess.run(["find", stage, "-name", "agentd-backend.pc"], capture_output=True, text=True).stdout.split()
    assert len(pcs) == 1, pcs
    return stage, os.path.dirname(pcs[0])


def start_runtime(token):
    """A bare agentix-server on the host (nothing heavy runs in it here)."""
    port = free_port()
    env = dict(os.environ, AGENTIX_TOKEN=token)
    server = subprocess.Popen([os.path.join(os.environ["AGENTIX_RUNTIME_DIR"], "agentix-server"),
                               "--host=127.0.0.1", f"--port={port}"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    assert wait_healthy(f"http://127.0.0.1:{port}", 10), "agentix-server did not answer /health"
    return server, f"http://127.0.0.1:{port}"


@test
def an_out_of_tree_backend_builds_against_the_installed_header_and_serves_sandboxes():
    stage, pcdir = install_staging()
    src = os.path.join(WORK, "backend-pool")
    shutil.copytree(os.path.join(SOURCE_ROOT, "examples", "backend-pool"), src)
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=stage, PKG_CONFIG_PATH=pcdir)
    r = subprocess.run(["meson", "setup", os.path.join(src, "build"), src], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["ninja", "-C", os.path.join(src, "build")], capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stdout, r.stdout
    backends = os.path.join(WORK, "backends")
    os.makedirs(backends)
    shutil.copy(os.path.join(src, "build", "pool.so"), backends)
    shutil.copy(os.path.join(BACKEND_DIR, "docker.so"), backends)
    config = f"[Backends]\nDirectory={backends}\nLoad=docker pool\n"

    # Fails fast, naming the variable, when its setting is missing.
    a = Agentd("pool-unset", config, env_extra={"AGENTD_BACKEND_DIR": backends})
    try:
        why = {str(n): str(w) for n, s, w in a.manager_property("Backends")}
        assert "AGENTIX_POOL is not set" in why["pool"], why
    finally:
        a.stop()

    token = "pool-token-" + os.urandom(8).hex()
    server, url = start_runtime(token)
    a = Agentd("pool", config, env_extra={"AGENTD_BACKEND_DIR": backends, "AGENTIX_POOL": f"{url}={token}"})
    try:
        path, sid = a.create(backend="pool")
        assert (str(url), token) == tuple(map(str, a.manager().GetRuntimeAccess(sid)))
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "sh", "-c", "echo pooled $AGENTIX_TOKEN"],
                           capture_output=True, text=True, env=a.env, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("pooled"), r.stderr
        props = dbus.Interface(a.conn.get_object(NAME, path), "org.freedesktop.DBus.Properties").GetAll(SANDBOX)
        assert props["Backend"] == "pool" and props["State"] == "running", props
        name, message = error_name(lambda: a.create(backend="pool"))
        assert name == f"{NAME}.TooManySandboxes" and "AGENTIX_POOL" in message, message
        a.manager().DeleteSandbox(sid, timeout=60)
        _, again = a.create(backend="pool")  # back in the pool
        a.manager().DeleteSandbox(again, timeout=60)
    finally:
        server.terminate()
        server.wait(10)
        assert a.stop() == 0, a.log_text()


# ---- podman ------------------------------------------------------------------------------------

class Podman:
    """`podman system service` on a socket of its own, with runc and the limits this host allows
    (NOTES.md), and the test's images loaded from Docker."""

    def __init__(self):
        self.dir = os.path.join(WORK, "podman")
        os.makedirs(self.dir, exist_ok=True)
        conf = os.path.join(self.dir, "containers.conf")
        with open(conf, "w") as f:
            f.write('[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
        self.env = dict(os.environ, CONTAINERS_CONF=conf)
        self.socket = os.path.join(self.dir, "podman.sock")
        self.service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{self.socket}"],
                                        env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: os.path.exists(self.socket), 30, what="podman system service")

    def podman(self, *args, check=True):
        r = subprocess.run(["podman", *args], capture_output=True, text=True, env=self.env, timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {r.stderr.strip()}")
        return r

    def load_from_docker(self, *refs):
        archive = os.path.join(self.dir, "images.tar")
        docker("save", "-o", archive, *refs, timeout=300)
        self.podman("load", "-i", archive)
        os.unlink(archive)

    def sandboxes(self):
        return set(self.podman("ps", "-a", "--filter", "label=org.agentix.sandbox", "--format",
                               "{{.Names}}").stdout.split())

    def stop(self):
        for name in self.sandboxes():
            self.podman("rm", "-f", "-t", "0", name, check=False)
        for name in self.podman("ps", "-a", "--filter", "label=org.agentix.carrier", "--format",
                                "{{.Names}}").stdout.split():
            self.podman("rm", "-f", "-v", name, check=False)
        self.service.terminate()
        self.service.wait(30)


@test
def the_podman_backend_runs_sandboxes_through_podmans_own_service():
    ref = bundle()
    pm = Podman()
    a = None
    try:
        pm.load_from_docker(BUSYBOX, ref)
        a = Agentd("podman", f"[Backends]\nLoad=docker podman\n\n[Podman]\nSocket={pm.socket}\n")
        assert [tuple(map(str, b[:2])) for b in a.manager_property("Backends")] == [("docker", "loaded"),
                                                                                   ("podman", "loaded")]
        path, sid = a.create(backend="podman", pids=dbus.UInt64(64), memory=dbus.UInt64(256 << 20))
        _, other = a.create(backend="podman")
        assert {f"agentix-{sid}", f"agentix-{other}"} <= pm.sandboxes()
        assert not {f"agentix-{sid}", f"agentix-{other}"} & managed_containers()  # not in Docker
        info = json.loads(pm.podman("inspect", f"agentix-{sid}").stdout)[0]
        assert info["Config"]["Labels"]["org.agentix.sandbox"] == sid
        assert info["HostConfig"]["PidsLimit"] == 64 and info["HostConfig"]["Memory"] == 256 << 20, info["HostConfig"]
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "sh", "-c",
                            "cat /proc/1/cgroup | grep -c libpod; python3 -c 'print(6 * 7)'"],
                           capture_output=True, text=True, env=a.env, timeout=60)
        assert r.returncode == 0 and r.stdout.split()[-1] == "42", (r.stdout, r.stderr)

        # Killed and restarted: the podman sandboxes are adopted like Docker's.
        a.kill_and_restart()
        wait_until(lambda: {sid, other} <= a.ids(), 20, what="the podman sandboxes adopted")
        assert str(a.manager().GetSandbox(sid)) == str(path)
        r = subprocess.run([AGENTIXCTL, f"--sandbox={sid}", "exec", "--", "echo", "adopted"], capture_output=True,
                           text=True, env=a.env, timeout=60)
        assert r.returncode == 0 and r.stdout == "adopted\n", r.stderr

        # Podman's events reach agentd: removed behind its back, the sandbox goes.
        pm.podman("rm", "-f", "-t", "0", f"agentix-{other}")
        wait_until(lambda: other not in a.ids(), 20, what="agentd to see podman's remove")
        a.manager().DeleteSandbox(sid, timeout=60)
        assert not pm.sandboxes()
    finally:
        try:
            if a:
                assert a.stop() == 0, a.log_text()
        finally:
            pm.stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
