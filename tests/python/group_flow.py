#!/usr/bin/env python3
"""A consumer-group flow with kafka-python, a client independent of
librdkafka: two consumers of one group share a 4-partition topic, each
commits what it processed, the survivor takes every partition when the
other closes, a new consumer resumes exactly after the last commit, and
the admin client lists, describes and deletes the group.

Usage: group_flow.py BOOTSTRAP TOPIC GROUP
Prints one JSON line with what it saw; exits non-zero on any failed check.
"""

import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from checks import check

PARTITIONS = 4
TIMEOUT = 40.0


def produce(bootstrap, topic, seqs):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for seq in seqs:
        producer.send(topic, key=f"key-{seq}".encode(), value=str(seq).encode(),
                      partition=seq % PARTITIONS)
    producer.flush(timeout=TIMEOUT)
    producer.close()


def consumer(bootstrap, topic, group, name):
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=5,
    )
    c.subscribe([topic])
    return c


def assigned(c):
    return sorted(tp.partition for tp in c.assignment())


def poll_commit(c, seen):
    """Polls once, records each message's seq, commits what it processed."""
    batches = c.poll(timeout_ms=100)
    for records in batches.values():
        for record in records:
            seen.append(int(record.value.decode()))
    if batches:
        c.commit()


def until(what, condition, step):
    deadline = time.time() + TIMEOUT
    while not condition():
        check(time.time() < deadline, f"timed out waiting for {what}")
        step()


def main():
    bootstrap, topic, group = sys.argv[1:4]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    produce(bootstrap, topic, range(0, 40))

    seen1, seen2 = [], []
    c1 = consumer(bootstrap, topic, group, "python-1")
    c2 = consumer(bootstrap, topic, group, "python-2")

    def both():
        poll_commit(c1, seen1)
        poll_commit(c2, seen2)

    # The two members share the partitions and, between them, read all 40.
    until("both members to be assigned and everything read",
          lambda: assigned(c1) and assigned(c2) and len(seen1) + len(seen2) >= 40, both)
    shared = (assigned(c1), assigned(c2))
    check(not set(shared[0]) & set(shared[1]), f"overlapping assignments {shared}")
    check(sorted(shared[0] + shared[1]) == list(range(PARTITIONS)), f"assignments {shared}")
    check(sorted(seen1 + seen2) == list(range(40)), "first 40 read once each")

    description = admin.describe_consumer_groups([group])[0]
    check(description.state == "Stable", f"state {description.state}")
    check(len(description.members) == 2, f"{len(description.members)} members")

    # One closes (LeaveGroup): the survivor takes every partition.
    c2.close()
    until("the survivor to own every partition",
          lambda: assigned(c1) == list(range(PARTITIONS)), lambda: poll_commit(c1, seen1))
    produce(bootstrap, topic, range(40, 60))
    until("messages 40-59", lambda: len(seen1) + len(seen2) >= 60, lambda: poll_commit(c1, seen1))
    c1.close()

    committed = admin.list_consumer_group_offsets(group)
    offsets = {tp.partition: meta.offset for tp, meta in committed.items()}
    check(offsets == {p: 15 for p in range(PARTITIONS)}, f"committed offsets {offsets}")

    # A new member resumes exactly after the last commit.
    produce(bootstrap, topic, range(60, 70))
    seen3 = []
    c3 = consumer(bootstrap, topic, group, "python-3")
    until("messages 60-69", lambda: len(seen3) >= 10, lambda: poll_commit(c3, seen3))
    end = time.time() + 1.0
    while time.time() < end:
        poll_commit(c3, seen3)
    check(sorted(seen3) == list(range(60, 70)), f"resumed with {sorted(seen3)}")
    c3.close()

    listed = dict(admin.list_consumer_groups())
    check(listed.get(group) == "consumer", f"listed {listed}")
    description = admin.describe_consumer_groups([group])[0]
    check(description.state == "Empty", f"state after close {description.state}")
    admin.delete_consumer_groups([group])
    check(group not in dict(admin.list_consumer_groups()), "group deleted")
    admin.close()

    print(json.dumps({
        "assignments": shared,
        "first_member": len(seen1),
        "second_member": len(seen2),
        "resumed": len(seen3),
        "committed": offsets,
    }))


if __name__ == "__main__":
    main()
