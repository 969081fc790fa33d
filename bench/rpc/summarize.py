#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Turn run.sh's JSON lines into a table (stdout) and results.json (machine, numbers, targets)."""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def machine():
    cpu = sh("awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo")
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    pkgs = sh("dpkg-query -W -f='${Package}=${Version} ' python3-socketio python3-engineio python3-uvicorn "
              "python3-msgpack python3-wsproto python3-uvloop python3-httptools docker.io libwebsockets-dev "
              "libmsgpack-dev 2>/dev/null")
    return {
        "cpu": cpu, "cpus": os.cpu_count(), "memory": mem, "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"), "python": sh("/usr/bin/python3 --version"),
        "packages": pkgs, "load_at_end": os.getloadavg()[0],
        "agentix_commit": sh("git -C '%s' rev-parse --short HEAD" % ROOT)
        + (" (+ uncommitted changes in runtime/ or client/)"
           if sh("git -C '%s' status --porcelain runtime client" % ROOT) else ""),
    }


def main():
    lines_path, out_path = sys.argv[1], sys.argv[2]
    rows = [json.loads(l) for l in open(lines_path) if l.strip()]
    by = {}
    for r in rows:
        if r["scenario"] == "6-cp":
            continue  # one line per copy: gathered by cp_medians()
        by.setdefault(r["scenario"], {})[r["label"] + ("/" + r["phase"] if "phase" in r else "")] = r

    def get(scenario, label, key):
        r = by.get(scenario, {}).get(label)
        return None if r is None or "failed" in r else r.get(key)

    def ratio(a, b):
        return None if a in (None, 0) or b in (None, 0) else a / b

    def check(value, op, target):
        if value is None:
            return "not measured"
        ok = value <= target if op == "<=" else value >= target
        return "met" if ok else "MISSED"

    targets = []

    def target(name, value, op, goal, unit):
        targets.append({"target": name, "value": value, "op": op, "goal": goal, "unit": unit,
                        "status": check(value, op, goal)})

    # Issue 20's targets are relative to this machine's floors measured in the same run: the
    # same load generator against floor-server --hop (a minimal Socket.IO answer on
    # libwebsockets, each call through a second process and back, as agentix's go through its
    # worker), and posix_spawn() of the same program from a small C process.
    def floor(q):
        return get("1-floor", "floor-ws-echo-hop", q)

    a50, p50 = get("1-echo", "agentix", "p50_us"), get("1-echo", "peer", "p50_us")
    target("1 echo p50 / floor p50", ratio(a50, floor("p50_us")), "<=", 1.8, "×")
    target("1 echo p99 / floor p99", ratio(get("1-echo", "agentix", "p99_us"), floor("p99_us")), "<=", 2.5, "×")
    pair_floor = [ratio(get("1-echo-pairs", f"agentix-{i}", "p50_us"), get("1-echo-pairs", f"floor-{i}", "p50_us"))
                  for i in (1, 2, 3)]
    pair_floor = [x for x in pair_floor if x is not None]
    target("1 echo p50 / floor p50 (median of 3 pairs)", statistics.median(pair_floor) if pair_floor else None,
           "<=", 1.8, "×")
    target("1 echo p50 peer/agentix", ratio(p50, a50), ">=", 10, "×")
    target("2 throughput, 64 in flight (agentix)", get("2-throughput", "agentix", "calls_per_s"), ">=", 20000, "calls/s")
    e50, pe50 = get("3-exec", "agentix", "p50_us"), get("3-exec", "peer", "p50_us")
    target("3 exec `/bin/true` p50 / posix_spawn /bin/true",
           ratio(get("3b-exec-program", "agentix", "p50_us"), get("3-exec", "spawn-true", "p50_us")), "<=", 1.25, "×")
    target("3 exec `true` p50 / posix_spawn sh -c true",
           ratio(e50, get("3-exec", "spawn-sh-true", "p50_us")), "<=", 1.25, "×")
    target("3 exec p50 peer/agentix", ratio(pe50, e50), ">=", 3, "×")
    target("4 download 64 MiB (agentix)", get("4-download", "agentix", "mb_per_s_median"), ">=", 600, "MB/s")
    rss = by.get("rss", {}).get("agentix/after-warmup")
    target("5 RSS server+worker after warm-up (agentix)", None if rss is None else rss["rss_kib"] / 1024, "<=", 8, "MiB")

    # libagentix over the bare load generator, same server, same call, run right after it.
    l50 = get("1-echo", "libagentix", "p50_us")
    target("1 echo p50 libagentix/loadgen", ratio(l50, a50), "<=", 1.10, "×")
    pair_ratios = [ratio(get("1-echo-pairs", f"libagentix-{i}", "p50_us"), get("1-echo-pairs", f"agentix-{i}", "p50_us"))
                   for i in (1, 2, 3)]
    pair_ratios = [x for x in pair_ratios if x is not None]
    target("1 echo p50 libagentix/loadgen (median of 3 pairs)",
           statistics.median(pair_ratios) if pair_ratios else None, "<=", 1.10, "×")

    # agentixctl cp vs docker cp: medians over the runs of verified copies.
    def cp_medians(label, direction):
        ts = [r["seconds"] for r in rows if r["scenario"] == "6-cp" and r["label"] == label
              and r["direction"] == direction and r.get("verified")]
        return (statistics.median(ts) if ts else None), len(ts)

    cp = {(tool, d): cp_medians(tool, d) for tool in ("docker-cp", "agentixctl") for d in ("up", "down")}
    for d, name in (("up", "into"), ("down", "out of")):
        target(f"6 cp {name} the sandbox: docker cp / agentixctl time",
               ratio(cp[("docker-cp", d)][0], cp[("agentixctl", d)][0]), ">=", 1.0, "×")

    # ---- table ----
    def f(v, fmt="{:.0f}"):
        return "—" if v is None else fmt.format(v)

    out = []
    out.append(f"{'scenario':<34}{'agentix':>14}{'peer':>14}{'peer/agentix':>14}")
    for sc, title in (("1-echo", "1 echo sandbox::echo"), ("1b-ls", "1b fs::ls(empty dir)"),
                      ("3-exec", "3 exec `true`"), ("3b-exec-program", "3b exec `/bin/true`")):
        for k in ("p50_us", "p90_us", "p99_us"):
            a, p = get(sc, "agentix", k), get(sc, "peer", k)
            out.append(f"{title + ' ' + k[:3] + ' µs':<34}{f(a, '{:.1f}'):>14}{f(p, '{:.1f}'):>14}{f(ratio(p, a), '{:.1f}×'):>14}")
    a, p = get("2-throughput", "agentix", "calls_per_s"), get("2-throughput", "peer", "calls_per_s")
    out.append(f"{'2 throughput 64 in flight calls/s':<34}{f(a):>14}{f(p):>14}{f(ratio(a, p), '{:.1f}× less'):>14}")
    a, p = get("4-download", "agentix", "mb_per_s_median"), get("4-download", "peer", "mb_per_s_median")
    ta, tl = get("2-throughput", "agentix", "calls_per_s"), get("2-throughput", "libagentix-async", "calls_per_s")
    out.append(f"{'2 throughput libagentix async':<34}{f(tl):>14}{'':>14}{f(ratio(tl, ta), '{:.2f}× loadgen'):>14}")
    out.append(f"{'4 download 64 MiB MB/s (median)':<34}{f(a):>14}{f(p):>14}{f(ratio(a, p), '{:.1f}× less'):>14}")
    def mem(label, phase, key):
        r = by.get("rss", {}).get(label + "/" + phase)
        return None if r is None else sum(p[key] for p in r["processes"]) / 1024

    for phase in ("after-warmup", "after-all"):
        for key, name in (("vmrss_kib", "VmRSS"), ("pss_kib", "Pss"), ("rssanon_kib", "RssAnon")):
            va, vp = mem("agentix", phase, key), mem("peer", phase, key)
            out.append(f"{'5 ' + name + ' ' + phase + ' MiB':<34}{f(va, '{:.1f}'):>14}{f(vp, '{:.1f}'):>14}"
                       f"{f(ratio(vp, va), '{:.1f}×'):>14}")
    out.append("")
    out.append(f"{'1 echo, same server':<34}{'loadgen':>14}{'libagentix':>14}{'lib/loadgen':>14}")
    for k in ("p50_us", "p90_us", "p99_us"):
        a, l = get("1-echo", "agentix", k), get("1-echo", "libagentix", k)
        out.append(f"{'1 echo sandbox::echo ' + k[:3] + ' µs':<34}{f(a, '{:.1f}'):>14}{f(l, '{:.1f}'):>14}"
                   f"{f(ratio(l, a), '{:.2f}×'):>14}")
    for i in (1, 2, 3):
        a, l = get("1-echo-pairs", f"agentix-{i}", "p50_us"), get("1-echo-pairs", f"libagentix-{i}", "p50_us")
        if a is not None or l is not None:
            out.append(f"{'  alternating pair ' + str(i) + ' p50 µs':<34}{f(a, '{:.1f}'):>14}{f(l, '{:.1f}'):>14}"
                       f"{f(ratio(l, a), '{:.2f}×'):>14}")
    l = get("1-echo", "libagentix", "client_cpu_us_per_call")
    if l is not None:
        out.append(f"{'  libagentix client CPU per call µs':<34}{'':>14}{f(l, '{:.1f}'):>14}")
    out.append("")
    if any(n for _, n in cp.values()):
        where = {r.get("server") for r in rows if r["scenario"] == "6-cp"}
        out.append(f"6 cp 256 MiB tree (1024 × 256 KiB), median s  (agentix-server in a {'/'.join(sorted(where))})")
        out.append(f"{'':<34}{'docker cp':>14}{'agentixctl':>14}{'docker/ctl':>14}")
        for d in ("up", "down"):
            (dt, dn), (at, an) = cp[("docker-cp", d)], cp[("agentixctl", d)]
            out.append(f"{'6 cp ' + d + ' s (runs: ' + str(dn) + '/' + str(an) + ')':<34}{f(dt, '{:.3f}'):>14}"
                       f"{f(at, '{:.3f}'):>14}{f(ratio(dt, at), '{:.2f}×'):>14}")
            for tool in ("docker-cp", "agentixctl"):
                ts = [r["seconds"] for r in rows if r["scenario"] == "6-cp" and r["label"] == tool
                      and r["direction"] == d and r.get("verified")]
                out.append(f"    {tool} {d} runs: " + ", ".join(f"{t:.3f}" for t in ts))
        out.append("")
    for label, what in (("floor-ws-echo-hop", "floor-server --hop: Socket.IO on lws, a second process per call"),
                        ("floor-ws-echo", "floor-server: Socket.IO on lws, answered in place")):
        v, v99 = get("1-floor", label, "p50_us"), get("1-floor", label, "p99_us")
        out.append(f"{'1 floor: ' + label + ' p50 µs':<34}{f(v, '{:.1f}'):>14}   p99 {f(v99, '{:.1f}')}   ({what})")
    for label in ("floor-socketpair", "floor-tcp-loopback"):
        v, v99 = get("1-pingpong", label, "p50_us"), get("1-pingpong", label, "p99_us")
        out.append(f"{'1 pingpong: ' + label + ' p50 µs':<34}{f(v, '{:.1f}'):>14}   p99 {f(v99, '{:.1f}')}"
                   f"   (a byte between two processes; reference only)")
    s50, x50 = get("3c-shell", "shell-run", "p50_us"), get("3c-shell", "exec", "p50_us")
    if s50 is not None:
        out.append(f"3c shell::run('true') in a session p50 {s50:8.1f} µs   p99 {f(get('3c-shell', 'shell-run', 'p99_us'), '{:.1f}')}"
                   f"   sandbox::exec('true') p50 {f(x50, '{:.1f}')} µs   exec/session {f(ratio(x50, s50), '{:.2f}×')}")
    c50, j50 = get("3d-code", "code-run", "p50_us"), get("3d-code", "jupyter-client", "p50_us")
    if c50 is not None:
        out.append(f"3d code::run('1+1') p50 {c50 / 1000:8.2f} ms   p99 {f(get('3d-code', 'code-run', 'p99_us'), '{:.0f}')} µs"
                   f"   jupyter_client p50 {f(j50 and j50 / 1000, '{:.2f}')} ms   jupyter_client/agentix "
                   f"{f(ratio(j50, c50), '{:.2f}×')}")
    for label in ("spawn-true", "spawn-sh-true", "docker-exec"):
        v = get("3-exec", label, "p50_us")
        if v is not None:
            out.append(f"3 exec baseline {label:<14} p50 {v / 1000:8.2f} ms   p90 {get('3-exec', label, 'p90_us') / 1000:8.2f} ms")
    d50 = get("3-exec", "docker-exec", "p50_us")
    if d50 and pe50:
        out.append(f"   docker exec / peer exec = {d50 / pe50:.1f}×" + (f",  docker exec / agentix exec = {d50 / e50:.1f}×" if e50 else ""))
    out.append("")
    for t in targets:
        v = t["value"]
        out.append(f"target {t['target']:<52} {f(v, '{:.2f}'):>10} {t['unit']:<8} {t['op']} {t['goal']:<8} {t['status']}")
    failed = [r for r in rows if "failed" in r]
    for r in failed:
        out.append(f"FAILED {r['scenario']}/{r['label']}{' ' + r['direction'] + ' run ' + str(r['run']) if 'run' in r else ''}:"
                   f" {r['failed']}")
    print("\n".join(out))

    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "targets": targets,
        "runs": rows,
    }
    with open(out_path, "w") as fp:
        json.dump(doc, fp, indent=1)
    print(f"\n(wrote {out_path})")


if __name__ == "__main__":
    main()
