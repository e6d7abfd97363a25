//! The five states of a classic group and the transitions Kafka allows
//! between them (`GroupState.validPreviousStates`). A transition that is not
//! allowed is a coordinator bug: it is refused and logged, never a panic.

/// Where a group is in its rebalance cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; offsets may still be committed (simple consumers, admin).
    Empty,
    /// Waiting for every known member to (re)join.
    PreparingRebalance,
    /// Every member joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// The assignment was handed out; members heartbeat.
    Stable,
    /// The group was removed; a caller still holding it must retry.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state, as DescribeGroups and ListGroups report it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether a group may move from `from` to `self`.
    pub fn allowed_from(self, from: GroupState) -> bool {
        use GroupState::*;
        match self {
            Empty => from == PreparingRebalance,
            PreparingRebalance => matches!(from, Stable | CompletingRebalance | Empty),
            CompletingRebalance => from == PreparingRebalance,
            Stable => from == CompletingRebalance,
            Dead => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState::*;

    #[test]
    fn transitions_follow_kafka() {
        assert!(PreparingRebalance.allowed_from(Empty));
        assert!(PreparingRebalance.allowed_from(Stable));
        assert!(PreparingRebalance.allowed_from(CompletingRebalance));
        assert!(!PreparingRebalance.allowed_from(PreparingRebalance));
        assert!(CompletingRebalance.allowed_from(PreparingRebalance));
        assert!(!CompletingRebalance.allowed_from(Stable));
        assert!(Stable.allowed_from(CompletingRebalance));
        assert!(!Stable.allowed_from(PreparingRebalance));
        assert!(Empty.allowed_from(PreparingRebalance));
        assert!(!Empty.allowed_from(Stable));
        assert!(Dead.allowed_from(Stable) && Dead.allowed_from(Empty));
        assert_eq!(CompletingRebalance.name(), "CompletingRebalance");
    }
}
