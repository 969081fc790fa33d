#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Per-user quotas against a real dockerd: agentd.conf [Quotas] and agentd.conf.d/users/NAME.conf,
checked at creates, claims and snapshots (QuotaExceeded naming quota, ask and use), atomic under
20 concurrent creates, one user's never limiting another's, GetUsage() and agentixctl usage,
reloads that apply to new creates only, and bad settings that change nothing.

Needs what agentd_env.py needs and a running dockerd."""

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402
import agentd_env  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, CALL_AS, NAME, SANDBOX, USERS, Agentd, bundle, busctl_as,  # noqa: E402
                        cleanup, ensure_users, error_name, remove_users)

QUOTA = f"{NAME}.Error.QuotaExceeded"
MANAGER = "org.agentix.Agentd1.Manager"
STATE = {}


def agentd():
    if "agentd" not in STATE:
        STATE["uids"] = ensure_users()
        STATE["agentd"] = Agentd("quotas", "[Limits]\nDefaultCPUs=0.5\nDefaultMemory=256M\n")
    return STATE["agentd"]


def configure(main_text, users=None):
    """agentd.conf and agentd.conf.d/users/*.conf as given, then Reload()."""
    a = agentd()
    with open(a.config, "w") as f:
        f.write("[Limits]\nDefaultCPUs=0.5\nDefaultMemory=256M\n" + main_text)
    udir = a.config + ".d/users"
    os.makedirs(udir, exist_ok=True)
    for name in os.listdir(udir):
        os.remove(os.path.join(udir, name))
    for name, text in (users or {}).items():
        with open(os.path.join(udir, f"{name}.conf"), "w") as f:
            f.write(text)
    a.manager().Reload()


# Many calls of one method with no arguments but an empty a{sv}, all sent before any reply is
# read (one connection, as one user): concurrent for agentd in the strictest sense.
CALL_MANY_AS = r"""
import json, sys, dbus, dbus.lowlevel
bus = dbus.bus.BusConnection(sys.argv[1])
path, iface, method, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
out = []
def got(reply):
    if isinstance(reply, dbus.lowlevel.ErrorMessage):
        out.append({"error": reply.get_error_name(), "message": str((reply.get_args_list() or [""])[0])})
    else:
        out.append({"ok": str(reply.get_args_list()[0])})
pending = []
for _ in range(n):
    msg = dbus.lowlevel.MethodCallMessage("org.agentix.Agentd1", path, iface, method)
    msg.append(dbus.Dictionary({}, signature="sv"), signature="a{sv}")
    pending.append(bus.send_message_with_reply(msg, got, 300))
for p in pending:
    p.block()
print(json.dumps(out))
"""


def call_many_as(who, path, iface, method, n):
    r = subprocess.run(["runuser", "-u", USERS[who], "--", "/usr/bin/python3", "-c", CALL_MANY_AS, agentd().address,
                        path, iface, method, str(n)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def call_as(who, path, iface, method, args):
    return agentd_env.call_as(who, agentd().address, path, iface, method, args)


def create_as(who, *extra):
    """CreateSandbox as one of USERS: (path, id), None; or None, "ErrorName: message"."""
    args = [list(extra[i:i + 3]) for i in range(0, len(extra), 3)]
    if "pool" not in extra:  # a pool says the image and bundle itself
        args += [["image", "s", BUSYBOX], ["bundle", "s", bundle()]]
    got = call_as(who, "/org/agentix/Agentd1", MANAGER, "CreateSandbox", args)
    if "error" in got:
        return None, f"{got['error']}: {got['message']}"
    return tuple(got["ok"]), None


def delete_all():
    m = agentd().manager()
    for sid in agentd().ids():
        try:
            m.DeleteSandbox(sid, timeout=60)
        except dbus.DBusException as e:  # gone meanwhile
            assert e.get_dbus_name() == f"{NAME}.NoSuchSandbox", e


def usage(who=None, uid=None):
    if who is None:
        m = agentd().manager()
        got = m.GetUsageOf(dbus.UInt32(uid), timeout=30) if uid is not None else m.GetUsage(timeout=30)
        return {str(k): v for k, v in got.items()}
    r = busctl_as(who, agentd().address, "call", NAME, "/org/agentix/Agentd1", MANAGER,
                  *(["GetUsageOf", "u", str(uid)] if uid is not None else ["GetUsage"]))
    assert r.returncode == 0, r.stderr
    return {k: v["data"] for k, v in json.loads(r.stdout)["data"][0].items()}


@test
def over_quota_creates_of_each_kind_fail_naming_quota_ask_and_use():
    configure("[Quotas]\nMaxCPUs=2\nMaxMemory=1G\n", {"agx-bob": "[Quotas]\nMaxSandboxes=1\n"})
    try:
        made, err = create_as("alice", "cpus", "d", "1.5", "memory", "t", str(512 << 20))
        assert err is None, err
        _, first = made
        _, err = create_as("alice", "cpus", "d", "1")
        assert QUOTA in err and "MaxCPUs=2" in err and "asks for 1 CPUs" in err and "1.5 of 2" in err, err
        _, err = create_as("alice", "cpus", "d", "0.25", "memory", "t", str(768 << 20))
        assert QUOTA in err and "MaxMemory=1024M" in err and "asks for 768M" in err and "512M of 1024M" in err, err
        # Within both: taken.
        made, err = create_as("alice", "cpus", "d", "0.5", "memory", "t", str(256 << 20))
        assert err is None, err
        _, second = made
        # bob's own file: one sandbox, whatever alice holds.
        made, err = create_as("bob")
        assert err is None, err
        _, bobs = made
        _, err = create_as("bob")
        assert QUOTA in err and "MaxSandboxes=1" in err and "agx-bob" in err, err
        # Their usage, as each sees it; root sees anyone's, alice only her own.
        u = usage("alice")
        assert (u["sandboxes"], u["cpus"], u["memory"], u["max_cpus"], u["max_memory"]) == \
            (2, 2.0, 768 << 20, 2.0, 1 << 30), u
        assert "max_sandboxes" not in u, u
        assert usage(uid=STATE["uids"]["bob"])["max_sandboxes"] == 1
        r = busctl_as("alice", agentd().address, "call", NAME, "/org/agentix/Agentd1", MANAGER, "GetUsageOf", "u",
                      str(STATE["uids"]["bob"]))
        assert r.returncode != 0 and "Only root may ask for another user's usage" in r.stderr, r.stderr
        r = subprocess.run(["runuser", "-u", USERS["alice"], "--", "env",
                            f"DBUS_SYSTEM_BUS_ADDRESS={agentd().address}", AGENTIXCTL, "usage"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "Sandboxes: 2 (no quota)" in r.stdout.replace("  ", " ") and "CPUs:" in r.stdout \
            and "2 of 2" in r.stdout and "768.0 MiB of 1.0 GiB" in r.stdout, r.stdout + r.stderr
        # Root has no quota.
        assert "max_cpus" not in usage()
        for sid in (first, second, bobs):
            agentd().manager().DeleteSandbox(sid, timeout=60)
    finally:
        delete_all()


@test
def twenty_concurrent_creates_against_max_sandboxes_5_make_5_and_alice_never_limits_bob():
    configure("", {"agx-alice": "[Quotas]\nMaxSandboxes=5\n"})
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            results = list(pool.map(lambda _: create_as("alice"), range(20)))
        made = [made for made, err in results if made]
        errors = [err for made, err in results if err]
        assert len(made) == 5, (len(made), errors[:3])
        assert all(QUOTA in e and "MaxSandboxes=5" in e for e in errors), errors[:3]
        # bob is not alice: his creates go on.
        made, err = create_as("bob")
        assert err is None, err
        _, bobs = made
        assert usage(uid=STATE["uids"]["alice"])["sandboxes"] == 5
    finally:
        delete_all()


@test
def a_claim_from_a_warm_pool_counts_and_reload_applies_to_new_creates_only():
    a = agentd()
    os.makedirs(os.path.join(a.dir, "pools.d"), exist_ok=True)
    with open(os.path.join(a.dir, "pools.d", "warm.pool"), "w") as f:
        f.write(f"[Pool]\nSize=1\nImage={BUSYBOX}\nBundle={bundle()}\n")
    configure("[Quotas]\nMaxSandboxes=1\n")
    try:
        wait_until(lambda: {str(n): int(r) for n, r, _ in a.manager().ListPools()}.get("warm") == 1, 120, 0.2,
                   what="the warm pool to fill")
        # The pool's member is no one's: alice's first create claims it, and it counts.
        made, err = create_as("alice", "pool", "s", "warm")
        assert err is None, err
        path, sid = made
        assert str(dbus.Interface(a.conn.get_object(NAME, path), "org.freedesktop.DBus.Properties")
                   .Get(SANDBOX, "Pool")) == "warm"
        wait_until(lambda: {str(n): int(r) for n, r, _ in a.manager().ListPools()}.get("warm") == 1, 120, 0.2,
                   what="the pool to refill")
        _, err = create_as("alice", "pool", "s", "warm")
        assert QUOTA in err and "MaxSandboxes=1" in err, err
        assert {str(n): int(r) for n, r, _ in a.manager().ListPools()}.get("warm") == 1  # not taken
        # A higher quota: the next create goes through; one lower than what she holds touches
        # nothing that runs, only what comes.
        configure("[Quotas]\nMaxSandboxes=2\n")
        made, err = create_as("alice")
        assert err is None, err
        _, second = made
        configure("[Quotas]\nMaxSandboxes=1\n")
        assert {sid, second} <= a.ids()
        _, err = create_as("alice")
        assert QUOTA in err, err
    finally:
        os.remove(os.path.join(a.dir, "pools.d", "warm.pool"))
        configure("")
        delete_all()


@test
def snapshots_past_max_snapshots_are_refused():
    configure("", {str(STATE.get("uids", ensure_users())["alice"]): "[Quotas]\nMaxSnapshots=0\n"})
    try:
        made, err = create_as("alice")
        assert err is None, err
        path, sid = made
        got = call_as("alice", path, SANDBOX, "Snapshot", [])
        assert got.get("error") == QUOTA and "MaxSnapshots=0" in got["message"], got
    finally:
        delete_all()


def snapshots_of(uid, sid):
    """The names of uid's snapshots of sandbox sid (the dockerd may be shared: others' are not
    this test's)."""
    return {str(x[0]) for x in agentd().manager().ListSnapshots(timeout=60) if int(x[2]) == uid and str(x[1]) == sid}


@test
def twenty_concurrent_snapshots_against_max_snapshots_3_make_3():
    # The attack: one user asks for 20 snapshots at once, each counted before any is made.
    alice = STATE.get("uids", ensure_users())["alice"]
    configure("", {"agx-alice": "[Quotas]\nMaxSnapshots=3\n"})
    results, sid = [], None
    try:
        made, err = create_as("alice")
        assert err is None, err
        path, sid = made
        results = call_many_as("alice", path, SANDBOX, "Snapshot", 20)
        assert len(results) == 20, results
        taken = {r["ok"] for r in results if "ok" in r}
        errors = [r for r in results if "error" in r]
        # 3 calls answered, with 3 names: no two claimed one name (the first image would be left
        # with none, in no list and no count).
        assert len([r for r in results if "ok" in r]) == 3 and len(taken) == 3, (results, errors[:3])
        assert all(e["error"] == QUOTA and "MaxSnapshots=3" in e["message"] for e in errors), errors[:3]
        # What is left is those 3, alice's.
        assert snapshots_of(alice, sid) == taken, (snapshots_of(alice, sid), taken)
        # Once one is deleted, there is room for one again.
        agentd().manager().DeleteSnapshot(sorted(taken)[0], timeout=60)
        got = call_as("alice", path, SANDBOX, "Snapshot", [])
        assert "ok" in got, got
        got2 = call_as("alice", path, SANDBOX, "Snapshot", [])
        assert got2.get("error") == QUOTA, got2
        # Nothing else was made of it: no image without a name.
        left = set(subprocess.run(["docker", "images", "-a", "-q", "--no-trunc", "--filter",
                                   f"label=org.agentix.snapshot.sandbox={sid}"], capture_output=True,
                                  text=True).stdout.split())
        assert len(left) == 3, left
    finally:
        delete_all()
        for image in snapshots_of(alice, sid):
            agentd().manager().DeleteSnapshot(image, timeout=60)
        if sid:  # and what a failure left without a name
            ids = set(subprocess.run(["docker", "images", "-a", "-q", "--filter",
                                      f"label=org.agentix.snapshot.sandbox={sid}"], capture_output=True,
                                     text=True).stdout.split())
            if ids:
                subprocess.run(["docker", "rmi", "-f", *ids], capture_output=True)
        configure("")


# Snapshot() as one user, sent the moment a file appears (connected before): two users' calls
# at the same instant.
SNAPSHOT_AT = r"""
import json, os, sys, time, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
obj = bus.get_object("org.agentix.Agentd1", sys.argv[2])
options = dbus.Dictionary({"tag": sys.argv[4]} if sys.argv[4] else {}, signature="sv")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.001)
try:
    print(json.dumps({"ok": str(obj.get_dbus_method("Snapshot", "org.agentix.Agentd1.Sandbox")(options, timeout=300))}))
except dbus.DBusException as e:
    print(json.dumps({"error": e.get_dbus_name(), "message": e.get_dbus_message()}))
"""


@test
def a_name_among_another_users_numbered_snapshots_never_takes_theirs():
    # The attack: bob names his snapshot agentix-snapshot/ALICES-ID:N at the moment alice takes
    # her N-th; whichever commit came last had the name, and alice's image could be left with
    # none (in no list, no count, and hers no more).
    uids = STATE.get("uids") or ensure_users()
    configure("")
    a = agentd()
    alice_sid = bob_sid = None
    try:
        (apath, alice_sid), err = create_as("alice")
        assert err is None, err
        (bpath, bob_sid), err = create_as("bob")
        assert err is None, err
        for n in range(1, 6):
            go = os.path.join(a.dir, f"go-{n}")
            procs = [subprocess.Popen(["runuser", "-u", USERS[who], "--", "/usr/bin/python3", "-c", SNAPSHOT_AT,
                                       a.address, path, go, tag], stdout=subprocess.PIPE, text=True)
                     for who, path, tag in (("alice", apath, ""),
                                            ("bob", bpath, f"agentix-snapshot/{alice_sid}:{n}"))]
            time.sleep(1)  # both connected and waiting
            open(go, "w").close()
            alice_got, bob_got = (json.loads(p.communicate(timeout=300)[0]) for p in procs)
            assert "ok" in alice_got, alice_got
            listed = {str(x[0]): int(x[2]) for x in a.manager().ListSnapshots(timeout=60)}
            # Alice's name is hers; bob's, if he had one, is his and another.
            assert listed.get(alice_got["ok"]) == uids["alice"], (n, alice_got, bob_got, listed)
            if "ok" in bob_got:
                assert bob_got["ok"] != alice_got["ok"] and listed.get(bob_got["ok"]) == uids["bob"], \
                    (n, alice_got, bob_got)
            else:
                assert bob_got["error"] == f"{NAME}.NotOwner", bob_got
        # No image of either sandbox was left without a name.
        for sid in (alice_sid, bob_sid):
            left = subprocess.run(["docker", "images", "-a", "-q", "--filter", "dangling=true", "--filter",
                                   f"label=org.agentix.snapshot.sandbox={sid}"], capture_output=True,
                                  text=True).stdout.split()
            assert not left, (sid, left)
    finally:
        delete_all()
        for image in {str(x[0]) for x in a.manager().ListSnapshots(timeout=60) if str(x[1]) in (alice_sid, bob_sid)}:
            a.manager().DeleteSnapshot(image, timeout=60)
        for sid in (alice_sid, bob_sid):
            ids = set(subprocess.run(["docker", "images", "-a", "-q", "--filter",
                                      f"label=org.agentix.snapshot.sandbox={sid}"], capture_output=True,
                                     text=True).stdout.split()) if sid else set()
            if ids:
                subprocess.run(["docker", "rmi", "-f", *ids], capture_output=True)


@test
def a_memory_ask_that_wraps_the_sum_around_2_64_is_past_max_memory():
    # The attack: with no host maximum ([Limits] MaxMemory=infinity), a second create asks for
    # 2^64 - 512M, so that the sum with the 512M held wraps to 0, under any quota.
    configure("MaxMemory=infinity\n[Quotas]\nMaxMemory=1G\n")
    try:
        made, err = create_as("alice", "memory", "t", str(512 << 20))
        assert err is None, err
        for ask in ((1 << 64) - (512 << 20), (1 << 64) - 1):
            _, err = create_as("alice", "memory", "t", str(ask))
            assert err and QUOTA in err and "MaxMemory=1024M" in err, err
        assert usage(uid=STATE["uids"]["alice"])["sandboxes"] == 1
    finally:
        delete_all()
        configure("")


@test
def quota_files_a_user_could_write_are_refused():
    # The attack: a per-user file (or the users/ directory) that its user, or anyone, may write
    # is quotas they set themselves; a symlink in users/ to a file of theirs likewise.
    uids = STATE.get("uids") or ensure_users()
    a = agentd()
    configure("[Quotas]\nMaxSandboxes=1\n")
    udir = a.config + ".d/users"
    own = os.path.join(a.dir, "alice-own.conf")
    want = "quotas come only from files root alone may write"

    def attempt(what):
        name, message = error_name(lambda: a.manager().Reload())
        assert name == f"{NAME}.InvalidConfig" and want in message, (what, name, message)
        assert usage(uid=uids["alice"])["max_sandboxes"] == 1, what
        made, err = create_as("alice")
        assert err is None, err
        _, err = create_as("alice")
        assert QUOTA in err and "MaxSandboxes=1" in err, (what, err)
        delete_all()

    path = os.path.join(udir, "agx-alice.conf")
    try:
        with open(path, "w") as f:
            f.write("[Quotas]\nMaxSandboxes=100\n")
        os.chown(path, uids["alice"], -1)
        attempt("a file alice owns")
        os.remove(path)
        with open(own, "w") as f:
            f.write("[Quotas]\nMaxSandboxes=100\n")
        os.chown(own, uids["alice"], -1)
        os.symlink(own, path)
        attempt("a symlink to a file alice owns")
        os.remove(path)
        with open(path, "w") as f:
            f.write("[Quotas]\nMaxSandboxes=100\n")
        os.chmod(path, 0o666)
        attempt("a file anyone may write")
        os.chmod(path, 0o644)
        os.chmod(udir, 0o777)
        attempt("a directory anyone may write in")
        os.chmod(udir, 0o755)
        # Root's own file, mode 0644 in a directory of root's: taken.
        a.manager().Reload()
        assert usage(uid=uids["alice"])["max_sandboxes"] == 100
    finally:
        os.chmod(udir, 0o755)
        for p in (path, own):
            if os.path.lexists(p):
                os.remove(p)
        delete_all()
        configure("")


@test
def a_user_with_a_long_passwd_entry_still_gets_their_own_file():
    # The attack: a passwd entry longer than a fixed lookup buffer (a GECOS field its user may
    # edit, in LDAP say) made the name unreadable, and the file naming the user was not applied.
    STATE.get("uids") or ensure_users()
    name = "agx-long"
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["useradd", "-M", "-N", "-G", "agentix", "-s", "/usr/sbin/nologin", "-c", "x" * 5000, name],
                   check=True)
    d = None
    try:
        d = Agentd("quotas-long", "")
        os.makedirs(d.config + ".d/users")
        with open(d.config + ".d/users/agx-long.conf", "w") as f:
            f.write("[Quotas]\nMaxSandboxes=0\n")
        d.manager().Reload()
        r = subprocess.run(["runuser", "-u", name, "--", "/usr/bin/python3", "-c", CALL_AS, d.address,
                            "/org/agentix/Agentd1", MANAGER, "CreateSandbox",
                            json.dumps([["image", "s", BUSYBOX], ["bundle", "s", bundle()]])],
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got.get("error") == QUOTA and "MaxSandboxes=0" in got["message"], got
    finally:
        if d:
            for sid in re.findall(r"Sandbox (\w+): creating for uid", d.log_text()):
                try:
                    d.manager().DeleteSandbox(sid, timeout=60)
                except dbus.DBusException:
                    pass
            d.stop()
        subprocess.run(["userdel", name], capture_output=True)


@test
def bad_quota_settings_name_file_line_and_key_and_change_nothing():
    a = agentd()
    configure("[Quotas]\nMaxSandboxes=3\n")
    for text, users, want in (
            ("[Quotas]\nMaxCPUs=-1\n", {}, "agentd.conf:5: MaxCPUs=-1 is not a number of CPUs"),
            ("[Quotas]\nMaxMemory=lots\n", {}, "agentd.conf:5: MaxMemory=lots is not a size"),
            ("[Quotas]\nMaxSpoons=3\n", {}, "agentd.conf:5: unknown key MaxSpoons= in [Quotas]"),
            ("", {"agx-bob": "[Quotas]\nMaxSandboxes=-2\n"}, "users/agx-bob.conf:2: MaxSandboxes=-2 is not a number"),
            ("", {"agx-bob": "[Limits]\nMaxCPUs=1\n"}, "users/agx-bob.conf:2: a user's file has [Quotas] only")):
        name, message = error_name(lambda: configure(text, users))
        assert name == f"{NAME}.InvalidConfig" and want in message, (want, name, message)
        assert want in a.log_text(), want
        # What was in effect stays: MaxSandboxes=3.
        assert usage(uid=STATE["uids"]["alice"])["max_sandboxes"] == 3
    configure("")


if __name__ == "__main__":
    try:
        main()
    finally:
        if "agentd" in STATE:
            STATE["agentd"].stop()
        remove_users()
        cleanup()
