#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentd against bare Docker, side by side in one run, on the same task image and bundle:

  create: CreateSandbox through agentd (answered when the runtime answers /health) against the
          same container made without agentd — `docker run -d --volumes-from CARRIER ...` and,
          without the CLI's own start-up, the Engine API's create + start + inspect — each
          followed by polling /health until agentix-server listens;
  delete: DeleteSandbox against `docker rm -f -v` and the Engine API's DELETE;
  run:    `agentixctl run -- true` end to end (create, connect, exec, delete).

Medians of N runs with min and max; prints a table and one JSON line (the last).

  bench.py AGENTIXCTL IMAGE BUNDLE [RUNS]     (DBUS_SYSTEM_BUS_ADDRESS: agentd's bus)"""

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import dbus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from harness import wait_healthy  # noqa: E402

AGENTIXCTL, IMAGE, BUNDLE = sys.argv[1:4]
RUNS = int(sys.argv[4]) if len(sys.argv) > 4 else 20
DOCKER = "/usr/bin/docker"
bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
mgr = dbus.Interface(bus.get_object("org.agentix.Agentd1", "/org/agentix/Agentd1"), "org.agentix.Agentd1.Manager")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("docker")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def api(method, path, body=None):
    c = UnixHTTP("/var/run/docker.sock")
    c.request(method, "/v1.41" + path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


def wait_health(url):
    if not wait_healthy(url, 60, interval=0.002):
        sys.exit(f"{url} did not answer /health")


def stats(times):
    return {"median_ms": round(statistics.median(times) * 1000, 1), "min_ms": round(min(times) * 1000, 1),
            "max_ms": round(max(times) * 1000, 1), "runs": len(times)}


def carrier():
    mgr.DeleteSandbox(mgr.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE}, signature="sv"),
                                        timeout=120)[1], timeout=60)  # makes agentd's carrier
    out = subprocess.run([DOCKER, "ps", "-a", "--filter", "label=org.agentix.carrier", "--format", "{{.Names}}"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0]


def main():
    carrier_name = carrier()
    results = {}
    t_agentd_create, t_agentd_delete = [], []
    t_cli_create, t_cli_delete, t_api_create, t_api_delete = [], [], [], []
    limits = ["--pids-limit", "1024", "--memory", str(2 << 30), "--cpus", "1"]
    for i in range(RUNS):
        # agentd
        t0 = time.perf_counter()
        path, sid = mgr.CreateSandbox(dbus.Dictionary({"image": IMAGE, "bundle": BUNDLE}, signature="sv"), timeout=120)
        t_agentd_create.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        mgr.DeleteSandbox(sid, timeout=60)
        t_agentd_delete.append(time.perf_counter() - t0)

        # the docker CLI
        name = f"agentix-bench-{os.getpid()}-{i}"
        t0 = time.perf_counter()
        subprocess.run([DOCKER, "run", "-d", "--name", name, "--volumes-from", carrier_name, "-e", "AGENTIX_TOKEN=x",
                        "-p", "127.0.0.1::8000", *limits, "--entrypoint", "/nix/runtime/bin/agentix-server", IMAGE],
                       check=True, capture_output=True)
        port = subprocess.run([DOCKER, "port", name, "8000/tcp"], check=True, capture_output=True,
                              text=True).stdout.split()[0].rsplit(":", 1)[1]
        wait_health(f"http://127.0.0.1:{port}")
        t_cli_create.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([DOCKER, "rm", "-f", "-v", name], check=True, capture_output=True)
        t_cli_delete.append(time.perf_counter() - t0)

        # the Engine API, as agentd uses it, without agentd
        name += "-api"
        t0 = time.perf_counter()
        st, body = api("POST", f"/containers/create?name={name}", {
            "Image": IMAGE, "Entrypoint": ["/nix/runtime/bin/agentix-server"], "Env": ["AGENTIX_TOKEN=x"],
            "ExposedPorts": {"8000/tcp": {}},
            "HostConfig": {"VolumesFrom": [carrier_name], "PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1"}]},
                           "PidsLimit": 1024, "Memory": 2 << 30, "NanoCpus": 10**9}})
        assert st == 201, body
        assert api("POST", f"/containers/{name}/start")[0] == 204
        port = api("GET", f"/containers/{name}/json")[1]["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
        wait_health(f"http://127.0.0.1:{port}")
        t_api_create.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert api("DELETE", f"/containers/{name}?force=1&v=1")[0] == 204
        t_api_delete.append(time.perf_counter() - t0)

    t_run = []
    for _ in range(max(5, RUNS // 2)):
        t0 = time.perf_counter()
        subprocess.run([AGENTIXCTL, "-q", "run", f"--image={IMAGE}", f"--bundle={BUNDLE}", "--", "true"], check=True)
        t_run.append(time.perf_counter() - t0)

    results = {"create_agentd": stats(t_agentd_create), "create_docker_cli": stats(t_cli_create),
               "create_engine_api": stats(t_api_create), "delete_agentd": stats(t_agentd_delete),
               "delete_docker_cli": stats(t_cli_delete), "delete_engine_api": stats(t_api_delete),
               "agentixctl_run_true": stats(t_run)}
    print(f"{'':24} {'median':>9} {'min':>9} {'max':>9}")
    for k, v in results.items():
        print(f"{k:24} {v['median_ms']:9.1f} {v['min_ms']:9.1f} {v['max_ms']:9.1f}  ms ({v['runs']} runs)")
    c = results
    print(f"create: agentd adds {c['create_agentd']['median_ms'] - c['create_engine_api']['median_ms']:+.1f} ms to the "
          f"Engine API's median, {c['create_agentd']['median_ms'] - c['create_docker_cli']['median_ms']:+.1f} ms to "
          f"docker run's")
    print(f"delete: agentd {c['delete_agentd']['median_ms'] / c['delete_docker_cli']['median_ms']:.2f}x docker rm -f, "
          f"{c['delete_agentd']['median_ms'] / c['delete_engine_api']['median_ms']:.2f}x the Engine API")
    print(json.dumps(results))


main()
