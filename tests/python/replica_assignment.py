"""CreateTopics with a manual replica assignment, as confluent-kafka's
AdminClient sends it (`NewTopic(replica_assignment=[[...], ...])`), for
tests/tests/replica_assignment.rs and tests/tests/cluster_assignment.rs.

Usage:
  replica_assignment.py create BOOTSTRAP TOPIC ASSIGNMENT
      ASSIGNMENT is JSON, the replicas of partitions 0, 1, ...: [[1, 2], [2, 3]]
      -> {"error": null | "INVALID_REPLICA_ASSIGNMENT" | ..., "partitions":
          {"0": {"leader": id, "replicas": [...], "isr": [...]}, ...}}
  replica_assignment.py describe BOOTSTRAP TOPIC -> {"partitions": {...}} as above
Each prints one JSON line. `partitions` is what BOOTSTRAP's Metadata says
of the topic afterwards (empty when it does not exist).
"""
import json
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def partitions(admin, topic):
    # All topics: asking for this one could auto-create it.
    metadata = admin.list_topics(timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return {}
    return {
        str(p.id): {"leader": p.leader, "replicas": p.replicas, "isr": p.isrs}
        for p in metadata.partitions.values()
    }


def create(bootstrap, topic, assignment):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    replicas = json.loads(assignment)
    # confluent-kafka wants the count the assignment has; librdkafka sends
    # -1 for both counts with an assignment, as Kafka requires.
    new = NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)
    futures = admin.create_topics([new], operation_timeout=10, request_timeout=15)
    error = None
    try:
        futures[topic].result(timeout=20)
    except KafkaException as failure:
        error = failure.args[0].name()
    return {"error": error, "partitions": partitions(admin, topic)}


def describe(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {"partitions": partitions(admin, topic)}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    result = {"create": create, "describe": describe}[command](*args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
