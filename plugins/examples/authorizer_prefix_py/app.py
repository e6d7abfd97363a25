"""The prefix authorizer in Python (componentize-py).

Tenant isolation by name, the same policy as the Rust example
(plugins/examples/authorizer_prefix): a principal ``User:<name>`` may do
anything to the topics and consumer groups whose names start with
``<name>``, and nothing else; ``User:admin`` may do everything.

Built by ``make`` with componentize-py against the ``kafka-authorizer``
world of ``wit/``; the result is a component like any other authorizer,
loaded into a running broker and switched to with
``gregor authorizer use authorizer_prefix_py``.
"""

from typing import List

from wit_world import exports
from wit_world.imports.types import Action, Operation, ResourceType
from wit_world.exports.authorizer import AuthorizableRequest

ADMIN = "User:admin"
TENANT_RESOURCES = (ResourceType.TOPIC, ResourceType.GROUP)


def allowed(principal: str, action: Action) -> bool:
    if principal == ADMIN:
        return True
    if not principal.startswith("User:"):
        return False
    name = principal[len("User:"):]
    return (
        bool(name)
        and action.resource_type in TENANT_RESOURCES
        and action.resource_name.startswith(name)
    )


def allowed_by_type(principal: str, resource_type: ResourceType) -> bool:
    """Some operation on some resource of the type: a tenant owns every
    name under its prefix, existing or not (the policy reads no ACLs)."""
    if principal == ADMIN:
        return True
    return (
        principal.startswith("User:")
        and len(principal) > len("User:")
        and resource_type in TENANT_RESOURCES
    )


class Authorizer(exports.Authorizer):
    def authorize(self, request: AuthorizableRequest, actions: List[Action]) -> List[bool]:
        return [allowed(request.principal, action) for action in actions]

    def authorize_by_resource_type(
        self, request: AuthorizableRequest, operation: Operation, resource_type: ResourceType
    ) -> bool:
        return allowed_by_type(request.principal, resource_type)
