"""Configs, ACLs and SCRAM users of a cluster with confluent-kafka, for
tests/tests/cluster_stores.rs; broker configs, which librdkafka cannot
name the cluster default of, and quotas go through admin_wire.py's
kafka-python requests.

Usage (NODE: the node.id of BOOTSTRAP, a PLAINTEXT listener, whose
ANONYMOUS user the test makes a super user; SASL: a SASL_PLAINTEXT listener):
  cluster_stores.py set-config NODE BOOTSTRAP TYPE NAME KEY VALUE -> {"error": null | "..."}
  cluster_stores.py config NODE BOOTSTRAP TYPE NAME KEY          -> {"value": ..., "source": ...}
  cluster_stores.py add-user NODE BOOTSTRAP USER PASSWORD        -> {"error": null | "..."}
  cluster_stores.py allow NODE BOOTSTRAP PRINCIPAL TOPIC         -> {"error": null | "..."}
  cluster_stores.py as-user NODE SASL USER PASSWORD TOPIC        -> {"error": ..., "topic_error": ...}
  cluster_stores.py wire NODE BOOTSTRAP COMMAND ARGS...          -> admin_wire.py's COMMAND, on NODE
TYPE is topic or broker (NAME "" is the cluster-wide default). librdkafka
asks the broker it is connected to; kafka-python's requests are pinned to
NODE here (it would ask the least loaded broker). Each prints one JSON line.
"""
import json
import sys

import admin_wire
from kafka import KafkaAdminClient

from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, AlterConfigOpType,
    ConfigEntry, ConfigResource, ResourcePatternType, ResourceType,
    ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)

TYPES = {"topic": ConfigResource.Type.TOPIC, "broker": ConfigResource.Type.BROKER}


def pin(node):
    """admin_wire's kafka-python client, its requests sent to `node`."""
    def client(bootstrap, **extra):
        admin = KafkaAdminClient(bootstrap_servers=bootstrap,
                                 request_timeout_ms=admin_wire.TIMEOUT_MS, **extra)
        send = admin.send_request
        admin.send_request = lambda request, node_id=None: send(
            request, int(node) if node_id is None else node_id)
        return admin
    admin_wire.admin_client = client


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def outcome(futures):
    try:
        for future in (futures.values() if isinstance(futures, dict) else futures):
            future.result(timeout=20)
        return {"error": None}
    except Exception as error:  # the KafkaException's text names the code
        return {"error": str(error)}


def set_config(bootstrap, kind, name, key, value):
    if kind == "broker" and name == "":
        code, message = admin_wire.incremental(
            admin_wire.admin_client(bootstrap), 4, name, [(key, 0, value)])
        return {"error": None if code == 0 else f"{code} {message}"}
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(TYPES[kind], name, incremental_configs=[entry])
    client = admin(bootstrap)  # alive until the futures are done
    return outcome(client.incremental_alter_configs([resource], request_timeout=15))


def config(bootstrap, kind, name, key):
    if kind == "broker" and name == "":
        entries = admin_wire.describe_configs(admin_wire.admin_client(bootstrap), 4, name)
        entry = entries.get(key, {})
        return {"value": entry.get("value"), "source": entry.get("source")}
    resource = ConfigResource(TYPES[kind], name)
    client = admin(bootstrap)
    futures = client.describe_configs([resource], request_timeout=15)
    try:
        entries = futures[resource].result(timeout=20)
    except Exception as error:  # an unknown topic, until it is known here
        return {"value": None, "source": None, "error": str(error)}
    entry = entries.get(key)
    if entry is None:
        return {"value": None, "source": None}
    return {"value": entry.value, "source": str(entry.source)}


def add_user(bootstrap, user, password):
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsertion = UserScramCredentialUpsertion(user, info, password.encode())
    client = admin(bootstrap)
    return outcome(client.alter_user_scram_credentials([upsertion], request_timeout=15))


def allow(bootstrap, principal, topic):
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   operation, AclPermissionType.ALLOW)
        for operation in (AclOperation.DESCRIBE, AclOperation.WRITE)
    ]
    client = admin(bootstrap)
    return outcome(client.create_acls(bindings, request_timeout=15))


def as_user(sasl, user, password, topic):
    client = AdminClient({
        "bootstrap.servers": sasl,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    })
    try:
        md = client.list_topics(topic=topic, timeout=10)
    except Exception as error:  # authentication failed, or no answer
        return {"error": str(error), "topic_error": None}
    found = md.topics.get(topic)
    topic_error = found.error.name() if found is not None and found.error is not None else None
    return {"error": None, "topic_error": topic_error}


def wire(bootstrap, command, *args):
    """One of admin_wire.py's commands (which prints its own line)."""
    admin_wire.sys.argv = ["admin_wire.py", bootstrap, command, *args]
    admin_wire.main()


def main():
    command, node, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    pin(node)
    if command == "wire":
        wire(*args)
        return
    commands = {
        "set-config": set_config,
        "config": config,
        "add-user": add_user,
        "allow": allow,
        "as-user": as_user,
    }
    print(json.dumps(commands[command](*args)))


if __name__ == "__main__":
    main()
