# SPDX-License-Identifier: MIT
"""agentd's isolated network in shards (docker-shards.c), made small: with a shard size of 8, 20
sandboxes fill agentix-isolated, agentix-isolated-1 and part of agentix-isolated-2, each a bridge
of its own; a SIGKILLed agentd finds them again (same runtime URLs, the same counts); and no
sandbox on agentd's networks has a docker-proxy: agentd reaches the runtime at the container's
address on its bridge. (The isolation of sandboxes on two shards is the escape suite's.)"""

import json
import os
import subprocess
import sys
import threading

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402
from agentd_env import BUSYBOX, NAME, SANDBOX, Agentd, bundle, cleanup, docker, own_containers  # noqa: E402

SHARD_SIZE = 8
STATE = {}


def agentd():
    if "agentd" not in STATE:
        STATE["agentd"] = Agentd("shards", env_extra={"AGENTIX_NETWORK_SHARD_SIZE": str(SHARD_SIZE)})
    return STATE["agentd"]


def create_many(n):
    """n creates, 4 at a time (each thread its own bus connection)."""
    a = agentd()
    made, errors, lock = [], [], threading.Lock()

    def worker(count):
        conn = dbus.bus.BusConnection(a.address)
        manager = dbus.Interface(conn.get_object(NAME, "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")
        for _ in range(count):
            try:
                path, sid = manager.CreateSandbox(dbus.Dictionary({"image": BUSYBOX, "bundle": bundle()},
                                                                  signature="sv"), timeout=120)
                with lock:
                    made.append(str(sid))
            except dbus.DBusException as e:
                with lock:
                    errors.append(str(e))
        conn.close()
    threads = [threading.Thread(target=worker, args=(n // 4 + (i < n % 4),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return made


def network_of(sid):
    info = json.loads(docker("inspect", f"agentix-{sid}").stdout)[0]
    return info["HostConfig"]["NetworkMode"], info


def runtime_url(sid):
    a = agentd()
    path = a.manager().GetSandbox(sid)
    return str(dbus.Interface(a.conn.get_object(NAME, path), "org.freedesktop.DBus.Properties").Get(SANDBOX,
                                                                                                  "RuntimeUrl"))


def by_shard(sids):
    shards = {}
    for sid in sids:
        shards.setdefault(network_of(sid)[0], []).append(sid)
    return shards


def docker_proxies():
    r = subprocess.run(["pgrep", "-c", "-x", "docker-proxy"], capture_output=True, text=True)
    return int(r.stdout.strip() or 0)


def answers(sid):
    r = subprocess.run([os.environ["AGENTIXCTL"], f"--sandbox={sid}", "exec", "--", "sh", "-c", "echo $((6 * 7))"],
                       capture_output=True, text=True, env=agentd().env, timeout=60)
    return r.returncode == 0 and r.stdout.strip() == "42"


@test
def twenty_sandboxes_fill_three_shards_each_a_bridge_of_its_own():
    proxies = docker_proxies()
    sids = create_many(20)
    shards = by_shard(sids)
    sizes = sorted(len(v) for v in shards.values())
    assert set(shards) == {"agentix-isolated", "agentix-isolated-1", "agentix-isolated-2"}, shards.keys()
    assert sizes == [4, 8, 8], {k: len(v) for k, v in shards.items()}
    for name in shards:
        net = json.loads(docker("network", "inspect", name).stdout)[0]
        bridge = net["Options"]["com.docker.network.bridge.name"]
        assert bridge == "agentix0" + name[len("agentix-isolated"):], (name, bridge)
        assert net["Options"]["com.docker.network.bridge.enable_icc"] == "false", net["Options"]
        assert net["Labels"].get("org.agentix.managed") == "1", net["Labels"]
    # No proxy process per sandbox: the runtime is at the container's address on its bridge.
    assert docker_proxies() == proxies, (proxies, docker_proxies())
    for sid in sids:
        net, info = network_of(sid)
        address = info["NetworkSettings"]["Networks"][net]["IPAddress"]
        assert runtime_url(sid) == f"http://{address}:8000", (runtime_url(sid), address)
        assert not info["HostConfig"].get("PortBindings"), info["HostConfig"]["PortBindings"]
    for sid in sids[::4]:
        assert answers(sid), sid
    STATE["sids"] = sids


@test
def a_sigkilled_agentd_finds_the_shards_again_with_the_same_urls():
    a = agentd()
    sids = STATE["sids"]
    urls = {sid: runtime_url(sid) for sid in sids}
    a.kill_and_restart()
    wait_until(lambda: a.ids() >= set(sids), 30, what="agentd to adopt the 20 sandboxes")
    assert {sid: runtime_url(sid) for sid in sids} == urls
    assert all(answers(sid) for sid in sids[:3])
    # The counts came back too: four more fill shard 2, and the next opens shard 3.
    more = create_many(5)
    shards = by_shard(more)
    assert sorted(shards) == ["agentix-isolated-2", "agentix-isolated-3"], shards
    assert len(shards["agentix-isolated-2"]) == 4, shards
    # A deleted sandbox's place is taken again: shard 0 has room for one.
    victim = by_shard(sids)["agentix-isolated"][0]
    a.manager().DeleteSandbox(victim, timeout=60)
    one = create_many(1)
    assert network_of(one[0])[0] == "agentix-isolated", network_of(one[0])[0]
    STATE["sids"] = [s for s in sids if s != victim] + more + one


@test
def deleting_them_all_leaves_no_container_and_no_veth():
    a = agentd()
    for sid in STATE.pop("sids"):
        a.manager().DeleteSandbox(sid, timeout=60)
    assert not a.ids()
    left = own_containers()  # this test's agentd's: what a demo or a user left is not counted
    assert not left, left
    for k in ("1", "2", "3"):
        links = subprocess.run(["ip", "-o", "link", "show", "master", f"agentix0-{k}"], capture_output=True,
                               text=True).stdout
        assert not links.strip(), links


@test
def agentd_stops_cleanly():
    a = STATE.pop("agentd")
    assert a.stop() == 0, a.log_text()[-3000:]


if __name__ == "__main__":
    try:
        main()
    finally:
        if "agentd" in STATE:
            STATE["agentd"].stop()
        # The shards beyond the first are this test's: the host's agentd needs no more than one.
        for k in ("1", "2", "3"):
            docker("network", "rm", f"agentix-isolated-{k}", check=False)
        cleanup()
