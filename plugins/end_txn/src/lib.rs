//! EndTxn (ApiKey 26): a transactional producer commits or aborts its
//! ongoing transaction, as Kafka's `KafkaApis.handleEndTxnRequest` and
//! `TransactionCoordinator.handleEndTransaction`.
//!
//! - Versions 0-4; flexible from v3. Not v5 (KIP-890 part 2: the epoch
//!   bumps on every transaction and the response carries the new producer
//!   id and epoch), which the coordinator does not do.
//! - WRITE on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//! - The host's `txn.end-txn` checks the producer id and epoch, writes the
//!   markers to every partition in the transaction and applies (or drops)
//!   its pending offsets before answering; a retried end is answered with
//!   success, the opposite end with INVALID_TXN_STATE. v0-1 clients get
//!   INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error.

use gregor_sdk::authorize::transactional_id_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use gregor_sdk::txn::{self, fenced_for_version};
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// The first version that may carry PRODUCER_FENCED (KIP-588).
const FENCED_VERSION: i16 = 2;

struct EndTxn;

impl Handler for EndTxn {
    gregor_sdk::api!(EndTxnRequest, 0..=4);

    fn handle(ctx: &RequestContext, request: &EndTxnRequest) -> Reply<EndTxnResponse> {
        let transactional_id = request.transactional_id.as_str();
        let error_code = if !transactional_id_allowed(Operation::Write, transactional_id) {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        } else {
            let code = txn::end_txn(
                transactional_id,
                request.producer_id.0,
                request.producer_epoch,
                request.committed,
            )
            .error_code();
            fenced_for_version(code, ctx.api_version, FENCED_VERSION)
        };
        EndTxnResponse::default().with_error_code(error_code).into()
    }
}

gregor_sdk::export_handler!(EndTxn);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let response = EndTxnResponse::default().with_error_code(48);
        assert_encodes_for_served_versions::<EndTxn>(
            &[EndTxnRequest::default()],
            std::slice::from_ref(&response),
        );
        for version in 0..=4 {
            let mut encoded = Vec::new();
            assert!(response.encode(&mut encoded, version).is_ok(), "v{version}");
            // throttle_time_ms and error_code only (plus tagged fields from v3).
            assert_eq!(
                encoded.len(),
                if version >= 3 { 7 } else { 6 },
                "v{version}"
            );
        }
    }
}
