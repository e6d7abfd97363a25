//! Manual replica assignments (CreateTopics' and CreatePartitions'
//! `assignments`) checked with Kafka's rules, order and messages
//! (`ReplicationControlManager.createTopic` and
//! `validateManualPartitionAssignment`). The single node's topic manager
//! and the cluster's placement both check with these, so a bad assignment
//! is answered alike whichever decides it. Every refusal here is
//! INVALID_REPLICA_ASSIGNMENT; the callers attach the code.

use std::collections::BTreeMap;

/// One partition's replicas: not empty, each a registered broker
/// (`registered`), none twice, and as many as `expected` (the previous
/// partitions', or the topic's replication factor) when given. Kafka walks
/// the sorted ids once, so an unregistered id is named before a later
/// duplicate and a duplicate before a later unregistered id.
pub fn check_replicas(
    replicas: &[i32],
    expected: Option<usize>,
    registered: &dyn Fn(i32) -> bool,
) -> Result<(), String> {
    if replicas.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted {
        if !registered(id) {
            return Err(format!(
                "The manual partition assignment includes broker {id}, but no such broker is \
                 registered."
            ));
        }
        if previous == Some(id) {
            return Err(format!(
                "The manual partition assignment includes the broker {id} more than once."
            ));
        }
        previous = Some(id);
    }
    match expected {
        Some(factor) if factor != replicas.len() => Err(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this \
             is not consistent with previous partitions, which have {factor} replica(s).",
            replicas.len()
        )),
        _ => Ok(()),
    }
}

/// A CreateTopics assignment as the request names it, (partition,
/// replicas) in request order, checked in that order: no partition twice,
/// each partition's replicas as [`check_replicas`] says with the count of
/// the first, then partitions 0..n without a gap. The replicas of
/// partitions 0, 1, ..., n-1.
pub fn in_partition_order(
    entries: &[(i32, Vec<i32>)],
    registered: &dyn Fn(i32) -> bool,
) -> Result<Vec<Vec<i32>>, String> {
    let mut partitions: BTreeMap<i32, &Vec<i32>> = BTreeMap::new();
    let mut expected = None;
    for (partition, replicas) in entries {
        if partitions.contains_key(partition) {
            return Err(format!(
                "Found multiple manual partition assignments for partition {partition}"
            ));
        }
        check_replicas(replicas, expected, registered)?;
        expected = Some(replicas.len());
        partitions.insert(*partition, replicas);
    }
    let count = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
    if !partitions.keys().copied().eq(0..count) {
        return Err("partitions should be a consecutive 0-based integer sequence".into());
    }
    Ok(partitions.into_values().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(id: i32) -> bool {
        (1..=3).contains(&id)
    }

    fn order(entries: &[(i32, &[i32])]) -> Result<Vec<Vec<i32>>, String> {
        let entries: Vec<(i32, Vec<i32>)> = entries.iter().map(|(p, r)| (*p, r.to_vec())).collect();
        in_partition_order(&entries, &registered)
    }

    #[test]
    fn replicas_follow_kafkas_rules() {
        assert_eq!(check_replicas(&[2, 1], None, &registered), Ok(()));
        assert_eq!(check_replicas(&[2, 3], Some(2), &registered), Ok(()));
        let refused = |replicas: &[i32], expected| {
            check_replicas(replicas, expected, &registered).unwrap_err()
        };
        assert!(refused(&[], None).contains("empty replica list"));
        assert!(refused(&[1, 7], None).contains("broker 7, but no such broker"));
        assert!(refused(&[2, 1, 2], None).contains("broker 2 more than once"));
        // One walk over the sorted ids: whichever comes first is named.
        assert!(refused(&[1, 1, 7], None).contains("broker 1 more than once"));
        assert!(refused(&[0, 2, 2], None).contains("broker 0, but no such"));
        let uneven = refused(&[1, 2, 3], Some(2));
        assert!(
            uneven.contains("a partition with 3 replica(s)") && uneven.contains("which have 2"),
            "{uneven}"
        );
    }

    #[test]
    fn create_topics_entries_come_back_in_partition_order() {
        assert_eq!(
            order(&[(1, &[2, 1]), (0, &[1, 2]), (2, &[3, 1])]),
            Ok(vec![vec![1, 2], vec![2, 1], vec![3, 1]])
        );
        let refused = |entries: &[(i32, &[i32])]| order(entries).unwrap_err();
        assert!(refused(&[(0, &[1]), (0, &[2])]).contains("multiple manual partition"));
        let gap = "consecutive 0-based";
        assert!(refused(&[(0, &[1]), (2, &[1])]).contains(gap));
        assert!(refused(&[(1, &[1])]).contains(gap));
        assert!(refused(&[(-1, &[1]), (0, &[1])]).contains(gap));
        assert!(refused(&[(0, &[1]), (1, &[1, 2])]).contains("not consistent"));
        // In the request's order: partition 1's unknown broker is found
        // before the gap it leaves.
        assert!(refused(&[(1, &[9])]).contains("broker 9"));
        assert_eq!(order(&[]), Ok(Vec::new()));
    }
}
