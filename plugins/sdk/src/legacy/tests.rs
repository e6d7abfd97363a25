use super::*;

/// OffsetCommit's request up to v2.
#[rustfmt::skip]
const REQUEST: &[Field] = &[
    all("group_id", Ty::String),
    since(1, "generation_id", Ty::Int32).with_default(-1), since(1, "member_id", Ty::String),
    Field::new("retention_time_ms", Ty::Int64, (2, 4)).with_default(-1),
    all("topics", Ty::Structs(&[all("name", Ty::String), all("partitions", Ty::Structs(&[
        all("partition_index", Ty::Int32), all("committed_offset", Ty::Int64),
        Field::new("commit_timestamp", Ty::Int64, (1, 1)).with_default(-1),
        all("committed_metadata", Ty::String),
    ]))])),
];

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Group "g", topic "t", partition 3 at offset 7 with metadata "m", in
/// `version` (0, 1 with timestamp 5, or 2 with generation 9 and member "x").
fn request(version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, "g");
    if version >= 1 {
        out.extend_from_slice(&(if version == 1 { -1i32 } else { 9 }).to_be_bytes());
        string(&mut out, if version == 1 { "" } else { "x" });
    }
    if version == 2 {
        out.extend_from_slice(&(-1i64).to_be_bytes());
    }
    out.extend_from_slice(&1i32.to_be_bytes());
    string(&mut out, "t");
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&3i32.to_be_bytes());
    out.extend_from_slice(&7i64.to_be_bytes());
    if version == 1 {
        out.extend_from_slice(&5i64.to_be_bytes());
    }
    string(&mut out, "m");
    out
}

#[test]
fn fields_are_added_with_defaults_and_dropped() {
    // v0 carries no generation, member or retention: the defaults.
    let mut v2 = Vec::new();
    string(&mut v2, "g");
    v2.extend_from_slice(&(-1i32).to_be_bytes());
    string(&mut v2, "");
    v2.extend_from_slice(&(-1i64).to_be_bytes());
    v2.extend_from_slice(&request(0)[3..]);
    assert_eq!(rewrite(REQUEST, &request(0), 0, 2).unwrap(), v2);
    // v1's commit timestamp is dropped; back from v2 it is the default.
    assert_eq!(rewrite(REQUEST, &request(1), 1, 2).unwrap(), v2);
    let mut v1 = request(1);
    let timestamp = v1.len() - 3 - 8;
    v1[timestamp..timestamp + 8].copy_from_slice(&(-1i64).to_be_bytes());
    assert_eq!(rewrite(REQUEST, &v2, 2, 1).unwrap(), v1);
    assert_eq!(rewrite(REQUEST, &v2, 2, 0).unwrap(), request(0));
}

#[test]
fn derived_fields_read_the_struct_so_far() {
    const CONFIG: &[Field] = &[
        since(1, "config_source", Ty::Int8),
        Field::new("is_default", Ty::Bool, (0, 0)).derived(|read, out| {
            out.push(u8::from(scalar(read, "config_source") == Some(5)));
        }),
    ];
    assert_eq!(rewrite(CONFIG, &[5], 1, 0).unwrap(), [1]);
    assert_eq!(rewrite(CONFIG, &[4], 1, 0).unwrap(), [0]);
}

#[test]
fn hostile_bodies_are_malformed() {
    let body = request(0);
    for len in 0..body.len() {
        assert!(
            matches!(
                rewrite(REQUEST, &body[..len], 0, 2),
                Err(DecodeError::Malformed(_))
            ),
            "truncated at {len}"
        );
    }
    let mut huge = body.clone();
    huge[3..7].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        rewrite(REQUEST, &huge, 0, 2),
        Err(DecodeError::Malformed(_))
    ));
    let mut trailing = body;
    trailing.push(0);
    assert!(rewrite(REQUEST, &trailing, 0, 2).is_err());
}

/// Mutated old bodies (as the bounded decoder's own test mutates) never
/// panic the rewriting, and what it accepts decodes within bounds.
#[test]
fn seeded_mutations_never_trap() {
    use crate::bounded::{decode_bounded, tests::mutate};
    use kafka_protocol::messages::OffsetCommitRequest;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    let mut rng = SmallRng::seed_from_u64(0x6f6c_6476);
    let (mut rewritten, mut decoded) = (0, 0);
    for version in [0, 1] {
        let body = request(version);
        for _ in 0..2000 {
            let input = mutate(&mut rng, &body);
            if let Ok(v2) = rewrite(REQUEST, &input, version, 2) {
                rewritten += 1;
                let request = decode_bounded::<OffsetCommitRequest>(&v2, 2, false, DECODE_BUDGET);
                decoded += usize::from(request.is_ok());
            }
        }
    }
    assert!(
        rewritten > 0 && decoded > 0,
        "{rewritten} rewritten, {decoded} decoded"
    );
}
