#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd's /metrics against a real dockerd, read directly and scraped by a real Prometheus
(Debian's package, started here on loopback with a scrape config naming agentd's port): the
sandbox count, the create histogram by source, per-user reservations, D-Bus calls and per-sandbox
usage match what the test did. Bad [Metrics] settings (an address that is none, a port in use,
a bad boolean) are one log line naming file, line and key, and change nothing.

Needs what agentd_env.py needs, prometheus, and a running dockerd."""

import concurrent.futures
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import main, test, wait_until  # noqa: E402
from agentd_env import (BUSYBOX, NAME, USERS, Agentd, bundle, busctl_as, cleanup, docker, ensure_users,  # noqa: E402
                        error_name, remove_users)

MiB = 1 << 20
STATE = {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text"), r.headers["Content-Type"]
        return r.read().decode()


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in s.items() if n == name and want <= set(ls))


@test
def metrics_match_what_was_done_and_prometheus_scrapes_them():
    uids = ensure_users()
    port = free_port()
    a = Agentd("metrics", f"[Metrics]\nListen=127.0.0.1:{port}\nPerSandbox=yes\n")
    made = []
    prom = None
    try:
        os.makedirs(os.path.join(a.dir, "pools.d"))
        with open(os.path.join(a.dir, "pools.d", "warm.pool"), "w") as f:
            f.write(f"[Pool]\nSize=1\nImage={BUSYBOX}\nBundle={bundle()}\n")
        a.manager().Reload()
        wait_until(lambda: {str(n): int(r) for n, r, _ in a.manager().ListPools()}.get("warm") == 1, 120, 0.2,
                   what="the warm pool to fill")
        # Two cold creates of alice's (1.5 CPUs, 384 MiB between them), a claim of root's, a
        # create that fails in the backend (no such image).
        for cpus, memory in (("1", 256 * MiB), ("0.5", 128 * MiB)):
            r = busctl_as("alice", a.address, "call", NAME, "/org/agentix/Agentd1", "org.agentix.Agentd1.Manager",
                          "CreateSandbox", "a{sv}", "4", "image", "s", BUSYBOX, "bundle", "s", bundle(), "cpus", "d",
                          cpus, "memory", "t", str(memory))
            assert r.returncode == 0, r.stderr
            made.append(json.loads(r.stdout)["data"][1])
        _, sid = a.manager().CreateSandbox(dbus.Dictionary({"pool": "warm"}, signature="sv"), timeout=120)
        made.append(str(sid))
        name, _ = error_name(lambda: a.create(image="agentix-test/no-such-image:1"))
        assert name == f"{NAME}.ImageNotFound", name

        s = samples(scrape(port))
        assert value(s, "agentix_sandboxes", state="running") == 3, s
        assert value(s, "agentix_creates_total", source="cold", result="ok") == 2
        assert value(s, "agentix_creates_total", source="pool", result="ok") == 1
        assert value(s, "agentix_creates_total", source="cold", result="error") >= 1
        assert value(s, "agentix_create_duration_seconds_count", source="cold") == 2
        assert value(s, "agentix_create_duration_seconds_bucket", source="cold", le="+Inf") == 2
        assert value(s, "agentix_create_duration_seconds_sum", source="pool") > 0
        alice = str(uids["alice"])
        assert value(s, "agentix_user_sandboxes", uid=alice) == 2
        assert value(s, "agentix_user_cpus", uid=alice) == 1.5
        assert value(s, "agentix_user_memory_bytes", uid=alice) == 384 * MiB
        assert value(s, "agentix_pool_size", pool="warm") == 1
        assert value(s, "agentix_dbus_calls_total", method="CreateSandbox", result="ok") >= 2  # alice's
        assert value(s, "agentix_backend_errors_total", backend="docker") >= 1
        assert value(s, "agentix_agentd_resident_memory_bytes") > 1 * MiB
        assert value(s, "agentix_agentd_open_fds") > 3
        for sid in made:  # PerSandbox=yes
            assert value(s, "agentix_sandbox_memory_bytes", id=sid) > 0, sid
            assert value(s, "agentix_sandbox_cpu_seconds_total", id=sid) > 0, sid
        assert value(s, "agentix_sandbox_memory_limit_bytes", id=made[0]) == 256 * MiB

        # A real Prometheus scrapes it and answers the same through its query API.
        pdir = tempfile.mkdtemp(prefix="agentix-prometheus-")
        ppath = os.path.join(pdir, "prometheus.yml")
        with open(ppath, "w") as f:
            f.write(f"global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: agentd\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        pport = free_port()
        plog = open(os.path.join(pdir, "log"), "w")
        prom = subprocess.Popen([shutil.which("prometheus") or "/usr/bin/prometheus", f"--config.file={ppath}",
                                 f"--storage.tsdb.path={pdir}/data", f"--web.listen-address=127.0.0.1:{pport}"],
                                stdout=plog, stderr=subprocess.STDOUT)

        def query(q):
            url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    got = json.load(r)
            except OSError:
                return None
            res = got["data"]["result"]
            return float(res[0]["value"][1]) if res else None

        wait_until(lambda: query('up{job="agentd"}') == 1.0 and query("sum(agentix_sandboxes)") is not None, 60, 0.5,
                   what="Prometheus to scrape agentd")
        assert query('sum(agentix_sandboxes{state="running"})') == 3
        assert query('agentix_create_duration_seconds_count{source="cold"}') == 2
        assert query('agentix_creates_total{source="pool",result="ok"}') == 1
        assert query(f'agentix_user_memory_bytes{{uid="{alice}"}}') == 384 * MiB
        assert query(f'agentix_user_cpus{{uid="{alice}"}}') == 1.5
        assert query(f'agentix_sandbox_memory_limit_bytes{{id="{made[0]}"}}') == 256 * MiB
    finally:
        if prom:
            prom.terminate()
            prom.wait(20)
        for sid in made:
            a.manager().DeleteSandbox(sid, timeout=60)
        a.stop()


def sanitizer_clean(a):
    """agentd stopped: its exit status and its log (stderr included) say no sanitizer fired."""
    rc = a.stop()
    text = a.log_text()
    assert "AddressSanitizer" not in text and "runtime error:" not in text and "LeakSanitizer" not in text, text[-4000:]
    assert rc == 0, (rc, text[-2000:])


@test
def a_scrape_that_trickles_a_body_while_fifty_sandboxes_are_made_is_answered_cleanly():
    # The attack: with PerSandbox=yes, a scrape's head arrives while there is no sandbox, its
    # body trickles in while 50 are made, and it ends once they run. agentd (root) must answer
    # it as a well-formed HTTP response, survive, and no sanitizer may fire.
    port = free_port()
    a = Agentd("metrics-slow", f"[Metrics]\nListen=127.0.0.1:{port}\nPerSandbox=yes\n")
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=a.address)
    made, answer = [], b""

    def create(_):
        r = subprocess.run(["busctl", "--system", "--json=short", "--timeout=300", "call", NAME, "/org/agentix/Agentd1",
                            "org.agentix.Agentd1.Manager", "CreateSandbox", "a{sv}", "2", "image", "s", BUSYBOX,
                            "bundle", "s", bundle()], capture_output=True, text=True, env=env)
        return (json.loads(r.stdout)["data"][1], None) if r.returncode == 0 else (None, r.stderr.strip())

    def take(sock):
        nonlocal answer
        while True:
            try:
                got = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                return True
            if not got:
                return True
            answer += got

    try:
        bundle()
        body = b"x" * 4096
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body))
        sock.setblocking(False)  # (a socket with a timeout waits for data even with MSG_DONTWAIT)
        sent, closed = 0, False
        with concurrent.futures.ThreadPoolExecutor(50) as pool:
            futures = [pool.submit(create, i) for i in range(50)]
            while not all(f.done() for f in futures):
                if not closed and sent < len(body) - 1:
                    try:
                        sock.send(body[sent:sent + 1])
                        sent += 1
                    except OSError:
                        closed = True
                closed = take(sock) or closed
                time.sleep(0.3)
            made = [f.result()[0] for f in futures if f.result()[0]]
            errors = [f.result()[1] for f in futures if not f.result()[0]]
        # (Under load Docker may time out on a few; any two made during the body are the attack.)
        assert len(made) >= 2, (len(made), errors[:3])
        # Every sandbox runs: now the rest of the body.
        if not closed:
            try:
                sock.sendall(body[sent:])
            except OSError:
                pass
        sock.settimeout(30)
        while not closed and b"\r\n\r\n" not in answer:
            try:
                got = sock.recv(65536)
            except OSError:
                break
            if not got:
                break
            answer += got
        sock.close()
        assert answer.startswith(b"HTTP/1.1 400 "), (answer[:300], a.agentd.poll(), a.log_text()[-3000:])
        assert b"takes no body" in answer, answer[:600]
        assert a.agentd.poll() is None, a.log_text()[-4000:]
        # A scrape as Prometheus makes it sees every one of the 50.
        s = samples(scrape(port))
        for sid in made:
            assert value(s, "agentix_sandbox_memory_bytes", id=sid) > 0, sid
    finally:
        for sid in made:
            try:
                a.manager().DeleteSandbox(sid, timeout=60)
            except dbus.DBusException:
                pass
        # Whatever it began to make (were it dead, or had it lost count) is Docker's to remove.
        for sid in set(re.findall(r"Sandbox (\w+): creating for uid", a.log_text())):
            docker("rm", "-f", "-v", f"agentix-{sid}", check=False)
        sanitizer_clean(a)


@test
def clients_that_trickle_bodies_into_every_connection_keep_no_scrape_out():
    # The attack: as many clients as /metrics takes connections send a scrape with a body and
    # go on trickling it, a byte a second, after their answer. A scrape then is still answered.
    port = free_port()
    a = Agentd("metrics-trickle", f"[Metrics]\nListen=127.0.0.1:{port}\nPerSandbox=yes\n")
    socks = []
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
            s.setblocking(False)
            socks.append(s)
        for _ in range(15):  # past the request timeout (10 s) and the linger after an answer
            for s in socks:
                try:
                    s.send(b"x")
                except OSError:
                    pass
            time.sleep(1)
        assert value(samples(scrape(port)), "agentix_agentd_open_fds") > 3
    finally:
        for s in socks:
            s.close()
        sanitizer_clean(a)


@test
def bad_metrics_settings_name_file_line_and_key_and_change_nothing():
    # An address that is none: agentd does not start, and says where.
    d = Agentd("metrics-bad", "[Metrics]\n\nListen=localhost\n", wait=False)
    try:
        wait_until(lambda: d.agentd.poll() is not None, 10, what="agentd to refuse the file")
        assert d.agentd.returncode != 0
        assert f"{d.config}:3: Listen=localhost is not ADDR:PORT" in d.log_text(), d.log_text()
    finally:
        d.stop()
    # A port in use: one line naming the file, the line and the key; agentd runs on, without it.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        d = Agentd("metrics-busy", f"[Sandboxes]\nDefaultTTL=1h\n[Metrics]\nListen=127.0.0.1:{port}\n")
        try:
            assert f"{d.config}:4: [Metrics] Listen=127.0.0.1:{port}: cannot listen there" in d.log_text(), \
                d.log_text()
            assert d.manager().ListPools() is not None  # it serves the bus all the same
            # A reload with a bad value changes nothing and names it.
            with open(d.config, "w") as f:
                f.write("[Metrics]\nPerSandbox=maybe\n")
            name, message = error_name(d.manager().Reload)
            assert name == f"{NAME}.InvalidConfig" and f"{d.config}:2: PerSandbox=maybe is not a boolean" in message, \
                message
        finally:
            d.stop()


@test
def metrics_are_served_over_https_when_given_a_certificate():
    import ssl
    import urllib.request
    d = tempfile.mkdtemp(prefix="metrics-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    port = free_port()
    a = Agentd("metrics-tls", f"[Metrics]\nListen=127.0.0.1:{port}\nTLSCertificate={cert}\nTLSKey={key}\n")
    try:
        ctx = ssl.create_default_context(cafile=cert)
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=10) as r:
            assert r.status == 200 and b"agentix_agentd_open_fds" in r.read()
        # Plain HTTP gets nothing from it.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            raise AssertionError("/metrics answered plain HTTP")
        except (OSError, ValueError) as e:
            assert "answered" not in str(e), e
        assert "over HTTPS" in a.log_text()
    finally:
        a.stop()
    # One without the other: agentd does not start, and says why.
    b = Agentd("metrics-tls-half", f"[Metrics]\nListen=127.0.0.1:{port}\nTLSCertificate={cert}\n", wait=False)
    try:
        wait_until(lambda: b.agentd.poll() is not None, 10, what="agentd to refuse the file")
        assert "TLSCertificate= and TLSKey= go together" in b.log_text(), b.log_text()
    finally:
        b.stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        remove_users()
        cleanup()
