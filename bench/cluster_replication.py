"""`make bench-cluster` part "replication" (issue 14.6): what replication
costs and how long a partition is unavailable when its leader dies, on
one 3-node cluster (bench/cluster_nodes.py) in one run.

- produce: `gregor-bench produce` (librdkafka through the `rdkafka` crate,
  acks=all, linger.ms=5, 1 KiB records, one partition) into a topic with
  RF 3 and min.insync.replicas=2 and into one with RF 1, alternating
  which goes first from round to round; MB/s and the three brokers' CPU
  seconds (user + system from /proc) per GiB, around each run only.
- consume: `gregor-bench consume` (librdkafka, assign, no group, from the
  leader as Kafka clients read) of the same number of records from each
  topic, alternating.
- failover: a confluent-kafka producer (librdkafka) sends 1 KiB records
  with acks=all to the RF 3 topic continuously (one every
  FAILOVER_INTERVAL s, polling between); the partition's leader is killed
  with SIGKILL; the figure is the time from the kill to the first
  delivery report that acknowledges a record, and the gap between the
  last acknowledgement before the kill and that one. The killed node is
  then started again and the next round waits for the ISR to hold all
  three replicas again.
Nothing is asserted; a failed delivery is counted and reported.
"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import cluster_nodes

FAILOVER_INTERVAL = 0.002


def create_topic(bootstrap, name, rf, configs):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=rf,
                                            config=configs)], operation_timeout=15)
    futures[name].result(timeout=30)


def partition(bootstrap, topic, index=0):
    """(leader, replicas, isr) of partition `index` of `topic`."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    if meta.error is not None:
        raise RuntimeError(str(meta.error))
    p = meta.partitions[index]
    return p.leader, sorted(p.replicas), sorted(p.isrs)


def wait_in_sync(cluster, topic, replicas, index=0):
    """Until every broker says partition `index` of `topic` has a leader and
    all `replicas` in its ISR; returns the leader."""

    def in_sync():
        seen = set()
        for broker in cluster.brokers:
            leader, _, isr = partition(broker, topic, index)
            if leader < 0 or len(isr) != replicas:
                return None
            seen.add(leader)
        return len(seen) == 1 and seen.pop()

    return cluster_nodes.checks.until(in_sync, 120, pause=0.2)


