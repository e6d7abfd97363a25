//! Authorization helpers: batch the questions a handler has, as KafkaApis
//! does, and ask the host's active authorizer once.

use crate::authz::{self, Action, Operation, ResourceType};
use crate::{Handler, Reply, RequestContext};

/// The name of the one Cluster resource, as Kafka's `CLUSTER_NAME`.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Is `operation` on the named resource allowed for this request's principal?
pub fn is_allowed(operation: Operation, resource_type: ResourceType, name: &str) -> bool {
    let answers = authz::authorize(&[Action {
        operation,
        resource_type,
        resource_name: name.to_string(),
    }]);
    answers.first().copied().unwrap_or(false)
}

/// The names a batch of questions found allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(std::collections::HashSet<String>);

impl Allowed {
    /// Is `name` allowed?
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// Is nothing allowed?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The allowed names, in no order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl FromIterator<String> for Allowed {
    /// Names allowed without asking (a caller already authorized for all).
    fn from_iter<I: IntoIterator<Item = String>>(names: I) -> Self {
        Allowed(names.into_iter().collect())
    }
}

/// Asks once for every name and returns the allowed ones. Kafka's
/// `filterByAuthorized`: duplicates are asked once.
pub fn allowed_names<'a>(
    operation: Operation,
    resource_type: ResourceType,
    names: impl IntoIterator<Item = &'a str>,
) -> Allowed {
    let mut unique: Vec<String> = names.into_iter().map(str::to_string).collect();
    unique.sort();
    unique.dedup();
    if unique.is_empty() {
        return Allowed::default();
    }
    let actions: Vec<Action> = unique
        .iter()
        .map(|name| Action {
            operation,
            resource_type,
            resource_name: name.clone(),
        })
        .collect();
    let answers = authz::authorize(&actions);
    Allowed(
        unique
            .into_iter()
            .enumerate()
            .filter(|(i, _)| answers.get(*i).copied().unwrap_or(false))
            .map(|(_, name)| name)
            .collect(),
    )
}

/// Is `operation` on the TransactionalId allowed? (WRITE to use it in a
/// transaction, DESCRIBE to see it.)
pub fn transactional_id_allowed(operation: Operation, transactional_id: &str) -> bool {
    is_allowed(operation, ResourceType::TransactionalId, transactional_id)
}

/// Is a cluster-level operation allowed?
pub fn cluster_allowed(operation: Operation) -> bool {
    is_allowed(operation, ResourceType::Cluster, CLUSTER_NAME)
}

/// Kafka's opening of a cluster-level admin API (the ACL APIs): without
/// `operation` on the Cluster the request is answered with its error
/// response carrying CLUSTER_AUTHORIZATION_FAILED ([`Handler::failed`]);
/// otherwise `handle` answers it.
pub fn on_cluster<H: Handler>(
    ctx: &RequestContext,
    request: &H::Request,
    operation: Operation,
    handle: impl FnOnce() -> H::Response,
) -> Reply<H::Response> {
    if !cluster_allowed(operation) {
        let denied = crate::ResponseError::ClusterAuthorizationFailed.code();
        return H::failed(ctx, request, denied).into();
    }
    handle().into()
}

/// Kafka's `AclOperation` code, the bit an operation sets in an
/// authorized-operations field (Metadata, DescribeCluster, DescribeGroups).
pub fn operation_code(operation: Operation) -> u8 {
    match operation {
        Operation::Any => 1,
        Operation::All => 2,
        Operation::Read => 3,
        Operation::Write => 4,
        Operation::Create => 5,
        Operation::Delete => 6,
        Operation::Alter => 7,
        Operation::Describe => 8,
        Operation::ClusterAction => 9,
        Operation::DescribeConfigs => 10,
        Operation::AlterConfigs => 11,
        Operation::IdempotentWrite => 12,
        Operation::CreateTokens => 13,
        Operation::DescribeTokens => 14,
    }
}

/// The operations that apply to a resource type, as Kafka's
/// `AclEntry.supportedOperations` lists them.
pub fn supported_operations(resource_type: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        ResourceType::Any => &[],
    }
}

/// Kafka's authorized-operations bitfield (`AuthHelper.authorizedOperations`)
/// for each named resource, in order: bit `1 << code` is set for every
/// operation that applies to the resource type and is allowed. All names are
/// asked in one batch.
pub fn authorized_operations(resource_type: ResourceType, names: &[&str]) -> Vec<i32> {
    let operations = supported_operations(resource_type);
    if names.is_empty() || operations.is_empty() {
        return vec![0; names.len()];
    }
    let actions: Vec<Action> = names
        .iter()
        .flat_map(|name| {
            operations.iter().map(move |&operation| Action {
                operation,
                resource_type,
                resource_name: name.to_string(),
            })
        })
        .collect();
    let answers = authz::authorize(&actions);
    (0..names.len())
        .map(|i| {
            operations
                .iter()
                .enumerate()
                .filter(|(j, _)| answers.get(i * operations.len() + j).copied() == Some(true))
                .fold(0i32, |bits, (_, &operation)| {
                    bits | 1 << operation_code(operation)
                })
        })
        .collect()
}

/// The Cluster's authorized operations as Kafka's `AuthHelper` reports
/// them (Metadata v8-10, DescribeCluster): only to a principal that may
/// DESCRIBE the Cluster, 0 to anyone else.
pub fn cluster_authorized_operations() -> i32 {
    let operations = authorized_operations(ResourceType::Cluster, &[CLUSTER_NAME]);
    let operations = operations.first().copied().unwrap_or(0);
    if operations & 1 << operation_code(Operation::Describe) != 0 {
        operations
    } else {
        0
    }
}

/// Declares and exports the handler of an API that needs `operation` on
/// the Cluster (the controller's APIs): `answer(ctx, request)` once the
/// principal may, else CLUSTER_AUTHORIZATION_FAILED in `failed(code)` (or,
/// without `failed`, the generic error response), as [`on_cluster`].
///
/// `cluster_api!(Handler: XxxRequest, min..=max, Operation => answer[, failed]);`
#[macro_export]
macro_rules! cluster_api {
    ($handler:ident: $request:ident, $min:tt..=$max:tt, $operation:ident => $answer:path $(, $failed:path)?) => {
        struct $handler;

        impl $crate::Handler for $handler {
            $crate::api!($request, $min..=$max);

            fn handle(
                ctx: &$crate::RequestContext,
                request: &$request,
            ) -> $crate::Reply<Self::Response> {
                let operation = $crate::authz::Operation::$operation;
                $crate::authorize::on_cluster::<Self>(ctx, request, operation, || {
                    $answer(ctx, request)
                })
            }

            $(
                fn failed(_: &$crate::RequestContext, _: &$request, code: i16) -> Self::Response {
                    $failed(code)
                }
            )?
        }

        $crate::export_handler!($handler);
    };
}
