//! Host bindings generated from `wit/`. Only the imports that can wait
//! (appends, long-poll fetches, JoinGroup and SyncGroup waiting for a
//! rebalance, offset commits and consumer heartbeats waiting for the
//! replicas of `__consumer_offsets`, and authorization, which calls the authorizer
//! module) are
//! async; every export is called with `call_async` because the engine runs
//! guests on fibers. A long wait parks its request and answers none
//! (`plugins::deferred`). Only the calls that hand out or read record sets
//! may trap, on a handle the host's table does not hold.

pub mod handler {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "kafka-handler",
        imports: {
            "gregor:broker/log.append": async,
            "gregor:broker/log.fetch-or-park": async | trappable,
            "gregor:broker/log.append-within": async,
            "gregor:broker/log.replica-fetch-or-park": async | trappable,
            "gregor:broker/log.fetch-legacy-or-park": async | trappable,
            "gregor:broker/log.[method]record-set.size": trappable,
            "gregor:broker/log.[method]record-set.read": trappable,
            "gregor:broker/log.request-records": trappable,
            "gregor:broker/log.append-records-within": async | trappable,
            "gregor:broker/authz.authorize": async,
            "gregor:broker/authz.authorize-by-resource-type": async,
            "gregor:broker/groups.join-or-park": async,
            "gregor:broker/groups.sync-or-park": async,
            "gregor:broker/groups.commit-offsets": async,
            "gregor:broker/groups.consumer-heartbeat": async,
            "gregor:broker/txn.txn-offset-commit": async,
            "gregor:broker/txn.write-markers": async,
        },
        exports: { default: async },
        with: {
            "gregor:broker/log.record-set": crate::plugins::imports::record_set::RecordSet,
        },
    });
}

pub mod authorizer {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "kafka-authorizer",
        exports: { default: async },
        with: {
            "gregor:broker/logging": super::handler::gregor::broker::logging,
            "gregor:broker/types": super::handler::gregor::broker::types,
        },
    });
}

/// Interceptors link against the handler linker (a subset of its
/// imports), so their imports reuse the handler world's host traits.
pub mod interceptor {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "kafka-interceptor",
        exports: { default: async },
        with: {
            "gregor:broker/logging": super::handler::gregor::broker::logging,
            "gregor:broker/metadata": super::handler::gregor::broker::metadata,
            "gregor:broker/types": super::handler::gregor::broker::types,
        },
    });
}

pub use handler::gregor::broker::types::{
    Action, ApiInfo, Operation, Outcome, RequestContext, ResourceType,
};
