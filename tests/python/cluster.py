"""Cluster checks with confluent-kafka, for tests/tests/cluster.rs.

Usage:
  cluster.py metadata BOOTSTRAP            -> {"brokers": [...], "controller": id, "topics": {...}}
  cluster.py create BOOTSTRAP TOPIC PARTITIONS RF -> {"error": null | "..."}
  cluster.py produce BOOTSTRAP TOPIC PARTITIONS   -> {"delivered": {partition: offset}}
Each prints one JSON line.
"""
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def metadata(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    topics = {}
    for name, topic in md.topics.items():
        topics[name] = {
            str(p.id): {"leader": p.leader, "replicas": p.replicas, "isr": p.isrs}
            for p in topic.partitions.values()
        }
    return {
        "brokers": sorted(md.brokers.keys()),
        "controller": md.controller_id,
        "topics": topics,
    }


def create(bootstrap, topic, partitions, rf):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=int(partitions), replication_factor=int(rf))],
        operation_timeout=10,
        request_timeout=15,
    )
    try:
        futures[topic].result(timeout=20)
        return {"error": None}
    except Exception as error:  # the KafkaException's text names the code
        return {"error": str(error)}


def produce(bootstrap, topic, partitions):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "message.timeout.ms": 15000})
    delivered = {}
    errors = []

    def report(error, message):
        if error is not None:
            errors.append(str(error))
        else:
            delivered[str(message.partition())] = message.offset()

    for partition in range(int(partitions)):
        producer.produce(topic, value=b"v%d" % partition, partition=partition, on_delivery=report)
    producer.flush(20)
    return {"delivered": delivered, "errors": errors}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    result = {"metadata": metadata, "create": create, "produce": produce}[command](*args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
