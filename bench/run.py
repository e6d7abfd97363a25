#!/usr/bin/env python3
"""`make bench`: start a fresh broker, measure, print BENCHMARKS.md-ready tables.

Measures, in order: broker start-up with a cold and a warm compile cache,
the plugin call inside the host (`gregor-bench call`), a hot reload of the
Produce handler (file write to the new version serving), then the client
suite (`gregor-bench suite`: producer matrix, consumers, end-to-end
latency, request round trips, transactional throughput against an
idempotent producer) against the running broker, and the broker's
resident memory when idle and after the suite.

Then the side-by-side run (`bench/peer.py`): Gregor, the peer broker
(Tansu) and the native floor (`gregor-floor`), one after the other, in
alternating rounds, with ratios.

Environment: BENCH_RECORDS (records per producer run, default 200000),
BENCH_TRANSACTIONS (transactions of 100 records per transactional run,
default 1000), BENCH_PARKED_FETCHES (long polls parked at once in the
parked-fetch run, default 10000), BENCH_ROUNDS (side-by-side rounds,
default 3), BENCH_PEER_BIN (the peer's binary).

Flags: `--quick` runs everything once and briefly (fewer records, one
side-by-side round, short latency runs): a check that it all works, not
figures to quote. `--only suite` or `--only peer` runs one of the two parts.

Results go to stdout (Markdown) and bench/results/latest.json.
"""

import argparse

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import hashlib

import peer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GREGOR_BIN", os.path.join(ROOT, "target/release/gregor"))
BENCH = os.path.join(os.path.dirname(BIN), "gregor-bench")
FLOOR = os.path.join(os.path.dirname(BIN), "gregor-floor")
PLUGINS = os.environ.get("GREGOR_PLUGIN_DIR", os.path.join(ROOT, "build/plugins"))
RECORDS = os.environ.get("BENCH_RECORDS", "200000")
TRANSACTIONS = os.environ.get("BENCH_TRANSACTIONS", "1000")
PARKED_FETCHES = os.environ.get("BENCH_PARKED_FETCHES", "10000")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=300):
    # A cold compile cache on a busy machine takes minutes to start.
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.005)
    raise SystemExit(f"broker did not listen on {port}")


