//! v0 of DescribeAcls, CreateAcls and DeleteAcls (Kafka 4 removed it,
//! KIP-896): v1 without the resource pattern type, which v0 has as
//! LITERAL (3). A v0 filter so matches literal bindings only, and what a v0
//! answer lists is literal, as in Kafka 3.9. The rest is v1's.

use super::{Field, Legacy, Ty, LATEST};

/// The pattern type v0 means: LITERAL.
const LITERAL: i64 = 3;

const fn pattern_type(name: &'static str) -> Field {
    Field::new(name, Ty::Int8, (1, LATEST)).with_default(LITERAL)
}

const fn string(name: &'static str) -> Field {
    Field::new(name, Ty::String, (0, LATEST))
}

const fn int8(name: &'static str) -> Field {
    Field::new(name, Ty::Int8, (0, LATEST))
}

const fn array(name: &'static str, fields: &'static [Field]) -> Field {
    Field::new(name, Ty::Structs(fields), (0, LATEST))
}

/// A binding, or a filter of bindings, field by field with the names the
/// messages give them.
const fn binding(type_: &'static str, name: &'static str, pattern: &'static str) -> [Field; 7] {
    [
        int8(type_),
        string(name),
        pattern_type(pattern),
        string("principal"),
        string("host"),
        int8("operation"),
        int8("permission_type"),
    ]
}

const FILTER: [Field; 7] = binding(
    "resource_type_filter",
    "resource_name_filter",
    "pattern_type_filter",
);
const ERROR: [Field; 2] = [
    Field::new("error_code", Ty::Int16, (0, LATEST)),
    string("error_message"),
];

const DESCRIBED_ACL: &[Field] = &[
    string("principal"),
    string("host"),
    int8("operation"),
    int8("permission_type"),
];
const DESCRIBED_RESOURCE: &[Field] = &[
    int8("resource_type"),
    string("resource_name"),
    pattern_type("pattern_type"),
    array("acls", DESCRIBED_ACL),
];
const DESCRIBE_RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (0, LATEST)),
    ERROR[0],
    ERROR[1],
    array("resources", DESCRIBED_RESOURCE),
];

/// DescribeAcls v0 through v1.
pub const DESCRIBE: Legacy = Legacy::new(1, Some(&FILTER), Some(DESCRIBE_RESPONSE));

const CREATION: [Field; 7] = binding("resource_type", "resource_name", "resource_pattern_type");

/// CreateAcls v0 through v1 (its answer is v1's).
pub const CREATE: Legacy = Legacy::new(1, Some(&[array("creations", &CREATION)]), None);

const MATCHING_ACL: [Field; 9] = {
    let acl = binding("resource_type", "resource_name", "pattern_type");
    [
        ERROR[0], ERROR[1], acl[0], acl[1], acl[2], acl[3], acl[4], acl[5], acl[6],
    ]
};
const FILTER_RESULT: &[Field] = &[ERROR[0], ERROR[1], array("matching_acls", &MATCHING_ACL)];
const DELETE_RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (0, LATEST)),
    array("filter_results", FILTER_RESULT),
];

/// DeleteAcls v0 through v1.
pub const DELETE: Legacy =
    Legacy::new(1, Some(&[array("filters", &FILTER)]), Some(DELETE_RESPONSE));
