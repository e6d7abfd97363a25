"""`make bench-cluster` part "offsets" (issue 15.5): what a replicated
`__consumer_offsets` costs a committing client, and how long a group is
without a coordinator when the coordinator's broker dies.

Two 3-node clusters (bench/cluster_nodes.py) run side by side in one run:
one with Kafka's default `offsets.topic.replication.factor=3`, one with
`offsets.topic.replication.factor=1` (both with the default
`offsets.commit.required.acks=-1`). The replication factor of the group's
`__consumer_offsets` partition is read back from Metadata and reported.

- commits: a confluent-kafka (librdkafka) consumer that never joins commits
  explicit offsets synchronously (`commit(asynchronous=False)`, one
  OffsetCommit at a time, each for a new offset of one partition), COMMITS
  per round, rounds alternating between the clusters and which goes first;
  commits per second, p50/p99 latency of each commit call, and the three
  brokers' CPU ms per 1000 commits.
- coordinator failover (RF 3 cluster): a client keeps committing (a new
  offset every COMMIT_PAUSE s, synchronously, retrying after a failure);
  the group coordinator's broker (FindCoordinator, asked of a broker that
  is not killed) is killed with SIGKILL; the figure is the time from the
  kill to the first successful commit sent after it (one sent before and
  answered just before the kill, read late, must not count; this
  overstates by one commit's round trip), the gap since the last success
  before it, and the time until a survivor's FindCoordinator names
  another broker (the cluster's part of the outage). The node is started again, and the next
  round waits for the group's partition to have all three replicas in sync.
Nothing is asserted; failed commits are counted and reported.
"""

import os
import socket
import statistics
import struct
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

import cluster_nodes
from cluster_replication import create_topic, partition, wait_in_sync, watch

checks = cluster_nodes.checks
OFFSETS = "__consumer_offsets"
COMMIT_PAUSE = 0.001


def offsets_partition(group, partitions=50):
    """Gregor's and Kafka's partition of `group` (abs(String.hashCode) % n)."""
    h = 0
    for unit in group.encode("utf-16-be").hex(" ", 2).split():
        h = (h * 31 + int(unit, 16)) & 0xFFFFFFFF
    if h >= 2**31:
        h -= 2**32
    return (abs(h) if h != -2**31 else 0) % partitions


def find_coordinator(address, group):
    """FindCoordinator v1 for `group` asked of the broker at `address`: its node id."""
    body = struct.pack(">h", len(group)) + group.encode() + b"\x00"
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(checks.frame(10, 1, body))
        size = struct.unpack(">i", checks.read_exact(sock, 4))[0]
        r = checks.Reader(checks.read_exact(sock, size))
    r.take(">i")  # correlation id
    r.take(">i")  # throttle
    error = r.take(">h")
    r.string()  # message
    node = r.take(">i")
    if error != 0:
        raise RuntimeError(f"FindCoordinator error {error}")
    return node


def committer(cluster, group):
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                     "enable.auto.commit": False, "log_level": 2})


