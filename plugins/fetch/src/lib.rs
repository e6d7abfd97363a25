//! Fetch (ApiKey 1): read record batches from partition logs, as Kafka's
//! `KafkaApis.handleFetchRequest` does for consumers.
//!
//! - Versions 0-17. v0-3 (Kafka 4 removed them) read the old message
//!   formats, v0/v1, and get the stored batches down-converted by the
//!   host, as Kafka 3.9 did ([`v0_3`]); a topic with
//!   `message.downconversion.enable=false` answers them UNSUPPORTED_VERSION.
//! - Every request is a full fetch without a session
//!   (KIP-227): we never hand out a session, so the response carries
//!   session id 0 and the client keeps sending full fetches. A request for
//!   an incremental fetch (session epoch other than 0 or -1) names a session
//!   we cannot have: FETCH_SESSION_ID_NOT_FOUND at the top level, as Kafka
//!   answers an unknown session.
//! - v13+ names topics by id (KIP-516); an unknown id is UNKNOWN_TOPIC_ID and
//!   the response echoes the id.
//! - READ on each Topic, asked once for the whole request; unauthorized
//!   partitions get TOPIC_AUTHORIZATION_FAILED.
//! - All authorized partitions go to the host in one `log.fetch-or-park`
//!   call, which applies `max_bytes` and each `partition_max_bytes`. When
//!   fewer than `min_bytes` are there it parks the request for up to
//!   `max_wait_ms` (Kafka's fetch purgatory: no instance or worker is held)
//!   and the host handles it again once data arrives or the wait is over.
//!   Results return to the response in request order.
//! - Every partition reports its last stable offset. read_committed reads
//!   stop there (the host cuts the records) and carry the aborted
//!   transactions overlapping the records returned, so the consumer drops
//!   their records; read_uncommitted responses carry none (null), as Kafka.
//!   A single node prefers no read replica (-1).
//! - A fetch from a follower (`replica_state.replica_id` from v15, the
//!   `replica_id` field before, >= 0) needs CLUSTER_ACTION on the Cluster
//!   (else every partition is TOPIC_AUTHORIZATION_FAILED, as Kafka) and
//!   goes to `log.replica-fetch-or-park`: records up to the leader's log
//!   end offset, the fetch offset recorded as the follower's, and a
//!   `diverging_epoch` (v12+) when the follower's log diverges. Follower
//!   fetches are not subject to client quotas.
//! - The records are not copied through the module (DESIGN §12): each
//!   partition's record set stays in the host and the response references
//!   it ([`gregor_sdk::records`]); the host writes the bytes as it sends
//!   the response. (v0-3 responses, rewritten from v4's, read them in.)
//! - Client quotas (KIP-219): `max_bytes` is capped at what the consumer's
//!   byte-rate quota allows in one window; the response's size counts
//!   against that quota and the handler time against the request quota.
//!   A throttled fetch answers at once with no data and the throttle time
//!   (its bytes are not counted), and the host mutes the connection.

use gregor_sdk::authorize::{allowed_names, cluster_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::topic_name_by_id;
use gregor_sdk::kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse as TopicResponse, PartitionData,
};
use gregor_sdk::kafka_protocol::messages::ProducerId;
use gregor_sdk::kafka_protocol::messages::{FetchRequest, FetchResponse};
use gregor_sdk::kafka_protocol::protocol::Encodable;
use gregor_sdk::log::{self, FetchOptions, FetchedPartition};
use gregor_sdk::partitions::{self, TopicAnswer};
use gregor_sdk::quotas;
use gregor_sdk::records;
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

mod v0_3;

/// Session epochs of a full fetch: open a session (0) or fetch without one (-1).
const FULL_FETCH_EPOCHS: [i32; 2] = [0, -1];
const READ_COMMITTED: i8 = 1;

struct Fetch;

