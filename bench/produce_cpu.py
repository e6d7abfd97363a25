#!/usr/bin/env python3
"""Broker CPU per GiB produced, two builds back to back: the cost of the
Produce record path (issue 17, records by reference across the Wasm
boundary).

Each round starts a fresh broker for every build given (`--build
LABEL=BINARY:PLUGIN_DIR`, in alternating order from round to round), has
`gregor-bench produce` (librdkafka, `--acks`, linger.ms=5, batch.size 1 MB)
write `--mib` MiB of `--size`-byte records into a fresh topic of
`--partitions` partitions, and reads the broker's CPU seconds (user +
system) and minor page faults (fresh memory touched) from
/proc/<pid>/stat around that run only (start-up and a warm-up run
excluded; the run's own topic creation, a few ms, included). It prints
every round and, per build, the medians of CPU seconds per GiB and MB/s,
with the load average: the machine is shared, so figures are rough. Not a test (nothing is asserted). python3 stdlib.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from broker_proc import cpu_seconds, free_port, minor_faults, wait_port


def one_round(bench, binary, plugins, records, size, acks, partitions):
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        broker = subprocess.Popen(
            [binary, "serve",
             "--set", f"listeners=PLAINTEXT://{bootstrap}",
             "--set", f"log.dirs={data}/log",
             "--set", f"plugin.dir={plugins}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port)
            # Warm-up: the topic's creation and a first small run, outside
            # the measured window.
            subprocess.run(
                [bench, "produce", "--bootstrap", bootstrap, "--records", "2000",
                 "--size", str(size), "--acks", acks, "--topic", "warmup"],
                check=True, stdout=subprocess.DEVNULL, timeout=300,
            )
            cpu0, t0 = cpu_seconds(broker.pid), time.time()
            faults0 = minor_faults(broker.pid)
            run = subprocess.run(
                [bench, "produce", "--bootstrap", bootstrap, "--records", str(records),
                 "--size", str(size), "--acks", acks, "--partitions", str(partitions)],
                check=True, capture_output=True, text=True, timeout=900,
            )
            seconds, cpu = time.time() - t0, cpu_seconds(broker.pid) - cpu0
            faults = minor_faults(broker.pid) - faults0
            report = json.loads(run.stdout.strip().splitlines()[-1])
            gib = records * size / 2**30
            return {
                "seconds": round(seconds, 3),
                "mb_per_sec": report["mb_per_sec"],
                "broker_cpu_s_per_gib": round(cpu / gib, 3),
                "minor_faults_per_mib": round(faults / (gib * 1024), 1),
                "load_average": [round(x, 1) for x in os.getloadavg()],
            }
        finally:
            broker.terminate()
            broker.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", required=True,
                        help="LABEL=BINARY:PLUGIN_DIR (give two)")
    parser.add_argument("--bench", required=True, help="the gregor-bench binary")
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    builds = []
    for spec in args.build:
        label, rest = spec.split("=", 1)
        binary, plugins = rest.split(":", 1)
        builds.append((label, binary, plugins))
    records = args.mib * 2**20 // args.size
    results = {label: [] for label, _, _ in builds}
    for round_index in range(args.rounds):
        order = builds if round_index % 2 == 0 else list(reversed(builds))
        for label, binary, plugins in order:
            result = one_round(args.bench, binary, plugins, records, args.size, args.acks,
                               args.partitions)
            results[label].append(result)
            print(json.dumps({"round": round_index, "build": label, **result}), flush=True)
    summary = {
        label: {
            "median_broker_cpu_s_per_gib": statistics.median(
                r["broker_cpu_s_per_gib"] for r in rounds),
            "median_mb_per_sec": statistics.median(r["mb_per_sec"] for r in rounds),
        }
        for label, rounds in results.items()
    }
    print(json.dumps({"mib": args.mib, "size": args.size, "acks": args.acks,
                      "partitions": args.partitions,
                      "rounds": args.rounds, "summary": summary}))


if __name__ == "__main__":
    main()
