//! Server-side assignors of the consumer group protocol (KIP-848): the
//! coordinator, not a client, decides who consumes what.
//!
//! - `uniform` (Kafka's default): every partition of the subscribed topics
//!   goes to one member subscribed to its topic, counts as even as the
//!   subscriptions allow, and a partition stays with its current owner
//!   whenever balance permits (sticky), so a rebalance moves few
//!   partitions.
//! - `range`: per topic, the members subscribed to it (in member id order)
//!   get contiguous ranges of partitions, the first ones one extra when the
//!   count does not divide evenly; co-partitioned topics line up.

use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic id.
pub type Assignment = BTreeMap<u128, BTreeSet<i32>>;

/// What an assignor sees of a member.
pub struct MemberSpec<'a> {
    pub member_id: &'a str,
    /// Topic ids the member subscribes to (existing topics only).
    pub topics: BTreeSet<u128>,
    /// The member's current target, for stickiness.
    pub current: Option<&'a Assignment>,
}

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// The assignors this coordinator offers, the default first.
pub const ASSIGNORS: &[&str] = &[UNIFORM, RANGE];

/// Runs the named assignor over `members`; `partitions` gives each
/// subscribed topic's partition count. Returns a target per member id.
pub fn assign(
    assignor: &str,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<u128, i32>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        RANGE => range(members, partitions),
        _ => uniform(members, partitions),
    }
}

fn range(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<u128, i32>,
) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    for (&topic, &count) in partitions {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(&topic))
            .map(|m| m.member_id)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        subscribers.sort_unstable();
        let n = subscribers.len() as i32;
        let (base, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribers.iter().enumerate() {
            let take = base + i32::from((i as i32) < extra);
            if take > 0 {
                let owned = result.entry(member.to_string()).or_default();
                owned.entry(topic).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    result
}

fn uniform(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<u128, i32>,
) -> BTreeMap<String, Assignment> {
    let mut owner: BTreeMap<(u128, i32), usize> = BTreeMap::new();
    let mut counts = vec![0usize; members.len()];
    let all: Vec<(u128, i32)> = partitions
        .iter()
        .flat_map(|(&topic, &count)| (0..count.max(0)).map(move |p| (topic, p)))
        .filter(|(topic, _)| members.iter().any(|m| m.topics.contains(topic)))
        .collect();
    if members.is_empty() {
        return BTreeMap::new();
    }
    // The most any member should hold when subscriptions are alike.
    let quota = all.len().div_ceil(members.len());
    // Sticky pass: current owners keep what they may, up to the quota.
    for (i, member) in members.iter().enumerate() {
        let Some(current) = member.current else {
            continue;
        };
        for (&topic, owned) in current {
            if !member.topics.contains(&topic) {
                continue;
            }
            let count = partitions.get(&topic).copied().unwrap_or(0);
            for &p in owned {
                if p < count && counts[i] < quota && !owner.contains_key(&(topic, p)) {
                    owner.insert((topic, p), i);
                    counts[i] += 1;
                }
            }
        }
    }
    // The rest go to the least loaded eligible member.
    for &(topic, p) in &all {
        if owner.contains_key(&(topic, p)) {
            continue;
        }
        let least = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.topics.contains(&topic))
            .min_by_key(|(i, m)| (counts[*i], m.member_id));
        if let Some((i, _)) = least {
            owner.insert((topic, p), i);
            counts[i] += 1;
        }
    }
    // Balance: move partitions from the most to the least loaded eligible
    // member while that narrows the gap (bounded: each move does).
    for _ in 0..all.len() {
        let mut moved = false;
        for (&(topic, p), from) in owner.clone().iter() {
            let target = members
                .iter()
                .enumerate()
                .filter(|(i, m)| *i != *from && m.topics.contains(&topic))
                .min_by_key(|(i, m)| (counts[*i], m.member_id));
            if let Some((to, _)) = target {
                if counts[*from] > counts[to] + 1 {
                    owner.insert((topic, p), to);
                    counts[*from] -= 1;
                    counts[to] += 1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut result: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    for ((topic, p), i) in owner {
        if let Some(entry) = result.get_mut(members[i].member_id) {
            entry.entry(topic).or_default().insert(p);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(id: &'a str, topics: &[u128], current: Option<&'a Assignment>) -> MemberSpec<'a> {
        MemberSpec {
            member_id: id,
            topics: topics.iter().copied().collect(),
            current,
        }
    }

    fn total(assignment: &Assignment) -> usize {
        assignment.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let members = [spec("a", &[1, 2], None), spec("b", &[1, 2], None)];
        let partitions = BTreeMap::from([(1, 3), (2, 2)]);
        let result = assign(RANGE, &members, &partitions);
        assert_eq!(result["a"][&1], BTreeSet::from([0, 1]));
        assert_eq!(result["b"][&1], BTreeSet::from([2]));
        assert_eq!(result["a"][&2], BTreeSet::from([0]));
        assert_eq!(result["b"][&2], BTreeSet::from([1]));
    }

    #[test]
    fn uniform_balances_and_sticks() {
        let partitions = BTreeMap::from([(1, 6)]);
        let first = assign(
            UNIFORM,
            &[spec("a", &[1], None), spec("b", &[1], None)],
            &partitions,
        );
        assert_eq!((total(&first["a"]), total(&first["b"])), (3, 3));
        // A third member arrives: a and b each give up one, keep the rest.
        let members = [
            spec("a", &[1], Some(&first["a"])),
            spec("b", &[1], Some(&first["b"])),
            spec("c", &[1], None),
        ];
        let second = assign(UNIFORM, &members, &partitions);
        for id in ["a", "b", "c"] {
            assert_eq!(total(&second[id]), 2, "{id}: {second:?}");
        }
        for id in ["a", "b"] {
            assert!(
                second[id][&1].is_subset(&first[id][&1]),
                "{id} kept its partitions"
            );
        }
    }

    #[test]
    fn uniform_respects_subscriptions() {
        let partitions = BTreeMap::from([(1, 4), (2, 2)]);
        let members = [spec("a", &[1], None), spec("b", &[1, 2], None)];
        let result = assign(UNIFORM, &members, &partitions);
        assert!(!result["a"].contains_key(&2));
        assert_eq!(total(&result["a"]) + total(&result["b"]), 6);
        assert_eq!((total(&result["a"]), total(&result["b"])), (3, 3));
    }
}
