//! `gregor-bench call-interceptor --plugin-dir DIR --interceptor NAME
//! [--size B] [--iterations N] [--set key=value]...`: the cost of one
//! interceptor per request inside the host, without a network or a
//! handler: the chain's request hook and response hook
//! (`plugins::interception::before` and `after`, what the broker runs
//! around a handler) on a pooled instance, for a Produce v3 request of one
//! record of B bytes (a JSON string, so a JSON validator passes it) and
//! the handler's one-partition answer. `--set` gives broker settings
//! (grants, the validator's topics). Used by `make bench-interceptors`;
//! never by tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};

use gregor::broker::Broker;
use gregor::config::BrokerConfig;
use gregor::log::client_records::{encode_batch, NewRecord};
use gregor::plugins::interception;
use gregor::plugins::loader::Loaded;

use crate::call::{context, load_module, session};

/// The topic the request writes to.
const TOPIC: &str = "bench-call";
/// The Produce version of the request (as `rps` sends).
const VERSION: i16 = 3;

/// A JSON string value of exactly `size` bytes (at least 2).
pub fn json_value(size: usize) -> Vec<u8> {
    let mut value = vec![b'x'; size.max(2)];
    value[0] = b'"';
    let last = value.len() - 1;
    value[last] = b'"';
    value
}

fn produce_request(size: usize) -> Result<Bytes> {
    let record = NewRecord {
        key: None,
        value: Some(json_value(size)),
        headers: Vec::new(),
    };
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(Bytes::from(encode_batch(&[record], 1_700_000_000_000)));
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partition_data.push(partition);
    let mut request = ProduceRequest::default();
    request.acks = 1;
    request.timeout_ms = 30_000;
    request.topic_data.push(topic);
    let mut body = BytesMut::new();
    request.encode(&mut body, VERSION)?;
    Ok(body.freeze())
}

fn produce_response() -> Result<Vec<u8>> {
    let mut partition = PartitionProduceResponse::default();
    partition.index = 0;
    partition.base_offset = 41;
    partition.log_append_time_ms = -1;
    let mut topic = TopicProduceResponse::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partition_responses.push(partition);
    let mut response = ProduceResponse::default();
    response.responses.push(topic);
    let mut body = BytesMut::new();
    response.encode(&mut body, VERSION)?;
    Ok(body.to_vec())
}

pub async fn run(args: &[String]) -> Result<()> {
    let mut plugin_dir = None;
    let mut name = None;
    let mut size = 100usize;
    let mut iterations = 20_000usize;
    let mut settings = Vec::new();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--plugin-dir" => plugin_dir = Some(value.clone()),
            "--interceptor" => name = Some(value.clone()),
            "--size" => size = value.parse().context("--size")?,
            "--iterations" => iterations = value.parse().context("--iterations")?,
            "--set" => settings.push(value.clone()),
            other => bail!("unknown flag {other}"),
        }
    }
    let plugin_dir = plugin_dir.context("--plugin-dir is required")?;
    let name = name.context("--interceptor is required")?;
    let data = std::env::temp_dir().join(format!(
        "gregor-bench-call-interceptor-{}",
        std::process::id()
    ));
    let mut config = BrokerConfig::default();
    config.set_pair(&format!("log.dirs={}", data.display()))?;
    config.set_pair(&format!("plugin.dir={plugin_dir}"))?;
    for setting in &settings {
        config.set_pair(setting)?;
    }
    let broker = Arc::new(Broker::open(Arc::new(config.clone()))?);
    let host = &broker.plugins;
    let interceptor = match load_module(&config, host, &name, u64::MAX).await? {
        Loaded::Interceptor(interceptor) => Arc::new(interceptor),
        _ => bail!("{name} is not an interceptor"),
    };
    if !interceptor.wraps(0) {
        bail!("{name} does not wrap Produce");
    }
    let session = session();
    let ctx = context(&session, 0, VERSION);
    let request = produce_request(size)?;
    let response = produce_response()?;

    let mut on_request = Duration::ZERO;
    let mut on_response = Duration::ZERO;
    let warmup = iterations / 10;
    for i in 0..warmup + iterations {
        let started = Instant::now();
        let before = interception::before(
            host,
            vec![Arc::clone(&interceptor)],
            &session,
            &ctx,
            request.clone(),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        let passed = Instant::now();
        if before.reply.is_some() || before.close || before.body != request {
            bail!("{name} did not pass the request on unchanged");
        }
        let answer = interception::after(
            host,
            &before.passed,
            &before.seen,
            &session,
            &ctx,
            response.clone(),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        if answer != response {
            bail!("{name} changed the response");
        }
        if i >= warmup {
            on_request += passed - started;
            on_response += passed.elapsed();
        }
    }
    let _ = std::fs::remove_dir_all(&data);
    let per_call = |total: Duration| total.as_secs_f64() * 1e6 / iterations as f64;
    let (request_us, response_us) = (per_call(on_request), per_call(on_response));
    println!(
        "{{\"bench\":\"interceptor_call\",\"interceptor\":\"{name}\",\"record_bytes\":{size},\"request_bytes\":{},\"on_request_us\":{request_us:.2},\"on_response_us\":{response_us:.2},\"per_request_us\":{:.2}}}",
        request.len(),
        request_us + response_us
    );
    Ok(())
}
