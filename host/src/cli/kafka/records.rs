//! `gregor produce` and `gregor consume`: Kafka's console producer and
//! consumer (and `rpk topic produce|consume`). Produce reads one record per
//! line of stdin (`--key-delimiter` splits a key off, `-H` adds headers),
//! partitions keyed records as Kafka's default partitioner does (murmur2 of
//! the key) and sends each batch to its partition's leader. Consume reads
//! partitions without a group from an offset, printing each record with a
//! `--format` (`%t %p %o %k %v %T %h`) or as JSON lines.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    produce_request::{PartitionProduceData, TopicProduceData},
    BrokerId, FetchRequest, MetadataResponse, ProduceRequest,
};
use serde_json::json;

use super::client::{topic_name, Client, EARLIEST, LATEST};
use super::{error_name, key_value, print, Output};
use crate::log::client_records::{
    decode_batches, encode_batch, FetchedRecord, NewRecord, RecordHeaders,
};

/// Records per produce request.
const BATCH: usize = 500;
/// Bytes asked of each partition per fetch.
const PARTITION_FETCH_BYTES: i32 = 1 << 20;

#[derive(Debug, Args)]
pub struct ProduceArgs {
    pub topic: String,
    /// Send every record to this partition (default: by key, else spread)
    #[arg(long, short = 'p')]
    pub partition: Option<i32>,
    /// Split each line at the first DELIM into key and value
    #[arg(long, short = 'k', value_name = "DELIM")]
    pub key_delimiter: Option<String>,
    /// A header on every record (repeatable)
    #[arg(long = "header", short = 'H', value_name = "KEY=VALUE")]
    pub headers: Vec<String>,
    /// 0, 1 or all (-1)
    #[arg(long, default_value = "all")]
    pub acks: String,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    pub topic: String,
    /// Only these partitions (repeatable; default: all)
    #[arg(long = "partition", short = 'p')]
    pub partitions: Vec<i32>,
    /// Where to start: earliest, latest, or an offset
    #[arg(long, default_value = "earliest")]
    pub offset: String,
    /// Stop after this many records
    #[arg(long, short = 'n')]
    pub num: Option<u64>,
    /// Stop at the end of the partitions as they were at the start
    #[arg(long, short = 'e')]
    pub end: bool,
    /// How each record is printed (text output): %t topic, %p partition,
    /// %o offset, %k key, %v value, %T timestamp, %h headers, \n, \t
    #[arg(long, short = 'f', default_value = "%v\\n")]
    pub format: String,
}

pub fn produce(client: &mut Client, args: ProduceArgs, output: Output) -> Result<()> {
    let acks = match args.acks.as_str() {
        "all" | "-1" => -1,
        "1" => 1,
        "0" => 0,
        other => bail!("--acks takes 0, 1 or all, not {other:?}"),
    };
    let headers: RecordHeaders = args
        .headers
        .iter()
        .map(|h| key_value(h).map(|(k, v)| (k, Some(v.into_bytes()))))
        .collect::<Result<_>>()?;
    let mut producer = Producer::new(client, &args.topic, acks)?;
    let stdin = std::io::stdin();
    let mut pending: BTreeMap<i32, Vec<NewRecord>> = BTreeMap::new();
    let mut next_unkeyed = 0usize;
    let mut last_progress = Instant::now();
    for line in stdin.lock().lines() {
        let line = line.context("reading stdin")?;
        let (key, value) = match &args.key_delimiter {
            Some(delimiter) => match line.split_once(delimiter.as_str()) {
                Some((key, value)) => (Some(key.as_bytes().to_vec()), value.to_string()),
                None => (None, line),
            },
            None => (None, line),
        };
        let partition = match (args.partition, &key) {
            (Some(p), _) => p,
            (None, Some(key)) => producer.partition_for_key(key),
            (None, None) => {
                next_unkeyed = next_unkeyed.wrapping_add(1);
                producer.partition_round_robin(next_unkeyed)
            }
        };
        let batch = pending.entry(partition).or_default();
        batch.push(NewRecord {
            key,
            value: Some(value.into_bytes()),
            headers: headers.clone(),
        });
        if batch.len() >= BATCH {
            let records = std::mem::take(batch);
            producer.send(partition, &records)?;
        }
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprintln!("produced {} records...", producer.sent);
            last_progress = Instant::now();
        }
    }
    for (partition, records) in pending {
        if !records.is_empty() {
            producer.send(partition, &records)?;
        }
    }
    let sent = producer.sent;
    let offsets: BTreeMap<String, Vec<i64>> = producer
        .offsets
        .iter()
        .map(|(p, offsets)| (p.to_string(), offsets.clone()))
        .collect();
    print(
        output,
        &json!({ "topic": args.topic, "produced": sent, "base_offsets": offsets }),
        |_| format!("produced {sent} records to {}\n", args.topic),
    );
    Ok(())
}

