"""Produce and consume with confluent-kafka, for tests/tests/cluster_roles.rs.

Usage:
  cluster_roles.py roundtrip BOOTSTRAP TOPIC COUNT
      -> {"produced": n, "errors": [...], "consumed": n, "values_match": bool}
      produces COUNT records with an idempotent producer (acks=all), then reads the
      topic from the beginning with a consumer group until it has COUNT records
Prints one JSON line.
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer


def roundtrip(bootstrap, topic, count):
    count = int(count)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 20000,
    })
    errors = []
    delivered = [0]

    def report(error, _message):
        if error is not None:
            errors.append(str(error))
        else:
            delivered[0] += 1

    sent = {b"r%d" % i for i in range(count)}
    for value in sorted(sent):
        producer.produce(topic, value=value, on_delivery=report)
        producer.poll(0)
    producer.flush(30)

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "roles-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    seen = set()
    deadline = time.time() + 30
    while len(seen) < count and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            errors.append(str(message.error()))
            continue
        seen.add(message.value())
    consumer.close()
    return {"produced": delivered[0], "errors": errors, "consumed": len(seen),
            "values_match": seen == sent}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    result = {"roundtrip": roundtrip}[command](*args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
