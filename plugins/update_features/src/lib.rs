//! UpdateFeatures (ApiKey 57): change the cluster's finalized feature
//! levels (KIP-584, KIP-778, KIP-1022), as Kafka's broker forwarding it to
//! the controller (`ControllerApis.handleUpdateFeatures`,
//! `QuorumController.updateFeatures`, `FeatureControlManager.updateFeatures`).
//!
//! What Kafka does:
//!
//! - ALTER on the Cluster is required, else CLUSTER_AUTHORIZATION_FAILED
//!   (`UpdateFeaturesRequest.getErrorResponse`: the top-level error and no
//!   per-feature results).
//! - Each update names a feature and a new max level; v0 has
//!   `allow_downgrade`, v1+ `upgrade_type` (1 upgrade, 2 safe downgrade, 3
//!   unsafe downgrade) and `validate_only`. An update fails with
//!   INVALID_UPDATE_VERSION and the message "Invalid update version V for
//!   feature F. <reason>": an unknown upgrade type, a level below 0, a
//!   level outside the range the controller and every broker support ("...
//!   does not support this feature." when the range is empty), a downgrade
//!   without a downgrade type (or the reverse), a feature the controller
//!   does not know ("Feature F not found."). The first failing update fails
//!   the request: the top-level error is INVALID_UPDATE_VERSION with "The
//!   update failed for all features since the following feature had an
//!   error: <message>", nothing is applied, and no per-feature results are
//!   returned. On success the top-level error is NONE (null message) and
//!   v0-1 list every feature with NONE; v2 has no per-feature results at
//!   all. `validate_only` checks without applying.
//!
//! What Gregor does: it supports no feature flags (ApiVersions advertises
//! no supported and no finalized features, epoch -1), so every feature is
//! unknown to it and every update is refused the way Kafka refuses one its
//! controller does not support: a level above 0 with "Local controller N
//! does not support this feature.", level 0 (deleting a feature that is
//! not there) with "Feature F not found.", after the upgrade-type and
//! negative-level checks. A request that updates nothing succeeds (with or
//! without `validate_only`). Updates are checked in request order (Kafka
//! checks them in hash-map order); a feature named twice counts once, with
//! its last level and type, as in Kafka's map. `timeout_ms` is not needed:
//! nothing waits for a controller.
//!
//! Error response (a trap or timeout): the error and no per-feature
//! results, as Kafka's `UpdateFeaturesRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use gregor_sdk::kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

const MAX_VERSION: i16 = 2;

/// Kafka's `FeatureUpdate.UpgradeType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

/// One feature update as the controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Update {
    feature: String,
    level: i16,
    upgrade_type: UpgradeType,
}

struct UpdateFeatures;

impl Handler for UpdateFeatures {
    gregor_sdk::api!(UpdateFeaturesRequest, 0..=MAX_VERSION);

