//! The names of the capabilities a handler module can be granted
//! (`plugin.grants.<module>`), each covering some functions of one WIT
//! interface. Only the vocabulary lives here, below the config that
//! validates grant values; the plugin runtime applies them
//! (`plugins::grants`).

use std::collections::BTreeSet;

/// The config prefix of a module's grants.
pub const CONFIG_PREFIX: &str = "plugin.grants.";

/// One capability: the functions of one interface it lets a module import.
pub struct Capability {
    pub name: &'static str,
    pub interface: &'static str,
    pub functions: &'static [&'static str],
}

const fn cap(
    name: &'static str,
    interface: &'static str,
    functions: &'static [&'static str],
) -> Capability {
    Capability {
        name,
        interface,
        functions,
    }
}

/// Every capability a handler can be granted, covering each function of
/// the `kafka-handler` world exactly once.
pub const CAPABILITIES: &[Capability] = &[
    cap("logging", "logging", &["log"]),
    cap("stats", "stats", &["count-errors"]),
    cap(
        "quotas.usage",
        "quotas",
        &[
            "record-produce",
            "fetch-window-bytes",
            "record-fetch",
            "unrecord-fetch",
            "record-request",
            "record-mutations",
        ],
    ),
    cap("quotas.read", "quotas", &["describe"]),
    cap("quotas.write", "quotas", &["alter"]),
    cap(
        "authz",
        "authz",
        &["authorize", "authorize-by-resource-type"],
    ),
    cap(
        "log.read",
        "log",
        &[
            "fetch-or-park",
            "fetch-legacy-or-park",
            "list-offset",
            "describe-log-dirs",
            "offset-for-leader-epoch",
        ],
    ),
    cap("log.replicate", "log", &["replica-fetch-or-park"]),
    // A record set a fetch handed over (only `log.read` and
    // `log.replicate` hand them out), or the records of the Produce
    // request being handled (the module's own input).
    cap(
        "log.records",
        "log",
        &[
            "[method]record-set.size",
            "[method]record-set.read",
            "request-records",
        ],
    ),
    cap(
        "log.append",
        "log",
        &["append", "append-within", "append-records-within"],
    ),
    cap("log.admin", "log", &["delete-records", "alter-log-dir"]),
    cap(
        "metadata.read",
        "metadata",
        &[
            "describe-cluster",
            "list-topics",
            "topic-by-name",
            "topic-by-id",
            "topic-configs",
            "broker-config",
            "supported-apis",
            "list-partition-reassignments",
        ],
    ),
    cap(
        "metadata.write",
        "metadata",
        &[
            "create-topic",
            "delete-topic",
            "create-partitions",
            "elect-leaders",
            "alter-partition-reassignment",
        ],
    ),
    cap(
        "groups.read",
        "groups",
        &[
            "list-groups",
            "describe-groups",
            "fetch-offsets",
            "consumer-group-describe",
        ],
    ),
    cap(
        "groups.write",
        "groups",
        &[
            "join-or-park",
            "sync-or-park",
            "heartbeat",
            "leave",
            "commit-offsets",
            "delete-offsets",
            "delete-groups",
            "consumer-heartbeat",
        ],
    ),
    cap("sasl", "sasl", &["handshake", "authenticate"]),
    cap("scram-credentials.read", "scram-credentials", &["describe"]),
    cap("scram-credentials.write", "scram-credentials", &["alter"]),
    cap("acl-admin.read", "acl-admin", &["describe-acls"]),
    cap(
        "acl-admin.write",
        "acl-admin",
        &["create-acls", "delete-acls"],
    ),
    cap(
        "txn.read",
        "txn",
        &[
            "describe-producers",
            "describe-transaction",
            "list-transactions",
        ],
    ),
    cap(
        "txn.write",
        "txn",
        &[
            "init-idempotent-producer",
            "init-transactional-producer",
            "add-partitions",
            "add-offsets",
            "txn-offset-commit",
            "end-txn",
        ],
    ),
    cap("txn.markers", "txn", &["write-markers"]),
    cap(
        "configs.read",
        "configs",
        &["describe", "list-client-metrics", "list-group-configs"],
    ),
    cap(
        "configs.write",
        "configs",
        &["incremental-alter", "replace"],
    ),
    cap(
        "delegation-tokens.read",
        "delegation-tokens",
        &["requests-allowed", "list-tokens"],
    ),
    cap(
        "delegation-tokens.write",
        "delegation-tokens",
        &["create", "renew", "expire"],
    ),
    cap(
        "telemetry",
        "telemetry",
        &["get-subscription", "accept-push", "export-metrics"],
    ),
    cap("controller.read", "controller", &["describe-quorum"]),
    cap(
        "controller.write",
        "controller",
        &[
            "register-broker",
            "broker-heartbeat",
            "unregister-broker",
            "allocate-producer-ids",
            "alter-partition",
        ],
    ),
];

