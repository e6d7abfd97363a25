#!/usr/bin/env python3
"""Configs, partitions and cluster administration with confluent-kafka's
AdminClient (librdkafka), checked step by step against Kafka's behaviour:

- DescribeConfigs of a topic: every topic config, Kafka's defaults and
  sources, broker synonyms;
- IncrementalAlterConfigs: SET, APPEND, SUBTRACT, DELETE, validate_only,
  and the errors Kafka gives (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION);
- AlterConfigs (legacy): the given configs replace the topic's overrides;
- broker configs: this broker's, a dynamic one reaching topics, read-only
  and unknown ones refused (librdkafka cannot name the cluster-wide
  default resource ""; admin_wire.py covers it);
- CreatePartitions (and validate_only, and a decrease refused),
  DescribeCluster, ElectLeaders.

Usage: admin_configs.py BOOTSTRAP TOPIC
Prints one JSON line with what it saw; exits non-zero on a failed check.
"""

import json
import sys
import warnings

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from checks import check

try:
    from confluent_kafka import ElectionType
except ImportError:  # older confluent-kafka
    from confluent_kafka.admin import ElectionType

TIMEOUT = 30


def one(futures):
    """The result of the only future in a dict of futures."""
    (future,) = futures.values()
    return future.result(timeout=TIMEOUT)


def error_of(call):
    """The Kafka error a call raises, or None."""
    try:
        call()
    except KafkaException as e:
        return e.args[0]
    return None


def describe(admin, resource):
    return admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(timeout=TIMEOUT)


def incremental(admin, resource, ops, validate_only=False):
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops]
    target = ConfigResource(resource.restype, resource.name, incremental_configs=entries)
    return one(admin.incremental_alter_configs([target], validate_only=validate_only))


