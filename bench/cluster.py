#!/usr/bin/env python3
"""`make bench-cluster`: figures of a local 3-node cluster (scripts/cluster.sh
on free loopback ports, an empty data directory; bench/cluster_nodes.py).

Parts (BENCH_CLUSTER_PARTS, comma-separated; default all three):
- metadata: each round starts a fresh cluster, then measures
  - propagation: CreateTopics (raw v4, RF 3, 3 partitions) answered by one
    broker, to the topic visible in Metadata on every broker (each polled
    with its own raw Metadata requests); BENCH_CLUSTER_TOPICS topics a
    round, through each broker in turn;
  - failover: SIGKILL of the active controller (the quorum leader) to the
    survivors agreeing on another, and to the first CreateTopics answered
    without error through a survivor (tests/python/cluster.py `failover`);
- replication (issue 14.6, bench/cluster_replication.py): acks=all produce
  and consume throughput at RF 3 vs RF 1, partition leader failover;
- offsets (issue 15.5, bench/cluster_offsets.py): synchronous OffsetCommit
  throughput and p99 on an RF 3 vs an RF 1 `__consumer_offsets`, group
  coordinator failover.

Environment: BENCH_CLUSTER_ROUNDS (metadata rounds, default 3),
BENCH_CLUSTER_TOPICS (default 10), BENCH_CLUSTER_RECORDS (records per
produce/consume run, default 400000), BENCH_CLUSTER_TPUT_ROUNDS (default 3),
BENCH_CLUSTER_COMMITS (commits per round, default 2000),
BENCH_CLUSTER_FAILOVERS (failover rounds per part, default 5), GREGOR_BENCH
(the gregor-bench binary; default next to GREGOR_BIN). Results: Markdown on
stdout, JSON in bench/results/cluster.json (metadata),
cluster-replication.json and cluster-offsets.json.
"""

import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

import cluster_nodes
from cluster_nodes import ROOT, checks

ROUNDS = int(os.environ.get("BENCH_CLUSTER_ROUNDS", "3"))
TOPICS = int(os.environ.get("BENCH_CLUSTER_TOPICS", "10"))
RECORDS = int(os.environ.get("BENCH_CLUSTER_RECORDS", "400000"))
TPUT_ROUNDS = int(os.environ.get("BENCH_CLUSTER_TPUT_ROUNDS", "3"))
COMMITS = int(os.environ.get("BENCH_CLUSTER_COMMITS", "2000"))
FAILOVERS = int(os.environ.get("BENCH_CLUSTER_FAILOVERS", "5"))
PARTS = os.environ.get("BENCH_CLUSTER_PARTS", "metadata,replication,offsets").split(",")
NODES = cluster_nodes.NODES
RESULTS = os.path.join(ROOT, "bench", "results")


def create_topic(address, name, partitions=3, rf=3):
    """Raw CreateTopics v4 to one broker: its error code."""
    body = struct.pack(">i", 1)
    body += struct.pack(">h", len(name)) + name.encode()
    body += struct.pack(">ihii", partitions, rf, 0, 0)  # no assignments, no configs
    body += struct.pack(">ib", 15000, 0)  # timeout, validate_only
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(checks.frame(19, 4, body))
        size = struct.unpack(">i", checks.read_exact(sock, 4))[0]
        r = checks.Reader(checks.read_exact(sock, size))
    r.take(">i")  # correlation id
    r.take(">i")  # throttle
    r.take(">i")  # one topic
    r.string()
    return r.take(">h")


def propagation(brokers, round_no):
    """Milliseconds from each CreateTopics answer to visibility on every broker."""
    figures = []
    for t in range(TOPICS):
        name = f"bench-{round_no}-{t}"
        error = create_topic(brokers[t % NODES], name)
        answered = time.perf_counter()
        if error != 0:
            raise SystemExit(f"CreateTopics {name}: error {error}")
        pending = set(brokers)
        while pending:
            for b in list(pending):
                topic = checks.raw_metadata(b, [name])["topics"].get(name, {})
                if topic.get("error") == 0 and topic.get("partitions") == 3:
                    pending.discard(b)
        figures.append((time.perf_counter() - answered) * 1000)
    return figures


