#!/usr/bin/env python3
"""Authorization rules of Kafka 4 driven by real clients, for
tests/tests/authorization.rs: librdkafka (confluent-kafka) where it offers
the call, kafka-python's protocol classes over its SASL connection where
no client offers it (kafka-python's own, or defined here). Every command logs in over SASL/SCRAM-SHA-512 and
prints one JSON line; the Rust test judges.

usage: authz_checks.py BOOTSTRAP USER PASSWORD COMMAND [ARGS...]

  create-topics TOPIC...  (confluent-kafka) {"created": [TOPIC...]}
  create-acls PERMISSION:TYPE:PATTERN:NAME:PRINCIPAL:OPERATION...
                          e.g. DENY:TOPIC:LITERAL:t:User:bob:WRITE
                          (kafka-python): {"failed": [errors]}

  init-producer-id        InitProducerId without a transactional id
                          (kafka-python): {"error_code", "producer_id"}
  find-share-coordinator  FindCoordinator key type SHARE (kafka-python,
                          v2 as it knows it): {"error_code"}
  describe-cluster        DescribeCluster v0 with the cluster's authorized
                          operations (kafka-python's connection, the
                          request defined here): {"operations"}
  join GROUP TOPIC...     a consumer-protocol (KIP-848) member of GROUP
                          subscribed to TOPICs (confluent-kafka), polled
                          until assigned or 15 s: {"assigned", "errors"}
  describe-groups ADMIN_USER ADMIN_PASSWORD GROUP:TOPIC[,TOPIC]...
                          ADMIN's members join each GROUP subscribed to
                          its TOPICs, then USER describes the groups
                          (confluent-kafka, ConsumerGroupDescribe):
                          {GROUP: {"error", "members"}}
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType
from kafka.admin import ResourcePattern, ResourceType
from kafka.protocol.api import Request, Response
from kafka.protocol.find_coordinator import FindCoordinatorRequest_v2
from kafka.protocol.init_producer_id import InitProducerIdRequest_v1
from kafka.protocol.types import (
    Boolean, CompactArray, CompactString, Int16, Int32, Schema, TaggedFields)

MECHANISM = "SCRAM-SHA-512"
SHARE = 2


def kafka_python(bootstrap, user, password):
    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="gregor-tests-authz",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=MECHANISM,
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=20000,
    )


def librdkafka(bootstrap, user, password, **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": MECHANISM,
        "sasl.username": user,
        "sasl.password": password,
    }
    config.update(extra)
    return config


def create_topics(bootstrap, user, password, *topics):
    admin = AdminClient(librdkafka(bootstrap, user, password))
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1) for t in topics])
    for future in futures.values():
        future.result(timeout=20)
    return {"created": sorted(futures)}


def create_acls(bootstrap, user, password, *specs):
    acls = []
    for spec in specs:
        permission, resource_type, pattern, name, principal_type, principal, operation = spec.split(":")
        acls.append(ACL(
            f"{principal_type}:{principal}", "*", ACLOperation[operation],
            ACLPermissionType[permission],
            ResourcePattern(ResourceType[resource_type], name, ACLResourcePatternType[pattern])))
    result = kafka_python(bootstrap, user, password).create_acls(acls)
    return {"failed": [str(error) for (_, error) in result["failed"]]}


def init_producer_id(bootstrap, user, password):
    admin = kafka_python(bootstrap, user, password)
    response = admin.send_request(
        InitProducerIdRequest_v1(transactional_id=None, transaction_timeout_ms=60000))
    return {"error_code": response.error_code, "producer_id": response.producer_id}


def find_share_coordinator(bootstrap, user, password):
    admin = kafka_python(bootstrap, user, password)
    response = admin.send_request(
        FindCoordinatorRequest_v2(coordinator_key="g:t:0", coordinator_type=SHARE))
    return {"error_code": response.error_code}


class DescribeClusterResponse_v0(Response):
    API_KEY = 60
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", CompactString("utf-8")),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("brokers", CompactArray(
            ("broker_id", Int32),
            ("host", CompactString("utf-8")),
            ("port", Int32),
            ("rack", CompactString("utf-8")),
            ("tags", TaggedFields),
        )),
        ("cluster_authorized_operations", Int32),
        ("tags", TaggedFields),
    )


class DescribeClusterRequest_v0(Request):
    """DescribeCluster v0, which kafka-python lacks (and librdkafka's
    describe_cluster sends Metadata instead)."""
    API_KEY = 60
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeClusterResponse_v0
    SCHEMA = Schema(
        ("include_cluster_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


def describe_cluster(bootstrap, user, password):
    admin = kafka_python(bootstrap, user, password)
    response = admin.send_request(
        DescribeClusterRequest_v0(include_cluster_authorized_operations=True, tags={}))
    bits = response.cluster_authorized_operations
    return {"operations": sorted(op.name for op in ACLOperation if op.value > 0 and bits & 1 << op.value)}


def member(bootstrap, user, password, group, topics):
    consumer = Consumer(librdkafka(
        bootstrap, user, password,
        **{"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"}))
    consumer.subscribe(topics)
    return consumer


def poll_assignment(consumer, seconds):
    """Polls until the member has an assignment or time is up."""
    errors = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error():
            errors.append(message.error().name())
        assigned = sorted({p.topic for p in consumer.assignment()})
        if assigned:
            return assigned, errors
    return [], errors


def join(bootstrap, user, password, group, *topics):
    consumer = member(bootstrap, user, password, group, list(topics))
    assigned, errors = poll_assignment(consumer, 15)
    consumer.close()
    return {"assigned": assigned, "errors": sorted(set(errors))}


def describe_groups(bootstrap, user, password, admin_user, admin_password, *groups):
    members = []
    for spec in groups:
        group, topics = spec.split(":", 1)
        consumer = member(bootstrap, admin_user, admin_password, group, topics.split(","))
        assigned, errors = poll_assignment(consumer, 20)
        if not assigned:
            raise SystemExit(f"{group}: the admin's member got no assignment ({errors})")
        members.append(consumer)
    admin = AdminClient(librdkafka(bootstrap, user, password))
    names = [spec.split(":", 1)[0] for spec in groups]
    described = {}
    for group, future in admin.describe_consumer_groups(names).items():
        try:
            result = future.result(timeout=20)
            described[group] = {"error": None, "members": len(result.members)}
        except KafkaException as error:
            described[group] = {"error": error.args[0].name(), "members": 0}
    for consumer in members:
        consumer.close()
    return described


COMMANDS = {
    "create-topics": create_topics,
    "create-acls": create_acls,
    "init-producer-id": init_producer_id,
    "find-share-coordinator": find_share_coordinator,
    "describe-cluster": describe_cluster,
    "join": join,
    "describe-groups": describe_groups,
}


def main():
    bootstrap, user, password, command, *args = sys.argv[1:]
    print(json.dumps(COMMANDS[command](bootstrap, user, password, *args)))


if __name__ == "__main__":
    main()
