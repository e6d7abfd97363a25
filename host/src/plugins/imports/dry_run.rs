//! The dry-run variants of the host calls that write, taken by a shadow
//! instance (`HandlerState::dry_run`, set for every instance of a version
//! loaded with `gregor plugins shadow`). A shadow runs on a copy of live
//! requests: what it does must be judged, never applied twice.
//!
//! - `log.append` validates what a real append validates first (acks, the
//!   partition and its leadership, the batches as Kafka's LogValidator
//!   checks a client's) and answers the offset the batch would get, the
//!   partition's end offset; nothing is appended.
//! - `log.replicate` (a follower's fetch) reads what the follower would
//!   get, but the leader records nothing of it: a copy of a follower's
//!   fetch, handled after the serving version's and possibly after the
//!   follower's next one, would otherwise move the leader's view of that
//!   follower (its log end offset back, its caught-up time, the ISR and
//!   the high watermark), and a changed shadow could move it anywhere.
//! - The `quotas.usage` calls charge nothing and throttle nothing: the
//!   client was charged for its request by the serving version.
//!
//! Every other writing capability has no dry-run variant yet, so a module
//! that uses one is refused as a shadow at load ([`without_dry_run`]),
//! naming the capabilities: it never runs, rather than writing for real.

use crate::error_code::ErrorCode;
use crate::log::validate;
use crate::plugins::bindings::handler::gregor::broker::log::AppendResult;
use crate::plugins::imports::error_field;
use crate::plugins::state::HandlerState;

/// Capabilities whose functions change broker state, and whether each has
/// a dry-run variant here.
const WRITING: &[(&str, bool)] = &[
    ("log.append", true),
    ("log.replicate", true),
    ("quotas.usage", true),
    ("log.admin", false),
    ("metadata.write", false),
    ("groups.write", false),
    ("sasl", false),
    ("scram-credentials.write", false),
    ("acl-admin.write", false),
    ("txn.write", false),
    ("txn.markers", false),
    ("configs.write", false),
    ("delegation-tokens.write", false),
    ("telemetry", false),
    ("controller.write", false),
    ("quotas.write", false),
];

/// The capabilities among `used` that write and have no dry-run variant:
/// a module using any of them cannot run as a shadow.
pub fn without_dry_run(used: &[String]) -> Vec<String> {
    used.iter()
        .filter(|name| WRITING.iter().any(|(writing, dry)| writing == name && !dry))
        .cloned()
        .collect()
}

/// Kafka's latest-offset timestamp (ListOffsets -1).
const LATEST: i64 = -1;

impl HandlerState {
    /// `log.append`, validated but not applied.
    pub(super) fn dry_append(
        &self,
        topic: &str,
        partition: i32,
        records: &[u8],
        required_acks: i16,
    ) -> AppendResult {
        let failed = |code: i16, message: Option<String>| AppendResult {
            error: error_field(code, message),
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
        };
        if !matches!(required_acks, -1..=1) {
            return failed(ErrorCode::InvalidRequiredAcks.code(), None);
        }
        let replica = &self.services.replica;
        let end = replica.list_offset(topic, partition, LATEST, false);
        if end.error_code != ErrorCode::None.code() {
            return failed(end.error_code, None);
        }
        if let Err(error) = validate::client_batches(records) {
            return failed(error.error_code(), Some(error.to_string()));
        }
        let start = replica.list_offset(topic, partition, -2, false);
        AppendResult {
            error: None,
            base_offset: end.offset,
            log_append_time_ms: -1,
            log_start_offset: start.offset,
            record_errors: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_writers_without_a_variant_keep_a_module_from_shadowing() {
        let used = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert!(without_dry_run(&used(&["authz", "log.append", "quotas.usage"])).is_empty());
        assert_eq!(
            without_dry_run(&used(&["groups.write", "log.read", "acl-admin.write"])),
            vec!["groups.write".to_string(), "acl-admin.write".to_string()]
        );
    }

    #[test]
    fn every_writing_capability_exists() {
        for (name, _) in WRITING {
            assert!(
                crate::plugin_grants::CAPABILITIES
                    .iter()
                    .any(|cap| cap.name == *name),
                "{name}"
            );
        }
    }
}
