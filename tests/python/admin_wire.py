#!/usr/bin/env python3
"""Admin APIs that librdkafka's AdminClient does not offer, driven with
kafka-python (an independent client implementation): its AdminClient for
connections, SASL and the APIs it has, and its protocol classes plus a few
defined here for the rest. Each command checks Kafka's behaviour and prints
one JSON line; a failed check exits non-zero.

usage: admin_wire.py BOOTSTRAP COMMAND [ARGS...]

  cluster-default TOPIC        broker "" (cluster-wide default) configs
  partitions PREFIX            DescribeTopicPartitions paging,
                               OffsetForLeaderEpoch, ElectLeaders,
                               Alter/ListPartitionReassignments
  quotas                       AlterClientQuotas and DescribeClientQuotas
  set-quota TYPE NAME KEY VALUE
                               one quota (NAME '-' for the default entity)
  mutations TOPIC              the controller mutation quota (KIP-599): strict
                               and permissive CreatePartitions, CreateTopics
                               and DeleteTopics, by hand
  request-quota                a tiny request_percentage throttles a client's
                               requests (throttle_time_ms, muted connection)
  client-metrics NAME METRICS INTERVAL [MATCH]
                               a CLIENT_METRICS subscription
  tokens PLAIN_BOOTSTRAP USER PASSWORD
                               delegation tokens over SASL/SCRAM (BOOTSTRAP
                               is the SASL_PLAINTEXT listener), token
                               authentication, renew, expire
  create-token USER PASSWORD   one token (SASL listener); prints its id
  list-tokens USER PASSWORD    the ids of the tokens USER may see
  show-state SUBSCRIPTION      every quota entity and a subscription's configs
  broker-loggers NODE set LOGGER
                               BROKER_LOGGER (KIP-412): describe the loggers,
                               set LOGGER to DEBUG, Kafka's errors
  broker-loggers NODE reset LOGGER
                               delete LOGGER's level: back to the root's
  group-configs GROUP set MS   GROUP configs (KIP-848): the defaults, Kafka's
                               errors, set consumer.heartbeat.interval.ms
  group-configs GROUP show     the group's configs and whether it is listed
  group-configs GROUP reset    delete the override: back to the default
"""

import base64
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.api import Request, Response
from kafka.protocol.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kafka.protocol.types import (
    Array,
    Boolean,
    Bytes,
    CompactArray,
    CompactString,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)

from checks import check

TIMEOUT_MS = 30000


# ---- request types kafka-python does not define ----

class IncrementalAlterConfigsResponse_v0(Response):
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(
            ("error_code", Int16),
            ("error_message", String("utf-8")),
            ("resource_type", Int8),
            ("resource_name", String("utf-8")))))


class IncrementalAlterConfigsRequest_v0(Request):
    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
    SCHEMA = Schema(
        ("resources", Array(
            ("resource_type", Int8),
            ("resource_name", String("utf-8")),
            ("configs", Array(
                ("name", String("utf-8")),
                ("config_operation", Int8),
                ("value", String("utf-8")))))),
        ("validate_only", Boolean))


class AlterClientQuotasResponse_v0(Response):
    API_KEY = 49
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("entries", Array(
            ("error_code", Int16),
            ("error_message", String("utf-8")),
            ("entity", Array(
                ("entity_type", String("utf-8")),
                ("entity_name", String("utf-8")))))))


class AlterClientQuotasRequest_v0(Request):
    API_KEY = 49
    API_VERSION = 0
    RESPONSE_TYPE = AlterClientQuotasResponse_v0
    SCHEMA = Schema(
        ("entries", Array(
            ("entity", Array(
                ("entity_type", String("utf-8")),
                ("entity_name", String("utf-8")))),
            ("ops", Array(
                ("key", String("utf-8")),
                ("value", Float64),
                ("remove", Boolean))))),
        ("validate_only", Boolean))


def create_token_classes():
    class CreateDelegationTokenResponse_v1(Response):
        API_KEY = 38
        API_VERSION = 1
        SCHEMA = Schema(
            ("error_code", Int16),
            ("principal_type", String("utf-8")),
            ("principal_name", String("utf-8")),
            ("issue_timestamp_ms", Int64),
            ("expiry_timestamp_ms", Int64),
            ("max_timestamp_ms", Int64),
            ("token_id", String("utf-8")),
            ("hmac", Bytes),
            ("throttle_time_ms", Int32))

    class CreateDelegationTokenRequest_v1(Request):
        API_KEY = 38
        API_VERSION = 1
        RESPONSE_TYPE = CreateDelegationTokenResponse_v1
        SCHEMA = Schema(
            ("renewers", Array(
                ("principal_type", String("utf-8")),
                ("principal_name", String("utf-8")))),
            ("max_lifetime_ms", Int64))

    class RenewDelegationTokenResponse_v1(Response):
        API_KEY = 39
        API_VERSION = 1
        SCHEMA = Schema(
            ("error_code", Int16),
            ("expiry_timestamp_ms", Int64),
            ("throttle_time_ms", Int32))

    class RenewDelegationTokenRequest_v1(Request):
        API_KEY = 39
        API_VERSION = 1
        RESPONSE_TYPE = RenewDelegationTokenResponse_v1
        SCHEMA = Schema(("hmac", Bytes), ("renew_period_ms", Int64))

    class ExpireDelegationTokenResponse_v1(Response):
        API_KEY = 40
        API_VERSION = 1
        SCHEMA = RenewDelegationTokenResponse_v1.SCHEMA

    class ExpireDelegationTokenRequest_v1(Request):
        API_KEY = 40
        API_VERSION = 1
        RESPONSE_TYPE = ExpireDelegationTokenResponse_v1
        SCHEMA = Schema(("hmac", Bytes), ("expiry_time_period_ms", Int64))

    class DescribeDelegationTokenResponse_v1(Response):
        API_KEY = 41
        API_VERSION = 1
        SCHEMA = Schema(
            ("error_code", Int16),
            ("tokens", Array(
                ("principal_type", String("utf-8")),
                ("principal_name", String("utf-8")),
                ("issue_timestamp", Int64),
                ("expiry_timestamp", Int64),
                ("max_timestamp", Int64),
                ("token_id", String("utf-8")),
                ("hmac", Bytes),
                ("renewers", Array(
                    ("principal_type", String("utf-8")),
                    ("principal_name", String("utf-8")))))),
            ("throttle_time_ms", Int32))

    class DescribeDelegationTokenRequest_v1(Request):
        API_KEY = 41
        API_VERSION = 1
        RESPONSE_TYPE = DescribeDelegationTokenResponse_v1
        SCHEMA = Schema(
            ("owners", Array(
                ("principal_type", String("utf-8")),
                ("principal_name", String("utf-8")))))

    return (CreateDelegationTokenRequest_v1, RenewDelegationTokenRequest_v1,
            ExpireDelegationTokenRequest_v1, DescribeDelegationTokenRequest_v1)


