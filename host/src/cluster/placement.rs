//! Replica placement for CreateTopics and CreatePartitions: which brokers
//! hold each new partition, and in what order (the first is the preferred
//! leader).
//!
//! Without an explicit assignment, Kafka's rack-unaware
//! `AdminUtils.assignReplicasToBrokers`: over the active brokers sorted by
//! id, partition `p`'s first replica is broker `(p + start) % n`, so leaders
//! go round the brokers; the followers are shifted by a per-round amount
//! that grows each time the partitions wrap around the brokers, so that
//! followers spread as evenly as leaders. `start` and `shift` are random in
//! Kafka, so that many small topics do not all lead on the first broker;
//! here the proposer draws them ([`Seed`]) and placement is a pure
//! function, the same on every node and in tests.
//!
//! An explicit `replica_assignment` is checked with Kafka's rules and
//! messages (`ReplicationControlManager.validateManualPartitionAssignment`).

use crate::cluster::command::Refusal;
use crate::error_code::ErrorCode;
use crate::metadata::assignment;

/// The random part of a placement, drawn by the proposer (Kafka's
/// `fixedStartIndex` and the initial `nextReplicaShift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seed {
    pub start_index: u32,
    pub replica_shift: u32,
}

impl Seed {
    /// A seed from random bytes (the proposer's `getrandom`).
    pub fn from_random(bytes: [u8; 8]) -> Self {
        let [a, b, c, d, e, f, g, h] = bytes;
        Self {
            start_index: u32::from_le_bytes([a, b, c, d]),
            replica_shift: u32::from_le_bytes([e, f, g, h]),
        }
    }
}

fn refusal(code: ErrorCode, message: String) -> Refusal {
    Refusal::new(code, message)
}

/// Kafka's message when there are fewer active brokers than replicas.
fn not_enough_brokers(replication_factor: usize, brokers: usize) -> Refusal {
    refusal(
        ErrorCode::InvalidReplicationFactor,
        format!(
            "Unable to replicate the partition {replication_factor} time(s): The target \
             replication factor of {replication_factor} cannot be reached because only \
             {brokers} broker(s) are registered."
        ),
    )
}

/// Replicas for `count` new partitions numbered from `first_partition`,
/// `replication_factor` each, over `brokers` (the active ones; sorted here).
/// INVALID_REPLICATION_FACTOR when there are fewer brokers than replicas.
pub fn assign(
    brokers: &[i32],
    count: i32,
    first_partition: i32,
    replication_factor: i16,
    seed: Seed,
) -> Result<Vec<Vec<i32>>, Refusal> {
    let Ok(factor) = usize::try_from(replication_factor) else {
        return Err(invalid_factor());
    };
    if factor == 0 {
        return Err(invalid_factor());
    }
    let mut brokers = brokers.to_vec();
    brokers.sort_unstable();
    brokers.dedup();
    let n = brokers.len();
    if factor > n {
        return Err(not_enough_brokers(factor, n));
    }
    let count = usize::try_from(count).map_err(|_| {
        refusal(
            ErrorCode::InvalidPartitions,
            "Number of partitions was set to an invalid non-positive value.".to_string(),
        )
    })?;
    let first = usize::try_from(first_partition.max(0)).unwrap_or(0);
    let start = seed.start_index as usize % n;
    let mut shift = seed.replica_shift as usize % n;
    let mut assignments = Vec::with_capacity(count);
    for partition in first..first.saturating_add(count) {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        let leader_index = (partition + start) % n;
        let mut replicas = Vec::with_capacity(factor);
        replicas.push(brokers[leader_index]);
        for j in 0..factor - 1 {
            // Kafka's replicaIndex: a follower offset of 1..n-1, never 0
            // (n > 1 here: factor > 1 needs at least 2 brokers).
            let offset = 1 + (shift + j) % (n - 1);
            replicas.push(brokers[(leader_index + offset) % n]);
        }
        assignments.push(replicas);
    }
    Ok(assignments)
}

fn invalid_factor() -> Refusal {
    refusal(
        ErrorCode::InvalidReplicationFactor,
        "Replication factor must be larger than 0, or -1 to use the default value.".to_string(),
    )
}

