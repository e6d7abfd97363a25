//! `quotas`: client quota enforcement for the request being handled (its
//! principal and client id, never ones the guest names) and the client
//! quota store. Every throttle handed out is also remembered for the call,
//! so the host mutes the connection even if the handler forgets.

use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::quotas::{
    self, EntityPart, FilterComponent, MatchType, MutationAnswer, QuotaEntry, QuotaOp, QuotaValue,
};
use crate::plugins::bindings::handler::gregor::broker::types::KafkaError;
use crate::plugins::imports::error_of;
use crate::plugins::state::HandlerState;
use crate::quota::{self as host, Client, QuotaError};

fn kafka_error(error: QuotaError) -> KafkaError {
    KafkaError {
        code: error.code,
        message: Some(error.message),
    }
}

impl HandlerState {
    /// The principal and client id of the request being handled.
    fn quota_identity(&self) -> (String, Option<String>) {
        let principal = self
            .session
            .as_ref()
            .map(|session| session.principal().to_string())
            .unwrap_or_default();
        (principal, self.client_id.clone())
    }
}

impl quotas::Host for HandlerState {
    fn record_produce(&mut self) -> i32 {
        if self.dry_run {
            return 0;
        }
        let (principal, client_id) = self.quota_identity();
        let client = Client::new(&principal, client_id.as_deref());
        let throttle = self
            .services
            .quotas
            .record_produce(client, self.quota.request_size);
        self.quota.throttle(throttle);
        throttle
    }

    fn fetch_window_bytes(&mut self) -> Option<i64> {
        let (principal, client_id) = self.quota_identity();
        self.services
            .quotas
            .fetch_window_bytes(Client::new(&principal, client_id.as_deref()))
    }

    fn record_fetch(&mut self, response_bytes: i64) -> i32 {
        if self.dry_run {
            return 0;
        }
        let (principal, client_id) = self.quota_identity();
        let client = Client::new(&principal, client_id.as_deref());
        let throttle = self.services.quotas.record_fetch(client, response_bytes);
        self.quota.throttle(throttle);
        throttle
    }

    fn unrecord_fetch(&mut self, response_bytes: i64) {
        if self.dry_run {
            return;
        }
        let (principal, client_id) = self.quota_identity();
        self.services.quotas.unrecord_fetch(
            Client::new(&principal, client_id.as_deref()),
            response_bytes,
        );
    }

    fn record_request(&mut self, exempt: bool) -> i32 {
        if self.quota.request_recorded || self.dry_run {
            return 0;
        }
        self.quota.request_recorded = true;
        if exempt {
            return 0;
        }
        let (principal, client_id) = self.quota_identity();
        let client = Client::new(&principal, client_id.as_deref());
        let client_throttle = self
            .services
            .quotas
            .record_request(client, self.clock.guest_time());
        // The module's own CPU limit throttles like a request quota.
        let throttle = client_throttle.max(crate::plugins::metering::request_throttle(self));
        self.quota.throttle(throttle);
        throttle
    }

    fn record_mutations(&mut self, mutations: u32, strict: bool) -> MutationAnswer {
        if self.dry_run {
            return MutationAnswer {
                error: None,
                throttle_time_ms: 0,
            };
        }
        let (principal, client_id) = self.quota_identity();
        let client = Client::new(&principal, client_id.as_deref());
        let (error_code, throttle_time_ms) = self
            .services
            .quotas
            .record_mutations(client, mutations, strict);
        self.quota.throttle(throttle_time_ms);
        MutationAnswer {
            error: error_of(error_code),
            throttle_time_ms,
        }
    }

    fn describe(
        &mut self,
        components: Vec<FilterComponent>,
        strict: bool,
    ) -> Result<Vec<QuotaEntry>, KafkaError> {
        let mut filter = Vec::with_capacity(components.len());
        for component in components {
            let matching = match (component.match_type, component.match_) {
                (MatchType::Exact, Some(name)) => host::Match::Exact(name),
                (MatchType::Exact, None) => {
                    return Err(KafkaError {
                        code: ErrorCode::InvalidRequest.code(),
                        message: Some(
                            "Request specified MATCH_TYPE_EXACT, but set match string to null."
                                .into(),
                        ),
                    })
                }
                (MatchType::Default, None) => host::Match::Default,
                (MatchType::Specified, None) => host::Match::Specified,
                (kind, Some(_)) => {
                    let name = if kind == MatchType::Default {
                        "MATCH_TYPE_DEFAULT"
                    } else {
                        "MATCH_TYPE_SPECIFIED"
                    };
                    return Err(KafkaError {
                        code: ErrorCode::InvalidRequest.code(),
                        message: Some(format!(
                            "Request specified {name}, but also specified a match string."
                        )),
                    });
                }
            };
            filter.push((component.entity_type, matching));
        }
        self.services
            .quotas
            .describe(&filter, strict)
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|(entity, values)| QuotaEntry {
                        entity: entity
                            .into_iter()
                            .map(|(entity_type, name)| EntityPart { entity_type, name })
                            .collect(),
                        values: values
                            .into_iter()
                            .map(|(key, value)| QuotaValue { key, value })
                            .collect(),
                    })
                    .collect()
            })
            .map_err(kafka_error)
    }

    fn alter(
        &mut self,
        entity: Vec<EntityPart>,
        ops: Vec<QuotaOp>,
        validate_only: bool,
    ) -> Result<(), KafkaError> {
        let entity: Vec<(String, Option<String>)> = entity
            .into_iter()
            .map(|part| (part.entity_type, part.name))
            .collect();
        let ops: Vec<host::QuotaOp> = ops
            .into_iter()
            .map(|op| host::QuotaOp {
                key: op.key,
                value: op.value,
                remove: op.remove,
            })
            .collect();
        self.broker_work(|state| state.services.quotas.alter(&entity, &ops, validate_only))
            .map_err(kafka_error)
    }
}