# ---- commands ----

def admin_client(bootstrap, **extra):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS, **extra)


def incremental(admin, resource_type, name, configs, validate_only=False):
    request = IncrementalAlterConfigsRequest_v0(
        resources=[(resource_type, name, configs)], validate_only=validate_only)
    response = admin.send_request(request)
    ((code, message, _, _),) = response.responses
    return code, message


def describe_configs(admin, resource_type, name):
    request = DescribeConfigsRequest[1](resources=[(resource_type, name, None)], include_synonyms=True)
    response = admin.send_request(request)
    ((code, message, _, _, entries),) = response.resources
    check(code == 0, f"describe {resource_type} {name!r}: {code} {message}")
    # v1 entry: name, value, read_only, source, is_sensitive, synonyms
    return {e[0]: {"value": e[1], "source": e[3], "synonyms": [(s[0], s[2]) for s in e[5]]} for e in entries}


def cluster_default(bootstrap, topic):
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    # Set the cluster-wide default of a dynamic broker config.
    code, message = incremental(admin, 4, "", [("log.retention.ms", 0, "7200000")])
    check(code == 0, f"cluster default: {code} {message}")
    defaults = describe_configs(admin, 4, "")
    check(list(defaults) == ["log.retention.ms"], f"cluster default lists {list(defaults)}")
    check(defaults["log.retention.ms"]["source"] == 3, "DYNAMIC_DEFAULT_BROKER_CONFIG")
    topic_configs = describe_configs(admin, 2, topic)
    retention = topic_configs["retention.ms"]
    check(retention["value"] == "7200000", f"topic sees {retention}")
    check(retention["source"] == 3, f"topic source {retention['source']}")
    check(("log.retention.hours", 5) in retention["synonyms"], f"synonyms {retention['synonyms']}")
    # The per-broker value takes precedence over the cluster default.
    code, _ = incremental(admin, 4, "1", [("log.retention.ms", 0, "3600000")])
    check(code == 0, "per-broker set")
    retention = describe_configs(admin, 2, topic)["retention.ms"]
    check(retention["value"] == "3600000" and retention["source"] == 2, f"per-broker wins: {retention}")
    sources = [s for _, s in retention["synonyms"]]
    check(sources[:2] == [2, 3], f"synonym order {retention['synonyms']}")
    # Another broker's id is refused, as are malformed requests.
    code, message = incremental(admin, 4, "2", [("log.retention.ms", 0, "1")])
    check(code == 42, f"other broker: {code} {message}")
    code, message = incremental(admin, 2, topic, [("retention.ms", 0, "1"), ("retention.ms", 0, "2")])
    check(code == 42, f"duplicate keys: {code} {message}")
    code, message = incremental(admin, 2, topic, [("retention.ms", 7, "1")])
    check(code == 42, f"unknown operation: {code} {message}")
    # Undo, so other checks see Kafka's defaults.
    incremental(admin, 4, "1", [("log.retention.ms", 1, None)])
    incremental(admin, 4, "", [("log.retention.ms", 1, None)])
    check(describe_configs(admin, 2, topic)["retention.ms"]["value"] == "604800000", "defaults back")
    print(json.dumps({"cluster_default": "ok"}))


