"""Module grants and ACLs through a real Kafka AdminClient (confluent-kafka),
for tests/tests/grants.rs.

usage: grants_admin.py --bootstrap HOST:PORT grant MODULE GRANTS
       grants_admin.py --bootstrap HOST:PORT revoke MODULE GRANT
       grants_admin.py --bootstrap HOST:PORT acls TOPIC

`grant` sets the dynamic broker config plugin.grants.MODULE=GRANTS on broker
1 (IncrementalAlterConfigs SET), `revoke` takes one grant out of it
(SUBTRACT); both print "ok" or raise. `acls` prints the ACL bindings on the
literal topic as one JSON list.
"""

import argparse
import json

from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("command", choices=["grant", "revoke", "acls"])
    parser.add_argument("args", nargs="+")
    args = parser.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    if args.command in ("grant", "revoke"):
        module, value = args.args
        op = AlterConfigOpType.SET if args.command == "grant" else AlterConfigOpType.SUBTRACT
        entry = ConfigEntry(f"plugin.grants.{module}", value, incremental_operation=op)
        resource = ConfigResource("BROKER", "1", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
        print("ok")
    else:
        (topic,) = args.args
        acl_filter = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        bindings = admin.describe_acls(acl_filter).result(timeout=30)
        print(
            json.dumps(
                [
                    {
                        "principal": b.principal,
                        "host": b.host,
                        "operation": b.operation.name,
                        "permission": b.permission_type.name,
                    }
                    for b in bindings
                ]
            )
        )


if __name__ == "__main__":
    main()
