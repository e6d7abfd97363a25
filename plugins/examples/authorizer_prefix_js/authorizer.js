// The prefix authorizer in JavaScript (componentize-js).
//
// Tenant isolation by name, the same policy as the Rust example
// (plugins/examples/authorizer_prefix): a principal `User:<name>` may do
// anything to the topics and consumer groups whose names start with
// `<name>`, and nothing else; `User:admin` may do everything.
//
// WIT enums arrive as their kebab-case names ('topic', 'group', ...) and
// record fields in camelCase (resourceType, resourceName).

const ADMIN = 'User:admin';
const TENANT_RESOURCES = new Set(['topic', 'group']);

function allowed(principal, action) {
  if (principal === ADMIN) {
    return true;
  }
  if (!principal.startsWith('User:')) {
    return false;
  }
  const name = principal.slice('User:'.length);
  return (
    name.length > 0 &&
    TENANT_RESOURCES.has(action.resourceType) &&
    action.resourceName.startsWith(name)
  );
}

// Some operation on some resource of the type: a tenant owns every name
// under its prefix, existing or not (the policy reads no ACLs).
function allowedByType(principal, resourceType) {
  if (principal === ADMIN) {
    return true;
  }
  return (
    principal.startsWith('User:') &&
    principal.length > 'User:'.length &&
    TENANT_RESOURCES.has(resourceType)
  );
}

export const authorizer = {
  authorize(request, actions) {
    return actions.map((action) => allowed(request.principal, action));
  },
  authorizeByResourceType(request, operation, resourceType) {
    return allowedByType(request.principal, resourceType);
  },
};