    fn handle(
        ctx: &RequestContext,
        request: &UpdateFeaturesRequest,
    ) -> Reply<UpdateFeaturesResponse> {
        if !cluster_allowed(Operation::Alter) {
            let error = ResponseError::ClusterAuthorizationFailed;
            return refused(error.code(), Some(&error.to_string())).into();
        }
        let updates = updates(ctx.api_version, &request.feature_updates);
        // The node id only shows in a refusal's message.
        let node_id = if updates.is_empty() {
            -1
        } else {
            metadata::describe_cluster().controller_id
        };
        match updates.iter().try_for_each(|u| check(u, node_id)) {
            Err(message) => refused(
                ResponseError::InvalidUpdateVersion.code(),
                Some(&format!(
                    "The update failed for all features since the following feature had an error: {message}"
                )),
            ),
            // Only a request updating nothing gets here: no results.
            Ok(()) => UpdateFeaturesResponse::default().with_error_message(None),
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: the error, no per-feature results.
    fn failed(
        _: &RequestContext,
        _: &UpdateFeaturesRequest,
        error_code: i16,
    ) -> UpdateFeaturesResponse {
        refused(error_code, None)
    }
}

/// Kafka's `UpdateFeaturesResponse.createWithErrors` for an error: the
/// top-level error and message, no per-feature results.
fn refused(error_code: i16, message: Option<&str>) -> UpdateFeaturesResponse {
    UpdateFeaturesResponse::default()
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

/// The requested updates, a feature named twice counting once with its
/// last level and type (Kafka collects them into a map), in the order the
/// features first appear.
fn updates(version: i16, keys: &[FeatureUpdateKey]) -> Vec<Update> {
    let mut updates: Vec<Update> = Vec::with_capacity(keys.len());
    for key in keys {
        let update = Update {
            feature: key.feature.to_string(),
            level: key.max_version_level,
            upgrade_type: upgrade_type(version, key),
        };
        match updates.iter_mut().find(|u| u.feature == update.feature) {
            Some(earlier) => *earlier = update,
            None => updates.push(update),
        }
    }
    updates
}

/// v0's `allow_downgrade` means a safe downgrade (Kafka's
/// `UpdateFeaturesRequest.getFeature`); v1+ name the type.
fn upgrade_type(version: i16, key: &FeatureUpdateKey) -> UpgradeType {
    if version == 0 {
        return if key.allow_downgrade {
            UpgradeType::SafeDowngrade
        } else {
            UpgradeType::Upgrade
        };
    }
    match key.upgrade_type {
        1 => UpgradeType::Upgrade,
        2 => UpgradeType::SafeDowngrade,
        3 => UpgradeType::UnsafeDowngrade,
        _ => UpgradeType::Unknown,
    }
}

/// Kafka's `FeatureControlManager.updateFeature` for a controller that
/// supports no feature: every update fails, with Kafka's message for the
/// first check it fails.
fn check(update: &Update, node_id: i32) -> Result<(), String> {
    let reason = if update.upgrade_type == UpgradeType::Unknown {
        "The controller does not support the given upgrade type.".to_string()
    } else if update.level < 0 {
        "A feature version cannot be less than 0.".to_string()
    } else if update.level > 0 {
        // The supported range of a feature this node does not know is
        // [0, 0] (Kafka's QuorumFeatures.DISABLED).
        format!("Local controller {node_id} does not support this feature.")
    } else {
        // Level 0 is within [0, 0] and equal to the (absent) current level,
        // so Kafka goes on to look the feature up.
        format!("Feature {} not found.", update.feature)
    };
    Err(format!(
        "Invalid update version {} for feature {}. {reason}",
        update.level, update.feature
    ))
}

gregor_sdk::export_handler!(UpdateFeatures);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
    use gregor_sdk::kafka_protocol::protocol::{Decodable, Encodable};
    use gregor_sdk::metadata::Cluster;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn key(feature: &str, level: i16, upgrade_type: i8) -> FeatureUpdateKey {
        FeatureUpdateKey::default()
            .with_feature(str_bytes(feature))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)
    }

    fn refusal(feature: &str, level: i16, upgrade_type: i8) -> String {
        let updates = updates(1, &[key(feature, level, upgrade_type)]);
        check(&updates[0], 1).unwrap_err()
    }

    #[test]
    fn every_update_is_refused_with_kafkas_message() {
        assert_eq!(
            refusal("transaction.version", 2, 1),
            "Invalid update version 2 for feature transaction.version. \
             Local controller 1 does not support this feature."
        );
        assert_eq!(
            refusal("metadata.version", 1, 3),
            "Invalid update version 1 for feature metadata.version. \
             Local controller 1 does not support this feature."
        );
        assert_eq!(
            refusal("group.version", 0, 2),
            "Invalid update version 0 for feature group.version. \
             Feature group.version not found."
        );
        assert_eq!(
            refusal("kraft.version", -1, 2),
            "Invalid update version -1 for feature kraft.version. \
             A feature version cannot be less than 0."
        );
        // The upgrade type is checked first.
        assert_eq!(
            refusal("kraft.version", -1, 9),
            "Invalid update version -1 for feature kraft.version. \
             The controller does not support the given upgrade type."
        );
    }

    #[test]
    fn upgrade_types_by_version() {
        let downgrade = key("f", 1, 1).with_allow_downgrade(true);
        assert_eq!(upgrade_type(0, &downgrade), UpgradeType::SafeDowngrade);
        assert_eq!(upgrade_type(0, &key("f", 1, 0)), UpgradeType::Upgrade);
        assert_eq!(upgrade_type(1, &key("f", 1, 1)), UpgradeType::Upgrade);
        assert_eq!(upgrade_type(2, &key("f", 1, 2)), UpgradeType::SafeDowngrade);
        assert_eq!(
            upgrade_type(2, &key("f", 1, 3)),
            UpgradeType::UnsafeDowngrade
        );
        assert_eq!(upgrade_type(1, &key("f", 1, 0)), UpgradeType::Unknown);
    }

    #[test]
    fn a_feature_named_twice_counts_once_with_its_last_update() {
        let keys = [key("a", 1, 1), key("b", 2, 1), key("a", -1, 2)];
        let updates = updates(1, &keys);
        assert_eq!(
            updates
                .iter()
                .map(|u| (u.feature.as_str(), u.level))
                .collect::<Vec<_>>(),
            [("a", -1), ("b", 2)]
        );
        assert!(check(&updates[0], 1)
            .unwrap_err()
            .ends_with("cannot be less than 0."));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let message = "The update failed for all features since the following feature had an \
                       error: Invalid update version 1 for feature f. Local controller 1 does \
                       not support this feature.";
        let refusal = refused(ResponseError::InvalidUpdateVersion.code(), Some(message));
        let empty = UpdateFeaturesResponse::default().with_error_message(None);
        let request = UpdateFeaturesRequest::default().with_feature_updates(vec![key("f", 1, 1)]);
        assert_encodes_for_served_versions::<UpdateFeatures>(&[request], &[refusal, empty]);
    }

    #[test]
    fn only_v0_and_v1_carry_per_feature_results() {
        // v0-1 carry per-feature results (Kafka's success shape); v2 drops them.
        let with_results = UpdateFeaturesResponse::default()
            .with_error_message(None)
            .with_results(vec![UpdatableFeatureResult::default()
                .with_feature(str_bytes("f"))
                .with_error_message(None)]);
        for version in 0..=MAX_VERSION {
            let mut encoded = Vec::new();
            assert!(with_results.encode(&mut encoded, version).is_ok());
            let decoded = UpdateFeaturesResponse::decode(&mut encoded.as_slice(), version).unwrap();
            assert_eq!(
                decoded.results.len(),
                usize::from(version <= 1),
                "v{version}"
            );
        }
    }

    /// Controller 7; ALTER on the Cluster as `allowed` says.
    struct Controller {
        allowed: bool,
    }

    impl FakeHost for Controller {
        fn authorize(&self, _: &Action) -> bool {
            self.allowed
        }
        fn describe_cluster(&self) -> Cluster {
            assert!(
                self.allowed,
                "an unauthorized update reached the controller"
            );
            Cluster {
                cluster_id: "c".to_string(),
                controller_id: 7,
                brokers: Vec::new(),
            }
        }
    }

    fn answer(allowed: bool, version: i16, keys: Vec<FeatureUpdateKey>) -> (i16, Option<String>) {
        let request = UpdateFeaturesRequest::default().with_feature_updates(keys);
        let handled = fake::handle::<UpdateFeatures>(Controller { allowed }, version, &request);
        let response = handled.response.unwrap();
        assert!(response.results.is_empty());
        (
            response.error_code,
            response.error_message.map(|m| m.to_string()),
        )
    }

    #[test]
    fn updates_are_refused_with_the_controllers_id() {
        let (code, message) = answer(true, 1, vec![key("f", 1, 1)]);
        assert_eq!(code, ResponseError::InvalidUpdateVersion.code());
        assert!(message.unwrap().ends_with(
            "Invalid update version 1 for feature f. Local controller 7 does not support this feature."
        ));
        assert_eq!(answer(true, 2, Vec::new()), (0, None));
    }

    #[test]
    fn without_alter_on_the_cluster_nothing_is_checked() {
        let (code, message) = answer(false, 0, vec![key("f", 1, 1)]);
        let denied = ResponseError::ClusterAuthorizationFailed;
        assert_eq!((code, message), (denied.code(), Some(denied.to_string())));
    }
}
