//! The network layer, Kafka's SocketServer: listeners accept connections,
//! each connection task reads size-prefixed frames, parses the request
//! header against what the loaded modules declare, hands the request to the
//! request channel and writes the response back, one request at a time.
//! SSL and SASL_SSL listeners wrap the socket in TLS first (`tls`); SASL
//! listeners admit only the authentication requests until the connection
//! has authenticated (`security::sasl`). Admission bounds what clients
//! can take: `connection_quotas` the connections (per broker, listener
//! and address), `memory_pool` the bytes of requests in flight. The
//! request channel (`channel`, Kafka's `kafka.network.RequestChannel`)
//! is the queue between the connections and the handler workers.
//! `plugins::exposure` keeps the controller's APIs to the controller
//! listeners. A response that references record sets is written in parts
//! (`vectored`): vectored writes from memory, and records still in a
//! segment file with `sendfile` on plain TCP (`transport`).

pub mod channel;
pub mod connection;
pub mod connection_quotas;
pub mod frame;
#[cfg(test)]
mod fuzz;
pub mod header;
pub mod listener;
pub mod memory_pool;
mod sasl_v0;
pub mod tls;
pub mod transport;
mod vectored;