def produce_round(bench, cluster, topic, records, size):
    cpu0 = cluster.cpu()
    run = subprocess.run([bench, "produce", "--bootstrap", cluster.bootstrap,
                          "--topic", topic, "--records", str(records), "--size", str(size),
                          "--acks", "all"],
                         check=True, capture_output=True, text=True, timeout=600)
    cpu = cluster.cpu() - cpu0
    report = json.loads(run.stdout.strip().splitlines()[-1])
    gib = records * size / 2**30
    return {"mb_per_sec": report["mb_per_sec"], "seconds": report["seconds"],
            "p99_ms": report["latency_ms"]["p99"],
            "cluster_cpu_s_per_gib": round(cpu / gib, 3),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def consume_round(bench, cluster, topic, records):
    cpu0 = cluster.cpu()
    run = subprocess.run([bench, "consume", "--bootstrap", cluster.bootstrap,
                          "--topic", topic, "--records", str(records)],
                         check=True, capture_output=True, text=True, timeout=600)
    cpu = cluster.cpu() - cpu0
    report = json.loads(run.stdout.strip().splitlines()[-1])
    gib = report["bytes"] / 2**30
    return {"mb_per_sec": report["mb_per_sec"], "seconds": report["seconds"],
            "cluster_cpu_s_per_gib": round(cpu / gib, 3),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def watch(check, seconds=120.0, pause=0.05):
    """Starts a thread that calls check() every `pause` s until it returns
    something truthy (an exception counts as no); the returned dict gets
    "at" (time.time()) and "value" then."""
    seen = {}

    def loop():
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                value = check()
            except Exception:  # a broker not answering (yet) is a "no"
                value = None
            if value:
                seen.update(at=time.time(), value=value)
                return
            time.sleep(pause)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    seen["thread"] = thread
    return seen


def failover_round(cluster, topic, size):
    """Kill the leader of `topic` under a continuous acks=all producer.

    The figure is the first acknowledgement of a record handed to the
    producer after the kill: such a record was sent after the kill, so no
    acknowledgement the old leader wrote before dying can count (one
    already on its way, read a few ms late on a busy machine, would). It
    overstates the outage by at most one produce round trip. Meanwhile a
    thread asks a surviving broker for the partition's leader, which
    splits the figure into the cluster electing a new leader and the
    client finding it."""
    leader = wait_in_sync(cluster, topic, 3)
    survivor = next(b for n, b in enumerate(cluster.brokers, 1) if n != leader)
    acked, failed = [], []  # acked: (handed to the producer, acknowledged)

    def report(error, _message, sent):
        if error is None:
            acked.append((sent, time.time()))
        else:
            failed.append(str(error))

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "message.timeout.ms": 120000,
                         "enable.idempotence": True, "log_level": 2})
    payload = b"x" * size

    def produce_for(seconds, until_acked_after=None):
        deadline = time.time() + seconds
        while time.time() < deadline:
            sent = time.time()
            producer.produce(topic, value=payload, partition=0,
                             on_delivery=lambda e, m, sent=sent: report(e, m, sent))
            producer.poll(FAILOVER_INTERVAL)
            if until_acked_after is not None and acked and acked[-1][0] > until_acked_after:
                return True
        return False

    # Steady state before the kill: acknowledged records (a new producer's
    # first ones can wait for its producer id and metadata), then 1 s more.
    if not produce_for(30.0, until_acked_after=0):
        raise SystemExit(f"no acknowledgement from leader {leader} in 30 s before the kill")
    produce_for(1.0)
    controller = cluster_nodes.checks.raw_metadata(survivor)["controller"]
    killed_at = cluster.kill(leader)
    last_before = max(t for _, t in acked if t <= killed_at)
    elected = watch(lambda: partition(survivor, topic)[0] not in (leader, -1))
    if not produce_for(120.0, until_acked_after=killed_at):
        raise SystemExit(f"no acknowledgement within 120 s of killing leader {leader}")
    first_after = min(t for sent, t in acked if sent > killed_at)
    producer.flush(60)
    elected["thread"].join(timeout=120)
    new_leader = partition(survivor, topic)[0]
    cluster.restart(leader)
    return {"killed": leader, "new_leader": new_leader, "killed_was_controller": controller == leader,
            "kill_to_first_ack_ms": round((first_after - killed_at) * 1000),
            "ack_gap_ms": round((first_after - last_before) * 1000),
            "kill_to_new_leader_in_metadata_ms":
                round((elected["at"] - killed_at) * 1000) if "at" in elected else None,
            "acked": len(acked), "failed": len(failed), "errors": sorted(set(failed))[:5]}


def median(values):
    return statistics.median(values) if values else float("nan")


def run(bench, work, rounds, records, failover_rounds, size=1024):
    cluster = cluster_nodes.Cluster(work, label="replication")
    results = {"records": records, "size": size, "rounds": rounds,
               "produce": {"rf3": [], "rf1": []}, "consume": {"rf3": [], "rf1": []},
               "failover": []}
    topics = {"rf3": "bench-rf3", "rf1": "bench-rf1"}
    try:
        create_topic(cluster.bootstrap, topics["rf3"], 3, {"min.insync.replicas": "2"})
        create_topic(cluster.bootstrap, topics["rf1"], 1, {})
        wait_in_sync(cluster, topics["rf3"], 3)
        wait_in_sync(cluster, topics["rf1"], 1)
        results["rf3_partition"] = partition(cluster.bootstrap, topics["rf3"])
        results["idle_cluster_cpu_s_per_s"] = cluster.idle_cpu()
        # Warm-up (connections, the first segment), outside the figures.
        for topic in topics.values():
            produce_round(bench, cluster, topic, 2000, size)
        for r in range(rounds):
            order = ["rf3", "rf1"] if r % 2 == 0 else ["rf1", "rf3"]
            for key in order:
                figures = produce_round(bench, cluster, topics[key], records, size)
                results["produce"][key].append(figures)
                print(f"produce round {r + 1} {key}: {figures}", flush=True, file=sys.stderr)
        for r in range(rounds):
            order = ["rf3", "rf1"] if r % 2 == 0 else ["rf1", "rf3"]
            for key in order:
                figures = consume_round(bench, cluster, topics[key], records)
                results["consume"][key].append(figures)
                print(f"consume round {r + 1} {key}: {figures}", flush=True, file=sys.stderr)
        for r in range(failover_rounds):
            figures = failover_round(cluster, topics["rf3"], size)
            results["failover"].append(figures)
            print(f"failover round {r + 1}: {figures}", flush=True, file=sys.stderr)
    finally:
        cluster.stop()
    summarize(results)
    return results