def partitions(bootstrap, prefix):
    admin = admin_client(bootstrap)
    topics = [f"{prefix}-{i}" for i in range(3)]
    admin.create_topics([NewTopic(t, 3, 1) for t in topics])
    time.sleep(0.5)

    # DescribeTopicPartitions: 9 partitions, 4 per page.
    wire = Wire(bootstrap)
    pages, seen, cursor = 0, [], None
    while True:
        response = describe_topic_partitions(wire, topics, 4, cursor)
        pages += 1
        for error, name, partitions_ in response["topics"]:
            check(error == 0, f"topic error {name} {error}")
            for index, leader, epoch, replicas, isr in partitions_:
                seen.append((name, index))
                check(leader == 1 and epoch == 0, f"leader/epoch {name}-{index}")
                check(replicas == [1] and isr == [1], f"replicas/isr {name}-{index}")
        cursor = response["next_cursor"]
        if cursor is None:
            break
        check(pages < 10, "too many pages")
    expected = [(t, p) for t in sorted(topics) for p in range(3)]
    check(seen == expected, f"pages gave {seen}")
    check(pages == 3, f"{pages} pages")
    # A cursor naming a topic outside the request is INVALID_REQUEST.
    response = describe_topic_partitions(wire, topics[:1], 4, (topics[2], 0))
    check([t[0] for t in response["topics"]] == [42], f"bad cursor {response}")
    # Unknown topics are named with their error.
    response = describe_topic_partitions(wire, ["no-such-topic"], 4, None)
    check([t[0] for t in response["topics"]] == [3], f"unknown topic {response}")

    # OffsetForLeaderEpoch (v3): epoch 0 ends at the log end offset.
    request = OffsetForLeaderEpochRequest[3](
        replica_id=-1, topics=[(topics[0], [(0, -1, 0), (1, -1, 1), (2, 1, 0)])])
    response = admin.send_request(request)
    ((_, parts),) = response.topics
    by_partition = {p[1]: p for p in parts}
    check(by_partition[0][0] == 0 and by_partition[0][2] == 0 and by_partition[0][3] == 0,
          f"epoch 0 {by_partition[0]}")
    check(by_partition[1][2] == -1 and by_partition[1][3] == -1, f"epoch 1 {by_partition[1]}")
    check(by_partition[2][0] == 75, f"newer current epoch {by_partition[2]}")

    # ElectLeaders v1 (kafka-python's class _v0 is API version 1).
    request = ElectLeadersRequest[0](election_type=0, topic_partitions=[(topics[0], [0, 7])], timeout=TIMEOUT_MS)
    response = admin.send_request(request)
    results = {p[0]: p[1] for topic in response.replication_election_results for p in topic[1]}
    check(results == {0: 84, 7: 3}, f"election {results}")

    # AlterPartitionReassignments: the only valid target is the current one.
    request = AlterPartitionReassignmentsRequest[0](timeout_ms=TIMEOUT_MS, topics=[
        (topics[0], [(0, [1], {}), (1, [2], {}), (2, None, {})], {})], tags={})
    response = admin.send_request(request)
    codes = {p[0]: p[1] for topic in response.responses for p in topic[1]}
    check(codes == {0: 0, 1: 39, 2: 85}, f"reassignments {codes}")
    request = ListPartitionReassignmentsRequest[0](timeout_ms=TIMEOUT_MS, topics=None, tags={})
    response = admin.send_request(request)
    check(response.error_code == 0 and list(response.topics) == [], f"ongoing {response}")

    print(json.dumps({"pages": pages, "partitions": len(seen)}))


def quotas(bootstrap):
    admin = admin_client(bootstrap)

    def alter(entity, ops, validate_only=False):
        response = admin.send_request(AlterClientQuotasRequest_v0(
            entries=[(entity, ops)], validate_only=validate_only))
        ((code, message, _),) = response.entries
        return code, message

    def describe(components, strict=False):
        response = admin.send_request(DescribeClientQuotasRequest[0](components=components, strict=strict))
        check(response.error_code == 0, f"describe {components}: {response.error_code} {response.error_message}")
        entries = [(tuple(sorted(e, key=str)), sorted(v)) for e, v in response.entries]
        return sorted(entries, key=str)

    check(alter([("user", "alice")], [("producer_byte_rate", 1048576.0, False)]) == (0, None), "user quota")
    check(alter([("user", "alice"), ("client-id", "app")], [("request_percentage", 50.0, False)])[0] == 0,
          "user+client quota")
    check(alter([("client-id", None)], [("consumer_byte_rate", 2097152.0, False)])[0] == 0, "default client quota")
    check(alter([("user", "bob")], [("producer_byte_rate", 5.0, False)], validate_only=True)[0] == 0, "validate")

    everything = describe([])
    check(len(everything) == 3, f"all entities {everything}")
    alice = describe([("user", 0, "alice")], strict=True)
    check(alice == [((("user", "alice"),), [("producer_byte_rate", 1048576.0)])], f"alice {alice}")
    check(len(describe([("user", 0, "alice")])) == 2, "alice non-strict")
    default_client = describe([("client-id", 1, None)])
    check(default_client == [((("client-id", None),), [("consumer_byte_rate", 2097152.0)])],
          f"default client {default_client}")
    check(len(describe([("user", 2, None)])) == 2, "any user")

    # Kafka's validation, per entry.
    for entity, ops, what in [
        ([("user", "alice")], [("producer_byte_rate", 1.5, False)], "fraction"),
        ([("user", "alice")], [("producer_byte_rate", 0.0, False)], "zero"),
        ([("user", "alice")], [("no_such_quota", 1.0, False)], "unknown key"),
        ([("group", "g")], [("producer_byte_rate", 1.0, False)], "unknown entity type"),
        ([], [("producer_byte_rate", 1.0, False)], "empty entity"),
    ]:
        code, message = alter(entity, ops)
        check(code == 42, f"{what}: {code} {message}")
    response = admin.send_request(DescribeClientQuotasRequest[0](components=[("group", 2, None)], strict=False))
    check(response.error_code == 35, f"unknown filter type: {response.error_code}")

    # Removing the last key removes the entity.
    check(alter([("user", "alice")], [("producer_byte_rate", 0.0, True)])[0] == 0, "remove")
    check(describe([("user", 0, "alice")], strict=True) == [], "removed")
    print(json.dumps({"quotas": "ok", "entities": len(describe([]))}))


def create_partitions_v3(wire, topic, count):
    """CreatePartitions v3 (flexible, strict mutation quota) by hand:
    (throttle time, error code, message)."""
    body = uvarint(2) + compact_string(topic) + struct.pack(">i", count) + uvarint(0) + uvarint(0)
    body += struct.pack(">i", 30000) + b"\x00" + uvarint(0)
    reader = FlexReader(wire.request(37, 3, body, flexible=True))
    reader.tags()
    throttle = reader.take(">i")
    results = reader.array(lambda: (reader.string(), reader.take(">h"), reader.string(), reader.tags()))
    ((_, code, message, _),) = results
    return throttle, code, message


