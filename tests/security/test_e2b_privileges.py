#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentix-e2b without CAP_SETUID/CAP_SETGID (issue 45, item 6): it acts for each key's user by
taking that user's credentials for a moment, which needs both. Run without CAP_SETGID (setpriv
drops it from the bounding set, so root's exec does not get it back), a gateway whose keys
name another user must refuse to start with a line that says why and exit status 4 (the unit's
RestartPreventExitStatus=), never start and then abort at the first request (a crash loop under
Restart=on-failure). A SIGHUP that brings such a key keeps the keys in use; the gateway goes on
serving its own user's key.

Needs AGENTIX_E2B (the gateway), dbus-daemon and setpriv, and runs as root."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

GATEWAY = os.environ["AGENTIX_E2B"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_key(user):
    r = subprocess.run([GATEWAY, f"--make-key={user}"], capture_output=True, text=True, check=True)
    return r.stdout.split()[0]


def write_keys(path, lines):
    with open(path + ".new", "w") as f:
        f.write("".join(f"{k} {u}\n" for k, u in lines))
    os.chmod(path + ".new", 0o600)
    os.rename(path + ".new", path)


def post(url, key):
    req = urllib.request.Request(url + "/sandboxes", data=b"{}", method="POST",
                                 headers={"X-API-KEY": key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (ConnectionError, urllib.error.URLError):
        return 0


def start_gateway(keys, env, log):
    port = free_port()
    gw = subprocess.Popen(["setpriv", "--bounding-set=-setgid", GATEWAY, f"--listen=127.0.0.1:{port}",
                           f"--keys={keys}"], env=env, stdout=log, stderr=subprocess.STDOUT)
    return gw, f"http://127.0.0.1:{port}"


def wait_serving(gw, url):
    for _ in range(200):
        if gw.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return True
        except urllib.error.HTTPError:
            return True
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.05)
    return False


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        # A bus of the test's own (the gateway connects to one at start); nobody answers as
        # agentd on it, which this test does not need.
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1",
                                f"--address=unix:path={d}/bus"], stdout=subprocess.PIPE, text=True)
        address = bus.stdout.readline().strip()
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address)
        keys = os.path.join(d, "keys")
        root_key, nobody_key = make_key("root"), make_key("nobody")
        log_path = os.path.join(d, "gateway.log")
        try:
            # 1. A key of another user at start: refused at once, exit 4, the reason said.
            write_keys(keys, [(root_key, "root"), (nobody_key, "nobody")])
            with open(log_path, "wb") as log:
                gw, url = start_gateway(keys, env, log)
            serving = wait_serving(gw, url)
            if serving:
                # What the old gateway did: start, then abort at the first request with the key.
                status = post(url, nobody_key)
                time.sleep(0.5)
                print(f"FAIL: started without CAP_SETGID (a request with nobody's key got {status}, "
                      f"gateway {'alive' if gw.poll() is None else 'died with ' + str(gw.returncode)})")
                failures += 1
                gw.kill()
                gw.wait()
            else:
                out = open(log_path).read()
                if gw.returncode != 4 or "nobody" not in out or "CAP_SETGID" not in out:
                    print(f"FAIL: exit {gw.returncode}, log: {out!r}")
                    failures += 1
                else:
                    print("ok: refused at start, exit 4:", out.strip().splitlines()[-1])

            # 2. Its own user's keys only: it starts; a SIGHUP bringing nobody's key keeps the
            # keys in use, and the gateway lives on.
            write_keys(keys, [(root_key, "root")])
            with open(log_path, "wb") as log:
                gw, url = start_gateway(keys, env, log)
            if not wait_serving(gw, url):
                print("FAIL: did not start with root's key only:", open(log_path).read())
                failures += 1
            else:
                write_keys(keys, [(root_key, "root"), (nobody_key, "nobody")])
                gw.send_signal(signal.SIGHUP)
                time.sleep(0.5)
                status_nobody = post(url, nobody_key)
                status_root = post(url, root_key)
                alive = gw.poll() is None
                out = open(log_path).read()
                # nobody's key was not taken: 401 as for any unknown key. root's request is
                # served (agentd is not on this bus: 503), not refused for its key.
                if status_nobody != 401 or status_root in (0, 401) or not alive or "CAP_SETGID" not in out:
                    print(f"FAIL: after SIGHUP nobody's key got {status_nobody}, root's {status_root}, "
                          f"alive {alive}, log {out!r}")
                    failures += 1
                else:
                    print(f"ok: SIGHUP kept the keys in use (nobody 401, root {status_root}), gateway alive")
                gw.terminate()
                if gw.wait(10) != 0:
                    print(f"FAIL: gateway exited {gw.returncode} on SIGTERM")
                    failures += 1
        finally:
            bus.terminate()
            bus.wait()
    print(f"{max(0, 2 - failures)} of 2 passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