def main():
    warnings.simplefilter("ignore", DeprecationWarning)  # legacy AlterConfigs on purpose
    bootstrap, topic = sys.argv[1], sys.argv[2]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seen = {}

    one(admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=TIMEOUT))
    resource = ConfigResource("topic", topic)

    # Every topic config with Kafka's default and where it comes from.
    configs = describe(admin, resource)
    seen["topic_configs"] = len(configs)
    check(len(configs) >= 20, f"only {len(configs)} topic configs")
    retention = configs["retention.ms"]
    check(retention.value == "604800000", f"default retention.ms {retention.value}")
    check(retention.source == ConfigSource.DEFAULT_CONFIG.value, f"source {retention.source}")
    check("log.retention.hours" in retention.synonyms, f"synonyms {list(retention.synonyms)}")
    check(configs["cleanup.policy"].value == "delete", "default cleanup.policy")
    check(not configs["segment.bytes"].is_read_only, "topic configs are not read-only")

    # validate_only changes nothing.
    incremental(admin, resource, [("retention.ms", "3600000", AlterConfigOpType.SET)], validate_only=True)
    check(describe(admin, resource)["retention.ms"].value == "604800000", "validate_only changed the config")

    # SET and APPEND, applied at once.
    incremental(admin, resource, [
        ("retention.ms", "3600000", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    ])
    configs = describe(admin, resource)
    check(configs["retention.ms"].value == "3600000", f"retention.ms {configs['retention.ms'].value}")
    check(configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, "override source")
    check(configs["cleanup.policy"].value == "delete,compact", f"APPEND gave {configs['cleanup.policy'].value}")

    # SUBTRACT and DELETE.
    incremental(admin, resource, [
        ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
        ("retention.ms", None, AlterConfigOpType.DELETE),
    ])
    configs = describe(admin, resource)
    check(configs["cleanup.policy"].value == "compact", f"SUBTRACT gave {configs['cleanup.policy'].value}")
    check(configs["retention.ms"].value == "604800000", "DELETE did not restore the default")
    seen["incremental"] = "ok"

    # Kafka's errors, per resource.
    bad = error_of(lambda: incremental(admin, resource, [("no.such.config", "1", AlterConfigOpType.SET)]))
    check(bad is not None and bad.code() == KafkaError.INVALID_CONFIG, f"unknown config: {bad}")
    seen["unknown_config_error"] = bad.str()
    bad = error_of(lambda: incremental(admin, resource, [("retention.ms", "soon", AlterConfigOpType.SET)]))
    check(bad is not None and bad.code() == KafkaError.INVALID_CONFIG, f"bad value: {bad}")
    bad = error_of(lambda: incremental(admin, resource, [("retention.ms", "1", AlterConfigOpType.APPEND)]))
    check(bad is not None and bad.code() == KafkaError.INVALID_CONFIG, f"APPEND on a LONG: {bad}")
    missing = ConfigResource("topic", topic + "-missing")
    bad = error_of(lambda: incremental(admin, missing, [("retention.ms", "1", AlterConfigOpType.SET)]))
    check(bad is not None and bad.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"unknown topic: {bad}")
    bad = error_of(lambda: describe(admin, missing))
    check(bad is not None and bad.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"describe unknown topic: {bad}")

    # Legacy AlterConfigs replaces every override.
    legacy = ConfigResource("topic", topic, set_config={"segment.ms": "100000"})
    one(admin.alter_configs([legacy]))
    configs = describe(admin, resource)
    check(configs["segment.ms"].value == "100000", "legacy alter did not set segment.ms")
    check(configs["cleanup.policy"].value == "delete", "legacy alter kept an override it should reset")
    seen["legacy"] = "ok"

    # This broker: every config, read-only flags, synonyms.
    broker = ConfigResource("broker", "1")
    configs = describe(admin, broker)
    seen["broker_configs"] = len(configs)
    check(configs["log.retention.hours"].value == "168", "log.retention.hours default")
    check(not configs["log.retention.hours"].is_read_only, "log.retention.hours is dynamic")
    check(configs["node.id"].is_read_only, "node.id is read-only")

    # A per-broker dynamic config reaches topics without an override.
    incremental(admin, broker, [("log.retention.ms", "5000000", AlterConfigOpType.SET)])
    configs = describe(admin, resource)
    check(configs["retention.ms"].value == "5000000", f"broker default gave {configs['retention.ms'].value}")
    check(configs["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, "dynamic broker source")
    broker_configs = describe(admin, broker)
    check(broker_configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value,
          "log.retention.ms source on the broker")

    # Read-only configs and other brokers are refused.
    bad = error_of(lambda: incremental(admin, broker, [("num.partitions", "3", AlterConfigOpType.SET)]))
    check(bad is not None and bad.code() == KafkaError.INVALID_REQUEST, f"read-only: {bad}")
    bad = error_of(lambda: incremental(admin, broker, [("no.such.broker.config", "3", AlterConfigOpType.SET)]))
    check(bad is not None and bad.code() == KafkaError.INVALID_CONFIG, f"unknown broker config: {bad}")
    seen["broker"] = "ok"

    # CreatePartitions: validate_only, the real thing, and a decrease.
    one(admin.create_partitions([NewPartitions(topic, 6)], validate_only=True))
    metadata = admin.list_topics(topic, timeout=TIMEOUT)
    check(len(metadata.topics[topic].partitions) == 2, "validate_only created partitions")
    one(admin.create_partitions([NewPartitions(topic, 4)]))
    metadata = admin.list_topics(topic, timeout=TIMEOUT)
    check(len(metadata.topics[topic].partitions) == 4, "partitions were not created")
    bad = error_of(lambda: one(admin.create_partitions([NewPartitions(topic, 3)])))
    check(bad is not None and bad.code() == KafkaError.INVALID_PARTITIONS, f"decrease: {bad}")
    seen["partitions"] = 4

    # DescribeCluster.
    cluster_info = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    check(len(cluster_info.nodes) == 1, f"nodes {cluster_info.nodes}")
    check(cluster_info.controller is not None and cluster_info.controller.id == 1, "controller")
    check(bool(cluster_info.cluster_id), "cluster id")
    seen["cluster_id"] = cluster_info.cluster_id

    # ElectLeaders: the only replica already leads.
    elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(timeout=TIMEOUT)
    error = elected[TopicPartition(topic, 0)]
    check(error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED, f"election: {error}")
    seen["election"] = error.name()

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
