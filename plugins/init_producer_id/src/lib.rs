//! InitProducerId (ApiKey 22): a producer id and epoch for an idempotent
//! producer, as Kafka's `KafkaApis.handleInitProducerIdRequest` and
//! `TransactionCoordinator.handleInitProducerId` without a transactional id.
//!
//! - Versions 0-5; flexible from v2.
//! - Authorization as Kafka: IDEMPOTENT_WRITE on the Cluster, or WRITE on
//!   some topic as the authorizer's `authorize-by-resource-type` answers
//!   (Kafka's `authorizeByResourceType`: ACL patterns alone, so a WRITE ACL
//!   on a topic not created yet counts). Refused:
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - The host allocates the id (`txn.init-idempotent-producer`), durably, so
//!   an id is never reused; the epoch is 0. As in Kafka, the producer id and
//!   epoch a v3+ idempotent producer sends are ignored: it gets a new id.
//! - A transactional id: WRITE on that TransactionalId first
//!   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the host's
//!   `txn.init-transactional-producer`: a new producer id at epoch 0 the
//!   first time, an epoch bump (fencing older instances) after that;
//!   PRODUCER_FENCED for a v3+ call naming a stale epoch (v3 clients,
//!   which predate that code, get INVALID_PRODUCER_EPOCH as in Kafka), and
//!   INVALID_TRANSACTION_TIMEOUT for a timeout outside
//!   (0, transaction.max.timeout.ms]. The transaction APIs that follow are
//!   their own modules (`add_partitions_to_txn`, `end_txn`, ...).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error, producer id -1 and epoch -1.

use gregor_sdk::authorize::{cluster_allowed, transactional_id_allowed};
use gregor_sdk::authz::{self, Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use gregor_sdk::AnswerError;
use gregor_sdk::{txn, Handler, Reply, RequestContext, ResponseError};

struct InitProducerId;

impl Handler for InitProducerId {
    gregor_sdk::api!(InitProducerIdRequest, 0..=5);

    fn handle(
        ctx: &RequestContext,
        request: &InitProducerIdRequest,
    ) -> Reply<InitProducerIdResponse> {
        match &request.transactional_id {
            Some(id) if !id.is_empty() => transactional(request, id.as_str(), ctx.api_version),
            _ if !idempotent_write_allowed() => {
                failed(ResponseError::ClusterAuthorizationFailed.code())
            }
            _ => {
                let answer = txn::init_idempotent_producer();
                InitProducerIdResponse::default()
                    .with_error_code(answer.error.error_code())
                    .with_producer_id(ProducerId(answer.producer_id))
                    .with_producer_epoch(answer.producer_epoch)
            }
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: the error, producer id and epoch -1.
    fn failed(
        _: &RequestContext,
        _: &InitProducerIdRequest,
        error_code: i16,
    ) -> InitProducerIdResponse {
        failed(error_code)
    }
}

/// Kafka: IDEMPOTENT_WRITE on the Cluster, or WRITE on some topic by the
/// authorizer's ACL patterns, whether or not a topic of that name exists.
fn idempotent_write_allowed() -> bool {
    cluster_allowed(Operation::IdempotentWrite)
        || authz::authorize_by_resource_type(Operation::Write, ResourceType::Topic)
}

fn transactional(
    request: &InitProducerIdRequest,
    transactional_id: &str,
    version: i16,
) -> InitProducerIdResponse {
    if !transactional_id_allowed(Operation::Write, transactional_id) {
        return failed(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let answer = txn::init_transactional_producer(
        transactional_id,
        request.transaction_timeout_ms,
        request.producer_id.0,
        request.producer_epoch,
    );
    InitProducerIdResponse::default()
        .with_error_code(txn::fenced_for_version(
            answer.error.error_code(),
            version,
            4,
        ))
        .with_producer_id(ProducerId(answer.producer_id))
        .with_producer_epoch(answer.producer_epoch)
}

fn failed(error_code: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(error_code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

gregor_sdk::export_handler!(InitProducerId);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    /// No IDEMPOTENT_WRITE; WRITE on topics by type as `by_type` says.
    struct Producer {
        by_type: bool,
    }

    impl FakeHost for Producer {
        fn authorize(&self, action: &Action) -> bool {
            action.operation != Operation::IdempotentWrite
        }
        fn authorize_by_resource_type(
            &self,
            operation: Operation,
            resource_type: ResourceType,
        ) -> bool {
            self.by_type && (operation, resource_type) == (Operation::Write, ResourceType::Topic)
        }
    }

    #[test]
    fn without_idempotent_write_the_authorizer_answers_by_resource_type() {
        let request = InitProducerIdRequest::default();
        let denied = fake::handle::<InitProducerId>(Producer { by_type: false }, 4, &request);
        let code = denied.response.map(|r| r.error_code);
        assert_eq!(code, Some(ResponseError::ClusterAuthorizationFailed.code()));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let response = failed(ResponseError::UnknownServerError.code());
        assert_eq!(
            (response.producer_id, response.producer_epoch),
            (ProducerId(-1), -1)
        );
        let granted = InitProducerIdResponse::default().with_producer_id(ProducerId(7));
        assert_encodes_for_served_versions::<InitProducerId>(
            &[InitProducerIdRequest::default()],
            &[response, granted],
        );
    }
}