/// Kafka's checks of an explicit assignment
/// ([`assignment::check_replicas`] for each partition): every partition
/// has replicas, each a registered broker (`registered`), none twice, and
/// all the same number (`replication_factor` if given: CreatePartitions
/// keeps the topic's). INVALID_REPLICA_ASSIGNMENT with Kafka's messages.
pub fn validate_assignment(
    assignment: &[Vec<i32>],
    replication_factor: Option<usize>,
    registered: impl Fn(i32) -> bool,
) -> Result<(), Refusal> {
    let mut expected = replication_factor;
    for replicas in assignment {
        assignment::check_replicas(replicas, expected, &registered)
            .map_err(|message| refusal(ErrorCode::InvalidReplicaAssignment, message))?;
        expected = Some(replicas.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seed(start_index: u32, replica_shift: u32) -> Seed {
        Seed {
            start_index,
            replica_shift,
        }
    }

    fn count_by_broker<'a>(ids: impl Iterator<Item = &'a i32>) -> BTreeMap<i32, usize> {
        let mut counts = BTreeMap::new();
        for id in ids {
            *counts.entry(*id).or_default() += 1;
        }
        counts
    }

    #[test]
    fn three_brokers_rf3_six_partitions_each_leads_two() {
        for start in 0..3 {
            for shift in 0..3 {
                let placed = assign(&[3, 1, 2], 6, 0, 3, seed(start, shift)).unwrap();
                assert_eq!(placed.len(), 6);
                let leaders = count_by_broker(placed.iter().map(|r| &r[0]));
                assert_eq!(leaders, BTreeMap::from([(1, 2), (2, 2), (3, 2)]));
                for replicas in &placed {
                    let mut sorted = replicas.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, [1, 2, 3], "{placed:?}");
                }
            }
        }
    }

    #[test]
    fn kafkas_layout() {
        // AdminUtilsTest's rack-unaware case: 5 brokers, 10 partitions,
        // RF 3, fixed start index 0 (start and shift both 0).
        let placed = assign(&[0, 1, 2, 3, 4], 10, 0, 3, seed(0, 0)).unwrap();
        let expected = [
            [0, 1, 2],
            [1, 2, 3],
            [2, 3, 4],
            [3, 4, 0],
            [4, 0, 1],
            [0, 2, 3],
            [1, 3, 4],
            [2, 4, 0],
            [3, 0, 1],
            [4, 1, 2],
        ];
        assert_eq!(placed, expected.map(|r| r.to_vec()).to_vec());
    }

    #[test]
    fn followers_spread_evenly_too() {
        let placed = assign(&[1, 2, 3, 4], 12, 0, 2, seed(5, 7)).unwrap();
        let leaders = count_by_broker(placed.iter().map(|r| &r[0]));
        assert!(leaders.values().all(|n| *n == 3), "{leaders:?}");
        let followers = count_by_broker(placed.iter().map(|r| &r[1]));
        assert!(followers.values().all(|n| *n == 3), "{followers:?}");
        assert!(placed.iter().all(|r| r[0] != r[1]));
    }

    #[test]
    fn new_partitions_continue_the_rotation() {
        let all = assign(&[1, 2, 3], 6, 0, 2, seed(1, 2)).unwrap();
        let tail = assign(&[1, 2, 3], 3, 3, 2, seed(1, 2)).unwrap();
        assert_eq!(tail, all[3..]);
    }

    #[test]
    fn deterministic_given_the_seed() {
        let a = assign(&[1, 2, 3, 4, 5], 20, 0, 3, seed(9, 4)).unwrap();
        let b = assign(&[5, 4, 3, 2, 1], 20, 0, 3, seed(9, 4)).unwrap();
        assert_eq!(a, b);
        let other = assign(&[1, 2, 3, 4, 5], 20, 0, 3, seed(10, 4)).unwrap();
        assert_ne!(a, other);
        assert_eq!(Seed::from_random([1, 0, 0, 0, 2, 0, 0, 0]), seed(1, 2));
    }

    #[test]
    fn replication_factor_beyond_the_brokers() {
        let refused = assign(&[1, 2], 1, 0, 3, Seed::default()).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidReplicationFactor);
        assert!(
            refused.message.contains("only 2 broker(s) are registered"),
            "{}",
            refused.message
        );
        let none = assign(&[], 1, 0, 1, Seed::default()).unwrap_err();
        assert_eq!(none.code, ErrorCode::InvalidReplicationFactor);
        for factor in [0, -1] {
            let refused = assign(&[1], 1, 0, factor, Seed::default()).unwrap_err();
            assert_eq!(refused.code, ErrorCode::InvalidReplicationFactor);
        }
        assert_eq!(
            assign(&[1], 1, 0, 1, Seed::default()).unwrap(),
            vec![vec![1]]
        );
        let negative = assign(&[1], -1, 0, 1, Seed::default()).unwrap_err();
        assert_eq!(negative.code, ErrorCode::InvalidPartitions);
    }

    #[test]
    fn explicit_assignments_follow_kafkas_rules() {
        let registered = |id: i32| (1..=3).contains(&id);
        let check = |assignment: &[Vec<i32>], factor| {
            validate_assignment(assignment, factor, registered).map_err(|r| {
                assert_eq!(r.code, ErrorCode::InvalidReplicaAssignment);
                r.message
            })
        };
        assert_eq!(check(&[vec![1, 2], vec![3, 1]], None), Ok(()));
        assert_eq!(check(&[vec![2, 3]], Some(2)), Ok(()));
        let empty = check(&[vec![]], None).unwrap_err();
        assert!(empty.contains("empty replica list"), "{empty}");
        let unknown = check(&[vec![1, 7]], None).unwrap_err();
        assert!(
            unknown.contains("broker 7, but no such broker"),
            "{unknown}"
        );
        let twice = check(&[vec![2, 1, 2]], None).unwrap_err();
        assert!(twice.contains("broker 2 more than once"), "{twice}");
        let uneven = check(&[vec![1, 2], vec![3]], None).unwrap_err();
        assert!(uneven.contains("partition with 1 replica(s)"), "{uneven}");
        let topic_factor = check(&[vec![1, 2, 3]], Some(2)).unwrap_err();
        assert!(
            topic_factor.contains("which have 2 replica(s)"),
            "{topic_factor}"
        );
    }
}
