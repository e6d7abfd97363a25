//! Kafka's topic-name rule (`Topic.validate`), in one place: at most 249
//! ASCII letters, digits, `.`, `_` and `-`, and not `.` or `..`.
//!
//! Two layers check it: topic administration, which answers clients with
//! Kafka's messages, and the log, for which a valid name is also a safe
//! directory name. Each words its own error; the rule is this one.

/// Kafka's limit on topic name length.
pub const MAX_LENGTH: usize = 249;

/// Which part of the rule a name breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    Empty,
    /// `.` or `..`.
    Dots,
    TooLong,
    /// The first character outside `[a-zA-Z0-9._-]`.
    Character(char),
}

/// Checks `name` against the rule, in Kafka's order.
pub fn check(name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Err(Invalid::Empty);
    }
    if name == "." || name == ".." {
        return Err(Invalid::Dots);
    }
    if name.len() > MAX_LENGTH {
        return Err(Invalid::TooLong);
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(Invalid::Character(c)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_kafkas() {
        assert_eq!(check("orders.v1_x-y"), Ok(()));
        assert_eq!(check(&"x".repeat(249)), Ok(()));
        assert_eq!(check(""), Err(Invalid::Empty));
        assert_eq!(check(".."), Err(Invalid::Dots));
        assert_eq!(check(&"x".repeat(250)), Err(Invalid::TooLong));
        assert_eq!(check("a/b"), Err(Invalid::Character('/')));
        assert_eq!(check("é"), Err(Invalid::Character('é')));
    }
}
