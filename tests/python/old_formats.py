#!/usr/bin/env python3
"""Clients of the old message formats (magic v0/v1), for tests/tests/old_formats.rs:

- produce BOOTSTRAP TOPIC API CODEC N: kafka-python pinned to broker API
  (0.9: Produce v1, magic v0; 0.10: Produce v2, magic v1) sends keys k0..
  and values v0.. with CODEC (none, gzip) in one request; prints the
  offsets acknowledged.
- consume BOOTSTRAP TOPIC API N: kafka-python pinned to API (0.9: Fetch
  v1; 0.10: Fetch v2) reads N records of partition 0 from the beginning;
  prints [offset, key, value, timestamp] of each.
- rdkafka BOOTSTRAP TOPIC N: confluent-kafka (librdkafka) with
  `api.version.request=false` as a client of 0.9.0 (Produce v1, Fetch
  v1, magic v0; librdkafka takes any fallback from 0.10 on as a broker
  answering ApiVersions) sends N values r0.. gzip-compressed, then reads
  the partition from the beginning; prints the offsets and values read.

Prints one JSON line; exits non-zero on a failed check.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TIMEOUT_S = 30
VERSIONS = {"0.9": (0, 9), "0.10": (0, 10, 0)}


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def produce(bootstrap, topic, api, codec, n):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=VERSIONS[api],
        compression_type=None if codec == "none" else codec,
        linger_ms=200,
        acks=1,
    )
    futures = [p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0) for i in range(n)]
    p.flush(TIMEOUT_S)
    offsets = [f.get(timeout=TIMEOUT_S).offset for f in futures]
    p.close()
    return {"offsets": offsets}


def consume(bootstrap, topic, api, n):
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=VERSIONS[api],
        enable_auto_commit=False,
        request_timeout_ms=40000,
    )
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    seen = []
    deadline = time.time() + TIMEOUT_S
    while len(seen) < n and time.time() < deadline:
        for records in c.poll(timeout_ms=500).values():
            for r in records:
                key = None if r.key is None else r.key.decode()
                value = None if r.value is None else r.value.decode()
                seen.append([r.offset, key, value, r.timestamp])
    c.close()
    check(len(seen) >= n, f"read {len(seen)} of {n} records: {seen}")
    return {"records": seen}


def rdkafka(bootstrap, topic, n):
    from confluent_kafka import Consumer, Producer

    old = {
        "bootstrap.servers": bootstrap,
        "api.version.request": "false",
        "broker.version.fallback": "0.9.0",
    }
    p = Producer({**old, "compression.codec": "gzip", "linger.ms": 100})
    errors = []
    for i in range(n):
        p.produce(topic, value=f"r{i}".encode(), partition=0,
                  on_delivery=lambda err, _msg: err and errors.append(str(err)))
    left = p.flush(TIMEOUT_S)
    check(left == 0 and not errors, f"undelivered {left}, errors {errors}")
    c = Consumer({**old, "group.id": "old-formats-rd", "auto.offset.reset": "earliest",
                  "enable.auto.commit": "false"})
    c.assign([__import__("confluent_kafka").TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.time() + TIMEOUT_S
    while len(values) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        check(m.error() is None, f"consumer error {m.error()}")
        values.append([m.offset(), m.value().decode()])
    c.close()
    return {"values": values}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce":
        out = produce(args[0], args[1], args[2], args[3], int(args[4]))
    elif command == "consume":
        out = consume(args[0], args[1], args[2], int(args[3]))
    elif command == "rdkafka":
        out = rdkafka(args[0], args[1], int(args[2]))
    else:
        check(False, f"unknown command {command}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
