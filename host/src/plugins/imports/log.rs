//! `log`: appends, fetches and offset lookups, via the ReplicaManager.
//! A fetch that must wait for data parks its request (`plugins::deferred`)
//! instead of holding the guest's instance for the long poll. The records
//! read go to the guest as record sets it references (`record_set`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Resource;

use crate::error_code::ErrorCode;
use crate::log::file_records::Records;
use crate::log::legacy_format;
use crate::plugins::bindings::handler::gregor::broker::log::{
    self, AbortedTransaction, AppendResult, DeleteRecordsResult, EpochEndOffset, FetchOptions,
    FetchPartition, FetchedPartition, LeaderEpochEnd, LogDir, LogDirPartition, OffsetAnswer,
    RecordError, ReplicaFetchPartition, ReplicaFetchedPartition,
};
use crate::plugins::bindings::handler::gregor::broker::types::KafkaError;
use crate::plugins::deferred::Memo;
use crate::plugins::imports::record_set::RecordSet;
use crate::plugins::imports::{error_field, error_of, result_of};
use crate::plugins::state::HandlerState;
use crate::replica;

/// Kafka's isolation level 1.
const READ_COMMITTED: i8 = 1;
/// How long `append` (without a timeout) lets acks=all wait: the
/// producer's default `request.timeout.ms`.
const DEFAULT_APPEND_TIMEOUT: Duration = Duration::from_secs(30);

impl log::Host for HandlerState {
    async fn append(
        &mut self,
        topic: String,
        partition: i32,
        records: Vec<u8>,
        required_acks: i16,
    ) -> AppendResult {
        self.append_waiting(
            topic,
            partition,
            &records,
            required_acks,
            DEFAULT_APPEND_TIMEOUT,
        )
        .await
    }

    async fn append_within(
        &mut self,
        topic: String,
        partition: i32,
        records: Vec<u8>,
        required_acks: i16,
        timeout_ms: i32,
    ) -> AppendResult {
        let timeout = Duration::from_millis(u64::try_from(timeout_ms.max(0)).unwrap_or(0));
        self.append_waiting(topic, partition, &records, required_acks, timeout)
            .await
    }

    fn request_records(
        &mut self,
        topic_index: u32,
        partition_index: u32,
    ) -> wasmtime::Result<Option<Resource<RecordSet>>> {
        let held = self
            .request_records
            .as_ref()
            .and_then(|held| held.get(topic_index, partition_index))
            .cloned();
        held.map(|records| self.record_set(Records::from(records)))
            .transpose()
    }

    async fn append_records_within(
        &mut self,
        topic: String,
        partition: i32,
        records: Resource<RecordSet>,
        required_acks: i16,
        timeout_ms: i32,
    ) -> wasmtime::Result<AppendResult> {
        // The buffer is shared, not copied: the handle stays the guest's.
        let records = self.record_set_bytes(&records)?;
        let timeout = Duration::from_millis(u64::try_from(timeout_ms.max(0)).unwrap_or(0));
        Ok(self
            .append_waiting(topic, partition, &records, required_acks, timeout)
            .await)
    }

    async fn fetch_or_park(
        &mut self,
        partitions: Vec<FetchPartition>,
        options: FetchOptions,
    ) -> wasmtime::Result<Option<Vec<FetchedPartition>>> {
        let Some(results) = self
            .fetch_deferred(consumer_requests(partitions), options, -1)
            .await
        else {
            return Ok(None);
        };
        let fetched = results.into_iter().map(|r| self.handed_over(r));
        Ok(Some(fetched.collect::<wasmtime::Result<_>>()?))
    }

    async fn replica_fetch_or_park(
        &mut self,
        replica_id: i32,
        partitions: Vec<ReplicaFetchPartition>,
        options: FetchOptions,
    ) -> wasmtime::Result<Option<Vec<ReplicaFetchedPartition>>> {
        let requests = partitions
            .into_iter()
            .map(|p| replica::FetchPartition {
                topic: p.topic,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
            })
            .collect();
        // A follower always reads uncommitted: it copies the whole log.
        let options = FetchOptions {
            isolation_level: 0,
            ..options
        };
        let Some(results) = self
            .fetch_deferred(requests, options, replica_id.max(0))
            .await
        else {
            return Ok(None);
        };
        let fetched = results.into_iter().map(|r| {
            let diverging_epoch = r
                .diverging_epoch
                .map(|(epoch, end_offset)| EpochEndOffset { epoch, end_offset });
            Ok(ReplicaFetchedPartition {
                fetched: self.handed_over(r)?,
                diverging_epoch,
            })
        });
        Ok(Some(fetched.collect::<wasmtime::Result<_>>()?))
    }

