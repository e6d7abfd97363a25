//! ListTransactions (ApiKey 66): the transactional ids the coordinator
//! knows, with producer id and state, as Kafka's
//! `KafkaApis.handleListTransactionsRequest` and
//! `TransactionStateManager.listTransactionStates` (what
//! `kafka-transactions.sh list` and `find-hanging` use).
//!
//! - Versions 0-1 (flexible). v1 adds the duration filter (KIP-994: only
//!   transactions running longer than that many ms). Not v2 (KIP-1152's
//!   transactional id regex).
//! - Filters by state names and producer ids, empty meaning any. State
//!   names compare exactly; ones Kafka does not know are echoed in
//!   `unknown_state_filters` and match nothing (a filter of unknown states
//!   only lists nothing). Dead transactions, being expired, are never
//!   listed.
//! - Only ids the principal may DESCRIBE are listed, asked in one batch;
//!   the others are left out silently.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error and no transactions.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::list_transactions_response::TransactionState;
use gregor_sdk::kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::txn::{self, STATES};
use gregor_sdk::{Handler, Reply, RequestContext};

struct ListTransactions;

impl Handler for ListTransactions {
    gregor_sdk::api!(ListTransactionsRequest, 0..=1);

    fn handle(
        ctx: &RequestContext,
        request: &ListTransactionsRequest,
    ) -> Reply<ListTransactionsResponse> {
        let (known, unknown) = split_states(&request.state_filters);
        let duration = if ctx.api_version >= 1 {
            request.duration_filter
        } else {
            -1
        };
        let mut listed = if !request.state_filters.is_empty() && known.is_empty() {
            // Only unknown states asked for: none can match.
            Vec::new()
        } else {
            let producer_ids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
            txn::list_transactions(&known, &producer_ids, duration)
        };
        listed.retain(|t| t.state != "Dead");
        let allowed = allowed_names(
            Operation::Describe,
            ResourceType::TransactionalId,
            listed.iter().map(|t| t.transactional_id.as_str()),
        );
        listed.retain(|t| allowed.contains(&t.transactional_id));
        let states = listed.into_iter().map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(StrBytes::from_string(t.state))
        });
        ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown.iter().map(|s| str_bytes(s)).collect())
            .with_transaction_states(states.collect())
            .into()
    }
}

/// The state filter split into the names Kafka knows and the others, each
/// once, in request order.
fn split_states(filters: &[StrBytes]) -> (Vec<String>, Vec<String>) {
    let mut known: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for name in filters {
        let list = if STATES.contains(&name.as_str()) {
            &mut known
        } else {
            &mut unknown
        };
        if !list.iter().any(|seen| seen == name.as_str()) {
            list.push(name.to_string());
        }
    }
    (known, unknown)
}

gregor_sdk::export_handler!(ListTransactions);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn unknown_states_are_reported_once() {
        let filters = [
            "Ongoing",
            "ongoing",
            "Running",
            "Ongoing",
            "PrepareEpochFence",
            "Running",
        ]
        .map(str_bytes);
        let (known, unknown) = split_states(&filters);
        assert_eq!(known, vec!["Ongoing", "PrepareEpochFence"]);
        assert_eq!(unknown, vec!["ongoing", "Running"]);
        assert_eq!(split_states(&[]), (Vec::new(), Vec::new()));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let state = TransactionState::default()
            .with_transactional_id(TransactionalId(str_bytes("t")))
            .with_producer_id(ProducerId(3))
            .with_transaction_state(str_bytes("Ongoing"));
        let response = ListTransactionsResponse::default()
            .with_unknown_state_filters(vec![str_bytes("Running")])
            .with_transaction_states(vec![state]);
        assert_encodes_for_served_versions::<ListTransactions>(
            &[ListTransactionsRequest::default()],
            &[response],
        );
    }
}