impl Handler for Fetch {
    gregor_sdk::api!(FetchRequest, 0..=17);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0_3::LEGACY);

    fn handle(ctx: &RequestContext, request: &FetchRequest) -> Reply<FetchResponse> {
        let version = ctx.api_version;
        let mut response = FetchResponse::default();
        if !FULL_FETCH_EPOCHS.contains(&request.session_epoch) {
            // Answered as is: no quota is recorded (see `throttle`).
            response.error_code = ResponseError::FetchSessionIdNotFound.code();
            return response.into();
        }

        let replica_id = replica_id(version, request);
        let from_follower = replica_id >= 0;
        let names: Vec<Option<String>> = request
            .topics
            .iter()
            .map(|topic| match version {
                13.. => topic_name_by_id(topic.topic_id),
                _ => Some(topic.topic.to_string()),
            })
            .collect();
        let names_to_check = names.iter().flatten().map(String::as_str);
        // A follower reads every partition it replicates, on the cluster's
        // authority; a consumer needs READ on each topic.
        let authorized = if from_follower {
            if cluster_allowed(Operation::ClusterAction) {
                names.iter().flatten().cloned().collect()
            } else {
                Default::default()
            }
        } else {
            allowed_names(Operation::Read, ResourceType::Topic, names_to_check)
        };

        // Every partition gets an error answer here; those we read are
        // overwritten below from the slot (topic, partition) they came from.
        let mut wanted = Vec::new();
        let mut slots = Vec::new();
        for (topic_slot, (topic, name)) in request.topics.iter().zip(&names).enumerate() {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for (partition_slot, partition) in topic.partitions.iter().enumerate() {
                let error = match name {
                    None => ResponseError::UnknownTopicId,
                    Some(name) if !authorized.contains(name) => {
                        ResponseError::TopicAuthorizationFailed
                    }
                    Some(name) => {
                        wanted.push(log::ReplicaFetchPartition {
                            topic: name.clone(),
                            partition: partition.partition,
                            fetch_offset: partition.fetch_offset,
                            partition_max_bytes: partition.partition_max_bytes,
                            current_leader_epoch: partition.current_leader_epoch,
                            last_fetched_epoch: partition.last_fetched_epoch,
                        });
                        slots.push((topic_slot, partition_slot));
                        // Only seen if the host answers fewer partitions than asked.
                        ResponseError::UnknownServerError
                    }
                };
                partitions.push(TopicResponse::error(partition, error.code()));
            }
            response
                .responses
                .push(TopicResponse::new(topic, partitions));
        }

        if !wanted.is_empty() {
            // Never more than the quota allows in a window, or the fetch
            // would be throttled whatever else happened.
            let max_bytes = match quotas::fetch_window_bytes().filter(|_| !from_follower) {
                Some(window) => request
                    .max_bytes
                    .min(i32::try_from(window.max(1)).unwrap_or(i32::MAX)),
                None => request.max_bytes,
            };
            let options = FetchOptions {
                max_wait_ms: request.max_wait_ms,
                min_bytes: request.min_bytes.min(max_bytes),
                max_bytes,
                isolation_level: request.isolation_level,
            };
            let read_committed = request.isolation_level == READ_COMMITTED && !from_follower;
            // Parked until data arrives or the wait is over; the host
            // then handles the request again and this call answers.
            let fetched = if from_follower {
                log::replica_fetch_or_park(replica_id, &wanted, options)
            } else {
                let wanted: Vec<log::FetchPartition> = wanted
                    .into_iter()
                    .map(|p| log::FetchPartition {
                        topic: p.topic,
                        partition: p.partition,
                        fetch_offset: p.fetch_offset,
                        partition_max_bytes: p.partition_max_bytes,
                    })
                    .collect();
                match v0_3::magic_for(version) {
                    None => log::fetch_or_park(&wanted, options),
                    Some(magic) => log::fetch_legacy_or_park(&wanted, options, magic),
                }
                .map(|fetched| {
                    fetched
                        .into_iter()
                        .map(|fetched| log::ReplicaFetchedPartition {
                            fetched,
                            diverging_epoch: None,
                        })
                        .collect()
                })
            };
            let Some(fetched) = fetched else {
                return Reply::Parked;
            };
            for ((topic_slot, partition_slot), fetched) in slots.into_iter().zip(fetched) {
                let slot = response
                    .responses
                    .get_mut(topic_slot)
                    .and_then(|topic| topic.partitions.get_mut(partition_slot));
                if let Some(slot) = slot {
                    let (read, records) = Read::split(fetched);
                    let records = records::reference(records);
                    *slot = partition_data(slot.partition_index, version, read_committed, read)
                        .with_records(Some(records));
                }
            }
        }
        response.into()
    }

    /// Every partition fails with `error_code` and carries no records.
    fn failed(_: &RequestContext, request: &FetchRequest, error_code: i16) -> FetchResponse {
        FetchResponse::default().with_responses(partitions::failed(&request.topics, error_code))
    }

    /// Client quotas: records the response's size and the handler time; a
    /// throttled fetch becomes an empty response carrying the throttle
    /// time, and its bytes are taken back (Kafka's `getThrottledResponse`).
    /// An unknown session's answer records nothing.
    fn throttle(ctx: &RequestContext, request: &FetchRequest, response: &mut FetchResponse) {
        if response.error_code != NONE || replica_id(ctx.api_version, request) >= 0 {
            return;
        }
        // Old versions are sized as the base version they are encoded from;
        // the records referenced count at their size.
        let size = response
            .compute_size(ctx.api_version.max(v0_3::FIRST_V2_VERSION))
            .map_or(0, |size| size + records::referenced_extra_bytes());
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let request_throttle = quotas::record_request(false);
        let bandwidth_throttle = quotas::record_fetch(size);
        let throttle = request_throttle.max(bandwidth_throttle);
        if throttle > 0 {
            quotas::unrecord_fetch(size);
            *response = FetchResponse::default().with_error_code(NONE);
        }
        response.throttle_time_ms = throttle;
    }
}

