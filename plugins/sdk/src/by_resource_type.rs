//! Kafka's default `Authorizer.authorizeByResourceType`, for authorizer
//! modules written in Rust: may a principal perform an operation on at
//! least one resource of a type, including resources that do not exist
//! yet? An idempotent producer asks it (WRITE on any topic) before it
//! knows which topics it will write.
//!
//! The rule reads ACL patterns alone, never resource names:
//! 1. If the authorizer allows the operation on a resource literally named
//!    `hardcode` (a super user, `allow.everyone.if.no.acl.found` with no ACL
//!    on that name), it is allowed.
//! 2. Of the bindings of the type whose host is the client's or `*`, whose
//!    principal is the request's or `User:*` and whose operation is the
//!    asked one or ALL (no implication here): a LITERAL `*` DENY denies,
//!    a LITERAL `*` ALLOW allows.
//! 3. Otherwise some ALLOW pattern must survive the DENYs: a LITERAL ALLOW
//!    is cancelled by a LITERAL DENY of the same name, and any ALLOW by a
//!    PREFIXED DENY that is a prefix of its name. A LITERAL DENY never
//!    cancels a PREFIXED ALLOW (other names under the prefix remain).
//!
//! The authorizer crates generate their own bindings of the
//! `kafka-authorizer` world, so this module speaks plain data: the crate
//! maps its ACL bindings to [`Binding`] and passes its own answer for
//! rule 1.

use std::collections::HashSet;

/// The resource name Kafka's default asks the authorizer about first.
pub const HARDCODED_NAME: &str = "hardcode";
/// Kafka's wildcard resource name (LITERAL) and host.
const WILDCARD: &str = "*";
/// Kafka's wildcard principal.
const WILDCARD_PRINCIPAL: &str = "User:*";

/// One ACL binding of the asked resource type, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The ACL's principal, e.g. `User:alice` or `User:*`.
    pub principal: &'a str,
    /// The ACL's host: an IP or `*`.
    pub host: &'a str,
    /// Is the ACL's operation the asked one or ALL?
    pub operation_matches: bool,
    /// ALLOW (else DENY).
    pub allow: bool,
    /// A PREFIXED pattern (else LITERAL).
    pub prefixed: bool,
    /// The pattern's resource name.
    pub name: &'a str,
}

