//! Config changes on a node of a cluster: the configs of topics, brokers,
//! groups and client-metrics subscriptions are the metadata log's, so an
//! alter is validated here as on a single node and then, instead of
//! being stored, proposed as the differences it makes ([`ConfigLog`]).
//! The stores follow what the log applied (the cluster brings them along
//! before the answer), so the next describe on any node shows it.
//!
//! Proposing the differences rather than the whole next config keeps two
//! brokers' concurrent changes to different names both in force.

use super::{ConfigError, Configs, Description, ResourceType, StoredConfigs};

/// Where a validated config change goes on a node of a cluster: each name
/// set (Some) or deleted (None) on the resource `name` of `resource_type`
/// (BROKER: a node id, or "" for the cluster default).
pub trait ConfigLog: Send + Sync {
    fn alter(
        &self,
        resource_type: ResourceType,
        name: &str,
        changes: Vec<(String, Option<String>)>,
    ) -> Result<(), ConfigError>;
}

/// A resource type whose validated changes go to the log instead of its
/// store; everything else is the type's own.
pub(super) struct Logged<'a, T> {
    stored: &'a T,
    log: &'a dyn ConfigLog,
    resource_type: ResourceType,
}

impl<'a, T> Logged<'a, T> {
    pub(super) fn new(stored: &'a T, log: &'a dyn ConfigLog, resource_type: ResourceType) -> Self {
        Self {
            stored,
            log,
            resource_type,
        }
    }
}

impl<T: StoredConfigs> StoredConfigs for Logged<'_, T> {
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.stored.describe_configs(name)
    }

    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        self.stored.check_name(name)
    }

    fn current(&self, name: &str) -> Result<Configs, ConfigError> {
        self.stored.current(name)
    }

    fn is_list(&self, config: &str) -> Result<bool, ConfigError> {
        self.stored.is_list(config)
    }

    fn default_of(&self, config: &str) -> Option<String> {
        self.stored.default_of(config)
    }

    fn validate(&self, name: &str, configs: &Configs) -> Result<(), ConfigError> {
        self.stored.validate(name, configs)
    }

    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError> {
        let changes = differences(&self.stored.current(name)?, &configs);
        if changes.is_empty() {
            return Ok(());
        }
        self.log.alter(self.resource_type, name, changes)
    }
}

/// What turns `current` into `next`: names set to a new value, names gone.
pub fn differences(current: &Configs, next: &Configs) -> Vec<(String, Option<String>)> {
    let set = next
        .iter()
        .filter(|(name, value)| current.get(*name) != Some(*value))
        .map(|(name, value)| (name.clone(), Some(value.clone())));
    let gone = current
        .keys()
        .filter(|name| !next.contains_key(*name))
        .map(|name| (name.clone(), None));
    set.chain(gone).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_set_changed_and_delete_gone_names() {
        let current = Configs::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]);
        let next = Configs::from([
            ("a".to_string(), "1".to_string()),
            ("c".to_string(), "3".to_string()),
        ]);
        assert_eq!(
            differences(&current, &next),
            vec![
                ("c".to_string(), Some("3".to_string())),
                ("b".to_string(), None)
            ]
        );
        assert!(differences(&next, &next).is_empty());
    }
}
