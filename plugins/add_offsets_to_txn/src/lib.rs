//! AddOffsetsToTxn (ApiKey 25): a transactional producer that will commit a
//! consumer group's offsets (`sendOffsetsToTransaction`, consume-transform-
//! produce) first makes the group part of its transaction, so the offsets
//! are committed or discarded with it. As Kafka's
//! `KafkaApis.handleAddOffsetsToTxnRequest`.
//!
//! - Versions 0-4; flexible from v3.
//! - WRITE on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//!   then READ on the Group (else GROUP_AUTHORIZATION_FAILED).
//! - The host's `txn.add-offsets` makes the same producer id and epoch
//!   checks as AddPartitionsToTxn (Kafka adds the group's
//!   `__consumer_offsets` partition to the transaction); v0-1 clients get
//!   INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED.

use gregor_sdk::authorize::transactional_id_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::groups::group_allowed;
use gregor_sdk::kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use gregor_sdk::txn::{self, fenced_for_version};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

/// The first version that may carry PRODUCER_FENCED (KIP-588).
const FENCED_VERSION: i16 = 2;

struct AddOffsetsToTxn;

impl RawHandler for AddOffsetsToTxn {
    fn describe() -> ApiInfo {
        api_info::<AddOffsetsToTxnRequest>("AddOffsetsToTxn", 0, 4)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: AddOffsetsToTxnRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let transactional_id = request.transactional_id.as_str();
        let error_code = if !transactional_id_allowed(Operation::Write, transactional_id) {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        } else if !group_allowed(Operation::Read, &request.group_id) {
            ResponseError::GroupAuthorizationFailed.code()
        } else {
            let code = txn::add_offsets(
                transactional_id,
                request.producer_id.0,
                request.producer_epoch,
                &request.group_id,
            );
            fenced_for_version(code, ctx.api_version, FENCED_VERSION)
        };
        gregor_sdk::count_errors([error_code]);
        let response = AddOffsetsToTxnResponse::default()
            .with_error_code(error_code)
            .with_throttle_time_ms(request_throttle_ms());
        respond(&ctx, &response)
    }

    fn error_response(ctx: RequestContext, _body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        encode(
            &ctx,
            &AddOffsetsToTxnResponse::default().with_error_code(error_code),
        )
    }
}

gregor_sdk::export_raw_handler!(AddOffsetsToTxn);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        let response = AddOffsetsToTxnResponse::default().with_error_code(47);
        for version in 0..=4 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
