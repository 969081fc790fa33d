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
import subprocess
import sys

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402
from agentd_env import (AGENTIXCTL, BUSYBOX, NAME, SANDBOX, USERS, Agentd, bundle, busctl_as, cleanup,  # noqa: E402
                        ensure_users, error_name, remove_users)

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


def call_as(who, path, iface, method, args):
    r = subprocess.run(["runuser", "-u", USERS[who], "--", "/usr/bin/python3", "-c", CALL_AS, agentd().address, path,
                        iface, method, json.dumps(args)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


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
        m.DeleteSandbox(sid, timeout=60)


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