/// The follower fetching, or -1 for a consumer: `replica_state` from v15,
/// the `replica_id` field before.
fn replica_id(version: i16, request: &FetchRequest) -> i32 {
    match version {
        15.. => request.replica_state.replica_id.0,
        _ => request.replica_id.0,
    }
}

/// A partition as the host read it, its records apart: they stay in the
/// host and the response references them.
struct Read {
    error: Option<gregor_sdk::KafkaError>,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    aborted_transactions: Vec<log::AbortedTransaction>,
    diverging_epoch: Option<log::EpochEndOffset>,
}

impl Read {
    fn split(read: log::ReplicaFetchedPartition) -> (Read, log::RecordSet) {
        let FetchedPartition {
            error,
            high_watermark,
            last_stable_offset,
            log_start_offset,
            records,
            aborted_transactions,
            ..
        } = read.fetched;
        let read = Read {
            error,
            high_watermark,
            last_stable_offset,
            log_start_offset,
            aborted_transactions,
            diverging_epoch: read.diverging_epoch,
        };
        (read, records)
    }
}

/// A partition as the host read it, records aside.
fn partition_data(index: i32, version: i16, read_committed: bool, read: Read) -> PartitionData {
    let error_code = storage_error_for_version(version, read.error.error_code());
    let aborted = (read_committed && error_code == NONE).then(|| {
        read.aborted_transactions
            .iter()
            .map(|txn| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(txn.producer_id))
                    .with_first_offset(txn.first_offset)
            })
            .collect()
    });
    let data = PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error_code)
        .with_high_watermark(read.high_watermark)
        .with_last_stable_offset(read.last_stable_offset)
        .with_log_start_offset(read.log_start_offset)
        .with_aborted_transactions(aborted)
        .with_preferred_read_replica((-1).into());
    match read.diverging_epoch {
        Some(epoch) if version >= 12 => data.with_diverging_epoch(
            EpochEndOffset::default()
                .with_epoch(epoch.epoch)
                .with_end_offset(epoch.end_offset),
        ),
        _ => data,
    }
}

/// Clients fetching with v5 or older may not know KAFKA_STORAGE_ERROR and
/// would give up; Kafka sends them the retriable NOT_LEADER_OR_FOLLOWER.
fn storage_error_for_version(version: i16, error_code: i16) -> i16 {
    if version <= 5 && error_code == ResponseError::KafkaStorageError.code() {
        ResponseError::NotLeaderOrFollower.code()
    } else {
        error_code
    }
}

