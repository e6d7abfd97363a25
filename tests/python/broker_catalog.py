#!/usr/bin/env python3
"""Broker configs Gregor does not act on, as Kafka 4 takes them
(issue 16 item 3), with confluent-kafka's AdminClient (librdkafka) and,
for the cluster-wide default resource "" that librdkafka cannot name,
kafka-python:

- `set`: a dynamic config Gregor ignores (sasl.kerberos.min.time.before.relogin)
  shows Kafka's default, is SET on this broker and described back; a
  password one is stored but described as null and sensitive; an unknown
  name is INVALID_CONFIG, a read-only one (broker.id, log.dirs) Kafka's
  INVALID_REQUEST, a value of the wrong type INVALID_CONFIG, a per-broker
  one on the cluster default INVALID_REQUEST;
- `restarted`: after a restart the values are still there.

Usage: broker_catalog.py BOOTSTRAP set|restarted
Prints one JSON line with what it saw; exits non-zero on a failed check.
"""

import json
import sys

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from admin_wire import admin_client, incremental
from checks import check

TIMEOUT = 30
RELOGIN = "sasl.kerberos.min.time.before.relogin"
JAAS = "sasl.jaas.config"
BROKER = ConfigResource("broker", "1")


def describe(admin):
    return admin.describe_configs([BROKER], request_timeout=TIMEOUT)[BROKER].result(timeout=TIMEOUT)


def set_configs(admin, configs):
    """IncrementalAlterConfigs SET on this broker: the Kafka error, or None."""
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs]
    target = ConfigResource("broker", "1", incremental_configs=entries)
    (future,) = admin.incremental_alter_configs([target]).values()
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as e:
        return e.args[0]
    return None


def refused(admin, configs, code, text):
    error = set_configs(admin, configs)
    check(error is not None and error.code() == code, f"{configs}: {error}")
    check(text in error.str(), f"{configs}: {error.str()!r} lacks {text!r}")
    return error.str()


def set_phase(bootstrap, seen):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    before = describe(admin)[RELOGIN]
    check(before.value == "60000", f"Kafka's default: {before.value}")
    check(before.source == ConfigSource.DEFAULT_CONFIG.value, f"default source {before.source}")
    check(not before.is_read_only, "a per-broker dynamic config is not read-only")

    check(set_configs(admin, [(RELOGIN, "120000"), (JAAS, "secret-jaas")]) is None, "SET refused")
    after = describe(admin)
    check(after[RELOGIN].value == "120000", f"described back: {after[RELOGIN].value}")
    check(after[RELOGIN].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, f"source {after[RELOGIN].source}")
    check(after[JAAS].value is None and after[JAAS].is_sensitive, f"password shown: {after[JAAS]}")
    check(after[JAAS].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, "password stored")
    check(after["broker.id"].is_read_only, "broker.id is read-only")

    seen["unknown"] = refused(admin, [("no.such.broker.config", "1")], KafkaError.INVALID_CONFIG, "no.such.broker.config")
    seen["read_only"] = refused(admin, [("broker.id", "7")], KafkaError.INVALID_REQUEST,
                                "Cannot update these configs dynamically: Set(broker.id)")
    refused(admin, [("log.dirs", "/tmp/elsewhere")], KafkaError.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(log.dirs)")
    seen["type"] = refused(admin, [(RELOGIN, "soon")], KafkaError.INVALID_CONFIG, "Not a number of type LONG")
    refused(admin, [("background.threads", "0")], KafkaError.INVALID_CONFIG, "Value must be at least 1")
    refused(admin, [("ssl.keystore.location", "/tmp/ks")], KafkaError.INVALID_REQUEST,
            "only per-listener using the listener prefix")
    check(describe(admin)[RELOGIN].value == "120000", "a refused change altered the stored value")

    # The cluster-wide default takes cluster-wide configs, not per-broker ones.
    wire = admin_client(bootstrap)
    for name, value, want in [(RELOGIN, "1000", 42), ("background.threads", "4", 0)]:
        code, message = incremental(wire, 4, "", [(name, 0, value)])
        check(code == want, f"cluster default {name}: {code} {message}")
        if code:
            check("broker id must be specified" in message, f"cluster default message {message!r}")
            seen["per_broker_at_default"] = message
    wire.close()
    seen["set"] = "ok"


def restarted_phase(bootstrap, seen):
    configs = describe(AdminClient({"bootstrap.servers": bootstrap}))
    check(configs[RELOGIN].value == "120000", f"after restart: {configs[RELOGIN].value}")
    check(configs[RELOGIN].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, "source after restart")
    check(configs[JAAS].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, "password after restart")
    check(configs["background.threads"].value == "4", "cluster default after restart")
    seen["restarted"] = "ok"


def main():
    bootstrap, phase = sys.argv[1], sys.argv[2]
    seen = {}
    {"set": set_phase, "restarted": restarted_phase}[phase](bootstrap, seen)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
