"""ACL administration with a real Kafka AdminClient (kafka-python), for
tests/tests/security.rs: the rdkafka crate has no ACL API.

usage: acl_admin.py --bootstrap HOST:PORT --user U --password P
                    [--mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN]
                    create|describe|delete
                    --principal User:NAME --resource-type TOPIC|GROUP|CLUSTER
                    --name NAME --operation READ|WRITE|... [--pattern LITERAL|PREFIXED]

Prints one JSON object: for create, {"succeeded": n, "failed": [errors]};
for describe, {"error": name, "acls": [...]}; for delete, {"deleted": n,
"errors": [...]}. Exits 0 whatever the broker answered; the test judges.
"""

import argparse
import json
import sys

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)


def acl_json(acl):
    return {
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission": acl.permission_type.name,
        "resource_type": acl.resource_pattern.resource_type.name,
        "name": acl.resource_pattern.resource_name,
        "pattern": acl.resource_pattern.pattern_type.name,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--mechanism", default="SCRAM-SHA-512")
    parser.add_argument("command", choices=["create", "describe", "delete"])
    parser.add_argument("--principal")
    parser.add_argument("--resource-type", default="TOPIC")
    parser.add_argument("--name")
    parser.add_argument("--operation", default="ALL")
    parser.add_argument("--pattern", default="LITERAL")
    args = parser.parse_args()

    admin = KafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="gregor-tests-acl-admin",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=args.mechanism,
        sasl_plain_username=args.user,
        sasl_plain_password=args.password,
        request_timeout_ms=30000,
    )
    resource_type = ResourceType[args.resource_type]
    operation = ACLOperation[args.operation]
    try:
        if args.command == "create":
            pattern = ResourcePattern(resource_type, args.name, ACLResourcePatternType[args.pattern])
            acl = ACL(args.principal, "*", operation, ACLPermissionType.ALLOW, pattern)
            result = admin.create_acls([acl])
            out = {
                "succeeded": len(result["succeeded"]),
                "failed": [str(error) for (_, error) in result["failed"]],
            }
        elif args.command == "describe":
            pattern = ResourcePatternFilter(resource_type, args.name, ACLResourcePatternType[args.pattern])
            acl_filter = ACLFilter(args.principal, None, operation, ACLPermissionType.ANY, pattern)
            acls, error = admin.describe_acls(acl_filter)
            out = {"error": error.__name__, "acls": [acl_json(a) for a in acls]}
        else:
            pattern = ResourcePatternFilter(resource_type, args.name, ACLResourcePatternType[args.pattern])
            acl_filter = ACLFilter(args.principal, None, operation, ACLPermissionType.ANY, pattern)
            results = admin.delete_acls([acl_filter])
            deleted = 0
            errors = []
            for (_, matching, error) in results:
                if error.errno != 0:
                    errors.append(error.__name__)
                deleted += len(matching)
            out = {"deleted": deleted, "errors": errors}
    except Exception as error:  # the test reads what went wrong
        out = {"exception": "%s: %s" % (type(error).__name__, error)}
    finally:
        admin.close()
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
