#!/usr/bin/env python3
"""`make bench-cluster`: a local 3-node cluster's metadata figures.

Each round starts a fresh cluster with scripts/cluster.sh (free loopback
ports, an empty data directory), then measures:
- propagation: CreateTopics (raw v4, RF 3, 3 partitions) answered by one
  broker, to the topic visible in Metadata on every broker (each polled
  with its own raw Metadata requests); BENCH_CLUSTER_TOPICS topics a
  round, through each broker in turn;
- failover: SIGKILL of the active controller (the quorum leader) to the
  survivors agreeing on another, and to the first CreateTopics answered
  without error through a survivor (tests/python/cluster.py `failover`).
Then the cluster is stopped (Ctrl-C to its process group).

Environment: BENCH_CLUSTER_ROUNDS (default 5), BENCH_CLUSTER_TOPICS
(default 10). Results: Markdown on stdout, bench/results/cluster.json.
"""

import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import cluster as checks  # noqa: E402  (tests/python/cluster.py)

ROUNDS = int(os.environ.get("BENCH_CLUSTER_ROUNDS", "5"))
TOPICS = int(os.environ.get("BENCH_CLUSTER_TOPICS", "10"))
NODES = 3


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


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


def node_pid(script_pid, node_id):
    """The pid of node `node_id` among the script's children."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == script_pid and f"node.id={node_id}".encode() in args:
            return int(entry)
    raise SystemExit(f"node {node_id} not found among the children of {script_pid}")


def start(work):
    client, controller, quorum, admin = (free_ports(NODES) for _ in range(4))
    env = dict(os.environ,
               CLUSTER_DATA=os.path.join(work, "data"),
               CLUSTER_PORTS=" ".join(map(str, client)),
               CLUSTER_CONTROLLER_PORTS=" ".join(map(str, controller)),
               CLUSTER_QUORUM_PORTS=" ".join(map(str, quorum)),
               CLUSTER_ADMIN_PORTS=" ".join(map(str, admin)),
               CLUSTER_STOP_ON_EXIT="0")
    log = open(os.path.join(work, "cluster.log"), "w")
    proc = subprocess.Popen([os.path.join(ROOT, "scripts", "cluster.sh")], env=env,
                            stdout=log, stderr=log, start_new_session=True, cwd=ROOT)
    brokers = [f"127.0.0.1:{p}" for p in client]

    def formed():
        seen = [checks.raw_metadata(b) for b in brokers]
        return (all(m["brokers"] == [1, 2, 3] for m in seen)
                and len({m["controller"] for m in seen}) == 1
                and seen[0]["controller"] >= 1 and seen[0]["controller"])

    controller_id = checks.until(formed, 60)
    return proc, brokers, controller_id


def stop(proc):
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)


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


def failover(proc, brokers, controller_id):
    victim = node_pid(proc.pid, controller_id)
    killed_at_ms = int(time.time() * 1000)
    os.kill(victim, signal.SIGKILL)
    survivors = [b for i, b in enumerate(brokers) if i + 1 != controller_id]
    return checks.failover(killed_at_ms, controller_id, *survivors)


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    results = {"rounds": []}
    for round_no in range(1, ROUNDS + 1):
        with tempfile.TemporaryDirectory(prefix="gregor-cluster-bench-") as work:
            proc, brokers, controller_id = start(work)
            try:
                visible = propagation(brokers, round_no)
                moved = failover(proc, brokers, controller_id)
            finally:
                stop(proc)
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
    out = os.path.join(ROOT, "bench", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cluster.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
