//! The replica fetcher of one leader broker (Kafka's ReplicaFetcherThread
//! over AbstractFetcherThread): every partition this broker follows under
//! that leader, in one fetch session of real Kafka requests.
//!
//! Each partition is in one of two phases, as in Kafka:
//! - **Truncating**, when it is (re)added under a new leader epoch: the
//!   follower asks the leader where its own latest epoch ends
//!   (OffsetForLeaderEpoch, KIP-101/279) and truncates there, so a former
//!   leader's unreplicated tail is cut before anything is fetched after
//!   it. An answer naming an epoch this replica does not know cuts to the
//!   end of the largest epoch below it and asks again.
//! - **Fetching**: Fetch v15 with `replica_state` (this broker's id and
//!   epoch), the log end offset as fetch offset, the epoch of the last
//!   batch held (`last_fetched_epoch`) and the leader epoch followed
//!   (`current_leader_epoch`). The batches come back with the leader's
//!   offsets and are appended verbatim; a `diverging_epoch` in the answer
//!   (KIP-320) truncates the log instead. The leader's high watermark
//!   becomes this follower's (capped at its log end offset) and the
//!   leader's log start offset is followed.
//!
//! OFFSET_OUT_OF_RANGE resets the fetch offset from the leader's offsets
//! (ListOffsets): truncated to the leader's end if this log is longer,
//! restarted at the leader's log start if this log ends before it.
//! FENCED_LEADER_EPOCH parks a partition until the image names a newer
//! epoch; other errors (the leader not yet leading, the log not yet
//! created here, a connection failure) delay it by
//! `replica.fetch.backoff.ms`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::leader_channel::LeaderChannel;
use super::truncation::{truncation, Truncation};
use crate::error_code::ErrorCode;
use crate::log::{StorageError, TopicPartition};
use crate::services::Services;

/// The versions sent: Fetch with `replica_state` (KIP-903), the newest
/// OffsetForLeaderEpoch and a ListOffsets with leader epochs.
const FETCH_VERSION: i16 = 15;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
const LIST_OFFSETS_VERSION: i16 = 7;

const NONE: i16 = ErrorCode::None.code();
const OFFSET_OUT_OF_RANGE: i16 = ErrorCode::OffsetOutOfRange.code();
const FENCED_LEADER_EPOCH: i16 = ErrorCode::FencedLeaderEpoch.code();
/// Kafka's TOPIC_AUTHORIZATION_FAILED.
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// Kafka's `replica.fetch.*` settings.
#[derive(Debug, Clone, Copy)]
pub struct FetchSettings {
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub backoff: Duration,
    pub socket_timeout: Duration,
}

impl Default for FetchSettings {
    /// Kafka's defaults.
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 10 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            backoff: Duration::from_millis(1000),
            socket_timeout: Duration::from_millis(30_000),
        }
    }
}

/// What the image says of a followed partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub topic_id: u128,
    pub leader_epoch: i32,
}

/// The partitions a fetcher follows, from the follower manager.
pub type Targets = BTreeMap<TopicPartition, Target>;

/// The followers' high watermarks, from their leaders' fetch responses.
#[derive(Debug, Default)]
pub struct FollowerHighWatermarks(RwLock<HashMap<TopicPartition, i64>>);

impl FollowerHighWatermarks {
    pub fn get(&self, tp: &TopicPartition) -> Option<i64> {
        crate::sync::read(&self.0).get(tp).copied()
    }

    fn set(&self, tp: &TopicPartition, high_watermark: i64) {
        crate::sync::write(&self.0).insert(tp.clone(), high_watermark);
    }