/// Kafka's default `authorizeByResourceType` for `principal` connected
/// from `host`. `hardcoded_allowed` answers rule 1: the authorizer's own
/// decision for the operation on the resource [`HARDCODED_NAME`] (LITERAL)
/// of the type; it is asked first and only once.
pub fn allowed<'a>(
    principal: &str,
    host: &str,
    hardcoded_allowed: impl FnOnce() -> bool,
    bindings: impl IntoIterator<Item = Binding<'a>>,
) -> bool {
    if hardcoded_allowed() {
        return true;
    }
    let mut deny_literal = HashSet::new();
    let mut deny_prefixed = HashSet::new();
    let mut allow_literal = HashSet::new();
    let mut allow_prefixed = HashSet::new();
    let mut wildcard_allow = false;
    let applies = |b: &Binding| {
        (b.host == host || b.host == WILDCARD)
            && (b.principal == principal || b.principal == WILDCARD_PRINCIPAL)
            && b.operation_matches
    };
    for binding in bindings.into_iter().filter(applies) {
        match (binding.allow, binding.prefixed) {
            (false, false) if binding.name == WILDCARD => return false,
            (false, false) => {
                deny_literal.insert(binding.name);
            }
            (false, true) => {
                deny_prefixed.insert(binding.name);
            }
            (true, false) if binding.name == WILDCARD => wildcard_allow = true,
            (true, false) => {
                allow_literal.insert(binding.name);
            }
            (true, true) => {
                allow_prefixed.insert(binding.name);
            }
        }
    }
    if wildcard_allow {
        return true;
    }
    // Does a PREFIXED DENY cover `name` (is one a non-empty prefix of it)?
    let dominated = |name: &str| {
        name.char_indices()
            .map(|(i, c)| &name[..i + c.len_utf8()])
            .any(|prefix| deny_prefixed.contains(prefix))
    };
    allow_literal
        .iter()
        .filter(|name| !deny_literal.contains(*name))
        .chain(allow_prefixed.iter())
        .any(|name| !dominated(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "User:alice";
    const HOST: &str = "10.0.0.1";

    fn binding(allow: bool, prefixed: bool, name: &str) -> Binding<'_> {
        Binding {
            principal: ALICE,
            host: "*",
            operation_matches: true,
            allow,
            prefixed,
            name,
        }
    }

    fn check(bindings: &[Binding]) -> bool {
        allowed(ALICE, HOST, || false, bindings.iter().copied())
    }

    fn allow(name: &str) -> Binding<'_> {
        binding(true, false, name)
    }

    fn allow_prefix(name: &str) -> Binding<'_> {
        binding(true, true, name)
    }

    fn deny(name: &str) -> Binding<'_> {
        binding(false, false, name)
    }

    fn deny_prefix(name: &str) -> Binding<'_> {
        binding(false, true, name)
    }

    #[test]
    fn the_hardcoded_answer_wins_and_is_asked_first() {
        assert!(allowed(ALICE, HOST, || true, [deny("*")]));
        assert!(!check(&[deny("*")]));
        assert!(!check(&[]));
    }

    #[test]
    fn any_allow_pattern_counts_whether_or_not_a_topic_exists() {
        assert!(check(&[allow("not-yet-created")]));
        assert!(check(&[allow_prefix("orders.")]));
        assert!(check(&[allow("*")]));
    }

    #[test]
    fn literal_and_prefixed_denies_cancel_what_they_cover() {
        assert!(!check(&[allow("t"), deny("t")]));
        // A LITERAL DENY does not cancel a PREFIXED ALLOW of the same name.
        assert!(check(&[allow_prefix("t"), deny("t")]));
        assert!(check(&[allow("t"), deny("u")]));
        assert!(!check(&[allow("orders.eu"), deny_prefix("orders")]));
        assert!(!check(&[allow_prefix("orders."), deny_prefix("orders.")]));
        // A longer DENY prefix does not cover a shorter ALLOW prefix.
        assert!(check(&[allow_prefix("orders"), deny_prefix("orders.eu")]));
        // One surviving ALLOW is enough.
        let some_survive = [allow("orders.eu"), allow("payments"), deny_prefix("orders")];
        assert!(check(&some_survive));
        // A LITERAL `*` DENY denies whatever else is allowed; a PREFIXED
        // `*` is an ordinary prefix.
        assert!(!check(&[allow("*"), deny("*")]));
        assert!(!check(&[allow_prefix("a"), deny("*")]));
        assert!(check(&[allow("a"), deny_prefix("*")]));
    }

    #[test]
    fn only_bindings_for_the_principal_host_and_operation_count() {
        let allow = allow("t");
        let bob = Binding {
            principal: "User:bob",
            ..allow
        };
        let anyone = Binding {
            principal: "User:*",
            ..allow
        };
        let elsewhere = Binding {
            host: "10.0.0.2",
            ..allow
        };
        let here = Binding {
            host: HOST,
            ..allow
        };
        let other_operation = Binding {
            operation_matches: false,
            ..allow
        };
        assert!(!check(&[bob]));
        assert!(check(&[anyone]));
        assert!(!check(&[elsewhere]));
        assert!(check(&[here]));
        assert!(!check(&[other_operation]));
        // A DENY for someone else does not cancel alice's ALLOW.
        let bob_denied = Binding {
            principal: "User:bob",
            ..deny_prefix("t")
        };
        assert!(check(&[allow, bob_denied]));
    }
}
