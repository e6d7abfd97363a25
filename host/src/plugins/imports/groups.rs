//! `groups`: consumer groups and committed offsets, via the group
//! coordinator. JoinGroup and SyncGroup waiting for the rebalance park
//! their request (`plugins::deferred`) instead of holding the guest's
//! instance. The client id and host of a joining member come from the
//! request's connection.

use std::time::Instant;

use crate::coordinator::{self as coord, Pending};
use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::groups::{
    self, CommittedOffset, ConsumerGroup, ConsumerHeartbeatRequest, ConsumerHeartbeatResult,
    ConsumerMember, GroupDescription, GroupOverview, JoinMember, JoinRequest, JoinResult,
    LeavingMember, MemberDescription, OffsetCommit, SyncRequest, SyncResult, TopicIdPartitions,
    TopicPartition,
};
use crate::plugins::bindings::handler::gregor::broker::types::{KafkaError, Uuid};
use crate::plugins::deferred::Memo;
use crate::plugins::imports::{error_field, error_of, failure, result_of};
use crate::plugins::state::HandlerState;

fn by_topic_id(list: Vec<(u128, Vec<i32>)>) -> Vec<TopicIdPartitions> {
    list.into_iter()
        .map(|(id, partitions)| TopicIdPartitions {
            topic_id: Uuid::from(id),
            partitions,
        })
        .collect()
}

fn partitions(list: Vec<TopicPartition>) -> Vec<(String, i32)> {
    list.into_iter().map(|p| (p.topic, p.partition)).collect()
}

/// A group-level error, or one error code per item: in the contract's
/// terms.
fn per_item(answer: Result<Vec<i16>, i16>) -> Result<Vec<Option<KafkaError>>, KafkaError> {
    answer
        .map(|codes| codes.into_iter().map(error_of).collect())
        .map_err(failure)
}

impl groups::Host for HandlerState {
    async fn join_or_park(&mut self, request: JoinRequest) -> Option<JoinResult> {
        self.join_deferred(request).await
    }

    async fn sync_or_park(&mut self, request: SyncRequest) -> Option<SyncResult> {
        self.sync_deferred(request).await
    }

    fn heartbeat(
        &mut self,
        group_id: String,
        generation_id: i32,
        member_id: String,
        group_instance_id: Option<String>,
    ) -> Result<(), KafkaError> {
        result_of(self.services.groups.heartbeat(
            &group_id,
            generation_id,
            &member_id,
            group_instance_id.as_deref(),
        ))
    }