def summarize(results):
    s = {}
    for part in ("produce", "consume"):
        for key in ("rf3", "rf1"):
            rounds = results[part][key]
            s[f"{part}_{key}_mb_per_sec"] = median([r["mb_per_sec"] for r in rounds])
            s[f"{part}_{key}_cpu_s_per_gib"] = median([r["cluster_cpu_s_per_gib"] for r in rounds])
        # Ratio per round (the two runs of a round are back to back), then the median.
        pairs = zip(results[part]["rf3"], results[part]["rf1"])
        s[f"{part}_rf3_over_rf1_mb_per_sec"] = median(
            [a["mb_per_sec"] / b["mb_per_sec"] for a, b in pairs])
        pairs = zip(results[part]["rf3"], results[part]["rf1"])
        s[f"{part}_rf3_over_rf1_cpu"] = median(
            [a["cluster_cpu_s_per_gib"] / b["cluster_cpu_s_per_gib"] for a, b in pairs])
    fo = results["failover"]
    if fo:
        firsts = [r["kill_to_first_ack_ms"] for r in fo]
        gaps = [r["ack_gap_ms"] for r in fo]
        s["failover_kill_to_first_ack_ms"] = {"median": median(firsts), "max": max(firsts),
                                              "min": min(firsts)}
        s["failover_ack_gap_ms"] = {"median": median(gaps), "max": max(gaps), "min": min(gaps)}
        s["failover_failed_deliveries"] = sum(r["failed"] for r in fo)
        elected = [r["kill_to_new_leader_in_metadata_ms"] for r in fo
                   if r["kill_to_new_leader_in_metadata_ms"] is not None]
        s["failover_kill_to_new_leader_ms"] = {"median": median(elected), "min": min(elected),
                                               "max": max(elected)} if elected else None
    results["summary"] = s


def markdown(results):
    s = results["summary"]
    n = results["rounds"]
    lines = [f"| replication ({n} alternating rounds of {results['records']} x "
             f"{results['size']} B, medians) | RF 3 | RF 1 | RF 3 / RF 1 |",
             "|---|---|---|---|"]
    for part, what in (("produce", "produce acks=all"), ("consume", "consume")):
        lines.append(f"| {what}, MB/s | {s[f'{part}_rf3_mb_per_sec']:.1f} | "
                     f"{s[f'{part}_rf1_mb_per_sec']:.1f} | "
                     f"{s[f'{part}_rf3_over_rf1_mb_per_sec']:.2f} |")
        lines.append(f"| {what}, 3 brokers' CPU s/GiB | {s[f'{part}_rf3_cpu_s_per_gib']:.2f} | "
                     f"{s[f'{part}_rf1_cpu_s_per_gib']:.2f} | "
                     f"{s[f'{part}_rf3_over_rf1_cpu']:.2f} |")
    lines.append(f"| 3 brokers' CPU s per s, idle (both topics, no client) | "
                 f"{results['idle_cluster_cpu_s_per_s']:.3f} | | |")
    if results["failover"]:
        a, g = s["failover_kill_to_first_ack_ms"], s["failover_ack_gap_ms"]
        e = s["failover_kill_to_new_leader_ms"]
        lines += ["", f"| leader failover ({len(results['failover'])} rounds, RF 3, "
                  "min.insync.replicas=2, acks=all) | median | min | max |", "|---|---|---|---|",
                  f"| SIGKILL of the leader to the first acknowledged produce (ms) | "
                  f"{a['median']:.0f} | {a['min']} | {a['max']} |",
                  f"| SIGKILL of the leader to a survivor naming a new leader (ms) | "
                  + (f"{e['median']:.0f} | {e['min']} | {e['max']} |" if e else "none | | |"),
                  f"| last ack before the kill to the first after (ms) | "
                  f"{g['median']:.0f} | {g['min']} | {g['max']} |",
                  f"| failed deliveries (all rounds) | {s['failover_failed_deliveries']} | | |"]
    return "\n".join(lines)