/// Where produce sends batches: the topic's partitions and their leaders.
struct Producer<'a> {
    client: &'a mut Client,
    topic: String,
    acks: i16,
    /// Partition index to leader id.
    leaders: BTreeMap<i32, i32>,
    sent: u64,
    /// Each partition's batches' base offsets (acks 1 and all).
    offsets: BTreeMap<i32, Vec<i64>>,
}

impl<'a> Producer<'a> {
    fn new(client: &'a mut Client, topic: &str, acks: i16) -> Result<Producer<'a>> {
        let mut producer = Producer {
            client,
            topic: topic.to_string(),
            acks,
            leaders: BTreeMap::new(),
            sent: 0,
            offsets: BTreeMap::new(),
        };
        producer.refresh()?;
        Ok(producer)
    }

    fn refresh(&mut self) -> Result<()> {
        let metadata = self
            .client
            .metadata(Some(std::slice::from_ref(&self.topic)))?;
        self.leaders = leaders(&metadata, &self.topic)?;
        Ok(())
    }

    fn partition_for_key(&self, key: &[u8]) -> i32 {
        let count = self.leaders.len().max(1) as u32;
        ((murmur2(key) & 0x7fff_ffff) % count) as i32
    }

    fn partition_round_robin(&self, n: usize) -> i32 {
        (n / BATCH % self.leaders.len().max(1)) as i32
    }

    /// Sends `records` to `partition`'s leader; one retry after a metadata
    /// refresh when the leader moved.
    fn send(&mut self, partition: i32, records: &[NewRecord]) -> Result<()> {
        let batch = Bytes::from(encode_batch(records, now_ms()));
        for attempt in 0..2 {
            let leader = *self
                .leaders
                .get(&partition)
                .ok_or_else(|| anyhow!("{} has no partition {partition}", self.topic))?;
            let request = ProduceRequest::default()
                .with_acks(self.acks)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name(&self.topic))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch.clone()))])]);
            let connection = self.client.broker(leader)?;
            if self.acks == 0 {
                connection.send_no_answer(&request, 8)?;
                self.sent += records.len() as u64;
                return Ok(());
            }
            let answer = connection.send(&request, 8)?;
            let result = answer
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .find(|p| p.index == partition)
                .ok_or_else(|| anyhow!("the produce answer lacks partition {partition}"))?;
            match result.error_code {
                0 => {
                    self.sent += records.len() as u64;
                    self.offsets
                        .entry(partition)
                        .or_default()
                        .push(result.base_offset);
                    return Ok(());
                }
                6 | 3 if attempt == 0 => self.refresh()?,
                code => bail!(
                    "producing to {}-{partition}: {} {}",
                    self.topic,
                    error_name(code),
                    result.error_message.as_deref().unwrap_or_default()
                ),
            }
        }
        bail!(
            "producing to {}-{partition}: the leader kept moving",
            self.topic
        )
    }
}