    fn leave(
        &mut self,
        group_id: String,
        members: Vec<LeavingMember>,
    ) -> Result<Vec<Option<KafkaError>>, KafkaError> {
        let members: Vec<coord::LeavingMember> = members
            .into_iter()
            .map(|m| coord::LeavingMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                reason: m.reason,
            })
            .collect();
        per_item(self.services.groups.leave(&group_id, &members))
    }

    async fn commit_offsets(
        &mut self,
        group_id: String,
        generation_id: i32,
        member_id: String,
        group_instance_id: Option<String>,
        retention_time_ms: i64,
        offsets: Vec<OffsetCommit>,
    ) -> Vec<Option<KafkaError>> {
        let request = coord::CommitRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            retention_time_ms,
            offsets: offsets
                .into_iter()
                .map(|o| coord::OffsetCommit {
                    topic: o.topic,
                    partition: o.partition,
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata,
                })
                .collect(),
        };
        // In a cluster the answer waits for the ISR of the group's
        // partition of __consumer_offsets: the broker's time, not the guest's.
        let started = Instant::now();
        let codes = match self.services.groups.begin_commit(&request) {
            Pending::Ready(codes) => codes,
            Pending::Later(replicated) => replicated.await,
        };
        self.clock.add_host_wait(started.elapsed());
        codes.into_iter().map(error_of).collect()
    }

    fn fetch_offsets(
        &mut self,
        group_id: String,
        wanted: Option<Vec<TopicPartition>>,
        require_stable: bool,
    ) -> Result<Vec<CommittedOffset>, KafkaError> {
        let wanted = wanted.map(partitions);
        let offsets = self
            .services
            .groups
            .fetch_offsets(&group_id, wanted.as_deref(), require_stable)
            .map_err(failure)?;
        // Offsets a transaction holds for the group are not stable yet.
        let pending = if require_stable {
            let mut pending = self.services.transactions.pending_offsets(&group_id);
            pending.extend(self.services.groups.pending_txn_partitions(&group_id));
            pending
        } else {
            Default::default()
        };
        Ok(offsets
            .into_iter()
            .map(|o| {
                let unstable = pending.contains(&(o.topic.clone(), o.partition));
                CommittedOffset {
                    error: error_of(if unstable {
                        ErrorCode::UnstableOffsetCommit.code()
                    } else {
                        o.error_code
                    }),
                    offset: if unstable { -1 } else { o.offset },
                    topic: o.topic,
                    partition: o.partition,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata,
                }
            })
            .collect())
    }

    fn delete_offsets(
        &mut self,
        group_id: String,
        doomed: Vec<TopicPartition>,
    ) -> Result<Vec<Option<KafkaError>>, KafkaError> {
        per_item(
            self.services
                .groups
                .delete_offsets(&group_id, &partitions(doomed)),
        )
    }

    fn list_groups(&mut self, states: Vec<String>, types: Vec<String>) -> Vec<GroupOverview> {
        self.services
            .groups
            .list_groups(&states, &types)
            .into_iter()
            .map(|g| GroupOverview {
                group_id: g.group_id,
                protocol_type: g.protocol_type,
                state: g.state,
                group_type: g.group_type,
            })
            .collect()
    }

    fn describe_groups(&mut self, group_ids: Vec<String>) -> Vec<GroupDescription> {
        self.services
            .groups
            .describe_groups(&group_ids)
            .into_iter()
            .map(|g| GroupDescription {
                error: error_of(g.error_code),
                group_id: g.group_id,
                state: g.state,
                protocol_type: g.protocol_type,
                protocol: g.protocol,
                members: g
                    .members
                    .into_iter()
                    .map(|m| MemberDescription {
                        member_id: m.member_id,
                        group_instance_id: m.group_instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        metadata: m.metadata,
                        assignment: m.assignment,
                    })
                    .collect(),
            })
            .collect()
    }

    fn delete_groups(&mut self, group_ids: Vec<String>) -> Vec<Option<KafkaError>> {
        let codes = self.services.groups.delete_groups(&group_ids);
        codes.into_iter().map(error_of).collect()
    }

    async fn consumer_heartbeat(
        &mut self,
        request: ConsumerHeartbeatRequest,
    ) -> ConsumerHeartbeatResult {
        let topics = self
            .services
            .topics
            .list()
            .into_iter()
            .map(|topic| {
                let meta = coord::TopicMeta {
                    id: topic.id,
                    partitions: topic.partitions,
                };
                (topic.name, meta)
            })
            .collect();
        let request = coord::ConsumerHeartbeat {
            group_id: request.group_id,
            member_id: request.member_id,
            member_epoch: request.member_epoch,
            instance_id: request.instance_id,
            rack_id: request.rack_id,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            subscribed_topic_names: request.subscribed_topic_names,
            server_assignor: request.server_assignor,
            owned: request.owned.map(|owned| {
                owned
                    .into_iter()
                    .map(|t| (u128::from(t.topic_id), t.partitions))
                    .collect()
            }),
            client_id: self.client_id.clone().unwrap_or_default(),
            client_host: self
                .session
                .as_ref()
                .map(|session| format!("/{}", session.client_host))
                .unwrap_or_default(),
        };
        // In a cluster the answer waits for the ISR to have the group's
        // records, as an offset commit does.
        let started = Instant::now();
        let result = match self
            .services
            .groups
            .begin_consumer_heartbeat(&request, topics)
        {
            Pending::Ready(result) => result,
            Pending::Later(replicated) => replicated.await,
        };
        self.clock.add_host_wait(started.elapsed());
        ConsumerHeartbeatResult {
            error: error_field(result.error_code, result.error_message),
            member_id: result.member_id,
            member_epoch: result.member_epoch,
            heartbeat_interval_ms: result.heartbeat_interval_ms,
            assignment: result.assignment.map(by_topic_id),
        }
    }

    fn consumer_group_describe(&mut self, group_ids: Vec<String>) -> Vec<ConsumerGroup> {
        self.services
            .groups
            .consumer_describe(&group_ids)
            .into_iter()
            .map(|g| ConsumerGroup {
                error: error_field(g.error_code, g.error_message),
                group_id: g.group_id,
                state: g.state,
                group_epoch: g.group_epoch,
                assignment_epoch: g.assignment_epoch,
                assignor_name: g.assignor_name,
                members: g
                    .members
                    .into_iter()
                    .map(|m| ConsumerMember {
                        member_id: m.member_id,
                        instance_id: m.instance_id,
                        rack_id: m.rack_id,
                        member_epoch: m.member_epoch,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        subscribed_topic_names: m.subscribed_topic_names,
                        assignment: by_topic_id(m.assignment),
                        target_assignment: by_topic_id(m.target_assignment),
                    })
                    .collect(),
            })
            .collect()
    }
}