def create_topic_raw(wire, version, topic, partitions):
    """CreateTopics v4 (permissive mutation quota) or v6 (strict, flexible)
    by hand, one topic with the default replication factor: (throttle time,
    error code, message)."""
    if version < 5:
        body = struct.pack(">i", 1) + kstring(topic) + struct.pack(">ihii", partitions, -1, 0, 0)
        body += struct.pack(">i", TIMEOUT_MS) + b"\x00"
        body = wire.request(19, version, body)
        throttle, count = struct.unpack_from(">ii", body, 0)
        check(count == 1, f"CreateTopics v{version}: {count} results")
        _, at = read_string(body, 8)
        (code,) = struct.unpack_from(">h", body, at)
        message, _ = read_string(body, at + 2)
        return throttle, code, message
    body = uvarint(2) + compact_string(topic) + struct.pack(">ih", partitions, -1)
    body += uvarint(1) + uvarint(1) + uvarint(0)  # no assignments, no configs
    body += struct.pack(">i", TIMEOUT_MS) + b"\x00" + uvarint(0)
    reader = FlexReader(wire.request(19, version, body, flexible=True))
    reader.tags()
    throttle = reader.take(">i")
    check(reader.uvarint() == 2, f"CreateTopics v{version}: one result")
    reader.string()
    if version >= 7:
        reader.at += 16  # topic id
    code, message = reader.take(">h"), reader.string()
    return throttle, code, message


def delete_topic_raw(wire, version, topic):
    """DeleteTopics v4 (permissive mutation quota) or v5 (strict) by hand:
    (throttle time, error code, message)."""
    body = uvarint(2) + compact_string(topic) + struct.pack(">i", TIMEOUT_MS) + uvarint(0)
    reader = FlexReader(wire.request(20, version, body, flexible=True))
    reader.tags()
    throttle = reader.take(">i")
    check(reader.uvarint() == 2, f"DeleteTopics v{version}: one result")
    reader.string()
    code = reader.take(">h")
    message = reader.string() if version >= 5 else None
    return throttle, code, message


def partition_count(admin, topic):
    (described,) = admin.describe_topics([topic])
    if described["error_code"] != 0:
        return None
    return len(described["partitions"])


def mutations(bootstrap, topic):
    """KIP-599 as Kafka's Strict- and PermissiveControllerMutationQuota
    apply it: a strict request (CreatePartitions v3+, CreateTopics v6+,
    DeleteTopics v5+) is refused with THROTTLING_QUOTA_EXCEEDED while the
    client's token bucket is below zero and is never throttled when it is
    accepted; an older request is always accepted and throttled for the
    time that refills the bucket to zero."""
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    # One mutation per second: a bucket of quota.window.num (11) windows'
    # worth, refilled at one token per second.
    response = admin.send_request(AlterClientQuotasRequest_v0(
        entries=[([("client-id", "admin-wire")], [("controller_mutation_rate", 1.0, False)])],
        validate_only=False))
    check(response.entries[0][0] == 0, f"quota: {response.entries}")
    # 20 new partitions: accepted, the bucket was not empty, and not
    # throttled, the request being strict. The bucket is now at about -9.
    first, code, message = create_partitions_v3(Wire(bootstrap), topic, 21)
    check(code == 0 and first == 0, f"first: {first} {code} {message}")
    check(partition_count(admin, topic) == 21, "partitions created")
    # Each request on a connection of its own: a throttled connection is
    # muted for the throttle time (KIP-219).
    refusals = []
    for name, (throttle, code, message) in [
        ("CreatePartitions v3", create_partitions_v3(Wire(bootstrap), topic, 22)),
        ("CreateTopics v6", create_topic_raw(Wire(bootstrap), 6, f"{topic}-strict", 1)),
    ]:
        check(code == 89 and message == "The throttling quota has been exceeded."
              and 5000 < throttle <= 9000,
              f"{name} over the quota: {throttle} {code} {message}")
        refusals.append(throttle)
    # Refused requests changed nothing and took no tokens.
    check(partition_count(admin, topic) == 21, "refused partitions were added")
    check(partition_count(admin, f"{topic}-strict") is None, "a refused topic was created")
    check(refusals[1] <= refusals[0], f"a refusal took tokens: {refusals}")
    # The permissive versions: accepted, and throttled for the whole
    # deficit, each 2 partitions deeper (2000 ms less the time between).
    created, code, message = create_topic_raw(Wire(bootstrap), 4, f"{topic}-lax", 2)
    check(code == 0 and refusals[1] + 1000 < created <= 11000,
          f"CreateTopics v4: {created} {code} {message}")
    check(partition_count(admin, f"{topic}-lax") == 2, "permissive topic created")
    throttle, code, message = delete_topic_raw(Wire(bootstrap), 5, f"{topic}-lax")
    check(code == 89 and 0 < throttle <= created, f"DeleteTopics v5: {throttle} {code} {message}")
    check(partition_count(admin, f"{topic}-lax") == 2, "a refused deletion deleted")
    deleted, code, message = delete_topic_raw(Wire(bootstrap), 4, f"{topic}-lax")
    check(code == 0 and throttle + 1000 < deleted <= 13000,
          f"DeleteTopics v4: {deleted} {code} {message}")
    check(partition_count(admin, f"{topic}-lax") is None, "permissive deletion")
    # Another client id has a quota of its own (none).
    other, code, message = create_partitions_v3(Wire(bootstrap, client_id="other-admin"), topic, 22)
    check(code == 0 and other == 0, f"another client: {other} {code} {message}")
    print(json.dumps({"first_throttle_ms": first, "refused_throttle_ms": refusals,
                      "permissive_create_throttle_ms": created,
                      "permissive_delete_throttle_ms": deleted}))