/// Partition index to leader of `topic` in `metadata`.
fn leaders(metadata: &MetadataResponse, topic: &str) -> Result<BTreeMap<i32, i32>> {
    let found = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .ok_or_else(|| anyhow!("no metadata for {topic}"))?;
    if found.error_code != 0 {
        bail!("topic {topic}: {}", error_name(found.error_code));
    }
    Ok(found
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect())
}

pub fn consume(client: &mut Client, args: ConsumeArgs, output: Output) -> Result<()> {
    let metadata = client.metadata(Some(std::slice::from_ref(&args.topic)))?;
    let mut leaders = leaders(&metadata, &args.topic)?;
    if !args.partitions.is_empty() {
        for p in &args.partitions {
            if !leaders.contains_key(p) {
                bail!("{} has no partition {p}", args.topic);
            }
        }
        leaders.retain(|p, _| args.partitions.contains(p));
    }
    let topics = [args.topic.clone()];
    let mut positions: BTreeMap<i32, i64> = match args.offset.as_str() {
        "earliest" => partition_offsets(client.offsets(&metadata, &topics, EARLIEST)?),
        "latest" => partition_offsets(client.offsets(&metadata, &topics, LATEST)?),
        offset => {
            let offset: i64 = offset.parse().map_err(|_| {
                anyhow!("--offset takes earliest, latest or an offset, not {offset:?}")
            })?;
            leaders.keys().map(|p| (*p, offset)).collect()
        }
    };
    positions.retain(|p, _| leaders.contains_key(p));
    let ends = if args.end {
        Some(partition_offsets(
            client.offsets(&metadata, &topics, LATEST)?,
        ))
    } else {
        None
    };
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    loop {
        if let Some(ends) = &ends {
            positions.retain(|p, at| ends.get(p).is_some_and(|end| *at < *end));
        }
        if positions.is_empty() || args.num.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        for (p, at) in &positions {
            if let Some(leader) = leaders.get(p) {
                by_leader.entry(*leader).or_default().push((*p, *at));
            }
        }
        for (leader, partitions) in by_leader {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(16 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic_name(&args.topic))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|(p, at)| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_fetch_offset(*at)
                                    .with_last_fetched_epoch(-1)
                                    .with_log_start_offset(-1)
                                    .with_partition_max_bytes(PARTITION_FETCH_BYTES)
                            })
                            .collect(),
                    )]);
            let answer = client.broker(leader)?.send(&request, 12)?;
            if answer.error_code != 0 {
                bail!("fetch: {}", error_name(answer.error_code));
            }
            for data in answer.responses.iter().flat_map(|t| &t.partitions) {
                let p = data.partition_index;
                match data.error_code {
                    0 => {}
                    6 => {
                        let metadata = client.metadata(Some(&topics))?;
                        leaders = leaders_of(&metadata, &args.topic, &leaders)?;
                        continue;
                    }
                    code => bail!("fetching {}-{p}: {}", args.topic, error_name(code)),
                }
                let Some(at) = positions.get(&p).copied() else {
                    continue;
                };
                let bytes = data.records.as_deref().unwrap_or_default();
                let records = decode_batches(bytes, at)
                    .map_err(|e| anyhow!("{}-{p} at {at}: {e}", args.topic))?;
                for record in &records {
                    if args.num.is_some_and(|n| printed >= n)
                        || ends
                            .as_ref()
                            .and_then(|e| e.get(&p))
                            .is_some_and(|end| record.offset >= *end)
                    {
                        break;
                    }
                    write_record(&mut out, output, &args, p, record)?;
                    printed += 1;
                    positions.insert(p, record.offset + 1);
                }
                // Batches of only control records or skipped offsets.
                if let Some(next) = next_offset(bytes) {
                    if records.is_empty() && next > at {
                        positions.insert(p, next);
                    }
                }
            }
        }
        out.flush()?;
    }
}

