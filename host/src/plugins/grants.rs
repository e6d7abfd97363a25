//! Least privilege for handler modules: which host functions a module may
//! import, by named capabilities ("grants").
//!
//! Every handler targets the one `kafka-handler` world, but a component
//! imports only the interfaces and functions it uses (the component
//! encoder drops the rest, and wasmtime lists what is left). So the loader
//! reads a module's imports before it instantiates it, maps each imported
//! function to the capability that covers it, and refuses a module whose
//! grants lack one, naming what is missing. Nothing of an ungranted
//! function is ever reachable: the module does not run at all.
//!
//! Capabilities split the interfaces where they mix reading and writing
//! (`log.read`, `log.append`, `log.admin`; `acl-admin.read` and
//! `acl-admin.write`; ...), function by function, so the WIT contract
//! stays as it is (grants came in 0.3.x) and no module needs rebuilding.
//!
//! Where a module's grants come from, first match wins: the dynamic broker
//! config `plugin.grants.<module>` (AlterConfigs, this broker then the
//! cluster default), the static one (`server.properties` / `--set`), then
//! [`STANDARD`] for the broker's own modules, recognised by their module
//! name (the file stem, as the loader names modules) and required to
//! describe that row's ApiKey. Any other module gets nothing but
//! [`BASELINE`]. Grants are read at each load (start, file change,
//! `gregor plugins load`): a change takes effect at the module's next load.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use serde::Serialize;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::config::BrokerConfig;
use crate::metadata::dynamic::BrokerLayers;

pub use crate::plugin_grants::{capability_of, parse, BASELINE, CAPABILITIES, CONFIG_PREFIX};

/// A standard module: the broker's handler for one ApiKey and what that
/// API needs (besides [`BASELINE`]).
pub struct Standard {
    pub module: &'static str,
    pub api_key: i16,
    pub grants: &'static [&'static str],
}