def request_quota(bootstrap):
    admin = admin_client(bootstrap)
    response = admin.send_request(AlterClientQuotasRequest_v0(
        entries=[([("client-id", "busy-admin")], [("request_percentage", 0.01, False)])],
        validate_only=False))
    check(response.entries[0][0] == 0, f"quota: {response.entries}")
    # A bare connection, which (unlike real clients) does not hold itself
    # back: the broker mutes it after a throttled response, so the next
    # request's answer comes only after the throttle time (KIP-219).
    wire = Wire(bootstrap, client_id="busy-admin")
    describe_broker = struct.pack(">i", 1) + struct.pack(">b", 4) + kstring("1") + struct.pack(">i", -1) + b"\x00"
    throttles, delays, previous = [], [], 0
    for _ in range(300):
        started = time.time()
        body = wire.request(32, 1, describe_broker)
        elapsed_ms = (time.time() - started) * 1000
        if previous > 0:
            delays.append((previous, round(elapsed_ms)))
        (previous,) = struct.unpack_from(">i", body, 0)
        if previous > 0:
            throttles.append(previous)
        if len(delays) >= 3:
            break
    check(len(delays) >= 3, f"no throttling: {throttles}")
    check(max(throttles) <= 1000, f"a request quota throttle is capped at one window: {throttles}")
    for throttle, delay in delays:
        check(delay >= throttle * 0.8, f"the connection was not muted: throttle {throttle} ms, next answer after {delay} ms")
    # Another client id is not slowed.
    quick = Wire(bootstrap, client_id="quick-admin").request(32, 1, describe_broker)
    check(struct.unpack_from(">i", quick, 0)[0] == 0, "another client was throttled")
    print(json.dumps({"throttle_then_next_answer_ms": delays}))


def set_quota(bootstrap, entity_type, name, key, value):
    admin = admin_client(bootstrap)
    name = None if name == "-" else name
    response = admin.send_request(AlterClientQuotasRequest_v0(
        entries=[([(entity_type, name)], [(key, float(value), False)])], validate_only=False))
    ((code, message, _),) = response.entries
    check(code == 0, f"set quota: {code} {message}")
    print(json.dumps({"set": key}))


def client_metrics(bootstrap, name, metrics, interval, match=None):
    admin = admin_client(bootstrap)
    configs = [("metrics", 0, metrics), ("interval.ms", 0, interval)]
    if match:
        configs.append(("match", 0, match))
    code, message = incremental(admin, 16, name, configs)
    check(code == 0, f"client metrics: {code} {message}")
    code, message = incremental(admin, 16, name, [("interval.ms", 0, "5")])
    check(code == 40, f"bad interval: {code} {message}")
    described = describe_configs(admin, 16, name)
    check(described["interval.ms"]["value"] == interval and described["interval.ms"]["source"] == 7,
          f"subscription {described}")
    print(json.dumps({"subscription": name}))


# ---- delegation tokens and SCRAM token authentication ----

class Wire:
    """A bare Kafka connection."""

    def __init__(self, bootstrap, client_id="admin-wire"):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0
        self.client_id = client_id.encode()

    def request(self, api_key, version, body, flexible=False):
        self.correlation += 1
        client = self.client_id
        header = struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client
        if flexible:
            header += b"\x00"  # request header v2: no tagged fields
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        payload = self._read(size)
        check(struct.unpack(">i", payload[:4])[0] == self.correlation, "correlation id")
        return payload[4:]

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed")
            data += chunk
        return data


def uvarint(value):
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def compact_string(value):
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


class FlexReader:
    def __init__(self, buf):
        self.buf, self.at = buf, 0

    def take(self, fmt):
        (value,) = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.buf[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        value = self.buf[self.at:self.at + n].decode()
        self.at += n
        return value

    def array(self, item):
        n = self.uvarint() - 1
        return [item() for _ in range(max(n, 0))]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()


def describe_topic_partitions(wire, topics, limit, cursor):
    """DescribeTopicPartitions v0 (flexible) by hand: the nullable cursor
    struct is what kafka-python's schemas cannot express."""
    body = uvarint(len(topics) + 1)
    for topic in topics:
        body += compact_string(topic) + uvarint(0)
    body += struct.pack(">i", limit)
    if cursor is None:
        body += struct.pack(">b", -1)
    else:
        body += struct.pack(">b", 1) + compact_string(cursor[0]) + struct.pack(">i", cursor[1]) + uvarint(0)
    body += uvarint(0)
    reader = FlexReader(wire.request(75, 0, body, flexible=True))
    reader.tags()  # response header v1
    reader.take(">i")  # throttle
    def partition():
        reader.take(">h")
        index, leader, epoch = reader.take(">i"), reader.take(">i"), reader.take(">i")
        ints = lambda: reader.array(lambda: reader.take(">i"))
        replicas, isr = ints(), ints()
        ints(); ints(); ints()  # eligible leader replicas, last known ELR, offline
        reader.tags()
        return index, leader, epoch, replicas, isr
    def topic():
        error = reader.take(">h")
        name = reader.string()
        reader.at += 16 + 1  # topic id, is_internal
        partitions_ = reader.array(partition)
        reader.take(">i")  # authorized operations
        reader.tags()
        return error, name, partitions_
    topics_ = reader.array(topic)
    next_cursor = None
    if reader.take(">b") >= 0:
        next_cursor = (reader.string(), reader.take(">i"))
        reader.tags()
    reader.tags()
    return {"topics": topics_, "next_cursor": next_cursor}



def kstring(value):
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def kbytes(value):
    return struct.pack(">i", len(value)) + value


def read_string(buf, at):
    (n,) = struct.unpack_from(">h", buf, at)
    at += 2
    if n < 0:
        return None, at
    return buf[at:at + n].decode(), at + n


def read_bytes(buf, at):
    (n,) = struct.unpack_from(">i", buf, at)
    at += 4
    if n < 0:
        return None, at
    return buf[at:at + n], at + n


def scram_login(bootstrap, username, password, token_auth):
    """SASL/SCRAM-SHA-256 on a new connection (SaslHandshake v1,
    SaslAuthenticate v1); returns (connection, error code, message)."""
    wire = Wire(bootstrap)
    body = wire.request(17, 1, kstring("SCRAM-SHA-256"))
    check(struct.unpack_from(">h", body, 0)[0] == 0, "handshake")
    nonce = base64.b64encode(os.urandom(18)).decode()
    extensions = ",tokenauth=true" if token_auth else ""
    client_first_bare = f"n={username},r={nonce}{extensions}"
    body = wire.request(36, 1, kbytes(("n,," + client_first_bare).encode()))
    (code,) = struct.unpack_from(">h", body, 0)
    message, at = read_string(body, 2)
    if code != 0:
        return wire, code, message
    server_first, at = read_bytes(body, at)
    server_first = server_first.decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salt, iterations, server_nonce = base64.b64decode(fields["s"]), int(fields["i"]), fields["r"]
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={server_nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    body = wire.request(36, 1, kbytes(f"{without_proof},p={proof}".encode()))
    (code,) = struct.unpack_from(">h", body, 0)
    message, at = read_string(body, 2)
    if code == 0:
        server_final, _ = read_bytes(body, at)
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, hashlib.sha256).digest()).decode()
        check(server_final.decode() == f"v={expected}", "server signature")
    return wire, code, message