/// The leaders again, keeping the old ones for partitions the refreshed
/// metadata leaves without one.
fn leaders_of(
    metadata: &MetadataResponse,
    topic: &str,
    old: &BTreeMap<i32, i32>,
) -> Result<BTreeMap<i32, i32>> {
    let fresh = leaders(metadata, topic)?;
    Ok(old
        .iter()
        .map(|(p, leader)| (*p, fresh.get(p).copied().unwrap_or(*leader)))
        .collect())
}

/// The offset after the last whole batch of a fetch answer's records.
fn next_offset(mut bytes: &[u8]) -> Option<i64> {
    let mut next = None;
    while bytes.len() >= 12 {
        let base = i64::from_be_bytes(bytes[..8].try_into().ok()?);
        let length = usize::try_from(i32::from_be_bytes(bytes[8..12].try_into().ok()?)).ok()?;
        let size = length.checked_add(12)?;
        if bytes.len() < size || length < 49 {
            break;
        }
        let last_delta = i32::from_be_bytes(bytes[23..27].try_into().ok()?);
        next = Some(base + i64::from(last_delta) + 1);
        bytes = &bytes[size..];
    }
    next
}

fn partition_offsets(offsets: std::collections::HashMap<(String, i32), i64>) -> BTreeMap<i32, i64> {
    offsets.into_iter().map(|((_, p), at)| (p, at)).collect()
}

fn write_record(
    out: &mut impl Write,
    output: Output,
    args: &ConsumeArgs,
    partition: i32,
    record: &FetchedRecord,
) -> Result<()> {
    fn lossy(bytes: &Option<Vec<u8>>) -> Option<std::borrow::Cow<'_, str>> {
        bytes.as_deref().map(String::from_utf8_lossy)
    }
    if output == Output::Json {
        let headers: Vec<_> = record
            .headers
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": lossy(v) }))
            .collect();
        let line = json!({
            "topic": args.topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": lossy(&record.key),
            "value": lossy(&record.value),
            "headers": headers,
        });
        writeln!(out, "{line}")?;
        return Ok(());
    }
    let mut chars = args.format.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('%', Some(spec)) => {
                chars.next();
                match spec {
                    't' => write!(out, "{}", args.topic)?,
                    'p' => write!(out, "{partition}")?,
                    'o' => write!(out, "{}", record.offset)?,
                    'T' => write!(out, "{}", record.timestamp)?,
                    'k' => out.write_all(record.key.as_deref().unwrap_or_default())?,
                    'v' => out.write_all(record.value.as_deref().unwrap_or_default())?,
                    'h' => {
                        let headers: Vec<String> = record
                            .headers
                            .iter()
                            .map(|(k, v)| format!("{k}={}", lossy(v).unwrap_or_default()))
                            .collect();
                        write!(out, "{}", headers.join(","))?
                    }
                    '%' => write!(out, "%")?,
                    other => write!(out, "%{other}")?,
                }
            }
            ('\\', Some('n')) => {
                chars.next();
                writeln!(out)?
            }
            ('\\', Some('t')) => {
                chars.next();
                write!(out, "\t")?
            }
            (c, _) => write!(out, "{c}")?,
        }
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Kafka's murmur2 (`Utils.murmur2`), which its default partitioner
/// applies to a record's key, so keyed records land where Kafka's own
/// clients put them.
fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32,
            -58897971
        );
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }

    #[test]
    fn formats_write_what_they_name() {
        let args = ConsumeArgs {
            topic: "t".into(),
            partitions: vec![],
            offset: "earliest".into(),
            num: None,
            end: false,
            format: "%t/%p@%o %k=%v [%h]\\n".into(),
        };
        let record = FetchedRecord {
            offset: 7,
            timestamp: 1,
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![("h".into(), Some(b"x".to_vec()))],
        };
        let mut out = Vec::new();
        write_record(&mut out, Output::Text, &args, 2, &record).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "t/2@7 k=v [h=x]\n");
    }
}
