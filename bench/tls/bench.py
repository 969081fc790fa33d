# SPDX-License-Identifier: MIT
"""bench/tls/run.sh's work: see README.md. Usage: bench.py BUILD_DIR ROUNDS"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BUILD, ROUNDS = sys.argv[1], int(sys.argv[2])
SERVER = os.path.join(BUILD, "runtime/server/agentix-server")
BENCH = os.path.join(BUILD, "bench/rpc/libagentix-bench")
CTL = os.path.join(BUILD, "client/agentixctl/agentixctl")
TOKEN = "bench-tls-token-0123456789"
SIZE = 64 << 20
WORK = tempfile.mkdtemp(prefix="agentix-bench-tls-")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki():
    p = lambda n: os.path.join(WORK, n)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "1", "-subj", "/CN=bench CA",
            "-addext", "basicConstraints=critical,CA:TRUE")
    openssl("req", *ec, "-keyout", p("server.key"), "-out", p("server.csr"), "-subj", "/CN=127.0.0.1")
    with open(p("ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"), "-CAcreateserial",
            "-out", p("server.crt"), "-days", "1", "-extfile", p("ext"))
    return p("ca.crt"), p("server.crt"), p("server.key")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(extra):
    port = free_port()
    proc = subprocess.Popen([SERVER, "--host", "127.0.0.1", "--port", str(port), *extra],
                            env=dict(os.environ, AGENTIX_TOKEN=TOKEN), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.025)
    return proc, port


def latency(url, env, callable_, args, count):
    r = subprocess.run([BENCH, f"--url={url}", f"--token={TOKEN}", "--mode=latency", f"--callable={callable_}",
                        *[f"--arg-str={a}" for a in args], f"--count={count}", "--warmup=200"],
                       env=env, capture_output=True, text=True, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["p50_us"]


def download(url, env, dest):
    if os.path.exists(dest):
        os.unlink(dest)
    t = time.monotonic()
    subprocess.run([CTL, f"--url={url}", f"--token={TOKEN}", "cp", "-q", ":/tmp/agentix-bench-tls-64m", dest],
                   env=env, check=True)
    seconds = time.monotonic() - t
    assert os.path.getsize(dest) == SIZE
    return SIZE / seconds / 1e6


def main():
    ca, cert, key = make_pki()
    env = dict(os.environ, AGENTIX_CA_FILE=ca)
    plain, plain_port = start([])
    tls, tls_port = start(["--tls-cert", cert, "--tls-key", key])
    urls = {"plain": f"http://127.0.0.1:{plain_port}", "tls": f"https://127.0.0.1:{tls_port}"}
    with open("/tmp/agentix-bench-tls-64m", "wb") as f:
        f.write(os.urandom(SIZE))
    res = {k: {"echo_p50_us": [], "exec_p50_us": [], "download_MBps": []} for k in urls}
    try:
        for _ in range(ROUNDS):
            for kind, url in urls.items():  # alternated: the machine's drift hits both
                res[kind]["echo_p50_us"].append(latency(url, env, "sandbox::echo", ["x"], 5000))
                res[kind]["exec_p50_us"].append(latency(url, env, "sandbox::exec", ["true"], 500))
                res[kind]["download_MBps"].append(download(url, env, os.path.join(WORK, f"down-{kind}")))
    finally:
        for p in (plain, tls):
            p.terminate()
            p.wait(10)
        os.unlink("/tmp/agentix-bench-tls-64m")
        shutil.rmtree(WORK, ignore_errors=True)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in res.items()}
    ratios = {"echo": med["tls"]["echo_p50_us"] / med["plain"]["echo_p50_us"],
              "exec": med["tls"]["exec_p50_us"] / med["plain"]["exec_p50_us"],
              "download": med["tls"]["download_MBps"] / med["plain"]["download_MBps"]}
    print(json.dumps({"rounds": ROUNDS, "median": med, "ratio_tls_over_plain": ratios, "runs": res}))
    print(f"{'':22}{'plain':>12}{'TLS':>12}{'TLS/plain':>12}")
    for m, unit in (("echo_p50_us", "µs"), ("exec_p50_us", "µs"), ("download_MBps", "MB/s")):
        name = m.rsplit("_", 1)[0]
        print(f"{name + ' (' + unit + ')':22}{med['plain'][m]:12.1f}{med['tls'][m]:12.1f}"
              f"{med['tls'][m] / med['plain'][m]:12.2f}")


main()
