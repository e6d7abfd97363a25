//! The request channel between the network layer and the handler workers,
//! Kafka's RequestChannel: a bounded queue of parsed requests, each with
//! the connection's session, the handler version it was routed to and the
//! timestamps Kafka's request metrics are made of. The connection task
//! waits for the response of one request before it reads the next, so
//! responses leave in request order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::log::file_records::Records;
use crate::metrics::RequestEnd;
use crate::network::header::{encode_response, response_head, RequestHeader};
use crate::plugins::deferred::Memo;
use crate::plugins::handler::LoadedHandler;
use crate::plugins::imports::record_set::ResponseBody;
use crate::security::session::Session;

/// Where a parsed request goes.
pub enum Route {
    /// To the module serving its ApiKey; the request keeps this version of
    /// the module even if a new one is loaded meanwhile.
    Handler(Arc<LoadedHandler>),
    /// An ApiVersions request newer than we serve: answered by the host
    /// with a v0 error response listing what we do serve.
    UnsupportedApiVersions,
}

/// What the connection does once the request is handled.
#[derive(Debug)]
pub enum Response {
    /// Write this whole frame (size prefix included).
    Send(Vec<u8>),
    /// Write these parts in order, one frame (a body referencing record
    /// sets: written from their buffers or files, not copied together).
    SendParts(Vec<Records>),
    /// Write nothing (acks=0 Produce).
    Nothing,
    /// Close the connection.
    Close,
}

impl Response {
    /// The frame answering `correlation_id` with `body`: one buffer, or
    /// its parts when it references record sets (not copied together).
    pub fn respond(correlation_id: i32, flexible_header: bool, body: &ResponseBody) -> Self {
        let parts = body.parts();
        match parts.as_slice() {
            [] => Response::Send(encode_response(correlation_id, flexible_header, &[])),
            [Records::Memory(only)] => {
                Response::Send(encode_response(correlation_id, flexible_header, only))
            }
            _ => {
                let head = response_head(correlation_id, flexible_header, body.len(), 0);
                let mut frame = Vec::with_capacity(parts.len() + 1);
                frame.push(Records::from(head));
                frame.extend(parts);
                Response::SendParts(frame)
            }
        }
    }
}

/// Timestamps along the request path (RequestQueueTime, LocalTime, ...).
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub received: Instant,
    pub dequeued: Option<Instant>,
    pub handled: Option<Instant>,
    /// Time the handler spent waiting in host calls (RemoteTime).
    pub remote: Duration,
}

/// What a worker hands back to the connection.
#[derive(Debug)]
pub struct Reply {
    pub response: Response,
    pub timings: Timings,
    pub end: RequestEnd,
    /// A client quota was exceeded: the connection reads no further
    /// request for this long after the response (KIP-219).
    pub throttle: Duration,
}

pub struct Request {
    pub header: RequestHeader,
    pub body: Bytes,
    /// The whole request's size (header and body), as quotas count it.
    pub size: usize,
    pub session: Arc<Session>,
    pub route: Route,
    pub flexible_response: bool,
    pub timings: Timings,
    pub reply: oneshot::Sender<Reply>,
    /// Answers of the waits this request parked for, when it is handled
    /// again (`plugins::deferred`); empty on its first handling.
    pub memos: Vec<Memo>,
    /// The bodies the interceptors wrapping its ApiKey were given,
    /// outermost first, once its request hooks ran; a parked request keeps
    /// them for the response hooks of its replay (`plugins::interception`).
    pub intercepted: Vec<Bytes>,
}

/// A bounded multi-consumer queue of requests.
#[derive(Clone)]
pub struct RequestChannel {
    sender: async_channel::Sender<Request>,
    receiver: async_channel::Receiver<Request>,
}

impl RequestChannel {
    pub fn new(capacity: usize) -> Self {
        let (sender, receiver) = async_channel::bounded(capacity);
        Self { sender, receiver }
    }

    /// Enqueues a request, waiting while the queue is full (back pressure
    /// on that connection only). Fails once the channel is closed.
    pub async fn send(&self, request: Request) -> Result<(), Request> {
        self.sender.send(request).await.map_err(|error| error.0)
    }

    pub fn receiver(&self) -> async_channel::Receiver<Request> {
        self.receiver.clone()
    }

    /// Requests waiting for a worker.
    pub fn queue_size(&self) -> usize {
        self.sender.len()
    }

    /// Stops accepting requests (shutdown).
    pub fn close(&self) {
        self.sender.close();
    }
}
