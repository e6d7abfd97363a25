//! The ReplicaManager of Gregor: what KafkaApis asks of the partition logs.
//! Appends go to the log store and wake waiting fetches; a fetch reads the
//! partitions in request order and, when fewer than `min_bytes` are
//! available, waits for an append or for `max_wait_ms` (Kafka's fetch
//! purgatory) as an async wait that suspends only the calling guest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::log::{LogStore, StorageError, TopicPartition};

/// Kafka error codes the replica manager answers with directly.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub topic: String,
    pub partition: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct FetchOptions {
    pub max_wait: Duration,
    pub min_bytes: usize,
    pub max_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct FetchedPartition {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAnswer {
    pub error_code: i16,
    pub offset: i64,
    pub timestamp: i64,
}

pub struct ReplicaManager {
    logs: Arc<dyn LogStore>,
    appended: Notify,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl ReplicaManager {
    pub fn new(logs: Arc<dyn LogStore>) -> Self {
        Self {
            logs,
            appended: Notify::new(),
        }
    }

    /// Appends one partition's batches. On a single node acks=1 and
    /// acks=-1 are both satisfied once the write is in the log.
    pub fn append(&self, topic: &str, partition: i32, records: &[u8], acks: i16) -> AppendOutcome {
        if !matches!(acks, -1..=1) {
            return AppendOutcome::failed(codes::INVALID_REQUIRED_ACKS, None);
        }
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        match self.logs.append(&tp, records, now_ms()) {
            Ok(info) => {
                self.appended.notify_waiters();
                AppendOutcome {
                    error_code: codes::NONE,
                    error_message: None,
                    base_offset: info.base_offset,
                    log_append_time_ms: info.log_append_time_ms,
                    log_start_offset: info.log_start_offset,
                }
            }
            Err(error) => AppendOutcome::failed(error.error_code(), message_of(&error)),
        }
    }

    /// Reads the partitions, waiting for `min_bytes` up to `max_wait`.
    pub async fn fetch(
        &self,
        partitions: &[FetchPartition],
        options: FetchOptions,
    ) -> Vec<FetchedPartition> {
        let deadline = Instant::now() + options.max_wait;
        loop {
            // Register interest before reading so an append between the
            // read and the wait is not missed.
            let appended = self.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();
            let results = self.read_all(partitions, options.max_bytes);
            let bytes: usize = results.iter().map(|result| result.records.len()).sum();
            let has_error = results
                .iter()
                .any(|result| result.error_code != codes::NONE);
            if bytes >= options.min_bytes || has_error || Instant::now() >= deadline {
                return results;
            }
            tokio::select! {
                _ = &mut appended => {}
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return self.read_all(partitions, options.max_bytes);
                }
            }
        }
    }

    /// One pass over the partitions with Kafka's byte limits: the response
    /// stops growing at `max_bytes`, but the first batch of the response is
    /// always whole so that a consumer makes progress (KIP-74).
    fn read_all(&self, partitions: &[FetchPartition], max_bytes: usize) -> Vec<FetchedPartition> {
        let mut remaining = max_bytes;
        let mut first_data = true;
        partitions
            .iter()
            .map(|request| {
                let tp = TopicPartition {
                    topic: request.topic.clone(),
                    partition: request.partition,
                };
                let limit = usize::try_from(request.partition_max_bytes.max(0))
                    .unwrap_or(0)
                    .min(remaining);
                let mut fetched = FetchedPartition {
                    topic: request.topic.clone(),
                    partition: request.partition,
                    error_code: codes::NONE,
                    high_watermark: -1,
                    log_start_offset: -1,
                    records: Vec::new(),
                };
                match self.logs.read(&tp, request.fetch_offset, limit, first_data) {
                    Ok(read) => {
                        fetched.high_watermark = read.high_watermark;
                        fetched.log_start_offset = read.log_start_offset;
                        fetched.records = read.records;
                        if !fetched.records.is_empty() {
                            first_data = false;
                            remaining = remaining.saturating_sub(fetched.records.len());
                        }
                    }
                    Err(error) => {
                        fetched.error_code = error.error_code();
                        if let Ok(offsets) = self.logs.offsets(&tp) {
                            fetched.high_watermark = offsets.high_watermark;
                            fetched.log_start_offset = offsets.log_start_offset;
                        }
                    }
                }
                fetched
            })
            .collect()
    }

    /// ListOffsets for one partition: -1 latest, -2 earliest, -3 max
    /// timestamp, -4 earliest local, -5 latest tiered, otherwise by
    /// timestamp.
    pub fn list_offset(&self, topic: &str, partition: i32, timestamp: i64) -> OffsetAnswer {
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        let answer = |offset, timestamp| OffsetAnswer {
            error_code: codes::NONE,
            offset,
            timestamp,
        };
        let result = match timestamp {
            -1 => self.logs.offsets(&tp).map(|o| answer(o.high_watermark, -1)),
            -2 | -4 => self
                .logs
                .offsets(&tp)
                .map(|o| answer(o.log_start_offset, -1)),
            // Latest tiered offset: with no tiered storage there is none.
            -5 => Ok(answer(-1, -1)),
            -3 => self.logs.max_timestamp(&tp).map(|found| match found {
                Some((offset, ts)) => answer(offset, ts),
                None => answer(-1, -1),
            }),
            ts if ts >= 0 => self
                .logs
                .offset_for_timestamp(&tp, ts)
                .map(|found| match found {
                    Some((offset, ts)) => answer(offset, ts),
                    None => answer(-1, -1),
                }),
            _ => {
                return OffsetAnswer {
                    error_code: 42, // INVALID_REQUEST: an unknown special timestamp
                    offset: -1,
                    timestamp: -1,
                };
            }
        };
        result.unwrap_or_else(|error| OffsetAnswer {
            error_code: error.error_code(),
            offset: -1,
            timestamp: -1,
        })
    }
}

impl AppendOutcome {
    fn failed(error_code: i16, error_message: Option<String>) -> Self {
        Self {
            error_code,
            error_message,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
        }
    }
}

fn message_of(error: &StorageError) -> Option<String> {
    match error {
        StorageError::UnknownTopicOrPartition | StorageError::OffsetOutOfRange => None,
        other => Some(other.to_string()),
    }
}