def commit(consumer, topic, offset):
    for result in consumer.commit(offsets=[TopicPartition(topic, 0, offset)],
                                  asynchronous=False):
        if result.error is not None:
            raise KafkaException(result.error)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def commit_round(cluster, consumer, topic, start, commits):
    cpu0 = cluster.cpu()
    by_node0 = [cluster_nodes.cpu_seconds(pid) for pid in cluster.pids()]
    latencies = []
    began = time.perf_counter()
    for i in range(commits):
        t0 = time.perf_counter()
        commit(consumer, topic, start + i)
        latencies.append((time.perf_counter() - t0) * 1000)
    seconds = time.perf_counter() - began
    cpu = cluster.cpu() - cpu0
    by_node = [cluster_nodes.cpu_seconds(pid) - c for pid, c in zip(cluster.pids(), by_node0)]
    return {"commits_per_sec": round(commits / seconds, 1),
            "cpu_ms_per_1000_by_node": [round(c * 1000 / commits * 1000, 1) for c in by_node],
            "p50_ms": round(percentile(latencies, 0.50), 3),
            "p99_ms": round(percentile(latencies, 0.99), 3),
            "max_ms": round(max(latencies), 3),
            "cluster_cpu_ms_per_1000": round(cpu * 1000 / commits * 1000, 1),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def verify(consumer, topic, offset):
    """The group's committed offset reads back as the last one committed
    (a commit figure only counts if the commits landed)."""
    found = consumer.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    if found != offset:
        raise SystemExit(f"committed offset reads back {found}, not {offset}")


def failover_round(cluster, topic, group):
    index = offsets_partition(group)
    wait_in_sync(cluster, OFFSETS, 3, index)
    coordinator = checks.until(lambda: find_coordinator(cluster.brokers[0], group), 30)
    asker = next(b for n, b in enumerate(cluster.brokers, 1) if n != coordinator)
    consumer = committer(cluster, group)
    successes, failures = [], []
    stop = threading.Event()

    def keep_committing():
        offset = 0
        while not stop.is_set():
            offset += 1
            started = time.time()
            try:
                commit(consumer, topic, offset)
                successes.append((started, time.time()))
            except KafkaException as error:
                failures.append(str(error.args[0].name() if error.args else error))
                time.sleep(0.01)
            time.sleep(COMMIT_PAUSE)

    thread = threading.Thread(target=keep_committing, daemon=True)
    thread.start()
    try:
        # Steady state before the kill: commits succeeding, then 1 s more.
        deadline = time.time() + 30
        while not successes and time.time() < deadline:
            time.sleep(0.01)
        if not successes:
            raise SystemExit(f"no commit succeeded with coordinator {coordinator} in 30 s")
        time.sleep(1.0)
        controller = checks.raw_metadata(asker)["controller"]
        killed_at = cluster.kill(coordinator)
        moved = watch(lambda: find_coordinator(asker, group) != coordinator)
        deadline = time.time() + 120
        while not (successes and successes[-1][0] > killed_at):
            if time.time() > deadline:
                raise SystemExit(f"no commit succeeded within 120 s of killing {coordinator}")
            time.sleep(0.005)
        first_after = min(t for began, t in successes if began > killed_at)
        last_before = max(t for _, t in successes if t <= killed_at)
    finally:
        stop.set()
        thread.join(timeout=60)
    consumer.close()
    moved["thread"].join(timeout=120)
    new_coordinator = checks.until(lambda: find_coordinator(asker, group), 30)
    cluster.restart(coordinator)
    return {"killed": coordinator, "new_coordinator": new_coordinator, "partition": index,
            "killed_was_controller": controller == coordinator,
            "kill_to_first_commit_ms": round((first_after - killed_at) * 1000),
            "commit_gap_ms": round((first_after - last_before) * 1000),
            "kill_to_new_coordinator_named_ms":
                round((moved["at"] - killed_at) * 1000) if "at" in moved else None,
            "commits": len(successes), "failed": len(failures),
            "errors": sorted(set(failures))[:5]}


def median(values):
    return statistics.median(values) if values else float("nan")


def run(work, rounds, commits, failover_rounds):
    clusters = {}
    results = {"commits_per_round": commits, "rounds": rounds,
               "commit": {"rf3": [], "rf1": []}, "failover": []}
    topic = "bench-commits"
    try:
        for key, rf in (("rf3", 3), ("rf1", 1)):
            path = os.path.join(work, key)
            os.makedirs(path)
            clusters[key] = cluster_nodes.Cluster(
                path, ["--set", f"offsets.topic.replication.factor={rf}"], label=key)
        consumers = {}
        for key, cluster in clusters.items():
            create_topic(cluster.bootstrap, topic, 1, {})
            consumers[key] = committer(cluster, f"bench-commits-{key}")
            # Warm-up: creates __consumer_offsets and finds the coordinator.
            checks.until(lambda: commit(consumers[key], topic, 0) or True, 60, pause=0.2)
            index = offsets_partition(f"bench-commits-{key}")
            results[f"{key}_offsets_partition"] = partition(cluster.bootstrap, OFFSETS, index)
            commit_round(cluster, consumers[key], topic, 1, 200)
            results[f"{key}_idle_cluster_cpu_s_per_s"] = cluster.idle_cpu()
        offset = 1000
        for r in range(rounds):
            order = ["rf3", "rf1"] if r % 2 == 0 else ["rf1", "rf3"]
            for key in order:
                figures = commit_round(clusters[key], consumers[key], topic, offset, commits)
                offset += commits
                results["commit"][key].append(figures)
                verify(consumers[key], topic, offset - 1)
                print(f"commit round {r + 1} {key}: {figures}", flush=True, file=sys.stderr)
        for consumer in consumers.values():
            consumer.close()
        clusters.pop("rf1").stop()
        for r in range(failover_rounds):
            figures = failover_round(clusters["rf3"], topic, "bench-failover")
            results["failover"].append(figures)
            print(f"coordinator failover round {r + 1}: {figures}", flush=True, file=sys.stderr)
    finally:
        for cluster in clusters.values():
            cluster.stop()
    summarize(results)
    return results


def summarize(results):
    s = {}
    for key in ("rf3", "rf1"):
        rounds = results["commit"][key]
        for figure in ("commits_per_sec", "p50_ms", "p99_ms", "cluster_cpu_ms_per_1000"):
            s[f"{key}_{figure}"] = median([r[figure] for r in rounds])
    pairs = list(zip(results["commit"]["rf3"], results["commit"]["rf1"]))
    s["rf3_over_rf1_commits_per_sec"] = median(
        [a["commits_per_sec"] / b["commits_per_sec"] for a, b in pairs])
    s["rf3_over_rf1_p99"] = median([a["p99_ms"] / b["p99_ms"] for a, b in pairs])
    fo = results["failover"]
    if fo:
        firsts = [r["kill_to_first_commit_ms"] for r in fo]
        gaps = [r["commit_gap_ms"] for r in fo]
        s["failover_kill_to_first_commit_ms"] = {"median": median(firsts), "min": min(firsts),
                                                 "max": max(firsts)}
        s["failover_commit_gap_ms"] = {"median": median(gaps), "min": min(gaps),
                                       "max": max(gaps)}
        s["failover_failed_commits"] = sum(r["failed"] for r in fo)
        named = [r["kill_to_new_coordinator_named_ms"] for r in fo
                 if r["kill_to_new_coordinator_named_ms"] is not None]
        s["failover_kill_to_new_coordinator_ms"] = {"median": median(named), "min": min(named),
                                                    "max": max(named)} if named else None
    results["summary"] = s


def markdown(results):
    s = results["summary"]
    rf = {key: len(results[f"{key}_offsets_partition"][1]) for key in ("rf3", "rf1")}
    lines = [f"| synchronous OffsetCommit ({results['rounds']} alternating rounds of "
             f"{results['commits_per_round']}, medians) | `__consumer_offsets` RF {rf['rf3']} | "
             f"RF {rf['rf1']} | ratio |", "|---|---|---|---|"]
    for figure, what in (("commits_per_sec", "commits/s (one client)"),
                         ("p50_ms", "p50 latency (ms)"), ("p99_ms", "p99 latency (ms)"),
                         ("cluster_cpu_ms_per_1000", "3 brokers' CPU ms per 1000 commits")):
        a, b = s[f"rf3_{figure}"], s[f"rf1_{figure}"]
        lines.append(f"| {what} | {a:.2f} | {b:.2f} | {a / b:.2f} |")
    a, b = (results[f"{key}_idle_cluster_cpu_s_per_s"] for key in ("rf3", "rf1"))
    lines.append(f"| 3 brokers' CPU s per s, idle (no client) | {a:.3f} | {b:.3f} | |")
    if results["failover"]:
        a, g = s["failover_kill_to_first_commit_ms"], s["failover_commit_gap_ms"]
        e = s["failover_kill_to_new_coordinator_ms"]
        lines += ["", f"| coordinator failover ({len(results['failover'])} rounds, "
                  "RF 3) | median | min | max |", "|---|---|---|---|",
                  f"| SIGKILL of the coordinator's broker to the first successful commit (ms) | "
                  f"{a['median']:.0f} | {a['min']} | {a['max']} |",
                  "| SIGKILL to FindCoordinator (asked of a survivor) naming another (ms) | "
                  + (f"{e['median']:.0f} | {e['min']} | {e['max']} |" if e else "none | | |"),
                  f"| last success before the kill to the first after (ms) | "
                  f"{g['median']:.0f} | {g['min']} | {g['max']} |",
                  f"| failed commits (all rounds) | {s['failover_failed_commits']} | | |"]
    return "\n".join(lines)
