//! ListGroups (ApiKey 16): the groups of the cluster, as Kafka's
//! `KafkaApis.handleListGroupsRequest`.
//!
//! - Versions 0-5. v4 adds the states filter and each group's state, v5
//!   the types filter and each group's type (all groups here are
//!   "classic"). Filters compare case-insensitively; empty means all.
//! - DESCRIBE on the Cluster lists every group; without it, only the
//!   groups the principal may DESCRIBE are listed (asked in one batch).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error and no groups.

use gregor_sdk::authorize::{allowed_names, cluster_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, GroupOverview};
use gregor_sdk::kafka_protocol::messages::list_groups_response::ListedGroup;
use gregor_sdk::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{Handler, Reply, RequestContext};

struct ListGroups;

impl Handler for ListGroups {
    gregor_sdk::api!(ListGroupsRequest, 0..=5);

    fn handle(ctx: &RequestContext, request: &ListGroupsRequest) -> Reply<ListGroupsResponse> {
        let states: Vec<String> = request
            .states_filter
            .iter()
            .map(|s| s.to_string())
            .collect();
        let types: Vec<String> = request.types_filter.iter().map(|s| s.to_string()).collect();
        let mut listed = groups::list_groups(&states, &types);
        if !cluster_allowed(Operation::Describe) {
            let allowed = allowed_names(
                Operation::Describe,
                ResourceType::Group,
                listed.iter().map(|g| g.group_id.as_str()),
            );
            listed.retain(|g| allowed.contains(&g.group_id));
        }
        let listed = listed.into_iter().map(|g| listed_group(g, ctx.api_version));
        ListGroupsResponse::default()
            .with_groups(listed.collect())
            .into()
    }
}

fn listed_group(group: GroupOverview, version: i16) -> ListedGroup {
    let mut listed = ListedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.group_id)))
        .with_protocol_type(StrBytes::from_string(group.protocol_type));
    if version >= 4 {
        listed.group_state = StrBytes::from_string(group.state);
    }
    if version >= 5 {
        listed.group_type = StrBytes::from_string(group.group_type);
    }
    listed
}

gregor_sdk::export_handler!(ListGroups);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn group(id: &str) -> GroupOverview {
        GroupOverview {
            group_id: id.into(),
            protocol_type: "consumer".into(),
            state: "Stable".into(),
            group_type: "classic".into(),
        }
    }

    #[test]
    fn encodes_for_every_served_version() {
        let listed: Vec<ListGroupsResponse> = (0..=5)
            .map(|version| {
                ListGroupsResponse::default().with_groups(vec![listed_group(group("g"), version)])
            })
            .collect();
        assert_encodes_for_served_versions::<ListGroups>(&[ListGroupsRequest::default()], &listed);
    }

    /// Groups "a" and "b"; the principal may DESCRIBE "a" only, and the
    /// Cluster when `cluster`.
    struct Groups {
        cluster: bool,
    }

    impl FakeHost for Groups {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name == "a" || (self.cluster && action.resource_name == "kafka-cluster")
        }
        fn list_groups(&self, states: &[String], _: &[String]) -> Vec<GroupOverview> {
            assert!(states.is_empty() || states == ["Stable"]);
            vec![group("a"), group("b")]
        }
    }

    fn listed(cluster: bool, version: i16) -> Vec<(String, String)> {
        // The states filter is asked for from v4.
        let states = if version >= 4 {
            vec![StrBytes::from_static_str("Stable")]
        } else {
            Vec::new()
        };
        let request = ListGroupsRequest::default().with_states_filter(states);
        let handled = fake::handle::<ListGroups>(Groups { cluster }, version, &request);
        let groups = handled.response.map(|r| r.groups).unwrap_or_default();
        groups
            .into_iter()
            .map(|g| (g.group_id.to_string(), g.group_state.to_string()))
            .collect()
    }

    #[test]
    fn only_describable_groups_are_listed_without_cluster_describe() {
        let stable = || "Stable".to_string();
        assert_eq!(listed(false, 4), vec![("a".to_string(), stable())]);
        assert_eq!(
            listed(true, 5),
            vec![("a".to_string(), stable()), ("b".to_string(), stable())]
        );
        // The state is only answered from v4.
        assert_eq!(listed(true, 3)[1], ("b".to_string(), String::new()));
    }
}