def create_token_on(wire):
    """CreateDelegationToken v1 on a bare connection: the error code."""
    body = wire.request(38, 1, struct.pack(">i", 0) + struct.pack(">q", -1))
    return struct.unpack_from(">h", body, 0)[0]


def topics_on(wire):
    """Metadata v1 for every topic on a bare connection: the topic names."""
    body = wire.request(3, 1, struct.pack(">i", -1))
    at = 0
    (brokers,) = struct.unpack_from(">i", body, at)
    at += 4
    for _ in range(brokers):
        at += 4
        _, at = read_string(body, at)
        at += 4
        _, at = read_string(body, at)
    at += 4  # controller id
    (count,) = struct.unpack_from(">i", body, at)
    at += 4
    names = []
    for _ in range(count):
        at += 2
        name, at = read_string(body, at)
        names.append(name)
        at += 1
        (partitions,) = struct.unpack_from(">i", body, at)
        at += 4
        for _ in range(partitions):
            at += 2 + 4 + 4
            for _ in range(2):
                (n,) = struct.unpack_from(">i", body, at)
                at += 4 + 4 * n
    return names


def tokens(bootstrap, plain_bootstrap, user, password):
    create, renew, expire, describe = create_token_classes()
    admin = sasl_admin(bootstrap, user, password)
    admin.create_topics([NewTopic("token-visible", 1, 1)])

    # Create, as the authenticated user, renewable by bob.
    created = admin.send_request(create(renewers=[("User", "bob")], max_lifetime_ms=3600000))
    check(created.error_code == 0, f"create: {created.error_code}")
    check((created.principal_type, created.principal_name) == ("User", user), "owner")
    check(created.max_timestamp_ms - created.issue_timestamp_ms == 3600000, "max lifetime")
    check(len(created.hmac) == 64, "HMAC-SHA512")
    token_id, token_hmac = created.token_id, created.hmac

    described = admin.send_request(describe(owners=None))
    check(described.error_code == 0 and [t[5] for t in described.tokens] == [token_id],
          f"describe {described}")
    check(described.tokens[0][7] == [("User", "bob")], "renewers")
    none = admin.send_request(describe(owners=[]))
    check(none.tokens == [], "an empty owner list describes nothing")

    renewed = admin.send_request(renew(hmac=token_hmac, renew_period_ms=60000))
    check(renewed.error_code == 0, f"renew {renewed.error_code}")
    check(abs(renewed.expiry_timestamp_ms - (time.time() * 1000 + 60000)) < 10000, "renewed expiry")
    unknown = admin.send_request(renew(hmac=b"nope", renew_period_ms=60000))
    check(unknown.error_code == 62, f"unknown token {unknown.error_code}")

    # Authenticate with the token: the connection acts as its owner, and
    # (as in Kafka) may not manage tokens itself.
    password_of_token = base64.b64encode(token_hmac).decode()
    wire, code, message = scram_login(bootstrap, token_id, password_of_token, token_auth=True)
    check(code == 0, f"token authentication: {code} {message}")
    check("token-visible" in topics_on(wire), "metadata as the token owner")
    check(create_token_on(wire) == 64, "token-authenticated connections may not create tokens")
    _, code, _ = scram_login(bootstrap, token_id, "wrong", token_auth=True)
    check(code == 58, f"wrong token password: {code}")
    _, code, _ = scram_login(bootstrap, token_id, password_of_token, token_auth=False)
    check(code == 58, f"a token id is not a user: {code}")

    # Plain text connections may not manage tokens.
    plain = Wire(plain_bootstrap)
    check(create_token_on(plain) == 64, "PLAINTEXT may not create tokens")

    # Expire now: the token is gone and no longer authenticates.
    expired = admin.send_request(expire(hmac=token_hmac, expiry_time_period_ms=-1))
    check(expired.error_code == 0, f"expire {expired.error_code}")
    gone = admin.send_request(describe(owners=None))
    check(gone.tokens == [], "expired token still described")
    _, code, _ = scram_login(bootstrap, token_id, password_of_token, token_auth=True)
    check(code == 58, f"expired token authenticated: {code}")
    print(json.dumps({"token_id": token_id, "tokens": "ok"}))


def sasl_admin(bootstrap, user, password):
    return admin_client(bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                        sasl_plain_username=user, sasl_plain_password=password)