def start(work, plugin_dir, cache, port, admin):
    log = open(os.path.join(work, "broker.log"), "a")
    env = dict(os.environ, GREGOR_CACHE_DIR=cache)
    began = time.time()
    proc = subprocess.Popen(
        [BIN, "serve",
         "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--set", f"log.dirs={work}/data",
         "--set", f"plugin.dir={plugin_dir}",
         "--set", f"admin.listener=127.0.0.1:{admin}",
         "--set", "plugin.watch.interval.ms=50"],
        stdout=log, stderr=log, env=env)
    try:
        wait_port(port)
    except SystemExit:
        proc.kill()
        raise
    return proc, (time.time() - began) * 1000


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def plugin_sha(admin, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/plugins", timeout=10) as response:
        for handler in json.load(response)["handlers"]:
            if handler["name"] == name:
                return handler["sha256"]
    return None


def variant(data, n):
    name = b"gregor-bench-variant"
    section = bytes([len(name)]) + name + n.to_bytes(4, "big")
    return data + bytes([0, len(section)]) + section


def gregor_suite(results, work, plugin_dir, cache, quick):
    """The Gregor-only figures: start-up, plugin call, hot reload, client suite, parked fetches."""
    records, transactions, parked_fetches = (("20000", "100", "1000") if quick
                                             else (RECORDS, TRANSACTIONS, PARKED_FETCHES))
    port, admin = free_port(), free_port()

    proc, cold = start(work, plugin_dir, cache, port, admin)
    stop(proc)
    proc, warm = start(work, plugin_dir, cache, port, admin)
    time.sleep(1)
    idle_rss = rss_mb(proc.pid)
    modules = sorted(f for f in os.listdir(plugin_dir) if f.endswith(".wasm"))
    size_kb = sum(os.path.getsize(os.path.join(plugin_dir, f)) for f in modules) / 1024
    results["startup"] = {"cold_ms": round(cold), "warm_ms": round(warm), "modules": len(modules),
                          "module_bytes_kb": round(size_kb), "idle_rss_mb": round(idle_rss, 1)}

    call = subprocess.run([BENCH, "call", "--plugin-dir", plugin_dir], capture_output=True, text=True,
                          env=dict(os.environ, GREGOR_CACHE_DIR=cache), check=True)
    results["plugin_call"] = json.loads(call.stdout.splitlines()[0])

    produce = open(os.path.join(plugin_dir, "produce.wasm"), "rb").read()
    reloads = []
    for n in range(1, 6):
        data = variant(produce, n)
        sha = hashlib.sha256(data).hexdigest()
        tmp = os.path.join(plugin_dir, ".produce.tmp")
        open(tmp, "wb").write(data)
        began = time.time()
        os.rename(tmp, os.path.join(plugin_dir, "produce.wasm"))
        while plugin_sha(admin, "produce") != sha:
            time.sleep(0.002)
        reloads.append((time.time() - began) * 1000)
    results["hot_reload_ms"] = {"first_cold_compile": round(reloads[0]), "median": round(sorted(reloads)[2]),
                                "all": [round(r) for r in reloads]}

    suite = subprocess.run([BENCH, "suite", "--bootstrap", f"127.0.0.1:{port}", "--records", records,
                            "--transactions", transactions, "--json", os.path.join(work, "suite.json")]
                           + (["--seconds", "3", "--iterations", "1000"] if quick else []),
                           capture_output=True, text=True)
    if suite.returncode != 0:
        print(suite.stdout, suite.stderr, file=sys.stderr)
        raise SystemExit("the client suite failed")
    results["after_suite_rss_mb"] = round(rss_mb(proc.pid), 1)
    stop(proc)

    # Parked long polls on a fresh broker: PARKED_FETCHES fetches wait at
    # once while round trips and end-to-end latency are measured again.
    proc, _ = start(work, plugin_dir, cache, port, admin)
    parked = subprocess.run([BENCH, "parked", "--bootstrap", f"127.0.0.1:{port}",
                             "--admin", f"127.0.0.1:{admin}", "--broker-pid", str(proc.pid),
                             "--fetches", parked_fetches],
                            capture_output=True, text=True)
    stop(proc)
    if parked.returncode != 0:
        print(parked.stdout, parked.stderr, file=sys.stderr)
        raise SystemExit("the parked-fetch run failed")
    results["parked_fetches"] = json.loads(parked.stdout.splitlines()[-1])
    results["suite"] = [json.loads(line) for line in open(os.path.join(work, "suite.json")) if line.strip()]

    s = results["startup"]
    print("## Start-up and memory\n")
    print("| modules | module bytes | start-up, cold compile cache | start-up, warm cache | idle RSS | RSS after the suite |")
    print("|---|---|---|---|---|---|")
    print(f"| {s['modules']} | {s['module_bytes_kb']} KiB | {s['cold_ms']} ms | {s['warm_ms']} ms | "
          f"{s['idle_rss_mb']} MB | {results['after_suite_rss_mb']} MB |\n")
    c = results["plugin_call"]
    print("## Plugin call inside the host (ApiVersions module, no network)\n")
    print("| pooled instance | fresh instance (instantiate + call) | empty native call |")
    print("|---|---|---|")
    print(f"| {c['pooled_call_us']} µs | {c['fresh_instance_call_us']} µs | {c['empty_native_call_ns']} ns |\n")
    h = results["hot_reload_ms"]
    print("## Hot reload of the Produce handler (file rename to new version serving)\n")
    print("| first (compile, cache miss) | median of 5 | all |")
    print("|---|---|---|")
    print(f"| {h['first_cold_compile']} ms | {h['median']} ms | {h['all']} |\n")
    print(suite.stdout)
    p = results["parked_fetches"]
    print(f"\n## {p['fetches']} parked long-poll fetches (max_wait_ms 600000, one connection each)\n")
    print("| | ApiVersions p50/p99 µs | Metadata p50/p99 µs | end-to-end p50/p99 ms |")
    print("|---|---|---|---|")
    for label, rtt, e2e in (("without", "rtt_baseline", "e2e_baseline"), ("with them parked", "rtt_parked", "e2e_parked")):
        a, m = list(p[rtt].values())[:2]
        print(f"| {label} | {a.get('p50_us')}/{a.get('p99_us')} | {m.get('p50_us')}/{m.get('p99_us')} | "
              f"{p[e2e + '_p50_ms']:.2f}/{p[e2e + '_p99_ms']:.2f} |")
    print(f"\nParked at once: {p['parked_seen']} (opened in {p['open_seconds']:.1f} s); broker RSS "
          f"{p['rss_before_kb'] / 1024:.1f} -> {p['rss_parked_kb'] / 1024:.1f} MB, "
          f"{p['bytes_per_parked_fetch'] / 1024:.1f} KiB per parked fetch (connection included); "
          f"{p['parked_after_close']} still parked {p['drain_seconds']:.1f} s after the clients closed.\n")


def side_by_side(results, work, cache, quick):
    """Gregor, the peer and the native floor in the same run (bench/peer.py)."""
    # The handlers as built (the suite's hot reload rewrote produce.wasm).
    plugin_dir = os.path.join(work, "plugins-side")
    shutil.copytree(PLUGINS, plugin_dir)
    ctx = {"work": work, "plugin_dir": plugin_dir, "cache": cache, "gregor": BIN, "bench": BENCH,
           "floor": FLOOR, "free_port": free_port, "wait_port": wait_port, "quick": quick,
           "rounds": 1 if quick else int(os.environ.get("BENCH_ROUNDS", "3")),
           "records": 40000 if quick else int(RECORDS), "rate": 2000,
           "e2e_seconds": 3 if quick else 10, "timeout": 90 if quick else 300}
    section, vs_peer, vs_floor = peer.compare(ctx)
    results["side_by_side"] = section
    results["vs_peer"] = vs_peer
    results["vs_floor"] = vs_floor
    peer.print_tables(section)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each scenario once, briefly")
    parser.add_argument("--only", choices=("suite", "peer"), help="run one part only")
    args = parser.parse_args()
    results = {"quick": args.quick, "uptime": subprocess.run(["uptime"], capture_output=True,
                                                             text=True).stdout.strip()}
    print(f"Machine: {results['uptime']}\n")
    work = tempfile.mkdtemp(prefix="gregor-bench-")
    plugin_dir = os.path.join(work, "plugins")
    shutil.copytree(PLUGINS, plugin_dir)
    cache = os.path.join(work, "cache")
    if args.only != "peer":
        gregor_suite(results, work, plugin_dir, cache, args.quick)
    if args.only != "suite":
        side_by_side(results, work, cache, args.quick)
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results/latest.json"), "w") as out:
        json.dump(results, out, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
