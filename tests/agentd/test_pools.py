#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Warm pools (pools.d/NAME.pool): agentd keeps sandboxes ready, invisible and owned by no one;
a create that matches takes one (a token minted at the claim, the create's env and workdir,
the TTL from then); the pool refills; reloads resize and replace pools; a SIGKILLed agentd
finds its claims again (and finishes one it had recorded but not made), and its pools' members.

Needs what agentd_env.py needs."""

import json
import os
import signal
import sys
import tempfile
import threading
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, main, test, wait_until  # noqa: E402
from agentd_env import (BUSYBOX, INSTANCE, INSTANCE_LABEL, MANAGER, NAME, SANDBOX, Agentd, bundle, docker,  # noqa: E402
                        error_name, main_beside_leftovers, own_containers)

STATE = tempfile.mkdtemp(prefix="agentix-pools-state-")
AGENTD = None


def pool_file(name, size, **keys):
    keys = {"Image": BUSYBOX, **keys}
    text = f"[Pool]\nSize={size}\nBundle={bundle()}\n" + "".join(f"{k}={v}\n" for k, v in keys.items())
    os.makedirs(os.path.join(AGENTD.dir, "pools.d"), exist_ok=True)
    path = os.path.join(AGENTD.dir, "pools.d", f"{name}.pool")
    if size is None:
        os.unlink(path)
        return
    with open(path, "w") as f:
        f.write(text)


def agentd():
    global AGENTD
    if AGENTD is None:
        bundle()
        AGENTD = Agentd("pools", "[Sandboxes]\nMaxSandboxes=40\n", env_extra={"STATE_DIRECTORY": STATE})
    return AGENTD


def pools():
    return {str(n): (int(r), int(s)) for n, r, s in agentd().manager().ListPools()}


def members(pool="small"):
    """{container name: start token} of the pool's containers (claimed ones included): this
    test's agentd's, not another agentd's pool of the same name."""
    out = own_containers(f"org.agentix.pool={pool}")
    got = {}
    for name in out:
        r = docker("inspect", name, check=False)
        if r.returncode != 0:
            continue  # removed since it was listed (a member agentd replaces)
        env = json.loads(r.stdout)[0]["Config"]["Env"]
        got[name] = next(e.split("=", 1)[1] for e in env if e.startswith("AGENTIX_TOKEN="))
    return got


def claimed_ids():
    return {f[:-5] for f in os.listdir(os.path.join(STATE, "claims"))} if os.path.isdir(os.path.join(STATE, "claims")) \
        else set()


def sandbox_props(path):
    obj = agentd().conn.get_object(NAME, path)
    return dbus.Interface(obj, "org.freedesktop.DBus.Properties").GetAll(SANDBOX)


def refused(url, token):
    try:
        RpcClient(url, token).close()
    except Exception:
        return True
    return False


@test
def a_pool_fills_and_stays_out_of_sight():
    a = agentd()
    pool_file("small", 2, Memory="256M")
    a.manager().Reload()
    wait_until(lambda: pools().get("small") == (2, 2), 60, interval=0.2, what="the pool to fill")
    assert len(members()) == 2
    assert a.ids() == set(), a.ids()  # nobody's: not listed, no object
    for name in members():
        labels = json.loads(docker("inspect", name).stdout)[0]["Config"]["Labels"]
        assert labels["org.agentix.pool"] == "small" and labels["org.agentix.owner"] == "0", labels


@test
def a_create_that_matches_takes_a_ready_one_with_a_new_token():
    a = agentd()
    before = members()
    path, sid = a.create(memory=dbus.UInt64(256 << 20), env=dbus.Dictionary({"GREETING": "hi"}, signature="ss"),
                         workdir="/work/here", ttl=dbus.UInt64(600))
    props = sandbox_props(path)
    assert props["Pool"] == "small" and props["State"] == "running", props
    assert f"agentix-{sid}" in before, (sid, before)  # one of the ready ones, not a new container
    assert abs(int(props["ExpiresAt"]) / 1e6 - (time.time() + 600)) < 30, props["ExpiresAt"]
    url, token = map(str, a.manager().GetRuntimeAccess(sid))
    start_token = before[f"agentix-{sid}"]
    assert token != start_token
    assert refused(url, start_token), "the start token still gets in"
    c = RpcClient(url, token)
    try:
        got = c.call("sandbox::exec", command="echo $GREETING; pwd; echo ${AGENTIX_CLAIMABLE:-none}")["output"]
        assert got == "hi\n/work/here\nnone\n", got
    finally:
        c.close()
    assert claimed_ids() == {sid}
    # The pool makes another behind; a create it cannot serve (other memory) is made cold.
    wait_until(lambda: pools()["small"] == (2, 2), 60, interval=0.2, what="the refill")
    path2, cold = a.create(memory=dbus.UInt64(300 << 20))
    assert sandbox_props(path2)["Pool"] == "" and cold not in {n[8:] for n in members()}
    a.manager().DeleteSandbox(cold, timeout=60)
    a.claimed = sid


