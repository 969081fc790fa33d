#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The port proxy against the port itself, side by side in one run: the same upstream, the same
client (http.client, a new connection per request, since the proxy takes one request per
connection), requests alternating between the two ways. Measured in the client around each
request, body read to the end: a small GET (REQUESTS times each), and a 64 MiB download
(DOWNLOADS times each). Medians, p99, ratios; a table and one JSON line.

  proxy.py local AGENTIX_SERVER [REQUESTS] [DOWNLOADS]
      agentix-server and a Python ThreadingHTTPServer on the host's loopback: what the proxy adds.
  proxy.py docker IMAGE BUNDLE [REQUESTS] [DOWNLOADS]
      a sandbox-like container (IMAGE with BUNDLE's /nix, agentix-server its entrypoint) running
      busybox httpd on port 8080, published by Docker on 127.0.0.1 beside the runtime's port:
      the port through the proxy against the same port published directly."""

import hashlib
import hmac
import http.client
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

MODE = sys.argv[1]
COUNTS = sys.argv[3:] if MODE == "local" else sys.argv[4:]
REQUESTS = int(COUNTS[0]) if len(COUNTS) > 0 else 500
DOWNLOADS = int(COUNTS[1]) if len(COUNTS) > 1 else 5
TOKEN = "bench-token-0123456789abcdef"
BIG = 64 << 20
CHUNK = bytes(range(256)) * 4096


class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/big":
            self.send_response(200)
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            for _ in range(BIG // len(CHUNK)):
                self.wfile.write(CHUNK)
            return
        body = b'{"ok": true}\n'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    n = 0
    while True:
        data = r.read(1 << 20)
        if not data:
            break
        n += len(data)
    c.close()
    assert r.status == 200, r.status
    return n


def stats(times):
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return {"median_ms": round(statistics.median(times) * 1000, 3), "p99_ms": round(p99 * 1000, 3),
            "runs": len(times)}


def wait_health(port):
    for _ in range(500):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit("agentix-server did not answer /health")


def measure(ways):
    small = {k: [] for k in ways}
    big = {k: [] for k in ways}
    for i in range(20):  # warm up both
        for port, prefix, headers in ways.values():
            get(port, prefix + "/small", headers)
    for i in range(REQUESTS):
        for k in (("direct", "proxy") if i % 2 == 0 else ("proxy", "direct")):
            port, prefix, headers = ways[k]
            t0 = time.perf_counter()
            get(port, prefix + "/small", headers)
            small[k].append(time.perf_counter() - t0)
    for i in range(DOWNLOADS):
        for k in (("direct", "proxy") if i % 2 == 0 else ("proxy", "direct")):
            port, prefix, headers = ways[k]
            t0 = time.perf_counter()
            assert get(port, prefix + "/big", headers) == BIG
            big[k].append(time.perf_counter() - t0)
    return small, big


def local():
    server = sys.argv[2]
    app_port, server_port = free_port(), free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", app_port), App)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    proc = subprocess.Popen([server, "--host", "127.0.0.1", "--port", str(server_port)],
                            env=dict(os.environ, AGENTIX_TOKEN=TOKEN), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_health(server_port)
        token = hmac.new(TOKEN.encode(), f"agentix-proxy:{app_port}".encode(), hashlib.sha256).hexdigest()
        return measure({"direct": (app_port, "", {}),
                        "proxy": (server_port, f"/proxy/{app_port}", {"Authorization": f"Bearer {token}"})})
    finally:
        proc.terminate()
        proc.wait(10)
        httpd.shutdown()


def docker(*args):
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


def in_docker():
    image, bundle = sys.argv[2], sys.argv[3]
    name = f"agentix-bench-proxy-{os.getpid()}"
    carrier = docker("create", "--name", name + "-carrier", bundle)
    try:
        docker("run", "-d", "--name", name, "--volumes-from", carrier, "-e", f"AGENTIX_TOKEN={TOKEN}",
               "-p", "127.0.0.1::8000", "-p", "127.0.0.1::8080", "--entrypoint", "/nix/runtime/bin/agentix-server",
               image)
        docker("exec", name, "/bin/sh", "-c", "mkdir -p /srv && printf '{\"ok\": true}\\n' > /srv/small && "
               f"head -c {BIG} /dev/zero > /srv/big && httpd -p 8080 -h /srv")
        runtime_port = int(docker("port", name, "8000/tcp").split()[0].rsplit(":", 1)[1])
        app_port = int(docker("port", name, "8080/tcp").split()[0].rsplit(":", 1)[1])
        wait_health(runtime_port)
        token = hmac.new(TOKEN.encode(), b"agentix-proxy:8080", hashlib.sha256).hexdigest()
        return measure({"direct": (app_port, "", {}),
                        "proxy": (runtime_port, "/proxy/8080", {"Authorization": f"Bearer {token}"})})
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name, name + "-carrier"], capture_output=True)


def main():
    small, big = local() if MODE == "local" else in_docker()
    ways = small.keys()
    results = {f"small_{k}": stats(v) for k, v in small.items()}
    results.update({f"download_64MiB_{k}": stats(v) for k, v in big.items()})
    for k in ways:
        results[f"download_64MiB_{k}"]["MiB_per_s"] = round(64 / statistics.median(big[k]), 1)
    print(f"{'':24} {'median':>10} {'p99':>10}")
    for k, v in results.items():
        extra = f"  {v['MiB_per_s']} MiB/s" if "MiB_per_s" in v else ""
        print(f"{k:24} {v['median_ms']:10.3f} {v['p99_ms']:10.3f}  ms ({v['runs']} runs){extra}")
    s = results["small_proxy"]["median_ms"] / results["small_direct"]["median_ms"]
    d = results["download_64MiB_proxy"]["median_ms"] / results["download_64MiB_direct"]["median_ms"]
    print(f"through the proxy: a small GET takes {s:.2f}x, a 64 MiB download {d:.2f}x the time of the port "
          "itself (medians)")
    print(json.dumps(results))


main()
