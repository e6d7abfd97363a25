#!/usr/bin/env python3
"""The cost of one interceptor per request (issue 18 item 4): Produce with
no interceptor, with `passthrough` (hands everything on unchanged, without
decoding: the fixed price of a link in the chain) and with `json_validator`
(decodes the request and parses every record value), over loopback
against a real broker.

Three parts, each alternating the three variants round by round (the
machine is shared, so each variant sees the same load over a run):

1. `rps`: one-record Produce v3 requests (acks=1) of 100 B and 1 KiB
   values over 1 and 10 connections, one request in flight each: requests/s,
   latency p50/p99 and broker CPU (user + system, /proc) per request.
2. `gregor-bench produce` (librdkafka, acks=1, linger.ms=5, batches up
   to 1 MB): records/s, delivery latency p50/p99 and broker CPU per GiB,
   a fresh broker per round (a warm-up run first, outside the window).
3. `gregor-bench call-interceptor`: the chain's two hooks inside the host,
   no network, per request (microseconds).

Values are JSON strings, so the validator passes every record and the
broker appends the same bytes in every variant. Prints Markdown tables of
the medians (and the ratios to no interceptor) and writes every round to
bench/results/interceptors.json. `make bench-interceptors`; never part
of `make test`; nothing is asserted. python3 stdlib.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_proc import cpu_seconds, free_port, wait_port  # noqa: E402

# The validator checks the topics the benchmarks write to.
VALIDATED = "rps,bench-*,warmup"
VARIANTS = [
    ("none", []),
    ("passthrough", ["plugin.interceptors.produce=passthrough"]),
    ("json_validator", [
        "plugin.interceptors.produce=json_validator",
        "plugin.grants.json_validator=metadata.read",
        f"json.validator.topics={VALIDATED}",
    ]),
]
EXAMPLES = ["passthrough", "json_validator"]


def plugin_dir(plugins, examples, into):
    """The standard modules plus the two example interceptors."""
    for name in os.listdir(plugins):
        if name.endswith(".wasm"):
            os.symlink(os.path.join(plugins, name), os.path.join(into, name))
    for name in EXAMPLES:
        source = os.path.join(examples, f"{name}.wasm")
        if not os.path.exists(source):
            sys.exit(f"{source} missing: run `make build`")
        shutil.copy(source, os.path.join(into, f"{name}.wasm"))
    return into


def load():
    return [round(x, 2) for x in os.getloadavg()]


def rps_part(args, plugins):
    """Part 1: rps with every variant, per record size; its JSON rows."""
    rows = []
    for size in args.sizes:
        out = os.path.join(tempfile.gettempdir(), f"gregor-interceptors-rps-{os.getpid()}.json")
        command = [args.rps, "--gregor-bin", args.gregor_bin, "--plugin-dir", plugins,
                   "--requests", "produce", "--connections", args.connections,
                   "--record-size", str(size), "--rounds", str(args.rounds),
                   "--seconds", str(args.seconds), "--warmup", "1", "--json", out]
        for label, settings in VARIANTS:
            command += ["--variant", f"{label}:{';'.join(settings)}"]
        print(f"# {' '.join(command)}", file=sys.stderr, flush=True)
        subprocess.run(command, check=True, timeout=1800)
        with open(out) as f:
            for line in f:
                row = json.loads(line)
                row["variant"] = row["broker"].rsplit("[", 1)[1].rstrip("]")
                rows.append(row)
        os.remove(out)
    return rows


def produce_round(args, plugins, settings, size):
    """Part 2: one fresh broker, one librdkafka producer run."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    records = args.mib * 2**20 // size
    with tempfile.TemporaryDirectory() as data:
        command = [args.gregor_bin, "serve",
                   "--set", f"listeners=PLAINTEXT://{bootstrap}",
                   "--set", f"log.dirs={data}/log",
                   "--set", f"plugin.dir={plugins}",
                   "--set", "admin.listener="]
        for setting in settings:
            command += ["--set", setting]
        broker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            subprocess.run(
                [args.bench, "produce", "--bootstrap", bootstrap, "--records", "2000",
                 "--size", str(size), "--acks", "1", "--topic", "warmup"],
                check=True, stdout=subprocess.DEVNULL, timeout=300)
            cpu0, t0 = cpu_seconds(broker.pid), time.time()
            run = subprocess.run(
                [args.bench, "produce", "--bootstrap", bootstrap, "--records", str(records),
                 "--size", str(size), "--acks", "1"],
                check=True, capture_output=True, text=True, timeout=900)
            seconds, cpu = time.time() - t0, cpu_seconds(broker.pid) - cpu0
            report = json.loads(run.stdout.strip().splitlines()[-1])
            return {
                "size": size,
                "records": records,
                "seconds": round(seconds, 3),
                "records_per_sec": report["records_per_sec"],
                "mb_per_sec": report["mb_per_sec"],
                "p50_ms": report["latency_ms"]["p50"],
                "p99_ms": report["latency_ms"]["p99"],
                "broker_cpu_s_per_gib": round(cpu / (records * size / 2**30), 3),
                "load": load(),
            }
        finally:
            broker.terminate()
            broker.wait(timeout=30)


def produce_part(args, plugins):
    rows = []
    for size in args.sizes:
        for round_index in range(args.rounds):
            order = VARIANTS if round_index % 2 == 0 else list(reversed(VARIANTS))
            for label, settings in order:
                row = produce_round(args, plugins, settings, size)
                row.update(variant=label, round=round_index)
                print(json.dumps({"bench": "interceptor_produce", **row}), file=sys.stderr,
                      flush=True)
                rows.append(row)
    return rows