@test
def a_create_naming_the_pool_takes_a_ready_one_and_names_its_errors():
    a = agentd()
    wait_until(lambda: pools()["small"] == (2, 2), 60, interval=0.2, what="the refill")
    before = members()
    path, sid = a.manager().CreateSandbox(dbus.Dictionary({"pool": "small", "ttl": dbus.UInt64(300)}, signature="sv"),
                                          timeout=120)
    props = sandbox_props(path)
    assert props["Pool"] == "small" and props["State"] == "running", props
    assert f"agentix-{sid}" in before, (sid, before)
    assert claimed_ids() >= {sid}
    name, message = error_name(lambda: a.manager().CreateSandbox(dbus.Dictionary({"pool": "nosuch"}, signature="sv")))
    assert name == f"{NAME}.InvalidConfig" and "'nosuch'" in message, (name, message)
    name, message = error_name(lambda: a.manager().CreateSandbox(
        dbus.Dictionary({"pool": "small", "memory": dbus.UInt64(256 << 20)}, signature="sv")))
    assert name == f"{NAME}.InvalidConfig" and "'memory'" in message and "pool" in message, (name, message)
    name, message = error_name(lambda: a.manager().CreateSandbox(dbus.Dictionary({"pool": "../x"}, signature="sv")))
    assert name == f"{NAME}.InvalidConfig" and "not a pool name" in message, (name, message)
    a.manager().DeleteSandbox(sid, timeout=60)


@test
def a_killed_agentd_finds_its_claims_and_its_pools_again():
    a = agentd()
    sid = a.claimed
    url, token = map(str, a.manager().GetRuntimeAccess(sid))
    ready = set(members()) - {f"agentix-{sid}"}
    a.kill_and_restart()
    # The claimed one: same owner, token, pool; the ready ones: back in their pool, not remade.
    assert tuple(map(str, a.manager().GetRuntimeAccess(sid))) == (url, token)
    assert sandbox_props(a.manager().GetSandbox(sid))["Pool"] == "small"
    assert pools()["small"] == (2, 2), pools()
    assert set(members()) - {f"agentix-{sid}"} == ready


@test
def a_claim_recorded_but_not_made_is_finished_by_the_next_agentd():
    """As if agentd died after writing the claim and before the runtime had it."""
    a = agentd()
    a.agentd.kill()
    a.agentd.wait(10)
    name, start_token = sorted((n, t) for n, t in members().items() if n[8:] not in claimed_ids())[0]
    sid, new_token = name[8:], "f" * 64
    os.makedirs(os.path.join(STATE, "claims"), exist_ok=True)
    now = int(time.time() * 1e6)
    with open(os.path.join(STATE, "claims", f"{sid}.json"), "w") as f:
        json.dump({"id": sid, "owner": 0, "token": new_token, "created_at": now, "expires_at": now + 600_000_000,
                   "pool": "small", "env": ["FINISHED=yes"], "workdir": "/finished", "labels": []}, f)
    a.start()
    url, token = map(str, a.manager().GetRuntimeAccess(sid))
    assert token == new_token
    wait_until(lambda: refused(url, start_token), 10, interval=0.2, what="the claim to be made")
    c = RpcClient(url, new_token)
    try:
        assert c.call("sandbox::exec", command="echo $FINISHED; pwd")["output"] == "yes\n/finished\n"
    finally:
        c.close()
    a.manager().DeleteSandbox(sid, timeout=60)
    assert sid not in claimed_ids()
    wait_until(lambda: pools()["small"] == (2, 2), 60, interval=0.2, what="the refill")


@test
def concurrent_creates_never_share_a_sandbox():
    a = agentd()
    results, errors = [], []

    def one():
        try:
            results.append(a.create(memory=dbus.UInt64(256 << 20)))
        except dbus.DBusException as e:
            errors.append(e)
    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    ids = [str(sid) for _, sid in results]
    assert len(set(ids)) == 6, ids
    pooled = [sid for path, sid in results if sandbox_props(path)["Pool"] == "small"]
    assert len(pooled) >= 1, pooled  # (at most the 2 ready; the rest cold or refilled meanwhile)
    tokens = {str(a.manager().GetRuntimeAccess(sid)[1]) for sid in ids}
    assert len(tokens) == 6
    for sid in ids:
        a.manager().DeleteSandbox(sid, timeout=60)