def create_token(bootstrap, user, password):
    create, _, _, _ = create_token_classes()
    created = sasl_admin(bootstrap, user, password).send_request(create(renewers=[], max_lifetime_ms=-1))
    check(created.error_code == 0, f"create: {created.error_code}")
    print(json.dumps({"token_id": created.token_id}))


def list_tokens(bootstrap, user, password):
    _, _, _, describe = create_token_classes()
    described = sasl_admin(bootstrap, user, password).send_request(describe(owners=None))
    check(described.error_code == 0, f"describe: {described.error_code}")
    print(json.dumps({"token_ids": [t[5] for t in described.tokens]}))


# ---- broker loggers (KIP-412) ----

BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_loggers(admin, node, names=None):
    """DescribeConfigs v1 on (BROKER_LOGGER, node): (code, message, {logger: entry})."""
    request = DescribeConfigsRequest[1](resources=[(BROKER_LOGGER, node, names)], include_synonyms=True)
    response = admin.send_request(request)
    ((code, message, kind, name, entries),) = response.resources
    check((kind, name) == (BROKER_LOGGER, node), f"echoed resource {kind} {name!r}")
    # v1 entry: name, value, read_only, source, is_sensitive, synonyms
    loggers = {e[0]: {"value": e[1], "read_only": e[2], "source": e[3], "sensitive": e[4], "synonyms": e[5]}
               for e in entries}
    return code, message, loggers


def logger_level(admin, node, logger):
    code, message, loggers = describe_loggers(admin, node, [logger])
    check(code == 0 and list(loggers) == [logger], f"describe {logger}: {code} {message} {list(loggers)}")
    return loggers[logger]["value"]