    pub(super) fn forget(&self, tp: &TopicPartition) {
        crate::sync::write(&self.0).remove(tp);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Truncating,
    Fetching,
}

#[derive(Debug, Clone)]
struct Followed {
    target: Target,
    phase: Phase,
    fetch_offset: i64,
    /// Not fetched before this (after an error).
    delayed_until: Option<Instant>,
    /// FENCED_LEADER_EPOCH: the leader has a newer epoch than the image
    /// here; wait for the image to catch up.
    fenced: bool,
}

impl Followed {
    fn ready(&self, now: Instant) -> bool {
        !self.fenced && self.delayed_until.is_none_or(|until| until <= now)
    }
}

/// The fetcher of one leader; runs until its targets sender is dropped.
pub struct Fetcher {
    pub node_id: i32,
    pub leader: i32,
    pub broker_epoch: Arc<AtomicI64>,
    pub services: Arc<Services>,
    pub settings: FetchSettings,
    pub high_watermarks: Arc<FollowerHighWatermarks>,
    pub targets: watch::Receiver<Targets>,
    pub channel: LeaderChannel,
}

/// A local log operation's failure, or the leader's answer to act on.
type Local<T> = Result<T, StorageError>;

impl Fetcher {
    pub async fn run(mut self) {
        let mut partitions: BTreeMap<TopicPartition, Followed> = BTreeMap::new();
        loop {
            let targets = self.targets.borrow_and_update().clone();
            self.sync(&mut partitions, &targets).await;
            let now = Instant::now();
            let truncating: Vec<TopicPartition> = partitions
                .iter()
                .filter(|(_, p)| p.phase == Phase::Truncating && p.ready(now))
                .map(|(tp, _)| tp.clone())
                .collect();
            if !truncating.is_empty() {
                self.truncate(&mut partitions, &truncating).await;
            }
            let now = Instant::now();
            let fetching: Vec<TopicPartition> = partitions
                .iter()
                .filter(|(_, p)| p.phase == Phase::Fetching && p.ready(now))
                .map(|(tp, _)| tp.clone())
                .collect();
            if fetching.is_empty() {
                let wake = partitions
                    .values()
                    .filter(|p| !p.fenced)
                    .filter_map(|p| p.delayed_until)
                    .min()
                    .unwrap_or(now + self.settings.backoff);
                tokio::select! {
                    changed = self.targets.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep_until(wake.into()) => {}
                }
                continue;
            }
            self.fetch(&mut partitions, &fetching).await;
            if self.targets.has_changed().is_err() {
                return;
            }
        }
    }

    /// Brings the followed partitions in line with the targets: new ones,
    /// and those under a new leader epoch, start truncating from the log
    /// end offset.
    async fn sync(&self, partitions: &mut BTreeMap<TopicPartition, Followed>, targets: &Targets) {
        partitions.retain(|tp, _| targets.contains_key(tp));
        for (tp, target) in targets {
            if partitions.get(tp).is_some_and(|p| p.target == *target) {
                continue;
            }
            let end = self.local(tp.clone(), log_end_offset).await;
            let (fetch_offset, delayed_until) = match end {
                Ok(end) => (end, None),
                // The reconciler has not created the log yet.
                Err(_) => (0, Some(Instant::now() + self.settings.backoff)),
            };
            info!(
                partition = %tp,
                leader = self.leader,
                leader_epoch = target.leader_epoch,
                fetch_offset,
                "following the partition's leader"
            );
            partitions.insert(
                tp.clone(),
                Followed {
                    target: *target,
                    phase: Phase::Truncating,
                    fetch_offset,
                    delayed_until,
                    fenced: false,
                },
            );
        }
    }

    /// Runs a blocking log operation off the async workers.
    async fn local<T: Send + 'static>(
        &self,
        tp: TopicPartition,
        f: impl FnOnce(&Services, &TopicPartition) -> Local<T> + Send + 'static,
    ) -> Local<T> {
        let services = Arc::clone(&self.services);
        tokio::task::spawn_blocking(move || f(&services, &tp))
            .await
            .unwrap_or_else(|e| Err(StorageError::Io(std::io::Error::other(e.to_string()))))
    }

    /// Whether this fetcher still follows `tp` as `target`. An answer
    /// that arrives after the partition moved on (another leader, a new
    /// leader epoch, this fetcher stopped) is dropped unapplied, as Kafka's
    /// fetcher drops data for partitions removed while its fetch was in
    /// flight: applied, a deposed leader's records could land on a log
    /// that already follows (or is) the new leader.
    fn still_following(&self, tp: &TopicPartition, target: &Target) -> bool {
        self.targets.has_changed().is_ok() && self.targets.borrow().get(tp) == Some(target)
    }

    fn delay(&self, p: &mut Followed) {
        p.delayed_until = Some(Instant::now() + self.settings.backoff);
    }

