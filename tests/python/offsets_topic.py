"""Offset commits and fetches with confluent-kafka, for tests/tests/offsets_topic.rs.

Usage:
  offsets_topic.py commit BOOTSTRAP GROUP TOPIC PARTITION:OFFSET[:METADATA]...  -> {"ok": true}
  offsets_topic.py committed BOOTSTRAP GROUP TOPIC PARTITIONS
      -> {"PARTITION": [offset, metadata], ...}  (offset -1001: none committed)
Prints one JSON line.
"""
import json
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition


def consumer(bootstrap, group):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False})


def commit(bootstrap, group, topic, *specs):
    offsets = []
    for spec in specs:
        parts = spec.split(":", 2)
        if len(parts) > 2:
            offsets.append(TopicPartition(topic, int(parts[0]), int(parts[1]), parts[2]))
        else:
            offsets.append(TopicPartition(topic, int(parts[0]), int(parts[1])))
    c = consumer(bootstrap, group)
    try:
        for result in c.commit(offsets=offsets, asynchronous=False):
            if result.error is not None:
                raise KafkaException(result.error)
    finally:
        c.close()
    return {"ok": True}


def committed(bootstrap, group, topic, partitions):
    c = consumer(bootstrap, group)
    try:
        found = c.committed([TopicPartition(topic, p) for p in range(int(partitions))], timeout=15)
    finally:
        c.close()
    return {str(tp.partition): [tp.offset, tp.metadata] for tp in found}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    result = {"commit": commit, "committed": committed}[command](*args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