/// What every handler has without being granted it: its own log lines
/// (rate-limited), the error counts of its responses, charging the
/// request it serves to that client's quotas, and reading the record sets
/// it was handed. None reaches another client's data or any broker state.
pub const BASELINE: &[&str] = &["logging", "stats", "quotas.usage", "log.records"];

/// The capability covering one function of one interface.
pub fn capability_of(interface: &str, function: &str) -> Option<&'static str> {
    CAPABILITIES
        .iter()
        .find(|cap| cap.interface == interface && cap.functions.contains(&function))
        .map(|cap| cap.name)
}

/// Parses a grants value: capability names separated by commas (blanks
/// around them ignored; empty: nothing granted). An unknown name is an
/// error that lists the known ones.
pub fn parse(value: &str) -> Result<BTreeSet<&'static str>, String> {
    let mut granted = BTreeSet::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match CAPABILITIES.iter().find(|cap| cap.name == name) {
            Some(cap) => {
                granted.insert(cap.name);
            }
            None => {
                let known: Vec<&str> = CAPABILITIES.iter().map(|cap| cap.name).collect();
                return Err(format!(
                    "unknown plugin grant {name:?} (known: {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler world's interfaces and the functions each declares,
    /// read from `wit/` (`name: func` lines inside `interface name {`).
    fn declared() -> Vec<(String, String)> {
        let files = [
            include_str!("../../wit/logging.wit"),
            include_str!("../../wit/stats.wit"),
            include_str!("../../wit/quotas.wit"),
            include_str!("../../wit/authz.wit"),
            include_str!("../../wit/log.wit"),
            include_str!("../../wit/metadata.wit"),
            include_str!("../../wit/groups.wit"),
            include_str!("../../wit/security.wit"),
            include_str!("../../wit/txn.wit"),
            include_str!("../../wit/configs.wit"),
            include_str!("../../wit/tokens.wit"),
            include_str!("../../wit/telemetry.wit"),
            include_str!("../../wit/controller.wit"),
        ];
        let mut functions = Vec::new();
        for text in files {
            let mut interface = None;
            // Methods are named as a component imports them.
            let mut resource: Option<String> = None;
            for line in text.lines().map(str::trim) {
                if line.starts_with("//") {
                    continue;
                }
                if let Some(rest) = line.strip_prefix("interface ") {
                    interface = rest.split_whitespace().next().map(str::to_string);
                } else if let Some(rest) = line.strip_prefix("resource ") {
                    resource = rest.split_whitespace().next().map(str::to_string);
                } else if line == "}" {
                    resource = None;
                } else if let (Some(interface), Some((name, _))) =
                    (&interface, line.split_once(": func"))
                {
                    let name = match &resource {
                        Some(resource) => format!("[method]{resource}.{}", name.trim()),
                        None => name.trim().to_string(),
                    };
                    functions.push((interface.clone(), name));
                }
            }
        }
        functions
    }

    #[test]
    fn every_handler_function_has_exactly_one_capability() {
        let declared = declared();
        // The parse found the world (82 functions in 0.4.0), not a few.
        assert!(declared.len() > 77, "{declared:?}");
        for (interface, function) in &declared {
            let covering = CAPABILITIES
                .iter()
                .filter(|cap| {
                    cap.interface == interface && cap.functions.contains(&function.as_str())
                })
                .count();
            assert_eq!(covering, 1, "{interface}.{function}");
        }
        for cap in CAPABILITIES {
            for function in cap.functions {
                assert!(
                    declared
                        .iter()
                        .any(|(i, f)| i == cap.interface && f == function),
                    "{} names {}.{function}, which wit/ does not declare",
                    cap.name,
                    cap.interface
                );
            }
        }
    }

    #[test]
    fn grants_parse_and_unknown_ones_are_named() {
        assert_eq!(
            parse(" log.read, metadata.read ,").map(|set| set.into_iter().collect::<Vec<_>>()),
            Ok(vec!["log.read", "metadata.read"])
        );
        assert_eq!(parse(""), Ok(BTreeSet::new()));
        let error = parse("log.read,log.write").expect_err("log.write is unknown");
        assert!(
            error.contains("\"log.write\"") && error.contains("log.append"),
            "{error}"
        );
    }
}