impl HandlerState {
    /// JoinGroup, parking the request while the rebalance runs: the
    /// answer, or none once parked (see `plugins::deferred`).
    async fn join_deferred(&mut self, request: JoinRequest) -> Option<JoinResult> {
        let client_host = self
            .session
            .as_ref()
            .map(|session| format!("/{}", session.client_host))
            .unwrap_or_default();
        let request = coord::JoinRequest {
            group_id: request.group_id,
            member_id: request.member_id,
            group_instance_id: request.group_instance_id,
            protocol_type: request.protocol_type,
            protocols: request
                .protocols
                .into_iter()
                .map(|p| (p.name, p.metadata))
                .collect(),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            require_known_member_id: request.require_known_member_id,
            supports_skip_assignment: request.supports_skip_assignment,
            reason: request.reason,
            client_id: self.client_id.clone().unwrap_or_default(),
            client_host,
        };
        let result = match self.deferral.join_answer(&request) {
            Some(result) => result,
            None => {
                let pending = self.services.groups.begin_join(&request);
                let (group_id, member_id) = (request.group_id, request.member_id);
                let memo = move |result| Memo::Join {
                    group_id,
                    member_id,
                    result,
                };
                self.settle(pending, memo).await?
            }
        };
        Some(JoinResult {
            error: error_of(result.error_code),
            generation_id: result.generation_id,
            protocol_type: result.protocol_type,
            protocol_name: result.protocol_name,
            leader: result.leader,
            skip_assignment: result.skip_assignment,
            member_id: result.member_id,
            members: result
                .members
                .into_iter()
                .map(|m| JoinMember {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    metadata: m.metadata,
                })
                .collect(),
        })
    }

    /// SyncGroup, parking a follower's request until the leader's
    /// assignment arrives: the answer, or none once parked.
    async fn sync_deferred(&mut self, request: SyncRequest) -> Option<SyncResult> {
        let request = coord::SyncRequest {
            group_id: request.group_id,
            generation_id: request.generation_id,
            member_id: request.member_id,
            group_instance_id: request.group_instance_id,
            protocol_type: request.protocol_type,
            protocol_name: request.protocol_name,
            assignments: request.assignments,
        };
        let result = match self.deferral.sync_answer(&request) {
            Some(result) => result,
            None => {
                let pending = self.services.groups.begin_sync(&request);
                let (group_id, member_id, generation_id) =
                    (request.group_id, request.member_id, request.generation_id);
                let memo = move |result| Memo::Sync {
                    group_id,
                    member_id,
                    generation_id,
                    result,
                };
                self.settle(pending, memo).await?
            }
        };
        Some(SyncResult {
            error: error_of(result.error_code),
            protocol_type: result.protocol_type,
            protocol_name: result.protocol_name,
            assignment: result.assignment,
        })
    }

    /// The answer of a group call that may have to wait: now, parked
    /// (none; `memo` keeps the wait's answer for the replay) or, in a
    /// replay that found no answer of its own, awaited here.
    async fn settle<T: Send + 'static>(
        &mut self,
        pending: Pending<T>,
        memo: impl FnOnce(T) -> Memo + Send + 'static,
    ) -> Option<T> {
        match pending {
            Pending::Ready(result) => Some(result),
            Pending::Later(wait) if self.deferral.may_park() => {
                self.deferral
                    .park(Box::pin(async move { memo(wait.await) }));
                None
            }
            Pending::Later(wait) => {
                let started = Instant::now();
                let result = wait.await;
                self.clock.add_host_wait(started.elapsed());
                Some(result)
            }
        }
    }
}