const fn standard(module: &'static str, api_key: i16, grants: &'static [&'static str]) -> Standard {
    Standard {
        module,
        api_key,
        grants,
    }
}

/// The broker's own modules (`plugins/<module>`), by ApiKey. PLUGINS.md
/// has the same table.
pub const STANDARD: &[Standard] = &[
    standard("produce", 0, &["authz", "log.append", "metadata.read"]),
    standard(
        "fetch",
        1,
        &["authz", "log.read", "log.replicate", "metadata.read"],
    ),
    standard("list_offsets", 2, &["authz", "log.read"]),
    standard("metadata", 3, &["authz", "metadata.read", "metadata.write"]),
    standard(
        "offset_commit",
        8,
        &["authz", "groups.write", "metadata.read"],
    ),
    standard("offset_fetch", 9, &["authz", "groups.read"]),
    // Kafka's FindCoordinator creates `__consumer_offsets` on first use.
    standard(
        "find_coordinator",
        10,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard("join_group", 11, &["authz", "groups.write"]),
    standard("heartbeat", 12, &["authz", "groups.write"]),
    standard("leave_group", 13, &["authz", "groups.write"]),
    standard("sync_group", 14, &["authz", "groups.write"]),
    standard("describe_groups", 15, &["authz", "groups.read"]),
    standard("list_groups", 16, &["authz", "groups.read"]),
    standard("sasl_handshake", 17, &["sasl"]),
    standard("api_versions", 18, &["metadata.read"]),
    standard(
        "create_topics",
        19,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard(
        "delete_topics",
        20,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard("delete_records", 21, &["authz", "log.admin"]),
    standard("init_producer_id", 22, &["authz", "txn.write"]),
    standard("offset_for_leader_epoch", 23, &["authz", "log.read"]),
    standard(
        "add_partitions_to_txn",
        24,
        &["authz", "metadata.read", "txn.write"],
    ),
    standard("add_offsets_to_txn", 25, &["authz", "txn.write"]),
    standard("end_txn", 26, &["authz", "txn.write"]),
    standard(
        "write_txn_markers",
        27,
        &["authz", "metadata.read", "txn.markers"],
    ),
    standard(
        "txn_offset_commit",
        28,
        &["authz", "metadata.read", "txn.write"],
    ),
    standard("describe_acls", 29, &["acl-admin.read", "authz"]),
    standard("create_acls", 30, &["acl-admin.write", "authz"]),
    standard("delete_acls", 31, &["acl-admin.write", "authz"]),
    standard("describe_configs", 32, &["authz", "configs.read"]),
    standard("alter_configs", 33, &["authz", "configs.write"]),
    standard("alter_replica_log_dirs", 34, &["authz", "log.admin"]),
    standard("describe_log_dirs", 35, &["authz", "log.read"]),
    standard("sasl_authenticate", 36, &["sasl"]),
    standard(
        "create_partitions",
        37,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard(
        "create_delegation_token",
        38,
        &["authz", "delegation-tokens.read", "delegation-tokens.write"],
    ),
    standard("renew_delegation_token", 39, &["delegation-tokens.write"]),
    standard("expire_delegation_token", 40, &["delegation-tokens.write"]),
    standard(
        "describe_delegation_token",
        41,
        &["authz", "delegation-tokens.read"],
    ),
    standard("delete_groups", 42, &["authz", "groups.write"]),
    standard(
        "elect_leaders",
        43,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard("incremental_alter_configs", 44, &["authz", "configs.write"]),
    standard(
        "alter_partition_reassignments",
        45,
        &["authz", "metadata.read", "metadata.write"],
    ),
    standard(
        "list_partition_reassignments",
        46,
        &["authz", "metadata.read"],
    ),
    standard(
        "offset_delete",
        47,
        &["authz", "groups.write", "metadata.read"],
    ),
    standard("describe_client_quotas", 48, &["authz", "quotas.read"]),
    standard("alter_client_quotas", 49, &["authz", "quotas.write"]),
    standard(
        "describe_user_scram_credentials",
        50,
        &["authz", "scram-credentials.read"],
    ),
    standard(
        "alter_user_scram_credentials",
        51,
        &["authz", "scram-credentials.write"],
    ),
    standard("describe_quorum", 55, &["authz", "controller.read"]),
    standard("alter_partition", 56, &["authz", "controller.write"]),
    standard("update_features", 57, &["authz", "metadata.read"]),
    standard("describe_cluster", 60, &["authz", "metadata.read"]),
    standard("describe_producers", 61, &["authz", "txn.read"]),
    standard("broker_registration", 62, &["authz", "controller.write"]),
    standard("broker_heartbeat", 63, &["authz", "controller.write"]),
    standard("unregister_broker", 64, &["authz", "controller.write"]),
    standard("describe_transactions", 65, &["authz", "txn.read"]),
    standard("list_transactions", 66, &["authz", "txn.read"]),
    standard("allocate_producer_ids", 67, &["authz", "controller.write"]),
    standard(
        "consumer_group_heartbeat",
        68,
        &["authz", "groups.write", "metadata.read"],
    ),
    standard(
        "consumer_group_describe",
        69,
        &["authz", "groups.read", "metadata.read"],
    ),
    standard("get_telemetry_subscriptions", 71, &["telemetry"]),
    standard("push_telemetry", 72, &["telemetry"]),
    standard(
        "list_config_resources",
        74,
        &["authz", "configs.read", "metadata.read"],
    ),
    standard("describe_topic_partitions", 75, &["authz", "metadata.read"]),
];

/// Where a module's grants came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// `plugin.grants.<module>` set with AlterConfigs for this broker.
    DynamicBroker,
    /// `plugin.grants.<module>` set with AlterConfigs for every broker.
    DynamicDefault,
    /// `plugin.grants.<module>` in the broker's start-up config.
    Config,
    /// The [`STANDARD`] row of the module's name.
    Standard,
    /// Nothing granted: [`BASELINE`] only.
    None,
    /// An authorizer: its world offers read-only ACLs and logging only.
    AuthorizerWorld,
}

/// A module's grants as resolved at its load, and what it uses of them.
#[derive(Debug, Clone, Serialize)]
pub struct Grants {
    /// Granted capabilities, besides the baseline, in name order.
    pub granted: Vec<String>,
    pub origin: Origin,
    /// The capabilities the module's imports need (baseline ones
    /// included), in name order.
    pub used: Vec<String>,
    /// With [`Origin::Standard`]: the ApiKey the module must describe.
    #[serde(skip)]
    pub standard_api_key: Option<i16>,
}

impl Grants {
    /// What an authorizer module is given by its world.
    pub fn authorizer() -> Self {
        Self {
            granted: vec!["acls.read".to_string()],
            origin: Origin::AuthorizerWorld,
            used: Vec::new(),
            standard_api_key: None,
        }
    }

    fn allows(&self, capability: &str) -> bool {
        BASELINE.contains(&capability) || self.granted.iter().any(|g| g == capability)
    }
}

/// The capabilities `component`'s imports need, by the function that
/// needs each (`interface.function`), for the refusal message. Only the
/// interfaces of `package` at `version` count (the loader has already
/// refused any other import but WASI); a function no capability covers is
/// refused.
pub fn required(
    engine: &Engine,
    component: &Component,
    package: &str,
    version: &str,
) -> Result<BTreeMap<&'static str, Vec<String>>> {
    let mut needed: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let prefix = format!("{package}/");
    let suffix = format!("@{version}");
    for (name, item) in component.component_type().imports(engine) {
        let Some(interface) = name
            .strip_prefix(prefix.as_str())
            .and_then(|rest| rest.strip_suffix(suffix.as_str()))
        else {
            continue;
        };
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        for (function, export) in instance.exports(engine) {
            if !matches!(export.ty, ComponentItem::ComponentFunc(_)) {
                continue;
            }
            let Some(capability) = capability_of(interface, function) else {
                bail!(
                    "the module imports {interface}.{function}, which no plugin grant covers \
                     (this broker's contract has no such function)"
                );
            };
            needed
                .entry(capability)
                .or_default()
                .push(format!("{interface}.{function}"));
        }
    }
    Ok(needed)
}

/// The grants of `module` now: dynamic config, static config, the
/// standard table, or none. A configured value that does not parse is an
/// error (the static one was checked at start, a dynamic one when it was
/// altered; this is the last line).
pub fn resolve(module: &str, config: &BrokerConfig, dynamic: &BrokerLayers) -> Result<Grants> {
    let key = format!("{CONFIG_PREFIX}{module}");
    let configured = dynamic
        .per_broker
        .get(&key)
        .map(|value| (value.as_str(), Origin::DynamicBroker))
        .or_else(|| {
            dynamic
                .cluster_default
                .get(&key)
                .map(|value| (value.as_str(), Origin::DynamicDefault))
        })
        .or_else(|| config.get(&key).map(|value| (value, Origin::Config)));
    let (granted, origin, standard_api_key) = match configured {
        Some((value, origin)) => {
            let granted = parse(value).map_err(|error| anyhow::anyhow!("{key}: {error}"))?;
            (granted, origin, None)
        }
        None => match STANDARD.iter().find(|row| row.module == module) {
            Some(row) => (
                row.grants.iter().copied().collect(),
                Origin::Standard,
                Some(row.api_key),
            ),
            None => (BTreeSet::new(), Origin::None, None),
        },
    };
    Ok(Grants {
        granted: granted.into_iter().map(str::to_string).collect(),
        origin,
        used: Vec::new(),
        standard_api_key,
    })
}

/// Checks what a module needs against its grants: Ok with the grants
/// noting what it uses, or the refusal naming every missing grant, the
/// functions that need each, and how to grant them.
pub fn check(
    module: &str,
    needed: &BTreeMap<&'static str, Vec<String>>,
    mut grants: Grants,
) -> Result<Grants> {
    let missing: Vec<(&str, &Vec<String>)> = needed
        .iter()
        .filter(|(capability, _)| !grants.allows(capability))
        .map(|(capability, functions)| (*capability, functions))
        .collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|(name, _)| *name).collect();
        let detail: Vec<String> = missing
            .iter()
            .map(|(name, functions)| format!("{name} for {}", functions.join(", ")))
            .collect();
        let mut wanted: BTreeSet<&str> = grants.granted.iter().map(String::as_str).collect();
        wanted.extend(names.iter().copied());
        let wanted: Vec<&str> = wanted.into_iter().collect();
        bail!(
            "module {module} is not granted {} ({}); it has {} ({}); grant them with \
             {CONFIG_PREFIX}{module}={}",
            names.join(", "),
            detail.join("; "),
            if grants.granted.is_empty() {
                "only the baseline".to_string()
            } else {
                grants.granted.join(", ")
            },
            origin_text(grants.origin),
            wanted.join(",")
        );
    }
    grants.used = needed.keys().map(|name| name.to_string()).collect();
    Ok(grants)
}

/// The capabilities of `used` that `grants` no longer covers: for a
/// loaded module whose grants changed.
pub fn uncovered(used: &[String], grants: &Grants) -> Vec<String> {
    used.iter()
        .filter(|capability| !grants.allows(capability))
        .cloned()
        .collect()
}

fn origin_text(origin: Origin) -> &'static str {
    match origin {
        Origin::DynamicBroker => "dynamic config of this broker",
        Origin::DynamicDefault => "dynamic cluster-default config",
        Origin::Config => "start-up config",
        Origin::Standard => "standard module",
        Origin::None => "not a standard module and no plugin.grants config",
        Origin::AuthorizerWorld => "authorizer world",
    }
}

/// A standard module must serve the ApiKey its grants are for.
pub fn check_api_key(module: &str, grants: &Grants, api_key: i16) -> Result<()> {
    if let Some(expected) = grants.standard_api_key {
        if expected != api_key {
            bail!(
                "module {module} has the standard grants of ApiKey {expected} but describes \
                 ApiKey {api_key}; name it otherwise and grant it with {CONFIG_PREFIX}<name>"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_rows_name_known_grants_once_each() {
        let mut modules = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for row in STANDARD {
            assert!(modules.insert(row.module), "{}", row.module);
            assert!(keys.insert(row.api_key), "{}", row.api_key);
            for grant in row.grants {
                assert!(parse(grant).is_ok(), "{}: {grant}", row.module);
                assert!(!BASELINE.contains(grant), "{}: {grant}", row.module);
            }
        }
        let list_groups = STANDARD.iter().find(|row| row.module == "list_groups");
        assert_eq!(
            list_groups.map(|row| row.grants),
            Some(&["authz", "groups.read"][..])
        );
    }

    fn config(pairs: &[&str]) -> BrokerConfig {
        BrokerConfig::from_pairs(pairs)
    }

    #[test]
    fn dynamic_config_wins_over_static_over_standard() {
        let layers = BrokerLayers::default();
        let standard = resolve("list_groups", &config(&[]), &layers).expect("resolves");
        assert_eq!(standard.origin, Origin::Standard);
        assert_eq!(standard.standard_api_key, Some(16));
        let none = resolve("mine", &config(&[]), &layers).expect("resolves");
        assert_eq!((none.origin, none.granted.len()), (Origin::None, 0));
        let configured = config(&["plugin.grants.list_groups=groups.read"]);
        let grants = resolve("list_groups", &configured, &layers).expect("resolves");
        assert_eq!(grants.origin, Origin::Config);
        assert_eq!(grants.granted, vec!["groups.read".to_string()]);
        let mut layers = BrokerLayers::default();
        layers
            .cluster_default
            .insert("plugin.grants.list_groups".into(), "authz".into());
        let grants = resolve("list_groups", &configured, &layers).expect("resolves");
        assert_eq!(
            (grants.origin, grants.granted),
            (Origin::DynamicDefault, vec!["authz".to_string()])
        );
        layers
            .per_broker
            .insert("plugin.grants.list_groups".into(), "".into());
        let grants = resolve("list_groups", &configured, &layers).expect("resolves");
        assert_eq!(
            (grants.origin, grants.granted.len()),
            (Origin::DynamicBroker, 0)
        );
    }

    #[test]
    fn a_refusal_names_every_missing_grant() {
        let mut needed: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        needed.insert("logging", vec!["logging.log".into()]);
        needed.insert("log.append", vec!["log.append".into()]);
        needed.insert("acl-admin.write", vec!["acl-admin.create-acls".into()]);
        needed.insert("authz", vec!["authz.authorize".into()]);
        let grants = resolve(
            "writer",
            &config(&["plugin.grants.writer=authz"]),
            &BrokerLayers::default(),
        )
        .expect("resolves");
        let refusal = check("writer", &needed, grants.clone())
            .expect_err("refused")
            .to_string();
        assert!(
            refusal.contains("not granted acl-admin.write, log.append (")
                && refusal.contains("plugin.grants.writer=acl-admin.write,authz,log.append"),
            "{refusal}"
        );
        needed.remove("acl-admin.write");
        needed.remove("log.append");
        let checked = check("writer", &needed, grants).expect("granted");
        assert_eq!(
            checked.used,
            vec!["authz".to_string(), "logging".to_string()]
        );
        assert!(uncovered(&checked.used, &Grants::authorizer()).contains(&"authz".to_string()));
    }
}
