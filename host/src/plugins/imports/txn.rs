//! `txn`: producer ids for InitProducerId, from the broker's
//! [`crate::producer_ids::ProducerIdManager`]; the transaction coordinator
//! ([`crate::transactions`]) for the transaction APIs; and the partitions'
//! producer state for DescribeProducers and markers, from the
//! ReplicaManager. Blocking work (fsyncs, marker appends, waits for the
//! in-sync replicas of `__transaction_state`) runs here on the calling
//! worker, as the other storage imports do, and counts as the broker's
//! time (`HandlerState::broker_work`), not the guest's: a coordinator
//! waiting out a paused replica answers its own retriable error instead
//! of the module timing out with UNKNOWN_SERVER_ERROR.

use std::time::Instant;

use crate::coordinator::{CommitRequest, Pending};
use crate::error_code::ErrorCode;
use crate::log::TopicPartition;
use crate::plugins::bindings::handler::gregor::broker::txn::{
    self, ActiveProducer, ProducerIdAndEpoch, TransactionDescription, TransactionListing,
    TxnGroupMember, TxnOffset, TxnPartitionResult,
};
use crate::plugins::bindings::handler::gregor::broker::types::{
    KafkaError, TopicPartition as TxnPartition,
};
use crate::plugins::imports::{error_of, failure, result_of};
use crate::plugins::state::HandlerState;
use crate::replica::{MarkerWrite, MARKER_REPLICATION_TIMEOUT};
use crate::transactions::{PendingOffset, ProducerRef};

impl txn::Host for HandlerState {
    fn init_idempotent_producer(&mut self) -> ProducerIdAndEpoch {
        match self.broker_work(|state| state.services.producer_ids.allocate()) {
            Ok(producer_id) => ProducerIdAndEpoch {
                error: None,
                producer_id,
                producer_epoch: 0,
            },
            Err(error) => {
                tracing::error!("allocating a producer id failed: {error:#}");
                ProducerIdAndEpoch {
                    error: Some(failure(ErrorCode::KafkaStorageError.code())),
                    producer_id: -1,
                    producer_epoch: -1,
                }
            }
        }
    }

    fn init_transactional_producer(
        &mut self,
        transactional_id: String,
        transaction_timeout_ms: i32,
        producer_id: i64,
        producer_epoch: i16,
    ) -> ProducerIdAndEpoch {
        let answer = self.broker_work(|state| {
            let services = state.services.as_ref();
            services.transactions.init_producer_id(
                &services.producer_ids,
                services,
                &transactional_id,
                transaction_timeout_ms,
                (producer_id, producer_epoch),
            )
        });
        ProducerIdAndEpoch {
            error: error_of(answer.error_code),
            producer_id: answer.producer_id,
            producer_epoch: answer.producer_epoch,
        }
    }

    fn describe_producers(
        &mut self,
        topic: String,
        partition: i32,
    ) -> Result<Vec<ActiveProducer>, KafkaError> {
        let producers = self
            .services
            .replica
            .active_producers(&topic, partition)
            .map_err(|error| failure(error.error_code()))?;
        Ok(producers
            .into_iter()
            .map(|producer| ActiveProducer {
                producer_id: producer.producer_id,
                producer_epoch: producer.producer_epoch,
                last_sequence: producer.last_sequence,
                last_timestamp: producer.last_timestamp,
                current_txn_start_offset: producer.current_txn_start_offset,
            })
            .collect())
    }

    fn add_partitions(
        &mut self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TxnPartition>,
        verify_only: bool,
    ) -> Vec<TxnPartitionResult> {
        let wanted = coordinator_partitions(&partitions);
        let codes = self.broker_work(|state| {
            let services = state.services.as_ref();
            services.transactions.add_partitions(
                services,
                ProducerRef {
                    transactional_id: &transactional_id,
                    producer_id,
                    producer_epoch,
                },
                &wanted,
                verify_only,
            )
        });
        results(partitions, &codes)
    }

    fn add_offsets(
        &mut self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
    ) -> Result<(), KafkaError> {
        result_of(self.broker_work(|state| {
            let services = state.services.as_ref();
            services.transactions.add_offsets(
                ProducerRef {
                    transactional_id: &transactional_id,
                    producer_id,
                    producer_epoch,
                },
                &group_id,
            )
        }))
    }