    /// The Truncating phase: OffsetForLeaderEpoch for the partitions'
    /// latest local epochs, then truncation to what the leader says.
    async fn truncate(
        &mut self,
        partitions: &mut BTreeMap<TopicPartition, Followed>,
        truncating: &[TopicPartition],
    ) {
        let mut by_topic: BTreeMap<&str, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
        let mut asked = Vec::new();
        for tp in truncating {
            let latest = self
                .local(tp.clone(), |s, tp| Ok(s.logs.epochs(tp)?.latest_epoch()))
                .await;
            let Some(p) = partitions.get_mut(tp) else {
                continue;
            };
            match latest {
                Ok(Some(epoch)) => {
                    by_topic.entry(tp.topic.as_str()).or_default().push(
                        OffsetForLeaderPartition::default()
                            .with_partition(tp.partition)
                            .with_current_leader_epoch(p.target.leader_epoch)
                            .with_leader_epoch(epoch),
                    );
                    asked.push(tp.clone());
                }
                // No epoch at all: nothing to compare, fetch from the end.
                Ok(None) => p.phase = Phase::Fetching,
                Err(error) => {
                    debug!(partition = %tp, %error, "local log not ready");
                    self.delay(p);
                }
            }
        }
        if asked.is_empty() {
            return;
        }
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, parts)| {
                        OffsetForLeaderTopic::default()
                            .with_topic(topic_name(topic))
                            .with_partitions(parts)
                    })
                    .collect(),
            );
        let response = match self
            .channel
            .send(&request, OFFSET_FOR_LEADER_EPOCH_VERSION)
            .await
        {
            Ok(response) => response,
            Err(error) => {
                warn!(leader = self.leader, %error, "OffsetForLeaderEpoch failed");
                for tp in &asked {
                    if let Some(p) = partitions.get_mut(tp) {
                        self.delay(p);
                    }
                }
                return;
            }
        };
        for topic in response.topics {
            for answer in topic.partitions {
                let tp = TopicPartition::new(topic.topic.as_str(), answer.partition);
                let Some(p) = partitions.get_mut(&tp) else {
                    continue;
                };
                if !self.still_following(&tp, &p.target) {
                    continue;
                }
                match answer.error_code {
                    NONE => {
                        let outcome = self
                            .apply_truncation(
                                &tp,
                                answer.leader_epoch,
                                answer.end_offset,
                                p.fetch_offset,
                            )
                            .await;
                        match outcome {
                            Ok((end, completed)) => {
                                p.fetch_offset = end;
                                if completed {
                                    p.phase = Phase::Fetching;
                                }
                            }
                            Err(error) => {
                                warn!(partition = %tp, %error, "truncation failed");
                                self.delay(p);
                            }
                        }
                    }
                    FENCED_LEADER_EPOCH => {
                        info!(partition = %tp, leader = self.leader, "the leader has a newer epoch; waiting for the metadata");
                        p.fenced = true;
                    }
                    TOPIC_AUTHORIZATION_FAILED => {
                        self.unauthorized(&tp, "OffsetForLeaderEpoch");
                        self.delay(p);
                    }
                    _ => {
                        debug!(partition = %tp, error = answer.error_code, "OffsetForLeaderEpoch refused; retrying");
                        self.delay(p);
                    }
                }
            }
        }
    }

    /// Truncates the local log for the leader's `(epoch, end_offset)`;
    /// the new log end offset and whether truncation is complete.
    async fn apply_truncation(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        leader_end_offset: i64,
        fetch_offset: i64,
    ) -> Local<(i64, bool)> {
        let leader = self.leader;
        self.local(tp.clone(), move |s, tp| {
            let epochs = s.logs.epochs(tp)?;
            let log_end = log_end_offset(s, tp)?;
            let Truncation { offset, completed } = truncation(
                leader_epoch,
                leader_end_offset,
                &epochs,
                log_end,
                fetch_offset,
            );
            let end = if offset < log_end {
                info!(
                    partition = %tp,
                    leader,
                    leader_epoch,
                    leader_end_offset,
                    offset,
                    log_end_offset = log_end,
                    "truncating a diverging log"
                );
                s.replica.truncate_to(tp, offset)?
            } else if epochs.latest().is_some_and(|e| e.start_offset >= log_end) {
                // An epoch this broker led without appending: it goes, or
                // the next fetch would send it again and diverge again.
                s.logs.truncate_to(tp, log_end)?
            } else {
                log_end
            };
            Ok((end, completed))
        })
        .await
    }

    /// The Fetching phase: one Fetch for the ready partitions.
    async fn fetch(
        &mut self,
        partitions: &mut BTreeMap<TopicPartition, Followed>,
        fetching: &[TopicPartition],
    ) {
        let mut by_topic: BTreeMap<u128, (String, Vec<FetchPartition>)> = BTreeMap::new();
        for tp in fetching {
            let local = self
                .local(tp.clone(), |s, tp| {
                    let epochs = s.logs.epochs(tp)?;
                    let start = s.logs.offsets(tp)?.log_start_offset;
                    Ok((epochs.latest_epoch().unwrap_or(-1), start))
                })
                .await;
            let Some(p) = partitions.get_mut(tp) else {
                continue;
            };
            let (last_fetched_epoch, log_start_offset) = match local {
                Ok(local) => local,
                Err(error) => {
                    debug!(partition = %tp, %error, "local log not ready");
                    self.delay(p);
                    continue;
                }
            };
            by_topic
                .entry(p.target.topic_id)
                .or_insert_with(|| (tp.topic.clone(), Vec::new()))
                .1
                .push(
                    FetchPartition::default()
                        .with_partition(tp.partition)
                        .with_current_leader_epoch(p.target.leader_epoch)
                        .with_fetch_offset(p.fetch_offset)
                        .with_last_fetched_epoch(last_fetched_epoch)
                        .with_log_start_offset(log_start_offset)
                        .with_partition_max_bytes(self.settings.partition_max_bytes),
                );
        }
        if by_topic.is_empty() {
            return;
        }
        let names: HashMap<u128, String> = by_topic
            .iter()
            .map(|(id, (name, _))| (*id, name.clone()))
            .collect();
        let asked: Vec<TopicPartition> = by_topic
            .values()
            .flat_map(|(name, parts)| {
                parts
                    .iter()
                    .map(|p| TopicPartition::new(name.clone(), p.partition))
            })
            .collect();
        let request = FetchRequest::default()
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(BrokerId(self.node_id))
                    .with_replica_epoch(self.broker_epoch.load(Ordering::Acquire)),
            )
            .with_max_wait_ms(i32::try_from(self.settings.max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(self.settings.min_bytes)
            .with_max_bytes(self.settings.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(id, (_, parts))| {
                        FetchTopic::default()
                            .with_topic_id(::uuid::Uuid::from_u128(id))
                            .with_partitions(parts)
                    })
                    .collect(),
            );
        let response = match self.channel.send(&request, FETCH_VERSION).await {
            Ok(response) if response.error_code == NONE => response,
            Ok(response) => {
                warn!(
                    leader = self.leader,
                    error = response.error_code,
                    "fetch refused"
                );
                self.delay_all(partitions, &asked);
                return;
            }
            Err(error) => {
                warn!(leader = self.leader, %error, "fetch failed");
                self.delay_all(partitions, &asked);
                return;
            }
        };
        for topic in response.responses {
            let Some(name) = names.get(&topic.topic_id.as_u128()) else {
                continue;
            };
            for data in topic.partitions {
                let tp = TopicPartition::new(name.clone(), data.partition_index);
                let Some(p) = partitions.get_mut(&tp) else {
                    continue;
                };
                if !self.still_following(&tp, &p.target) {
                    continue;
                }
                self.handle_partition(&tp, p, data).await;
            }
        }
    }

    /// The leader refused this broker a replica's request: a
    /// misconfiguration, not a passing state, so said at every attempt (as
    /// Kafka's fetcher logs partition errors).
    fn unauthorized(&self, tp: &TopicPartition, api: &str) {
        warn!(
            partition = %tp,
            leader = self.leader,
            "the leader refused this replica's {api}: the inter-broker user needs CLUSTER_ACTION on the cluster"
        );
    }

    fn delay_all(
        &self,
        partitions: &mut BTreeMap<TopicPartition, Followed>,
        asked: &[TopicPartition],
    ) {
        for tp in asked {
            if let Some(p) = partitions.get_mut(tp) {
                self.delay(p);
            }
        }
    }

    /// One partition of a fetch response.
    async fn handle_partition(
        &mut self,
        tp: &TopicPartition,
        p: &mut Followed,
        data: PartitionData,
    ) {
        match data.error_code {
            NONE => {}
            OFFSET_OUT_OF_RANGE => {
                if let Err(error) = self.reset_out_of_range(tp, p).await {
                    info!(partition = %tp, %error, "cannot reset an out-of-range fetch offset yet");
                    self.delay(p);
                }
                return;
            }
            FENCED_LEADER_EPOCH => {
                info!(partition = %tp, leader = self.leader, "the leader has a newer epoch; waiting for the metadata");
                p.fenced = true;
                return;
            }
            TOPIC_AUTHORIZATION_FAILED => {
                self.unauthorized(tp, "Fetch");
                self.delay(p);
                return;
            }
            _ => {
                debug!(partition = %tp, leader = self.leader, error = data.error_code, "fetch error; backing off");
                self.delay(p);
                return;
            }
        }
        if data.diverging_epoch.epoch >= 0 && data.diverging_epoch.end_offset >= 0 {
            // KIP-320: truncate first; the data is fetched again after.
            let outcome = self
                .apply_truncation(
                    tp,
                    data.diverging_epoch.epoch,
                    data.diverging_epoch.end_offset,
                    p.fetch_offset,
                )
                .await;
            match outcome {
                Ok((end, completed)) => {
                    p.fetch_offset = end;
                    if !completed {
                        p.phase = Phase::Truncating;
                    }
                }
                Err(error) => {
                    warn!(partition = %tp, %error, "truncation failed");
                    self.delay(p);
                }
            }
            return;
        }
        let records = data.records.unwrap_or_default();
        let leader_high_watermark = data.high_watermark;
        let leader_log_start = data.log_start_offset;
        let applied = self
            .local(tp.clone(), move |s, tp| {
                append_fetched(s, tp, records, leader_log_start)
            })
            .await;
        match applied {
            Ok(end) => {
                p.fetch_offset = end;
                // Kafka's follower: its high watermark is the leader's,
                // never past its own log end.
                self.high_watermarks
                    .set(tp, leader_high_watermark.min(end).max(0));
            }
            Err(error) => {
                warn!(partition = %tp, leader = self.leader, %error, "appending fetched batches failed");
                self.delay(p);
            }
        }
    }

    /// Kafka's `fetchOffsetAndTruncate` after OFFSET_OUT_OF_RANGE.
    async fn reset_out_of_range(
        &mut self,
        tp: &TopicPartition,
        p: &mut Followed,
    ) -> Result<(), String> {
        let epoch = p.target.leader_epoch;
        let leader_end = self.leader_offset(tp, epoch, -1).await?;
        let local_end = self
            .local(tp.clone(), log_end_offset)
            .await
            .map_err(|e| e.to_string())?;
        if leader_end < local_end {
            warn!(partition = %tp, leader_end, local_end, "the leader's log is shorter: truncating to it");
            p.fetch_offset = self
                .local(tp.clone(), move |s, tp| {
                    s.replica.truncate_to(tp, leader_end)
                })
                .await
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        let leader_start = self.leader_offset(tp, epoch, -2).await?;
        if leader_start > local_end {
            warn!(partition = %tp, leader_start, local_end, "this log ends before the leader's starts: starting again there");
            self.local(tp.clone(), move |s, tp| {
                s.replica.truncate_fully_and_start_at(tp, leader_start)
            })
            .await
            .map_err(|e| e.to_string())?;
            p.fetch_offset = leader_start;
        } else {
            p.fetch_offset = local_end;
        }
        Ok(())
    }

    /// ListOffsets at the leader, as a replica: -1 latest, -2 earliest.
    async fn leader_offset(
        &mut self,
        tp: &TopicPartition,
        epoch: i32,
        timestamp: i64,
    ) -> Result<i64, String> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(&tp.topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_current_leader_epoch(epoch)
                    .with_timestamp(timestamp)])]);
        let response = self.channel.send(&request, LIST_OFFSETS_VERSION).await?;
        let answer = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == tp.partition)
            .ok_or("the leader answered no offset")?;
        if answer.error_code != NONE {
            return Err(format!("ListOffsets error {}", answer.error_code));
        }
        Ok(answer.offset)
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// The local log end offset (what the log's offsets call its end).
fn log_end_offset(services: &Services, tp: &TopicPartition) -> Local<i64> {
    Ok(services.logs.offsets(tp)?.high_watermark)
}

/// Appends fetched batches and follows the leader's log start offset;
/// the new log end offset.
fn append_fetched(
    services: &Services,
    tp: &TopicPartition,
    records: Bytes,
    leader_log_start: i64,
) -> Local<i64> {
    if !records.is_empty() {
        services.replica.append_replicated(tp, &records)?;
    }
    let offsets = services.logs.offsets(tp)?;
    let end = offsets.high_watermark;
    if leader_log_start > offsets.log_start_offset && leader_log_start <= end {
        // Kafka's `maybeIncrementLogStartOffset` on a follower.
        match services.logs.delete_records(tp, leader_log_start) {
            Ok(_) | Err(StorageError::PolicyViolation(_)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(end)
}
