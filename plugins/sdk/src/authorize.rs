//! Authorization helpers: batch the questions a handler has, as KafkaApis
//! does, and ask the host's active authorizer once.

use crate::authz::{self, Action, Operation, ResourceType};

/// Is `operation` on the named resource allowed for this request's principal?
pub fn is_allowed(operation: Operation, resource_type: ResourceType, name: &str) -> bool {
    let answers = authz::authorize(&[Action {
        operation,
        resource_type,
        resource_name: name.to_string(),
    }]);
    answers.first().copied().unwrap_or(false)
}

/// Asks once for every name and returns, per name, whether it is allowed.
/// Kafka's `filterByAuthorized`: duplicates are asked once.
pub fn allowed_names<'a>(
    operation: Operation,
    resource_type: ResourceType,
    names: impl IntoIterator<Item = &'a str>,
) -> std::collections::HashMap<String, bool> {
    let mut unique: Vec<String> = names.into_iter().map(str::to_string).collect();
    unique.sort();
    unique.dedup();
    let actions: Vec<Action> = unique
        .iter()
        .map(|name| Action {
            operation,
            resource_type,
            resource_name: name.clone(),
        })
        .collect();
    let answers = authz::authorize(&actions);
    unique
        .into_iter()
        .enumerate()
        .map(|(i, name)| (name, answers.get(i).copied().unwrap_or(false)))
        .collect()
}

/// Is a cluster-level operation allowed?
pub fn cluster_allowed(operation: Operation) -> bool {
    is_allowed(operation, ResourceType::Cluster, "kafka-cluster")
}