@test
def reload_resizes_replaces_and_drops_pools_and_leaves_claims_alone():
    a = agentd()
    sid = a.claimed
    wait_until(lambda: pools()["small"] == (2, 2), 60, interval=0.2, what="a full pool")
    pool_file("small", 1, Memory="256M")
    a.manager().Reload()
    assert pools()["small"] == (1, 1)
    wait_until(lambda: len(members()) == 2, 30, interval=0.2, what="the surplus to go")  # 1 ready + the claimed
    old = set(members()) - {f"agentix-{sid}"}
    pool_file("small", 1, Memory="320M")
    a.manager().Reload()
    wait_until(lambda: pools()["small"] == (1, 1) and set(members()) - {f"agentix-{sid}"} - old, 60, interval=0.2,
               what="the pool's sandboxes to be replaced")
    name = next(iter(set(members()) - {f"agentix-{sid}"}))
    assert json.loads(docker("inspect", name).stdout)[0]["HostConfig"]["Memory"] == 320 << 20
    pool_file("small", None)
    a.manager().Reload()
    assert pools() == {}
    wait_until(lambda: set(members()) == {f"agentix-{sid}"}, 30, interval=0.2, what="the pool's sandboxes to go")
    assert sid in a.ids()  # the claimed one is untouched
    a.manager().DeleteSandbox(sid, timeout=60)


@test
def a_ready_sandbox_that_dies_is_replaced():
    a = agentd()
    pool_file("small", 2, Memory="256M")
    a.manager().Reload()
    wait_until(lambda: pools().get("small") == (2, 2), 60, interval=0.2, what="a full pool")
    victim = sorted(members())[0]
    docker("kill", victim)
    wait_until(lambda: victim not in members() and pools()["small"] == (2, 2), 60, interval=0.2,
               what="the dead one to be replaced")
    assert "stopped (die) while it waited: replacing it" in a.log_text()


@test
def a_claim_that_fails_is_made_good_by_a_cold_create():
    """Every ready one frozen (docker pause: its runtime cannot answer the claim): the create
    still gets a sandbox, made for it, after the claim's connection gives up."""
    a = agentd()
    wait_until(lambda: pools().get("small") == (2, 2), 60, interval=0.2, what="a full pool")
    frozen = sorted(members())
    for name in frozen:
        docker("pause", name)
    try:
        path, sid = a.create(memory=dbus.UInt64(256 << 20))
        assert sandbox_props(path)["Pool"] == "" and f"agentix-{sid}" not in frozen, (sid, frozen)
        assert "making one for the create instead" in a.log_text()
        assert frozen[0] not in members() or frozen[1] not in members()  # the one tried went
        a.manager().DeleteSandbox(sid, timeout=60)
    finally:
        for name in frozen:
            docker("unpause", name, check=False)