    async fn txn_offset_commit(
        &mut self,
        transactional_id: String,
        group_id: String,
        producer_id: i64,
        producer_epoch: i16,
        member: TxnGroupMember,
        offsets: Vec<TxnOffset>,
    ) -> Vec<TxnPartitionResult> {
        let answer = |code: i16, offsets: Vec<TxnOffset>| -> Vec<TxnPartitionResult> {
            offsets
                .into_iter()
                .map(|offset| TxnPartitionResult {
                    topic: offset.topic,
                    partition: offset.partition,
                    error: error_of(code),
                })
                .collect()
        };
        // The member check is the group's (KIP-447), then the offsets wait
        // in the transaction.
        let member_error = self
            .services
            .groups
            .validate_txn_offset_commit(&CommitRequest {
                group_id: group_id.clone(),
                generation_id: member.generation_id,
                member_id: member.member_id,
                group_instance_id: member.group_instance_id,
                retention_time_ms: -1,
                offsets: Vec::new(),
            });
        if member_error != ErrorCode::None.code() {
            return answer(member_error, offsets);
        }
        let pending: Vec<PendingOffset> = offsets
            .iter()
            .map(|offset| PendingOffset {
                topic: offset.topic.clone(),
                partition: offset.partition,
                offset: offset.offset,
                leader_epoch: offset.leader_epoch,
                metadata: offset.metadata.clone(),
            })
            .collect();
        // On a cluster node the transaction is coordinated elsewhere (or
        // may move): the offsets wait at the group's coordinator for the
        // transaction's marker, as in Kafka.
        if self.services.transactions.in_cluster() {
            let commits: Vec<crate::coordinator::OffsetCommit> =
                pending.iter().map(PendingOffset::to_commit).collect();
            // The write waits for the ISR of the group's partition: the
            // broker's time, not the guest's.
            let started = Instant::now();
            let code = match self.services.groups.add_pending_txn_offsets(
                &group_id,
                producer_id,
                producer_epoch,
                &commits,
            ) {
                Pending::Ready(code) => code,
                Pending::Later(replicated) => replicated.await,
            };
            self.clock.add_host_wait(started.elapsed());
            return answer(code, offsets);
        }
        let code = self.broker_work(|state| {
            let services = state.services.as_ref();
            services.transactions.txn_offset_commit(
                ProducerRef {
                    transactional_id: &transactional_id,
                    producer_id,
                    producer_epoch,
                },
                &group_id,
                &pending,
            )
        });
        answer(code, offsets)
    }

    fn end_txn(
        &mut self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<(), KafkaError> {
        // The decision waits for the in-sync replicas of the id's
        // partition, then the markers are written: the broker's time.
        result_of(self.broker_work(|state| {
            let services = state.services.as_ref();
            services.transactions.end_txn(
                services,
                ProducerRef {
                    transactional_id: &transactional_id,
                    producer_id,
                    producer_epoch,
                },
                commit,
            )
        }))
    }

    async fn write_markers(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        partitions: Vec<TxnPartition>,
    ) -> Vec<TxnPartitionResult> {
        let started = Instant::now();
        let mut results = Vec::with_capacity(partitions.len());
        for partition in partitions {
            // A marker for __consumer_offsets ends the transaction's
            // pending offsets of that partition's groups. Either waits for
            // the partition's ISR, as Kafka appends markers with acks=all.
            let error_code = if partition.topic == crate::coordinator::offsets_topic::TOPIC {
                match self.services.groups.complete_transaction(
                    partition.partition,
                    producer_id,
                    producer_epoch,
                    commit,
                ) {
                    Pending::Ready(code) => code,
                    Pending::Later(replicated) => replicated.await,
                }
            } else {
                let marker = MarkerWrite {
                    topic: &partition.topic,
                    partition: partition.partition,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                };
                self.services
                    .replica
                    .write_marker_acked(marker, MARKER_REPLICATION_TIMEOUT)
                    .await
            };
            results.push(TxnPartitionResult {
                topic: partition.topic,
                partition: partition.partition,
                error: error_of(error_code),
            });
        }
        self.clock.add_host_wait(started.elapsed());
        results
    }

    fn describe_transaction(
        &mut self,
        transactional_id: String,
    ) -> Result<TransactionDescription, KafkaError> {
        // Waits for a change being written to the id's partition.
        let found = self
            .broker_work(|state| state.services.transactions.describe(&transactional_id))
            .map_err(failure)?;
        Ok(TransactionDescription {
            state: found.state.name().to_string(),
            producer_id: found.producer_id,
            producer_epoch: found.producer_epoch,
            timeout_ms: found.timeout_ms,
            start_timestamp_ms: found.start_ms,
            partitions: found
                .partitions
                .into_iter()
                .map(|p| TxnPartition {
                    topic: p.topic,
                    partition: p.partition,
                })
                .collect(),
        })
    }

    fn list_transactions(
        &mut self,
        states: Vec<String>,
        producer_ids: Vec<i64>,
        min_duration_ms: i64,
    ) -> Vec<TransactionListing> {
        let now = crate::clock::now_ms();
        self.broker_work(|state| {
            let services = state.services.as_ref();
            services
                .transactions
                .list(&states, &producer_ids, min_duration_ms, now)
        })
        .into_iter()
        .map(
            |(transactional_id, producer_id, state)| TransactionListing {
                transactional_id,
                producer_id,
                state: state.name().to_string(),
            },
        )
        .collect()
    }
}

fn coordinator_partitions(partitions: &[TxnPartition]) -> Vec<TopicPartition> {
    partitions
        .iter()
        .map(|p| TopicPartition::new(p.topic.clone(), p.partition))
        .collect()
}

/// Pairs each partition with its error code.
fn results(partitions: Vec<TxnPartition>, codes: &[i16]) -> Vec<TxnPartitionResult> {
    partitions
        .into_iter()
        .zip(
            codes
                .iter()
                .copied()
                .chain(std::iter::repeat(ErrorCode::CoordinatorNotAvailable.code())),
        )
        .map(|(p, error_code)| TxnPartitionResult {
            topic: p.topic,
            partition: p.partition,
            error: error_of(error_code),
        })
        .collect()
}
