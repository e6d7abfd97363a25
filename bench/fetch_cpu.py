#!/usr/bin/env python3
"""Broker CPU per GiB fetched, and fetch throughput: the cost of the Fetch
record path (DESIGN §12), for comparing two builds side by side.

Starts a fresh broker (GREGOR_BIN, GREGOR_PLUGIN_DIR), writes
`--mib` MiB of 1 KiB records into a one-partition topic with kcat, then
reads the topic from the beginning `--rounds` times with kcat (librdkafka,
output discarded) and reports, per round, the wall time, MiB/s and the
broker's CPU seconds (user + system, from /proc/<pid>/stat) per GiB read.
The machine is shared: the load average is printed with the figures, which
are rough. Not a test (nothing is asserted). python3 stdlib and kcat.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from broker_proc import cpu_seconds, free_port, wait_port


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    binary = os.environ["GREGOR_BIN"]
    plugins = os.environ["GREGOR_PLUGIN_DIR"]
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
            records = args.mib * 1024
            line = b"x" * 1023 + b"\n"
            produce = subprocess.Popen(
                ["kcat", "-P", "-b", bootstrap, "-t", "fetchcpu", "-p", "0",
                 "-X", "linger.ms=20", "-X", "batch.size=1000000",
                 "-X", "topic.metadata.refresh.interval.ms=1000"],
                stdin=subprocess.PIPE,
            )
            chunk = line * 1024
            for _ in range(args.mib):
                produce.stdin.write(chunk)
            produce.stdin.close()
            if produce.wait(timeout=600) != 0:
                sys.exit("kcat produce failed")
            rounds = []
            for _ in range(args.rounds):
                cpu0, t0 = cpu_seconds(broker.pid), time.time()
                consume = subprocess.run(
                    ["kcat", "-C", "-b", bootstrap, "-t", "fetchcpu", "-p", "0",
                     "-o", "beginning", "-e", "-q", "-c", str(records),
                     "-X", "fetch.max.bytes=52428800",
                     "-X", "max.partition.fetch.bytes=10485760"],
                    stdout=subprocess.DEVNULL, timeout=600,
                )
                seconds, cpu = time.time() - t0, cpu_seconds(broker.pid) - cpu0
                if consume.returncode != 0:
                    sys.exit("kcat consume failed")
                gib = records * 1024 / 2**30
                rounds.append({
                    "seconds": round(seconds, 3),
                    "mib_per_s": round(records / 1024 / seconds, 1),
                    "broker_cpu_s_per_gib": round(cpu / gib, 3),
                })
            print(json.dumps({
                "label": args.label,
                "mib": args.mib,
                "load_average": os.getloadavg(),
                "rounds": rounds,
            }))
        finally:
            broker.terminate()
            broker.wait(timeout=30)


if __name__ == "__main__":
    main()
