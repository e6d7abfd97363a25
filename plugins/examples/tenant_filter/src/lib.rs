//! TenantFilter: an interceptor that isolates tenants sharing one broker.
//! A principal `User:<tenant>.<name>` belongs to `<tenant>`; every topic
//! and group it names is prefixed with `<tenant>.` before the standard
//! handler sees the request, and the prefix is taken off again in the
//! response, so two tenants can each use a topic called `orders` (stored
//! as `acme.orders` and `globex.orders`). Metadata and ListGroups answer
//! only the tenant's own topics and groups.
//!
//! Principals without a tenant (no `.` in the user name, ANONYMOUS) pass
//! through unchanged: give them no access on a tenants' listener (ACLs).
//! A request naming a topic by id (Produce v13+, Fetch v13+) must name one
//! of the tenant's topics (checked with `metadata.read`, which the module
//! must be granted); otherwise the connection is closed. Transactional ids
//! are not isolated (InitProducerId and the transaction APIs are not
//! wrapped). Configure it with
//! `plugin.interceptors.<api>=tenant_filter` for each API below.

use gregor_intercept::kafka_protocol::messages::*;
use gregor_intercept::kafka_protocol::protocol::StrBytes;
use gregor_intercept::kafka_protocol::ResponseError;
use gregor_intercept::{
    metadata, refuse_unreadable, rewrite_request, rewrite_response, types, Interceptor,
    RequestContext, Verdict,
};

struct TenantFilter;

/// The ApiKeys whose requests name topics or groups.
const WRAPPED: &[i16] = &[0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 23];

/// A tenant's prefix, `<tenant>.`.
struct Tenant(String);

impl Tenant {
    fn of(ctx: &RequestContext) -> Option<Self> {
        let user = ctx.principal.strip_prefix("User:")?;
        let (tenant, name) = user.split_once('.')?;
        (!tenant.is_empty() && !name.is_empty()).then(|| Self(format!("{tenant}.")))
    }

    fn add(&self, name: &str) -> StrBytes {
        StrBytes::from_string(format!("{}{name}", self.0))
    }

    fn topic(&self, name: &mut TopicName) {
        if !name.0.is_empty() {
            name.0 = self.add(&name.0);
        }
    }

    fn group(&self, group: &mut GroupId) {
        group.0 = self.add(&group.0);
    }

    /// Takes the prefix off; false if the name is not the tenant's.
    fn strip(&self, name: &mut StrBytes) -> bool {
        match name.strip_prefix(self.0.as_str()) {
            Some(own) => {
                *name = StrBytes::from_string(own.to_string());
                true
            }
            None => name.is_empty(),
        }
    }

    fn strip_topic(&self, name: &mut TopicName) -> bool {
        self.strip(&mut name.0)
    }

    fn strip_group(&self, group: &mut GroupId) -> bool {
        self.strip(&mut group.0)
    }

    /// Whether a topic named by id is the tenant's (the nil id names none).
    fn owns_id(&self, id: &uuid::Uuid) -> bool {
        if id.is_nil() {
            return true;
        }
        let (high, low) = id.as_u64_pair();
        metadata::topic_by_id(types::Uuid { high, low })
            .is_some_and(|topic| topic.name.starts_with(self.0.as_str()))
    }
}

impl Interceptor for TenantFilter {
    const NAME: &'static str = "tenant-filter";
    const API_KEYS: &'static [i16] = WRAPPED;