def broker_loggers(bootstrap, node, action, logger):
    admin = admin_client(bootstrap)
    if action == "reset":
        code, message = incremental(admin, BROKER_LOGGER, node, [(logger, DELETE, None)])
        check(code == 0, f"delete {logger}: {code} {message}")
        root = logger_level(admin, node, "root")
        level = logger_level(admin, node, logger)
        check(level == root, f"{logger} back at the root level {root}: {level}")
        print(json.dumps({"logger": logger, "level": level, "root": root}))
        return
    check(action == "set", f"unknown action {action}")
    code, message, loggers = describe_loggers(admin, node)
    check(code == 0, f"describe loggers: {code} {message}")
    check("root" in loggers and logger in loggers and "gregor" in loggers, f"loggers {sorted(loggers)}")
    for name, entry in loggers.items():
        check(entry["source"] == 6 and not entry["read_only"] and not entry["sensitive"]
              and entry["synonyms"] == [], f"{name}: {entry}")
        check(entry["value"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"), f"{name}: {entry}")
    root = loggers["root"]["value"]
    before = loggers[logger]["value"]
    parent = logger.rsplit("::", 1)[0]
    parent_before = loggers[parent]["value"]

    # Kafka's errors, each for the whole resource, nothing applied.
    errors = {}
    for label, configs, expected in [
        ("lower case level", [(logger, SET, "debug")], 40),
        ("OFF", [(logger, SET, "OFF")], 40),
        ("unknown logger", [("no.such.logger", SET, "DEBUG")], 40),
        ("delete root", [("root", DELETE, None)], 42),
        ("append", [(logger, APPEND, "DEBUG")], 42),
        ("subtract", [(logger, SUBTRACT, "DEBUG")], 42),
        ("null value", [(logger, SET, None)], 42),
        ("one bad of two", [(parent, SET, "DEBUG"), (logger, SET, "LOUD")], 40),
    ]:
        code, message = incremental(admin, BROKER_LOGGER, node, configs)
        check(code == expected, f"{label}: {code} {message}")
        errors[label] = message
    check(errors["lower case level"] == f"Cannot set the log level of {logger} to debug as it is not a supported "
          "log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN", errors["lower case level"])
    check(errors["unknown logger"] == "Logger no.such.logger does not exist!", errors["unknown logger"])
    check(errors["delete root"] == "Removing the log level of the root logger is not allowed", errors["delete root"])
    check(errors["append"] == "APPEND operation is not allowed for the BROKER_LOGGER resource", errors["append"])
    # Another broker, a name that is not an id.
    code, message = incremental(admin, BROKER_LOGGER, str(int(node) + 1), [(logger, SET, "DEBUG")])
    check(code == 42, f"other node: {code} {message}")
    code, message = incremental(admin, BROKER_LOGGER, "x", [(logger, SET, "DEBUG")])
    check(code == 42 and message == "Node id must be an integer, but it is: x", f"not an id: {code} {message}")
    for name in ("", str(int(node) + 1)):
        code, message, _ = describe_loggers(admin, node=name)
        check(code == 42, f"describe broker logger {name!r}: {code} {message}")
    # The legacy AlterConfigs never supported broker loggers.
    response = admin.send_request(AlterConfigsRequest[0](
        resources=[(BROKER_LOGGER, node, [(logger, "DEBUG")])], validate_only=False))
    ((code, message, _, _),) = response.resources
    check(code == 42 and message == "Unknown resource type 8", f"legacy AlterConfigs: {code} {message}")
    # validate_only changes nothing.
    code, message = incremental(admin, BROKER_LOGGER, node, [(logger, SET, "TRACE")], validate_only=True)
    check(code == 0, f"validate only: {code} {message}")
    check(logger_level(admin, node, logger) == before, "validate only changed the level")
    check(logger_level(admin, node, parent) == parent_before, "a refused batch changed the level")

    # SET: the logger (and what it prefixes) is DEBUG, its parent is not.
    code, message = incremental(admin, BROKER_LOGGER, node, [(logger, SET, "DEBUG")])
    check(code == 0, f"set {logger}: {code} {message}")
    check(logger_level(admin, node, logger) == "DEBUG", "described DEBUG")
    check(logger_level(admin, node, parent) == parent_before, f"{parent} unchanged")
    check(logger_level(admin, node, "root") == root, "root unchanged")
    print(json.dumps({"logger": logger, "before": before, "root": root, "level": "DEBUG"}))


GROUP = 32
HEARTBEAT = "consumer.heartbeat.interval.ms"


def group_state(admin, group):
    configs = describe_configs(admin, GROUP, group)
    wire = Wire(admin.config["bootstrap_servers"])
    # ListConfigResources v1 for GROUP: resource_types [32], no tags.
    payload = wire.request(74, 1, bytes([2, GROUP, 0]), flexible=True)
    at = 1 + 4  # response header tags, throttle
    code = struct.unpack(">h", payload[at:at + 2])[0]
    at += 2
    count, listed = payload[at] - 1, []
    at += 1
    for _ in range(count):
        size = payload[at] - 1
        listed.append((payload[at + 1:at + 1 + size].decode(), payload[at + 1 + size]))
        at += 1 + size + 2
    check(code == 0, f"ListConfigResources: {code}")
    return {"configs": configs, "listed": group in [n for n, t in listed if t == GROUP]}


def group_configs(bootstrap, group, action, value=None):
    admin = admin_client(bootstrap)
    if action == "show":
        state = group_state(admin, group)
        print(json.dumps(state))
        return
    if action == "reset":
        code, message = incremental(admin, GROUP, group, [(HEARTBEAT, DELETE, None)])
        check(code == 0, f"delete {HEARTBEAT}: {code} {message}")
        print(json.dumps(group_state(admin, group)))
        return
    check(action == "set", f"unknown action {action}")
    state = group_state(admin, group)
    configs = state["configs"]
    check(sorted(configs) == ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                              "share.auto.offset.reset", "share.heartbeat.interval.ms",
                              "share.record.lock.duration.ms", "share.session.timeout.ms"], f"{sorted(configs)}")
    check(configs[HEARTBEAT] == {"value": "5000", "source": 5,
                                 "synonyms": [("group.consumer.heartbeat.interval.ms", 5)]}, f"{configs[HEARTBEAT]}")
    check(configs["share.auto.offset.reset"]["value"] == "latest", f"{configs}")
    check(not state["listed"], "a group without configs is listed")
    # Kafka's errors (GroupConfig.validate), nothing applied.
    for label, ops, expected, text in [
        ("below the minimum", [(HEARTBEAT, SET, "1000")], 40,
         "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        ("above the maximum", [("consumer.session.timeout.ms", SET, "90000")], 40,
         "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        ("unknown", [("session.timeout.ms", SET, "45000")], 40, "Unknown group config name: session.timeout.ms"),
        ("not a number", [(HEARTBEAT, SET, "soon")], 40, None),
        ("append", [(HEARTBEAT, APPEND, "6000")], 40, None),
        ("null value", [(HEARTBEAT, SET, None)], 42, None),
    ]:
        code, message = incremental(admin, GROUP, group, ops)
        check(code == expected and (text is None or message == text), f"{label}: {code} {message}")
    code, message = incremental(admin, GROUP, "", [(HEARTBEAT, SET, value)])
    check(code == 42, f"empty group name: {code} {message}")
    # The legacy AlterConfigs validates the same way.
    response = admin.send_request(AlterConfigsRequest[0](
        resources=[(GROUP, group, [("nope", "1")])], validate_only=True))
    ((code, message, _, _),) = response.resources
    check(code == 40, f"legacy AlterConfigs: {code} {message}")
    # validate_only changes nothing.
    code, message = incremental(admin, GROUP, group, [(HEARTBEAT, SET, value)], validate_only=True)
    check(code == 0, f"validate only: {code} {message}")
    check(describe_configs(admin, GROUP, group)[HEARTBEAT]["source"] == 5, "validate only stored the value")

    code, message = incremental(admin, GROUP, group, [(HEARTBEAT, SET, value)])
    check(code == 0, f"set {HEARTBEAT}: {code} {message}")
    state = group_state(admin, group)
    entry = state["configs"][HEARTBEAT]
    check(entry == {"value": value, "source": 8,
                    "synonyms": [(HEARTBEAT, 8), ("group.consumer.heartbeat.interval.ms", 5)]}, f"{entry}")
    check(state["listed"], "the group is listed for GROUP")
    print(json.dumps(state))


def show_state(bootstrap, subscription):
    admin = admin_client(bootstrap)
    response = admin.send_request(DescribeClientQuotasRequest[0](components=[], strict=False))
    check(response.error_code == 0, f"describe quotas: {response.error_code}")
    quotas_ = [{"entity": {t: n for t, n in e}, "values": {k: v for k, v in vals}}
               for e, vals in response.entries]
    configs = describe_configs(admin, 16, subscription)
    print(json.dumps({"quotas": quotas_, "subscription": {k: v["value"] for k, v in configs.items()}}))


def main():
    bootstrap, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "cluster-default":
        cluster_default(bootstrap, *args)
    elif command == "partitions":
        partitions(bootstrap, *args)
    elif command == "quotas":
        quotas(bootstrap)
    elif command == "request-quota":
        request_quota(bootstrap)
    elif command == "mutations":
        mutations(bootstrap, *args)
    elif command == "set-quota":
        set_quota(bootstrap, *args)
    elif command == "client-metrics":
        client_metrics(bootstrap, *args)
    elif command == "tokens":
        tokens(bootstrap, *args)
    elif command == "create-token":
        create_token(bootstrap, *args)
    elif command == "list-tokens":
        list_tokens(bootstrap, *args)
    elif command == "show-state":
        show_state(bootstrap, *args)
    elif command == "broker-loggers":
        broker_loggers(bootstrap, *args)
    elif command == "group-configs":
        group_configs(bootstrap, *args)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
