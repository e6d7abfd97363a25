#!/usr/bin/env python3
"""What confluent-kafka (librdkafka) and kafka-python see of two Kafka
behaviours real producers and tools rely on:

- record-errors BOOTSTRAP TOPIC: one batch to a compacted topic with
  keyless records among keyed ones. Kafka refuses the batch with
  INVALID_RECORD and names the keyless records in `record_errors`
  (KIP-467); librdkafka then fails those with INVALID_RECORD and the
  others with _INVALID_DIFFERENT_RECORD (when more than one record is
  named: with one, it fails the whole batch with the partition's error).
  kafka-python sends a batch as a raw ProduceRequest v8 and reads the
  response's record_errors and error_message as they are on the wire.
- internal-topics BOOTSTRAP: Metadata for Kafka's internal topic names
  with auto-creation on (a confluent-kafka producer asks for it) creates
  no user topic; kafka-python's describe_topics shows them is_internal.

Prints one JSON line with what it saw; exits non-zero on a failed check.
"""

import json
import sys

from confluent_kafka import KafkaError, Producer

TIMEOUT = 30
INTERNAL = ["__consumer_offsets", "__transaction_state", "__share_group_state"]


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def record_errors(bootstrap, topic):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "broker.address.family": "v4",
            # One batch: nothing is sent before all six are queued.
            "linger.ms": 1000,
            "acks": "all",
        }
    )
    keys = [b"k0", None, b"k2", None, None, b"k5"]
    seen = {}

    def delivered(index):
        def callback(error, message):
            seen[index] = error

        return callback

    for index, key in enumerate(keys):
        producer.produce(topic, value=f"v{index}", key=key, partition=0, on_delivery=delivered(index))
    check(producer.flush(TIMEOUT) == 0, "every delivery report arrived")
    different = getattr(KafkaError, "_INVALID_DIFFERENT_RECORD", -138)
    report = []
    for index, key in enumerate(keys):
        error = seen.get(index)
        check(error is not None, f"record {index} failed")
        report.append({"index": index, "code": error.code(), "reason": error.str()})
        if key is None:
            check(error.code() == KafkaError.INVALID_RECORD, f"record {index}: {error}")
        else:
            check(error.code() == different, f"record {index}: {error}")
    return {"librdkafka": report, "wire": raw_record_errors(bootstrap, topic)}


def raw_record_errors(bootstrap, topic):
    """A batch of keyed, keyless, keyed records as a raw ProduceRequest v8
    (kafka-python's protocol classes): the response's partition."""
    from kafka import KafkaClient
    from kafka.protocol.produce import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for key in [b"a", None, b"c"]:
        builder.append(timestamp=None, key=key, value=b"v", headers=[])
    builder.close()
    client = KafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        node = client.least_loaded_node()
        for _ in range(TIMEOUT * 10):
            if client.ready(node):
                break
            client.poll(timeout_ms=100)
        request = ProduceRequest[8](
            transactional_id=None,
            required_acks=-1,
            timeout=TIMEOUT * 1000,
            topics=[(topic, [(0, builder.buffer())])],
        )
        future = client.send(node, request)
        client.poll(future=future, timeout_ms=TIMEOUT * 1000)
        check(future.succeeded(), f"raw produce: {future.exception}")
        partition = future.value.topics[0][1][0]
    finally:
        client.close()
    _, error_code, _, _, _, record_errors, error_message = partition
    check(error_code == KafkaError.INVALID_RECORD, f"raw produce error {error_code}")
    check(
        [index for index, _ in record_errors] == [1],
        f"record_errors {record_errors}",
    )
    check("without key" in record_errors[0][1], f"record error message {record_errors}")
    check(
        error_message.startswith("One or more records have been rejected due to 1 record errors"),
        f"error_message {error_message!r}",
    )
    return {"record_errors": record_errors, "error_message": error_message}


def internal_topics(bootstrap):
    from kafka.admin import KafkaAdminClient

    # A producer's Metadata allows auto-creation (librdkafka's default).
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    answered = {}
    for name in INTERNAL + ["__a_user_topic"]:
        metadata = producer.list_topics(topic=name, timeout=TIMEOUT)
        error = metadata.topics[name].error
        answered[name] = None if error is None else error.code()
    for name in INTERNAL:
        check(answered[name] == KafkaError.UNKNOWN_TOPIC_OR_PART, f"{name}: {answered[name]}")
    listed = set(producer.list_topics(timeout=TIMEOUT).topics)
    check(not listed & set(INTERNAL), f"internal names created as topics: {sorted(listed)}")
    check("__a_user_topic" in listed, f"a __ user topic is auto-created: {sorted(listed)}")

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    described = {t["topic"]: t for t in admin.describe_topics(INTERNAL + ["__a_user_topic"])}
    admin.close()
    for name in INTERNAL:
        check(described[name]["is_internal"], f"{name} is_internal: {described[name]}")
    check(not described["__a_user_topic"]["is_internal"], "a user topic is not internal")
    return {"answered": answered, "listed": sorted(listed)}


def main():
    command, bootstrap = sys.argv[1], sys.argv[2]
    if command == "record-errors":
        result = record_errors(bootstrap, sys.argv[3])
    elif command == "internal-topics":
        result = internal_topics(bootstrap)
    else:
        check(False, f"unknown command {command}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
