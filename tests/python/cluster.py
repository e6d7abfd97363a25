"""Cluster checks with confluent-kafka, for tests/tests/cluster.rs.

Usage:
  cluster.py metadata BOOTSTRAP            -> {"brokers": [...], "controller": id, "topics": {...}}
  cluster.py create BOOTSTRAP TOPIC PARTITIONS RF -> {"error": null | "..."}
  cluster.py produce BOOTSTRAP TOPIC PARTITIONS   -> {"delivered": {partition: offset}}
  cluster.py failover KILLED_AT_MS OLD_CONTROLLER BOOTSTRAP... -> {"controller": id,
      "controller_ms": ..., "create_ms": ...}: after the controller was killed (epoch ms),
      waits until every survivor names another controller, then creates topics through the
      first survivor until one is created; the times are from the kill
Each prints one JSON line. `raw_metadata` asks one broker, never another (librdkafka
would pick any broker it knows, the killed one included); bench/cluster.py uses these too.
"""
import json
import socket
import struct
import sys
import time

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


def frame(api_key, version, body, correlation_id=1):
    header = struct.pack(">hhih", api_key, version, correlation_id, 7) + b"cluster"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self):
        n = self.take(">h")
        text = self.data[self.pos:self.pos + max(n, 0)].decode()
        self.pos += max(n, 0)
        return text if n >= 0 else None

    def array(self, item):
        return [item() for _ in range(self.take(">i"))]


def raw_metadata(address, topics=(), timeout=2.0):
    """Metadata v4 (no auto-creation) of `topics` from the broker at HOST:PORT:
    {"brokers": [...], "controller": id, "topics": {name: {"error": code, "partitions": n}}}."""
    body = struct.pack(">i", len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    body += b"\x00"  # allow_auto_topic_creation = false
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame(3, 4, body))
        size = struct.unpack(">i", read_exact(sock, 4))[0]
        r = Reader(read_exact(sock, size))
    r.take(">i")  # correlation id
    r.take(">i")  # throttle
    brokers = r.array(lambda: (r.take(">i"), r.string(), r.take(">i"), r.string())[0])
    r.string()  # cluster id
    controller = r.take(">i")

    def topic():
        error, name, _internal = r.take(">h"), r.string(), r.take(">b")
        partitions = r.array(lambda: (r.take(">hii"), r.array(lambda: r.take(">i")),
                                      r.array(lambda: r.take(">i"))))
        return name, {"error": error, "partitions": len(partitions)}

    return {"brokers": sorted(brokers), "controller": controller, "topics": dict(r.array(topic))}


def until(check, timeout, pause=0.02):
    """check() until it returns something truthy (an exception counts as no), up to timeout s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            found = check()
            if found:
                return found
        except Exception:  # a broker not answering (yet) is a "no"
            pass
        time.sleep(pause)
    raise SystemExit(f"timed out after {timeout}s")


def failover(killed_at_ms, old_controller, *bootstraps, timeout=25):
    killed_at = int(killed_at_ms) / 1000.0
    old = int(old_controller)

    def new_controller():
        seen = {raw_metadata(b)["controller"] for b in bootstraps}
        return len(seen) == 1 and seen != {old} and min(seen) >= 0 and seen.pop()

    controller = until(new_controller, timeout)
    controller_ms = (time.time() - killed_at) * 1000
    attempt = [0]

    def created():
        attempt[0] += 1
        return create(bootstraps[0], f"after-failover-{attempt[0]}", 1, 1)["error"] is None

    until(created, timeout)
    create_ms = (time.time() - killed_at) * 1000
    return {"controller": controller, "controller_ms": round(controller_ms),
            "create_ms": round(create_ms), "attempts": attempt[0]}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    commands = {"metadata": metadata, "create": create, "produce": produce, "failover": failover}
    result = commands[command](*args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