gregor_sdk::export_handler!(Fetch);

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use gregor_sdk::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn fetched(error_code: i16) -> Read {
        Read {
            error: gregor_sdk::error_of(error_code),
            high_watermark: 10,
            last_stable_offset: 10,
            log_start_offset: 0,
            aborted_transactions: vec![gregor_sdk::log::AbortedTransaction {
                producer_id: 7,
                first_offset: 2,
            }],
            diverging_epoch: None,
        }
    }

    /// With records, as the plain encoding carries them.
    fn consumer_data(index: i32, version: i16, read_committed: bool, read: Read) -> PartitionData {
        partition_data(index, version, read_committed, read)
            .with_records(Some(Bytes::from_static(&[1, 2, 3])))
    }

    fn partition_error(index: i32, error_code: i16) -> PartitionData {
        TopicResponse::error(&FetchPartition::default().with_partition(index), error_code)
    }

    #[test]
    fn encodes_for_every_served_version() {
        let partitions = vec![
            partition_error(0, ResponseError::UnknownTopicId.code()),
            consumer_data(1, 17, true, fetched(NONE)),
            consumer_data(2, 17, false, fetched(NONE)),
        ];
        let topic = TopicResponse::default().with_partitions(partitions);
        let request = FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic(gregor_sdk::ids::str_bytes("t").into())
            .with_partitions(vec![FetchPartition::default().with_partition(1)])]);
        assert_encodes_for_served_versions::<Fetch>(
            &[request],
            &[FetchResponse::default().with_responses(vec![topic])],
        );
    }

    #[test]
    fn a_diverging_epoch_is_answered_from_v12() {
        let diverging = |version| {
            let read = Read {
                diverging_epoch: Some(log::EpochEndOffset {
                    epoch: 3,
                    end_offset: 40,
                }),
                ..fetched(NONE)
            };
            partition_data(0, version, false, read).diverging_epoch
        };
        assert_eq!((diverging(12).epoch, diverging(12).end_offset), (3, 40));
        assert_eq!(diverging(11), EpochEndOffset::default());
    }

    #[test]
    fn the_follower_is_named_by_replica_state_from_v15() {
        use gregor_sdk::kafka_protocol::messages::fetch_request::ReplicaState;
        use gregor_sdk::kafka_protocol::messages::BrokerId;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(2))
            .with_replica_state(ReplicaState::default().with_replica_id(BrokerId(3)));
        assert_eq!(replica_id(14, &request), 2);
        assert_eq!(replica_id(15, &request), 3);
        assert_eq!(replica_id(17, &FetchRequest::default()), -1, "a consumer");
    }

    #[test]
    fn storage_errors_become_retriable_for_old_clients() {
        let storage = ResponseError::KafkaStorageError.code();
        assert_eq!(
            storage_error_for_version(5, storage),
            ResponseError::NotLeaderOrFollower.code()
        );
        assert_eq!(storage_error_for_version(6, storage), storage);
        assert_eq!(storage_error_for_version(4, NONE), NONE);
    }

    #[test]
    fn error_partitions_carry_no_data() {
        let partition = partition_error(3, ResponseError::UnknownTopicId.code());
        assert_eq!(partition.partition_index, 3);
        assert_eq!(partition.high_watermark, -1);
        assert_eq!(partition.aborted_transactions, None);
        assert_eq!(partition.records, Some(Bytes::new()));
    }

    #[test]
    fn aborted_transactions_only_for_read_committed_success() {
        let committed = consumer_data(0, 12, true, fetched(NONE));
        let aborted = committed.aborted_transactions.unwrap_or_default();
        assert_eq!(aborted.len(), 1);
        assert_eq!((aborted[0].producer_id.0, aborted[0].first_offset), (7, 2));
        assert_eq!(committed.records.as_deref(), Some(&[1u8, 2, 3][..]));
        assert_eq!(
            consumer_data(0, 12, false, fetched(NONE)).aborted_transactions,
            None
        );
        let failed = consumer_data(0, 12, true, fetched(ResponseError::OffsetOutOfRange.code()));
        assert_eq!(failed.aborted_transactions, None);
    }
}