    async fn fetch_legacy_or_park(
        &mut self,
        partitions: Vec<FetchPartition>,
        options: FetchOptions,
        magic: i8,
    ) -> wasmtime::Result<Option<Vec<FetchedPartition>>> {
        let fetch_offsets: Vec<i64> = partitions.iter().map(|p| p.fetch_offset).collect();
        let Some(fetched) = self
            .fetch_deferred(consumer_requests(partitions), options, -1)
            .await
        else {
            return Ok(None);
        };
        let started = Instant::now();
        let converted: Vec<replica::FetchedPartition> = fetched
            .into_iter()
            .zip(fetch_offsets)
            .map(|(partition, fetch_offset)| self.down_converted(partition, magic, fetch_offset))
            .collect();
        self.clock.add_host_wait(started.elapsed());
        let fetched = converted.into_iter().map(|r| self.handed_over(r));
        Ok(Some(fetched.collect::<wasmtime::Result<_>>()?))
    }

    fn list_offset(
        &mut self,
        topic: String,
        partition: i32,
        timestamp: i64,
        isolation_level: i8,
    ) -> OffsetAnswer {
        let answer = self.services.replica.list_offset(
            &topic,
            partition,
            timestamp,
            isolation_level == READ_COMMITTED,
        );
        OffsetAnswer {
            error: error_of(answer.error_code),
            offset: answer.offset,
            timestamp: answer.timestamp,
        }
    }

    fn offset_for_leader_epoch(
        &mut self,
        topic: String,
        partition: i32,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> LeaderEpochEnd {
        let tp = crate::log::TopicPartition::new(topic, partition);
        let answer =
            self.services
                .replica
                .offset_for_leader_epoch(&tp, current_leader_epoch, leader_epoch);
        LeaderEpochEnd {
            error: error_of(answer.error_code),
            leader_epoch: answer.leader_epoch,
            end_offset: answer.end_offset,
        }
    }

    fn delete_records(
        &mut self,
        topic: String,
        partition: i32,
        offset: i64,
    ) -> DeleteRecordsResult {
        let outcome = self
            .services
            .replica
            .delete_records(&topic, partition, offset);
        DeleteRecordsResult {
            error: error_field(outcome.error_code, outcome.error_message),
            low_watermark: outcome.low_watermark,
        }
    }

    fn describe_log_dirs(&mut self) -> Vec<LogDir> {
        self.services
            .replica
            .describe_log_dirs()
            .into_iter()
            .map(|dir| LogDir {
                path: dir.path,
                error: error_of(dir.error_code),
                partitions: dir
                    .partitions
                    .into_iter()
                    .map(|p| LogDirPartition {
                        topic: p.topic,
                        partition: p.partition,
                        size: p.size,
                    })
                    .collect(),
                total_bytes: dir.total_bytes,
                usable_bytes: dir.usable_bytes,
            })
            .collect()
    }

    fn alter_log_dir(
        &mut self,
        topic: String,
        partition: i32,
        log_dir: String,
    ) -> Result<(), KafkaError> {
        result_of(
            self.services
                .replica
                .alter_log_dir(&topic, partition, &log_dir),
        )
    }
}

impl HandlerState {
    /// An append, and for acks=all the wait for the ISR (suspending only
    /// this guest), counted as host wait.
    async fn append_waiting(
        &mut self,
        topic: String,
        partition: i32,
        records: &[u8],
        required_acks: i16,
        timeout: Duration,
    ) -> AppendResult {
        // A shadow's appends validate and change nothing (dry_run.rs).
        if self.dry_run {
            return self.dry_append(&topic, partition, records, required_acks);
        }
        let started = Instant::now();
        let transactions = &self.services.transactions;
        let in_transaction = |producer_id: i64, producer_epoch: i16| {
            transactions.includes_partition(producer_id, producer_epoch, &topic, partition)
        };
        let outcome = self
            .services
            .replica
            .append_acked(
                &topic,
                partition,
                records,
                required_acks,
                timeout,
                &in_transaction,
            )
            .await;
        self.clock.add_host_wait(started.elapsed());
        AppendResult {
            error: error_field(outcome.error_code, outcome.error_message),
            base_offset: outcome.base_offset,
            log_append_time_ms: outcome.log_append_time_ms,
            log_start_offset: outcome.log_start_offset,
            record_errors: outcome
                .record_errors
                .into_iter()
                .map(|e| RecordError {
                    batch_index: e.batch_index,
                    message: Some(e.message),
                })
                .collect(),
        }
    }

