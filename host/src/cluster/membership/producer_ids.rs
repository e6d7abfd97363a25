//! A broker's producer-id blocks from the active controller, as Kafka's
//! `RPCProducerIdManager`: a real AllocateProducerIds request (v0) on a
//! broker-to-controller channel ([`ControllerChannel`], the kind the
//! heartbeats use), answered by the controller's AllocateProducerIds
//! handler, whose host decision proposes the ProducerIdsRecord. The
//! controller hands each block out once across the cluster, so a broker
//! needs no file of its own and a restarted one simply asks again.
//!
//! The next block is asked for in the background once 90% of the current
//! one is used (Kafka's threshold), so InitProducerId rarely waits for the
//! controller; when it must (the prefetch failed or was not done), it
//! asks in line, retrying a controller that moved or a registration not
//! done yet, up to [`ASK_TIMEOUT`].
//!
//! The asks run on a runtime of their own (one thread). InitProducerId
//! waits for a block inside a handler call, on one of the broker's runtime
//! workers, while holding the id manager's lock; other InitProducerId
//! calls then block their workers on that lock. Were the ask's socket and
//! timers driven by those same workers, a few concurrent InitProducerId
//! with the controller unreachable would stop every worker for good (seen
//! in the fault test: the broker froze, logging nothing, ignoring SIGTERM).
//! On its own runtime the ask always ends, by its answer or its timeout.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::{AllocateProducerIdsRequest, BrokerId};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::wire::ControllerChannel;
use crate::error_code::ErrorCode;
use crate::producer_ids::BlockSource;

/// How long one block may take to come (controller moves included).
const ASK_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two asks that failed.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

const NOT_CONTROLLER: i16 = ErrorCode::NotController.code();

/// A block `first .. end`, or why there is none.
type Block = Result<(i64, i64), String>;

struct Asker {
    channel: tokio::sync::Mutex<ControllerChannel>,
    broker_id: i32,
    /// The broker's current epoch (-1 until registered).
    epoch: Arc<AtomicI64>,
}

impl Asker {
    /// AllocateProducerIds until the active controller grants a block.
    async fn ask(&self) -> Block {
        let deadline = Instant::now() + ASK_TIMEOUT;
        let mut channel = self.channel.lock().await;
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            let request = AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(self.broker_id))
                .with_broker_epoch(epoch);
            let why = match channel.send(&request, 0).await {
                Ok(response) if response.error_code == 0 => {
                    let first = response.producer_id_start.0;
                    let size = i64::from(response.producer_id_len);
                    if first < 0 || size <= 0 {
                        return Err(format!(
                            "the controller granted an empty block ({first}, {size})"
                        ));
                    }
                    return Ok((first, first.saturating_add(size)));
                }
                Ok(response) => {
                    if response.error_code == NOT_CONTROLLER {
                        channel.reset();
                    }
                    format!(
                        "the controller refused AllocateProducerIds with error code {}",
                        response.error_code
                    )
                }
                Err(error) => error,
            };
            // A controller that moved, or this broker's registration (its
            // epoch) not done yet: both pass.
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(why);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

pub struct ControllerBlocks {
    asker: Arc<Asker>,
    /// The background ask for the next block, if one was started.
    next: Mutex<Option<JoinHandle<Block>>>,
    /// Where the asks run (None only while dropping).
    runtime: Option<Runtime>,
}

impl ControllerBlocks {
    pub fn new(
        channel: ControllerChannel,
        broker_id: i32,
        epoch: Arc<AtomicI64>,
    ) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("producer-id-blocks")
            .enable_all()
            .build()?;
        Ok(Self {
            asker: Arc::new(Asker {
                channel: tokio::sync::Mutex::new(channel),
                broker_id,
                epoch,
            }),
            next: Mutex::new(None),
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> Result<&Runtime> {
        self.runtime
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the producer id runtime is stopped"))
    }
}

impl Drop for ControllerBlocks {
    /// Dropped from async code at shutdown: a runtime may not block there.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl BlockSource for ControllerBlocks {
    fn next_block(&self) -> Result<(i64, i64)> {
        let prefetched = crate::sync::lock(&self.next).take();
        let asker = Arc::clone(&self.asker);
        let runtime = self.runtime()?;
        let block = tokio::task::block_in_place(|| {
            runtime.block_on(async move {
                if let Some(prefetched) = prefetched {
                    match prefetched.await {
                        Ok(Ok(block)) => return Ok(block),
                        Ok(Err(why)) => {
                            tracing::warn!("prefetching a producer id block: {why}");
                        }
                        Err(error) => tracing::warn!("prefetching a producer id block: {error}"),
                    }
                }
                asker.ask().await
            })
        });
        match block {
            Ok(block) => Ok(block),
            Err(why) => bail!("no producer id block from the controller: {why}"),
        }
    }

    fn prefetch(&self) {
        let mut next = crate::sync::lock(&self.next);
        if let (None, Ok(runtime)) = (next.as_ref(), self.runtime()) {
            let asker = Arc::clone(&self.asker);
            *next = Some(runtime.spawn(async move { asker.ask().await }));
        }
    }
}
