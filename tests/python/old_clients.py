#!/usr/bin/env python3
"""kafka-python pinned to old brokers' API versions (`api_version=`, so it
sends no ApiVersions and uses the versions those brokers served), for the
versions Kafka 4 removed (KIP-896) and Gregor serves:

- commit BOOTSTRAP TOPIC GROUP: a consumer of 0.8.1 commits offset 5 with
  OffsetCommit v0 and reads it back with OffsetFetch v0; one of 0.8.2
  commits 7 with OffsetCommit v1 (FindCoordinator v0) and reads it with
  OffsetFetch v1.
- list-offsets BOOTSTRAP TOPIC: a consumer of 0.10.0 asks the earliest and
  latest offsets of partition 0 with ListOffsets v0.
- topics BOOTSTRAP PREFIX: an admin client of 0.10.1 creates a topic with
  CreateTopics v0 and deletes it with DeleteTopics v0; one of 0.10.2
  validates one with CreateTopics v1 `validate_only` (nothing created).
- configs-acls BOOTSTRAP TOPIC: an admin client of 0.11 describes the
  topic's configs (DescribeConfigs v0) and creates, describes and deletes
  an ACL (CreateAcls, DescribeAcls, DeleteAcls v0).
- librdkafka BOOTSTRAP TOPIC GROUP: confluent-kafka (librdkafka) with
  `api.version.request=false`: as a client of 0.9.0 it reads the
  watermarks with ListOffsets v0; as one of 0.8.2 it commits offset 4 with
  OffsetCommit v1 and reads it back with OffsetFetch v1.

Prints one JSON line with what it saw; exits non-zero on a failed check.
"""

import json
import sys

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.structs import OffsetAndMetadata

TIMEOUT_MS = 30000


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def consumer(bootstrap, api_version, group=None):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id=group,
        enable_auto_commit=False,
        # Before 0.10.1 it must exceed the session timeout (30 s).
        request_timeout_ms=TIMEOUT_MS + 10000,
    )


def admin(bootstrap, api_version):
    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        request_timeout_ms=TIMEOUT_MS,
    )


def commit(bootstrap, topic, group):
    tp = TopicPartition(topic, 0)
    seen = {}
    for api_version, offset in [((0, 8, 1), 5), ((0, 8, 2), 7)]:
        c = consumer(bootstrap, api_version, group)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(offset, f"at {offset}", -1)}, timeout_ms=TIMEOUT_MS)
        committed = c.committed(tp, metadata=True, timeout_ms=TIMEOUT_MS)
        c.close()
        seen[".".join(map(str, api_version))] = [committed.offset, committed.metadata]
    return seen


def list_offsets(bootstrap, topic):
    tp = TopicPartition(topic, 0)
    c = consumer(bootstrap, (0, 10, 0))
    c.assign([tp])
    c.seek_to_beginning(tp)
    earliest = c.position(tp, timeout_ms=TIMEOUT_MS)
    c.seek_to_end(tp)
    latest = c.position(tp, timeout_ms=TIMEOUT_MS)
    c.close()
    return {"earliest": earliest, "latest": latest}


def topics(bootstrap, prefix):
    created = f"{prefix}-v0"
    old = admin(bootstrap, (0, 10, 1))
    old.create_topics([NewTopic(created, 2, 1)], timeout_ms=TIMEOUT_MS)
    listed = sorted(t for t in old.list_topics() if t.startswith(prefix))
    old.delete_topics([created], timeout_ms=TIMEOUT_MS)
    old.close()
    newer = admin(bootstrap, (0, 10, 2))
    newer.create_topics(
        [NewTopic(f"{prefix}-validated", 1, 1)], timeout_ms=TIMEOUT_MS, validate_only=True
    )
    after = sorted(t for t in newer.list_topics() if t.startswith(prefix))
    newer.close()
    return {"created": listed, "after": after}


def configs_acls(bootstrap, topic):
    a = admin(bootstrap, (0, 11))
    described = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    configs = {}
    for response in described:
        for result in response.resources:
            error_code, _message, _type, _name, entries = result
            check(error_code == 0, f"DescribeConfigs error {error_code}")
            for name, value, read_only, is_default, _sensitive in entries:
                configs[name] = [value, is_default]
    pattern = ResourcePattern(ResourceType.TOPIC, topic)
    acl = ACL("User:old", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
    created = a.create_acls([acl])
    check(not created["failed"], f"CreateAcls failed: {created['failed']}")
    acl_filter = ACLFilter(
        "User:old",
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL),
    )
    described_acls, error = a.describe_acls(acl_filter)
    check(error.errno == 0, f"DescribeAcls error {error}")
    deleted = a.delete_acls([acl_filter])
    a.close()
    return {
        "cleanup.policy": configs.get("cleanup.policy"),
        "retention.ms": configs.get("retention.ms"),
        "acls": [[x.principal, x.operation.name] for x in described_acls],
        "deleted": [[x.principal, x.operation.name] for _, ms, _ in deleted for x, _ in ms],
    }


def librdkafka(bootstrap, topic, group):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    def old(fallback):
        return Consumer(
            {
                "bootstrap.servers": bootstrap,
                "broker.address.family": "v4",
                "group.id": group,
                "enable.auto.commit": False,
                "api.version.request": False,
                "broker.version.fallback": fallback,
            }
        )

    c = old("0.9.0")
    low, high = c.get_watermark_offsets(Tp(topic, 0), timeout=TIMEOUT_MS / 1000)
    c.close()
    c = old("0.8.2")
    c.commit(offsets=[Tp(topic, 0, 4)], asynchronous=False)
    committed = c.committed([Tp(topic, 0)], timeout=TIMEOUT_MS / 1000)
    c.close()
    return {"watermarks": [low, high], "committed": committed[0].offset}


COMMANDS = {
    "librdkafka": librdkafka,
    "commit": commit,
    "list-offsets": list_offsets,
    "topics": topics,
    "configs-acls": configs_acls,
}

if __name__ == "__main__":
    command, *args = sys.argv[1:]
    print(json.dumps(COMMANDS[command](*args)))