    /// A fetch that parks its request rather than wait in the call: the
    /// answer, or none once parked (see `plugins::deferred`).
    async fn fetch_deferred(
        &mut self,
        requests: Vec<replica::FetchPartition>,
        options: FetchOptions,
        replica_id: i32,
    ) -> Option<Vec<replica::FetchedPartition>> {
        let mut options = replica::FetchOptions {
            max_wait: Duration::from_millis(u64::try_from(options.max_wait_ms.max(0)).unwrap_or(0)),
            min_bytes: usize::try_from(options.min_bytes.max(0)).unwrap_or(0),
            max_bytes: usize::try_from(options.max_bytes.max(0)).unwrap_or(0),
            read_committed: options.isolation_level == READ_COMMITTED,
            replica_id,
            // A shadow's follower fetch moves nothing (dry_run.rs).
            dry_run: self.dry_run,
        };
        if let Some(results) = self.deferral.fetch_answer(&requests) {
            return Some(results);
        }
        if !self.deferral.may_park() {
            // A replay asking for something else than it waited for: what
            // is there now.
            options.max_wait = Duration::ZERO;
        }
        let replica = &self.services.replica;
        if let Some(results) = replica.fetch_now(&requests, options) {
            return Some(results);
        }
        let services = Arc::clone(&self.services);
        self.deferral.park(Box::pin(async move {
            let results = services.replica.fetch(&requests, options).await;
            Memo::Fetch {
                partitions: requests,
                results,
            }
        }));
        None
    }
}

/// A consumer's partitions: no leader epochs checked.
fn consumer_requests(partitions: Vec<FetchPartition>) -> Vec<replica::FetchPartition> {
    partitions
        .into_iter()
        .map(|p| replica::FetchPartition {
            topic: p.topic,
            partition: p.partition,
            fetch_offset: p.fetch_offset,
            partition_max_bytes: p.partition_max_bytes,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        })
        .collect()
}

impl HandlerState {
    /// One partition read for Fetch v0-3, as Kafka 3.9's
    /// `maybeConvertFetchedData`: refused when its topic is zstd or has
    /// down-conversion disabled, else its batches as legacy messages.
    fn down_converted(
        &self,
        mut partition: replica::FetchedPartition,
        magic: i8,
        fetch_offset: i64,
    ) -> replica::FetchedPartition {
        let topics = &self.services.topics;
        let config = |name: &str| topics.config_value(&partition.topic, name);
        let refusal = if config("compression.type").as_deref() == Some("zstd") {
            Some(ErrorCode::UnsupportedCompressionType)
        } else if config("message.downconversion.enable").is_some_and(|v| v.trim() != "true") {
            Some(ErrorCode::UnsupportedVersion)
        } else {
            None
        };
        let converted = match refusal {
            Some(error) => Err(error.code()),
            None => match partition.records.load() {
                Ok(records) => {
                    legacy_format::down_convert(&records, magic, fetch_offset).map_err(|e| {
                        tracing::warn!(
                            topic = %partition.topic,
                            partition = partition.partition,
                            "cannot down-convert to magic v{magic}: {e}"
                        );
                        e.error_code()
                    })
                }
                Err(e) => {
                    tracing::warn!(
                        topic = %partition.topic,
                        partition = partition.partition,
                        "cannot read the records to down-convert: {e}"
                    );
                    Err(ErrorCode::KafkaStorageError.code())
                }
            },
        };
        match converted {
            Ok(records) => partition.records = Records::from(records),
            Err(code) => {
                partition.error_code = code;
                partition.high_watermark = -1;
                partition.last_stable_offset = -1;
                partition.log_start_offset = -1;
                partition.records = Records::default();
                partition.aborted_transactions = Vec::new();
            }
        }
        partition
    }
}

impl HandlerState {
    /// A partition read, its records handed over as a record set.
    fn handed_over(&mut self, r: replica::FetchedPartition) -> wasmtime::Result<FetchedPartition> {
        Ok(FetchedPartition {
            topic: r.topic,
            partition: r.partition,
            error: error_of(r.error_code),
            high_watermark: r.high_watermark,
            last_stable_offset: r.last_stable_offset,
            log_start_offset: r.log_start_offset,
            records: self.record_set(r.records)?,
            aborted_transactions: r
                .aborted_transactions
                .into_iter()
                .map(|txn| AbortedTransaction {
                    producer_id: txn.producer_id,
                    first_offset: txn.first_offset,
                })
                .collect(),
        })
    }
}