    fn on_request(ctx: &RequestContext, body: Vec<u8>) -> Verdict {
        let Some(tenant) = Tenant::of(ctx) else {
            return Verdict::Continue(body);
        };
        let mut foreign = false;
        let rewritten = match ctx.api_key {
            0 => rewrite_request(ctx, &body, |r: &mut ProduceRequest| {
                for topic in &mut r.topic_data {
                    tenant.topic(&mut topic.name);
                    foreign |= !tenant.owns_id(&topic.topic_id);
                }
            }),
            1 => rewrite_request(ctx, &body, |r: &mut FetchRequest| {
                for topic in &mut r.topics {
                    tenant.topic(&mut topic.topic);
                    foreign |= !tenant.owns_id(&topic.topic_id);
                }
                for topic in &mut r.forgotten_topics_data {
                    tenant.topic(&mut topic.topic);
                }
            }),
            2 => rewrite_request(ctx, &body, |r: &mut ListOffsetsRequest| {
                r.topics.iter_mut().for_each(|t| tenant.topic(&mut t.name));
            }),
            3 => rewrite_request(ctx, &body, |r: &mut MetadataRequest| {
                for topic in r.topics.iter_mut().flatten() {
                    if let Some(name) = &mut topic.name {
                        tenant.topic(name);
                    }
                    foreign |= !tenant.owns_id(&topic.topic_id);
                }
            }),
            8 => rewrite_request(ctx, &body, |r: &mut OffsetCommitRequest| {
                tenant.group(&mut r.group_id);
                r.topics.iter_mut().for_each(|t| tenant.topic(&mut t.name));
            }),
            9 => rewrite_request(ctx, &body, |r: &mut OffsetFetchRequest| {
                if !r.group_id.0.is_empty() {
                    tenant.group(&mut r.group_id);
                }
                for topic in r.topics.iter_mut().flatten() {
                    tenant.topic(&mut topic.name);
                }
                for group in &mut r.groups {
                    tenant.group(&mut group.group_id);
                    for topic in group.topics.iter_mut().flatten() {
                        tenant.topic(&mut topic.name);
                    }
                }
            }),
            // Group coordinators only (key type 0); transactional ids pass.
            10 => rewrite_request(ctx, &body, |r: &mut FindCoordinatorRequest| {
                if r.key_type == 0 {
                    if !r.key.is_empty() {
                        r.key = tenant.add(&r.key);
                    }
                    for key in &mut r.coordinator_keys {
                        *key = tenant.add(key);
                    }
                }
            }),
            11 => rewrite_request(ctx, &body, |r: &mut JoinGroupRequest| {
                tenant.group(&mut r.group_id)
            }),
            12 => rewrite_request(ctx, &body, |r: &mut HeartbeatRequest| {
                tenant.group(&mut r.group_id)
            }),
            13 => rewrite_request(ctx, &body, |r: &mut LeaveGroupRequest| {
                tenant.group(&mut r.group_id)
            }),
            14 => rewrite_request(ctx, &body, |r: &mut SyncGroupRequest| {
                tenant.group(&mut r.group_id)
            }),
            15 => rewrite_request(ctx, &body, |r: &mut DescribeGroupsRequest| {
                r.groups.iter_mut().for_each(|g| tenant.group(g));
            }),
            19 => rewrite_request(ctx, &body, |r: &mut CreateTopicsRequest| {
                r.topics.iter_mut().for_each(|t| tenant.topic(&mut t.name));
            }),
            23 => rewrite_request(ctx, &body, |r: &mut OffsetForLeaderEpochRequest| {
                r.topics.iter_mut().for_each(|t| tenant.topic(&mut t.topic));
            }),
            // ListGroups: nothing to rewrite in the request.
            _ => Ok(body),
        };
        match rewritten {
            Ok(_) if foreign => refuse_unreadable(ctx, "a topic id of another tenant"),
            Ok(body) => Verdict::Continue(body),
            Err(why) => refuse_unreadable(ctx, &why),
        }
    }

    fn on_response(
        ctx: &RequestContext,
        _request: Vec<u8>,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        let Some(tenant) = Tenant::of(ctx) else {
            return Ok(body);
        };
        match ctx.api_key {
            0 => rewrite_response(ctx, &body, |r: &mut ProduceResponse| {
                r.responses.retain_mut(|t| tenant.strip_topic(&mut t.name));
            }),
            1 => rewrite_response(ctx, &body, |r: &mut FetchResponse| {
                r.responses.retain_mut(|t| tenant.strip_topic(&mut t.topic));
            }),
            2 => rewrite_response(ctx, &body, |r: &mut ListOffsetsResponse| {
                r.topics.retain_mut(|t| tenant.strip_topic(&mut t.name));
            }),
            // Only the tenant's topics, un-prefixed (a request for every
            // topic answers every topic of the broker).
            3 => rewrite_response(ctx, &body, |r: &mut MetadataResponse| {
                r.topics
                    .retain_mut(|t| t.name.as_mut().is_some_and(|n| tenant.strip_topic(n)));
            }),
            8 => rewrite_response(ctx, &body, |r: &mut OffsetCommitResponse| {
                r.topics.retain_mut(|t| tenant.strip_topic(&mut t.name));
            }),
            9 => rewrite_response(ctx, &body, |r: &mut OffsetFetchResponse| {
                r.topics.retain_mut(|t| tenant.strip_topic(&mut t.name));
                r.groups.retain_mut(|g| {
                    g.topics.retain_mut(|t| tenant.strip_topic(&mut t.name));
                    tenant.strip_group(&mut g.group_id)
                });
            }),
            10 => rewrite_response(ctx, &body, |r: &mut FindCoordinatorResponse| {
                for coordinator in &mut r.coordinators {
                    tenant.strip(&mut coordinator.key);
                }
            }),
            15 => rewrite_response(ctx, &body, |r: &mut DescribeGroupsResponse| {
                r.groups.retain_mut(|g| tenant.strip_group(&mut g.group_id));
            }),
            16 => rewrite_response(ctx, &body, |r: &mut ListGroupsResponse| {
                r.groups.retain_mut(|g| tenant.strip_group(&mut g.group_id));
            }),
            19 => rewrite_response(ctx, &body, |r: &mut CreateTopicsResponse| {
                for topic in &mut r.topics {
                    if !tenant.strip_topic(&mut topic.name) {
                        topic.error_code = ResponseError::TopicAuthorizationFailed.code();
                    }
                }
            }),
            23 => rewrite_response(ctx, &body, |r: &mut OffsetForLeaderEpochResponse| {
                r.topics.retain_mut(|t| tenant.strip_topic(&mut t.topic));
            }),
            // JoinGroup, Heartbeat, LeaveGroup, SyncGroup answer no names.
            _ => Ok(body),
        }
    }
}

gregor_intercept::export_interceptor!(TenantFilter);
