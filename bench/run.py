#!/usr/bin/env python3
"""`make bench`: start a fresh broker, measure, print BENCHMARKS.md-ready tables.

Measures, in order: broker start-up with a cold and a warm compile cache,
the plugin call inside the host (`gregor-bench call`), a hot reload of the
Produce handler (file write to the new version serving), then the client
suite (`gregor-bench suite`: producer matrix, consumers, end-to-end
latency, request round trips, transactional throughput against an
idempotent producer) against the running broker, and the broker's
resident memory when idle and after the suite.

Environment: BENCH_RECORDS (records per producer run, default 200000),
BENCH_TRANSACTIONS (transactions of 100 records per transactional run,
default 1000), BENCH_PARKED_FETCHES (long polls parked at once in the
parked-fetch run, default 10000).

Results go to stdout (Markdown) and bench/results/latest.json.
"""

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GREGOR_BIN", os.path.join(ROOT, "target/release/gregor"))
BENCH = os.path.join(os.path.dirname(BIN), "gregor-bench")
PLUGINS = os.environ.get("GREGOR_PLUGIN_DIR", os.path.join(ROOT, "build/plugins"))
RECORDS = os.environ.get("BENCH_RECORDS", "200000")
TRANSACTIONS = os.environ.get("BENCH_TRANSACTIONS", "1000")
PARKED_FETCHES = os.environ.get("BENCH_PARKED_FETCHES", "10000")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60):
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
    wait_port(port)
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


def main():
    results = {}
    work = tempfile.mkdtemp(prefix="gregor-bench-")
    plugin_dir = os.path.join(work, "plugins")
    shutil.copytree(PLUGINS, plugin_dir)
    cache = os.path.join(work, "cache")
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

    suite = subprocess.run([BENCH, "suite", "--bootstrap", f"127.0.0.1:{port}", "--records", RECORDS,
                            "--transactions", TRANSACTIONS, "--json", os.path.join(work, "suite.json")],
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
                             "--fetches", PARKED_FETCHES],
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
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results/latest.json"), "w") as out:
        json.dump(results, out, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
