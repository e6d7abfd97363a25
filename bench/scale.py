#!/usr/bin/env python3
"""`make bench-scale`: how the broker's cost grows with partitions, topics and
connections (issue 17.5). Never part of `make test`.

For 1, 100, 1,000 and 10,000 partitions (topics of 10 partitions, one topic
below 10), each on a fresh broker:
- the time of the one CreateTopics request that makes them;
- the broker's descriptors (/proc/<pid>/fd) and resident memory, idle and
  after the run;
- produce throughput (1 KiB records, confluent-kafka, linger.ms=5, spread
  round-robin over the partitions) and consume throughput (one consumer
  assigned every partition, reading everything back).

Then, with 10,000 topics of one partition: the Metadata round trip for all
topics (median of 5), the start-up time (process start to a Metadata answer
listing every topic), memory per idle partition (resident memory with them,
after a restart, against an empty broker) and memory per idle connection
(1,000 connections, each having sent one ApiVersions request).

Environment: BENCH_SCALE_RECORDS (records per produce run, default 100000),
BENCH_SCALE_MAX (largest partition count, default 10000).

Results go to stdout (Markdown) and bench/results/scale.json.
"""

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GREGOR_BIN", os.path.join(ROOT, "target/release/gregor"))
PLUGINS = os.environ.get("GREGOR_PLUGIN_DIR", os.path.join(ROOT, "build/plugins"))
RECORDS = int(os.environ.get("BENCH_SCALE_RECORDS", "100000"))
MAX = int(os.environ.get("BENCH_SCALE_MAX", "10000"))
VALUE = b"v" * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, work):
        self.work = work
        self.port = free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(self.work, "broker.log"), "a")
        began = time.time()
        self.proc = subprocess.Popen(
            [BIN, "serve",
             "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--set", f"log.dirs={self.work}/data",
             "--set", f"plugin.dir={PLUGINS}",
             "--set", "admin.listener="],
            stdout=log, stderr=log)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return (time.time() - began) * 1000
            except OSError:
                time.sleep(0.005)
        self.proc.kill()
        raise SystemExit("broker did not start")

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        # A failed step (SystemExit included) must not leave a broker
        # running: one left by an aborted run idled beside later benches.
        self.stop()

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def conf(broker, **extra):
    c = {"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"}
    c.update(extra)
    return c