def failover(cluster):
    controller_id = cluster.controller
    killed_at_ms = int(cluster.kill(controller_id) * 1000)
    survivors = [b for i, b in enumerate(cluster.brokers) if i + 1 != controller_id]
    return checks.failover(killed_at_ms, controller_id, *survivors)


def median(values):
    return statistics.median(values) if values else float("nan")


def metadata_part():
    results = {"rounds": []}
    for round_no in range(1, ROUNDS + 1):
        with tempfile.TemporaryDirectory(prefix="gregor-cluster-bench-") as work:
            cluster = cluster_nodes.Cluster(work)
            controller_id = cluster.controller
            try:
                visible = propagation(cluster.brokers, round_no)
                moved = failover(cluster)
            finally:
                cluster.stop()
        results["rounds"].append({"visible_ms": visible, "failover": moved})
        print(f"round {round_no}: visible on all brokers, median {median(visible):.1f} ms "
              f"(max {max(visible):.1f}); failover {controller_id} -> {moved['controller']}: "
              f"controller {moved['controller_ms']} ms, CreateTopics {moved['create_ms']} ms",
              file=sys.stderr)
    rounds = results["rounds"]
    visible = [v for r in rounds for v in r["visible_ms"]]
    controller_ms = [r["failover"]["controller_ms"] for r in rounds]
    create_ms = [r["failover"]["create_ms"] for r in rounds]
    print(f"| figure ({ROUNDS} rounds) | median | min | max |")
    print("|---|---|---|---|")
    print(f"| CreateTopics answered to visible on all 3 brokers ({len(visible)} topics, ms) "
          f"| {median(visible):.1f} | {min(visible):.1f} | {max(visible):.1f} |")
    print(f"| controller SIGKILL to survivors agreeing on a new one (ms) "
          f"| {median(controller_ms):.0f} | {min(controller_ms)} | {max(controller_ms)} |")
    print(f"| controller SIGKILL to first CreateTopics answered (ms) "
          f"| {median(create_ms):.0f} | {min(create_ms)} | {max(create_ms)} |")
    save("cluster.json", results)


def bench_binary():
    default = os.path.join(os.path.dirname(os.environ.get("GREGOR_BIN", "")), "gregor-bench")
    binary = os.environ.get("GREGOR_BENCH", default)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"gregor-bench not found at {binary} (set GREGOR_BENCH)")
    return binary


def save(name, results):
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, name), "w") as f:
        json.dump(results, f, indent=1)


def main():
    unknown = set(PARTS) - {"metadata", "replication", "offsets"}
    if unknown:
        raise SystemExit(f"BENCH_CLUSTER_PARTS: unknown parts {sorted(unknown)}")
    started = time.time()
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    if "metadata" in PARTS:
        metadata_part()
    if "replication" in PARTS:
        import cluster_replication
        with tempfile.TemporaryDirectory(prefix="gregor-cluster-bench-") as work:
            results = cluster_replication.run(bench_binary(), work, TPUT_ROUNDS, RECORDS,
                                              FAILOVERS)
        results["load_average_end"] = os.getloadavg()
        save("cluster-replication.json", results)
        print()
        print(cluster_replication.markdown(results))
    if "offsets" in PARTS:
        import cluster_offsets
        with tempfile.TemporaryDirectory(prefix="gregor-cluster-bench-") as work:
            results = cluster_offsets.run(work, TPUT_ROUNDS, COMMITS, FAILOVERS)
        results["load_average_end"] = os.getloadavg()
        save("cluster-offsets.json", results)
        print()
        print(cluster_offsets.markdown(results))
    print(f"\n{'+'.join(PARTS)}: {time.time() - started:.0f} s; load average at the end: "
          f"{os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