@test
def agentixctl_lists_pools_and_says_when_a_create_came_from_one():
    import subprocess
    from agentd_env import AGENTIXCTL
    a = agentd()
    wait_until(lambda: pools().get("small") == (2, 2), 60, interval=0.2, what="a full pool")

    def ctl(*args):
        r = subprocess.run([AGENTIXCTL, *args], env=a.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r
    assert ctl("pools").stdout.split("\n")[1].split() == ["small", "2", "2", "-"]
    assert [json.loads(line) for line in ctl("pools", "--json").stdout.splitlines()] == \
        [{"name": "small", "ready": 2, "size": 2, "error": None}]
    r = ctl("create", f"--image={BUSYBOX}", f"--bundle={bundle()}", "--memory=256M")
    sid = r.stdout.strip()
    assert len(sid) == 16 and r.stderr == "From warm pool small.\n", (r.stdout, r.stderr)
    assert "Pool: small" in ctl("status", sid).stdout
    made = json.loads(ctl("create", "--json", f"--image={BUSYBOX}", f"--bundle={bundle()}", "--memory=200M").stdout)
    assert made["pool"] == "", made
    ctl("delete", sid, made["id"])


def check_no_sandbox_has_two_owners(a):
    """After a restart: every pool container is either one claimed sandbox (listed, its record's
    owner and token, which its runtime takes) or one ready member (no record), never both."""
    conts = members()
    listed = {}
    for sid in a.ids():
        path = a.manager().GetSandbox(sid)
        if sandbox_props(path)["Pool"]:
            listed[sid] = str(a.manager().GetRuntimeAccess(sid)[1])
    records = claimed_ids()
    assert set(listed) == records, (listed, records)
    for sid, token in listed.items():
        with open(os.path.join(STATE, "claims", f"{sid}.json")) as f:
            assert json.load(f)["token"] == token
        assert f"agentix-{sid}" in conts
    ready = sum(r for r, _ in pools().values())
    assert len(conts) == len(listed) + ready, (len(conts), listed, pools())


@test
def sigkill_during_twenty_claims_and_refills_leaves_every_sandbox_one_owner():
    a = agentd()
    pool_file("small", 6, Memory="256M")
    a.manager().Reload()
    wait_until(lambda: pools().get("small") == (6, 6), 90, interval=0.2, what="a full pool")
    import subprocess
    procs = [subprocess.Popen(["busctl", "--system", "--json=short", "--timeout=120", "call", NAME,
                               "/org/agentix/Agentd1", MANAGER, "CreateSandbox", "a{sv}", "3", "image", "s", BUSYBOX,
                               "bundle", "s", bundle(), "memory", "t", str(256 << 20)], env=a.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(20)]
    time.sleep(0.4)  # claims answered, cold creates and refills under way
    a.agentd.kill()
    a.agentd.wait(10)
    for p in procs:
        p.communicate(timeout=120)
    a.start()
    # Settled: half-made ones removed, the pool refilled.
    wait_until(lambda: pools()["small"] == (6, 6), 90, interval=0.2, what="the pool refilled after the restart")
    check_no_sandbox_has_two_owners(a)
    # Each claimed one still answers its owner's token.
    for sid in list(a.ids()):
        url, token = map(str, a.manager().GetRuntimeAccess(sid))
        c = RpcClient(url, token)
        c.close()
        a.manager().DeleteSandbox(sid, timeout=60)
    assert claimed_ids() == set()
    pool_file("small", 2, Memory="256M")
    a.manager().Reload()


@test
def a_pool_whose_image_is_gone_says_so_once_and_in_pool_errors_and_backs_off():
    a = agentd()
    pool_file("ghost", 1, **{"Image": "agentix-test/no-such-image:1"})
    a.manager().Reload()
    time.sleep(4)  # a first failure, then retries at 1 s and 2 s
    assert pools()["ghost"] == (0, 1)
    said = [line for line in a.log_text().splitlines() if "Pool ghost cannot make sandboxes" in line]
    assert len(said) == 1 and "no-such-image" in said[0], said
    # ... and so does the Manager (PoolErrors), which agentixctl pools shows.
    errors = {str(k): str(v) for k, v in dbus.Interface(a.conn.get_object(NAME, "/org/agentix/Agentd1"),
                                                        "org.freedesktop.DBus.Properties").Get(MANAGER, "PoolErrors").items()}
    assert list(errors) == ["ghost"] and "no-such-image" in errors["ghost"], errors
    import subprocess
    from agentd_env import AGENTIXCTL
    out = subprocess.run([AGENTIXCTL, "pools"], env=a.env, capture_output=True, text=True, timeout=60).stdout
    line = next(x for x in out.splitlines() if x.startswith("ghost"))
    assert line.split()[1:3] == ["0", "1"] and "no-such-image" in line, out
    pool_file("ghost", None)
    a.manager().Reload()


@test
def bad_pool_files_name_file_line_and_key():
    a = agentd()
    pool_file("broken", 1, Memory="lots")
    name, message = error_name(a.manager().Reload)
    assert name == f"{NAME}.InvalidConfig" and "pools.d/broken.pool:5: Memory=lots is not a size" in message, message
    pool_file("broken", 1, Bogus="1")
    name, message = error_name(a.manager().Reload)
    assert "pools.d/broken.pool:5: unknown key Bogus= in [Pool]" in message, message
    pool_file("broken", 50)
    name, message = error_name(a.manager().Reload)
    assert "add up to more than agentd.conf's MaxSandboxes=" in message, message
    pool_file("broken", None)


@test
def delete_on_stop_removes_the_pools_sandboxes_too():
    global AGENTD
    a = agentd()
    wait_until(lambda: pools().get("small") == (2, 2), 60, interval=0.2, what="a full pool")
    with open(a.config, "a") as f:
        f.write("DeleteOnStop=yes\n")
    a.manager().Reload()
    assert a.stop() == 0, a.log_text()
    AGENTD = None
    assert members() == {}, members()
    assert "Removing the pools' 2 ready sandbox(es) (DeleteOnStop=yes)." in a.log_text()


def stop_and_remove_pools(status):
    """agentd stopped; the pools' sandboxes outlive it (the next one adopts them): this test's
    go now. Returns 1 when the test left any sandbox behind."""
    if AGENTD:
        if status:
            print("agentd's log, the end:\n" + AGENTD.log_text()[-4000:])
        AGENTD.stop()
    # Every sandbox has the label, empty unless it is a pool's.
    for line in docker("ps", "-a", "--filter", f"label={INSTANCE_LABEL}={INSTANCE}", "--format",
                       '{{.Names}} {{.Label "org.agentix.pool"}}').stdout.splitlines():
        name, _, pool = line.partition(" ")
        if pool:
            docker("rm", "-f", "-v", name, check=False)
    left = own_containers() - BEFORE
    if left:
        print(f"left behind: {sorted(left)}")
        return 1
    return 0


if __name__ == "__main__":
    BEFORE = own_containers()
    main_beside_leftovers(main, stop_and_remove_pools)