def layout(partitions):
    """Topics of 10 partitions (one smaller topic below 10)."""
    if partitions < 10:
        return [("s-0", partitions)]
    return [(f"s-{i}", 10) for i in range(partitions // 10)]


def create(broker, topics):
    """CreateTopics in as few requests as Kafka allows (at most 10,000
    metadata records each: a topic and each of its partitions is one)."""
    admin = AdminClient(conf(broker, **{"socket.timeout.ms": 300000}))
    chunks, chunk, records = [], [], 0
    for name, n in topics:
        if chunk and records + 1 + n > 10000:
            chunks.append(chunk)
            chunk, records = [], 0
        chunk.append((name, n))
        records += 1 + n
    chunks.append(chunk)
    began = time.time()
    errors = []
    for chunk in chunks:
        futures = admin.create_topics(
            [NewTopic(name, n, 1) for name, n in chunk], request_timeout=600,
            operation_timeout=600)
        for name, future in futures.items():
            try:
                future.result()
            except Exception as e:  # noqa: BLE001 - reported, not swallowed
                errors.append(f"{name}: {e}")
    took = (time.time() - began) * 1000
    if errors:
        raise SystemExit(f"CreateTopics: {len(errors)} failed, first: {errors[0]}")
    return took, len(chunks)


def wait_metadata(broker, topics, timeout=600):
    admin = AdminClient(conf(broker))
    deadline = time.time() + timeout
    want = {name for name, _ in topics}
    while time.time() < deadline:
        try:
            md = admin.list_topics(timeout=60)
            if want <= set(md.topics) and all(
                    p.leader >= 0 for t in want for p in md.topics[t].partitions.values()):
                return
        except Exception:  # noqa: BLE001 - retried until the deadline
            pass
        time.sleep(0.2)
    raise SystemExit("topics never showed up in Metadata")


def produce(broker, tps):
    p = Producer(conf(broker, **{"linger.ms": 5, "acks": 1, "queue.buffering.max.messages": 1000000,
                                "queue.buffering.max.kbytes": 1048576}))
    failed = []
    began = time.time()
    for i in range(RECORDS):
        topic, partition = tps[i % len(tps)]
        while True:
            try:
                p.produce(topic, VALUE, partition=partition,
                          on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(600)
    took = time.time() - began
    if failed:
        raise SystemExit(f"produce: {len(failed)} failed, first: {failed[0]}")
    return RECORDS * len(VALUE) / took / 1e6


def consume(broker, tps):
    c = Consumer(conf(broker, **{"group.id": "scale", "enable.auto.commit": False,
                                "fetch.wait.max.ms": 10}))
    c.assign([TopicPartition(t, p, 0) for t, p in tps])
    got = 0
    began = time.time()
    deadline = began + 900
    while got < RECORDS and time.time() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    took = time.time() - began
    c.close()
    if got < RECORDS:
        raise SystemExit(f"consume: {got} of {RECORDS} records")
    return RECORDS * len(VALUE) / took / 1e6


def api_versions_frame(correlation_id):
    client = b"scale"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(body)) + body


def idle_connections(broker, n):
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", broker.port))
        s.sendall(api_versions_frame(i))
        socks.append(s)
    for s in socks:
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        recv_exact(s, size)
    return socks


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
    return buf


def partitions_run(counts):
    rows = []
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="gregor-scale-") as work, Broker(work) as broker:
            broker.start()
            time.sleep(1)
            empty = {"rss_mb": broker.rss_mb(), "fds": broker.fds()}
            topics = layout(n)
            create_ms, requests = create(broker, topics)
            wait_metadata(broker, topics)
            idle = {"rss_mb": broker.rss_mb(), "fds": broker.fds()}
            tps = [(t, p) for t, k in topics for p in range(k)]
            produce_mbs = produce(broker, tps)
            written = {"rss_mb": broker.rss_mb(), "fds": broker.fds()}
            consume_mbs = consume(broker, tps)
            after = {"rss_mb": broker.rss_mb(), "fds": broker.fds()}
        row = {"partitions": n, "topics": len(topics), "create_topics_ms": round(create_ms),
               "create_topics_requests": requests,
               "produce_mb_s": round(produce_mbs, 1), "consume_mb_s": round(consume_mbs, 1),
               "empty": empty, "idle": idle, "written": written, "after": after}
        print(f"  {n} partitions: {json.dumps(row)}", file=sys.stderr)
        rows.append(row)
    return rows


def topics_run(n):
    with tempfile.TemporaryDirectory(prefix="gregor-scale-") as work, Broker(work) as broker:
        broker.start()
        time.sleep(1)
        empty_rss = broker.rss_mb()
        topics = [(f"t-{i}", 1) for i in range(n)]
        create_ms, requests = create(broker, topics)
        wait_metadata(broker, topics)
        admin = AdminClient(conf(broker))
        admin.list_topics(timeout=60)
        times = []
        for _ in range(5):
            began = time.time()
            md = admin.list_topics(timeout=120)
            times.append((time.time() - began) * 1000)
            assert len([t for t in md.topics if t.startswith("t-")]) == n
        broker.stop()
        # Start-up: to listening, and to a Metadata answer with every topic.
        began = time.time()
        listen_ms = broker.start()
        wait_metadata(broker, topics)
        ready_ms = (time.time() - began) * 1000
        time.sleep(1)
        idle_rss = broker.rss_mb()
        idle_fds = broker.fds()
        socks = idle_connections(broker, 1000)
        time.sleep(1)
        conn_rss = broker.rss_mb()
        conn_fds = broker.fds()
        for s in socks:
            s.close()
        broker.stop()
    times.sort()
    return {
        "topics": n,
        "create_topics_ms": round(create_ms),
        "create_topics_requests": requests,
        "metadata_all_topics_ms_median": round(times[len(times) // 2], 1),
        "startup_listening_ms": round(listen_ms),
        "startup_metadata_ready_ms": round(ready_ms),
        "rss_mb_empty": round(empty_rss, 1),
        "rss_mb_idle_topics": round(idle_rss, 1),
        "kib_per_idle_partition": round((idle_rss - empty_rss) * 1024 / n, 2),
        "fds_idle_topics": idle_fds,
        "rss_mb_with_1000_connections": round(conn_rss, 1),
        "kib_per_idle_connection": round((conn_rss - idle_rss) * 1024 / 1000, 2),
        "fds_with_1000_connections": conn_fds,
    }


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main():
    counts = [c for c in (1, 100, 1000, 10000) if c <= MAX]
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load_before": load(), "records_per_run": RECORDS, "record_bytes": len(VALUE)}
    print(f"partitions: {counts}", file=sys.stderr)
    results["partitions"] = partitions_run(counts)
    print(f"topics: {MAX}", file=sys.stderr)
    results["topics"] = topics_run(MAX)
    results["load_after"] = load()
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results/scale.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print(f"Scale run {results['date']}, load {' '.join(results['load_before'])} before, "
          f"{' '.join(results['load_after'])} after; {RECORDS} records of 1 KiB per run.\n")
    print("| partitions | topics | CreateTopics | produce | consume | RSS idle | RSS after "
          "| fds idle | fds written |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results["partitions"]:
        print(f"| {r['partitions']} | {r['topics']} | {r['create_topics_ms']} ms "
              f"({r['create_topics_requests']} req.) "
              f"| {r['produce_mb_s']} MB/s | {r['consume_mb_s']} MB/s "
              f"| {r['idle']['rss_mb']:.0f} MB | {r['after']['rss_mb']:.0f} MB "
              f"| {r['idle']['fds']} | {r['written']['fds']} |")
    t = results["topics"]
    print()
    for k, v in t.items():
        print(f"- {k}: {v}")


if __name__ == "__main__":
    main()
