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
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error.

use gregor_sdk::authorize::transactional_id_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::groups::group_allowed;
use gregor_sdk::kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use gregor_sdk::txn::{self, fenced_for_version};
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// The first version that may carry PRODUCER_FENCED (KIP-588).
const FENCED_VERSION: i16 = 2;

struct AddOffsetsToTxn;

impl Handler for AddOffsetsToTxn {
    gregor_sdk::api!(AddOffsetsToTxnRequest, 0..=4);

    fn handle(
        ctx: &RequestContext,
        request: &AddOffsetsToTxnRequest,
    ) -> Reply<AddOffsetsToTxnResponse> {
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
            )
            .error_code();
            fenced_for_version(code, ctx.api_version, FENCED_VERSION)
        };
        AddOffsetsToTxnResponse::default()
            .with_error_code(error_code)
            .into()
    }
}

gregor_sdk::export_handler!(AddOffsetsToTxn);

gregor_sdk::served_versions_test!(
    AddOffsetsToTxn,
    [AddOffsetsToTxnRequest::default()],
    [AddOffsetsToTxnResponse::default().with_error_code(47)]
);