def call_part(args, plugins):
    rows = []
    for size in args.sizes:
        for round_index in range(args.rounds):
            for label, settings in VARIANTS[1:]:
                command = [args.bench, "call-interceptor", "--plugin-dir", plugins,
                           "--interceptor", label, "--size", str(size),
                           "--iterations", str(args.call_iterations)]
                for setting in settings[1:]:
                    command += ["--set", setting]
                run = subprocess.run(command, check=True, capture_output=True, text=True,
                                     timeout=600)
                row = json.loads(run.stdout.strip().splitlines()[-1])
                row.update(variant=label, round=round_index, load=load())
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    return rows


def median(rows, key):
    values = [r[key] for r in rows]
    return statistics.median(values) if values else float("nan")


def ratio(value, base):
    return f"{value / base:.2f}×" if base else "-"


def report(args, rps_rows, produce_rows, call_rows):
    labels = [label for label, _ in VARIANTS]
    print(f"\nMedians of {args.rounds} alternating rounds; 1-minute load average "
          f"{min(r['load1'] for r in rps_rows or [{'load1': 0}]):.1f} to "
          f"{max(r['load1'] for r in rps_rows or [{'load1': 0}]):.1f} during part 1.\n")
    if rps_rows:
        print("### One-record Produce v3 requests (rps, acks=1)\n")
        print("| value | connections | interceptor | requests/s | p50 µs | p99 µs | "
              "broker CPU µs/request | requests/s vs none | CPU vs none |")
        print("|---|---|---|---|---|---|---|---|---|")
        for size in args.sizes:
            for connections in sorted({r["connections"] for r in rps_rows}):
                base = None
                for label in labels:
                    rows = [r for r in rps_rows if r["record_size"] == size
                            and r["connections"] == connections and r["variant"] == label]
                    rps = median(rows, "requests_per_s")
                    cpu = median(rows, "broker_cpu_us_per_request")
                    if base is None:
                        base = (rps, cpu)
                    print(f"| {size} B | {connections} | {label} | {rps:.0f} | "
                          f"{median(rows, 'p50_us'):.0f} | {median(rows, 'p99_us'):.0f} | "
                          f"{cpu:.1f} | {ratio(rps, base[0])} | {ratio(cpu, base[1])} |")
    if produce_rows:
        print(f"\n### librdkafka producer ({args.mib} MiB per run, acks=1, linger.ms=5)\n")
        print("| value | interceptor | records/s | MB/s | p50 ms | p99 ms | broker CPU s/GiB | "
              "records/s vs none | CPU vs none | load |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for size in args.sizes:
            base = None
            for label in labels:
                rows = [r for r in produce_rows if r["size"] == size and r["variant"] == label]
                rec = median(rows, "records_per_sec")
                cpu = median(rows, "broker_cpu_s_per_gib")
                if base is None:
                    base = (rec, cpu)
                loads = [r["load"][0] for r in rows]
                print(f"| {size} B | {label} | {rec:.0f} | {median(rows, 'mb_per_sec'):.1f} | "
                      f"{median(rows, 'p50_ms'):.2f} | {median(rows, 'p99_ms'):.2f} | {cpu:.2f} | "
                      f"{ratio(rec, base[0])} | {ratio(cpu, base[1])} | "
                      f"{min(loads):.1f}-{max(loads):.1f} |")
    if call_rows:
        print("\n### Inside the host (the chain's hooks, no network, pooled instance)\n")
        print("| value | interceptor | on-request µs | on-response µs | per request µs |")
        print("|---|---|---|---|---|")
        for size in args.sizes:
            for label in labels[1:]:
                rows = [r for r in call_rows if r["record_bytes"] == size and r["variant"] == label]
                print(f"| {size} B | {label} | {median(rows, 'on_request_us'):.2f} | "
                      f"{median(rows, 'on_response_us'):.2f} | "
                      f"{median(rows, 'per_request_us'):.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gregor-bin", default=os.environ.get("GREGOR_BIN"))
    parser.add_argument("--plugins", default=os.environ.get("GREGOR_PLUGIN_DIR", "build/plugins"))
    parser.add_argument("--examples",
                        default=os.environ.get("GREGOR_EXAMPLE_DIR", "build/examples"))
    parser.add_argument("--bench", required=True, help="the gregor-bench binary")
    parser.add_argument("--rps", required=True, help="the rps binary")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--connections", default="1,10")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--mib", type=int, default=64, help="MiB per librdkafka run")
    parser.add_argument("--call-iterations", type=int, default=20000)
    parser.add_argument("--parts", default="rps,produce,call")
    parser.add_argument("--json", default="bench/results/interceptors.json")
    args = parser.parse_args()
    if not args.gregor_bin:
        sys.exit("give --gregor-bin or $GREGOR_BIN")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="gregor-interceptors-") as tmp:
        plugins = plugin_dir(os.path.abspath(args.plugins), os.path.abspath(args.examples), tmp)
        rps_rows = rps_part(args, plugins) if "rps" in parts else []
        produce_rows = produce_part(args, plugins) if "produce" in parts else []
        call_rows = call_part(args, plugins) if "call" in parts else []
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        for row in rps_rows + produce_rows + call_rows:
            f.write(json.dumps(row) + "\n")
    report(args, rps_rows, produce_rows, call_rows)


if __name__ == "__main__":
    main()
