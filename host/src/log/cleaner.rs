//! Log compaction (`cleanup.policy=compact`), after Kafka's LogCleaner.
//!
//! A compacted log keeps, for every key, at least the latest record. The
//! cleaner thread of the log manager calls [`clean`] for each compacted
//! partition; one pass:
//!
//! 1. Picks the cleanable range: the segments before the active one (which is
//!    never touched) whose newest record is older than
//!    `min.compaction.lag.ms`. The part after the cleaner checkpoint (the
//!    first dirty offset) is the dirty part. A pass runs when the dirty part
//!    is at least `min.cleanable.dirty.ratio` of the range, when a dirty
//!    segment is older than `max.compaction.lag.ms`, or when a kept
//!    tombstone's delete horizon has passed.
//! 2. Builds a map from each key in the dirty part to its latest offset.
//! 3. Rewrites the whole range, grouping neighbouring segments up to
//!    `segment.bytes`: a record survives if no later record has its key.
//!    Offsets never change: a rewritten batch keeps its base offset, its
//!    last offset delta and every record's offset delta, so a compacted log
//!    simply has gaps. A batch that loses nothing is copied verbatim.
//! 4. Tombstones (null values) follow KIP-534: the first pass that keeps one
//!    stamps its batch with a delete horizon (`now + delete.retention.ms`,
//!    in the base timestamp, with attribute bit 6); a pass after the horizon
//!    drops it. Consumers that read the log within `delete.retention.ms`
//!    therefore see the deletion.
//!
//! Crash safety: a group is written to `<base>.log.cleaned` and fsynced,
//! renamed to `<base>.log.swap` (the commit point), then the originals are
//! deleted and the swap file renamed into place. Opening a partition
//! discards `.cleaned` files and completes `.swap` ones (see `partition`).
//!
//! Records without a key are invalid in a compacted log (appends refuse
//! them); a pass drops any left from before the topic became compacted.
//!
//! Transactional batches, markers included, are copied whole and never
//! supersede other records: the cleaner does not know which transactions
//! aborted, and an aborted value must not replace a committed one, nor may
//! a marker go while its transaction's records stay (the rebuilt
//! aborted-transaction index would then see an open transaction). Kafka
//! removes aborted records and, later, their markers; Gregor keeps both,
//! which keeps more than needed but never loses a committed value.
//! Compressed batches are decompressed (see `codec`), at most
//! `codec::limit_for(max.message.bytes)` each; one that keeps every
//! record is copied verbatim, one that loses some is rewritten
//! uncompressed (Kafka recompresses with the original codec; the host has
//! decoders only).

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::batch::{self, BatchHeader, RecordInfo, Records, HEADER_SIZE};
use super::batch_writer::{put_record, NewBatch};
use super::partition::{remove_index_files, remove_segment_files, Partition};
use super::segment::{self, Segment, SegmentView, MAX_RELATIVE_OFFSET, MAX_SEGMENT_BYTES};
use super::varint::{put_bytes, put_varint};
use super::{codec, sync_dir, StorageError};
use crate::sync::{lock, read, write};

/// Attribute bit 6: the base timestamp is the batch's delete horizon.
const DELETE_HORIZON_FLAG: i16 = 0x40;
const COMPRESSION_MASK: i16 = 0x07;

fn corrupt(message: String) -> StorageError {
    StorageError::CorruptMessage(message)
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
}

struct Candidate {
    view: SegmentView,
    base_offset: i64,
    next_offset: i64,
    size: u64,
}

/// Compacts the partition's cleanable range if it is due. `None` when
/// there was nothing to do.
pub fn clean(partition: &Partition, now_ms: i64) -> Result<Option<CleanStats>, StorageError> {
    let _maintenance = lock(&partition.maintenance);
    let (config, candidates, first_dirty, end_offset) = {
        let state = read(&partition.state);
        if state.deleted || !state.config.compact {
            return Ok(None);
        }
        let config = state.config.clone();
        let segments = &state.segments;
        let Some(active) = segments.len().checked_sub(1) else {
            return Ok(None);
        };
        let cleanable = segments[..active]
            .iter()
            .take_while(|s| {
                now_ms.saturating_sub(s.largest_timestamp()) >= config.min_compaction_lag_ms
            })
            .count();
        if cleanable == 0 {
            return Ok(None);
        }
        let end_offset = segments[cleanable].base_offset();
        let first_dirty = state.first_dirty_offset.max(state.log_start_offset);
        let total: u64 = segments[..cleanable].iter().map(Segment::size).sum();
        let dirty: u64 = segments[..cleanable]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .map(Segment::size)
            .sum();
        let tombstones_due = state.next_tombstone_expiry.is_some_and(|t| now_ms >= t);
        let lag_due = segments[..cleanable].iter().any(|s| {
            s.next_offset() > first_dirty
                && now_ms.saturating_sub(s.largest_timestamp()) > config.max_compaction_lag_ms
        });
        let ratio_due =
            total > 0 && dirty as f64 / total as f64 >= config.min_cleanable_dirty_ratio;
        let has_dirty = first_dirty < end_offset && dirty > 0;
        if !(tombstones_due || (has_dirty && (ratio_due || lag_due))) {
            return Ok(None);
        }
        let candidates: Vec<Candidate> = segments[..cleanable]
            .iter()
            .map(|s| {
                Ok(Candidate {
                    view: s.view(0)?,
                    base_offset: s.base_offset(),
                    next_offset: s.next_offset(),
                    size: s.size(),
                })
            })
            .collect::<Result<_, StorageError>>()?;
        (config, candidates, first_dirty, end_offset)
    };

    // Stored batches passed this limit when appended (unless the topic's
    // max.message.bytes shrank since); it bounds what one batch holds here.
    let limit = codec::limit_for(config.max_message_bytes);
    // The latest offset of every key in the dirty part.
    let mut latest: HashMap<Vec<u8>, i64> = HashMap::new();
    for c in candidates.iter().filter(|c| c.next_offset > first_dirty) {
        c.view.for_each_batch(|_, header, bytes| {
            if header.last_offset() < first_dirty || header.is_transactional() {
                return Ok(());
            }
            let section = batch::record_section(bytes, header, limit).map_err(corrupt)?;
            for record in Records::in_section(&section, header) {
                let record = record.map_err(StorageError::InvalidRecord)?;
                let offset = header.base_offset + i64::from(record.offset_delta);
                if let (true, Some(key)) = (offset >= first_dirty, &record.key) {
                    latest.insert(section[key.clone()].to_vec(), offset);
                }
            }
            Ok(())
        })?;
    }

    // Neighbouring segments that fit in one, as Kafka's groupSegmentsBySize.
    let segment_bytes = config.segment_bytes.clamp(1, MAX_SEGMENT_BYTES);
    let mut groups: Vec<&[Candidate]> = Vec::new();
    let mut start = 0;
    while start < candidates.len() {
        let mut end = start + 1;
        let mut size = candidates[start].size;
        while end < candidates.len()
            && size + candidates[end].size <= segment_bytes
            && candidates[end].next_offset - 1 - candidates[start].base_offset
                <= MAX_RELATIVE_OFFSET
        {
            size += candidates[end].size;
            end += 1;
        }
        groups.push(&candidates[start..end]);
        start = end;
    }

    let mut stats = CleanStats {
        segments_before: candidates.len(),
        bytes_before: candidates.iter().map(|c| c.size).sum(),
        ..CleanStats::default()
    };
    let mut next_expiry: Option<i64> = None;
    let horizon = now_ms.saturating_add(config.delete_retention_ms);
    for group in groups {
        let dir = partition.dir();
        let base = group[0].base_offset;
        let cleaned = dir.join(format!("{}.cleaned", segment::file_name(base)));
        let swap = dir.join(format!("{}.swap", segment::file_name(base)));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&cleaned)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for c in group {
            c.view.for_each_batch(|_, header, bytes| {
                if header.is_transactional() {
                    out.write_all(bytes)?;
                    return Ok(());
                }
                let filtered = filter_batch(header, bytes, &latest, now_ms, horizon, limit)?;
                stats.records_removed += filtered.removed;
                if let Some(expiry) = filtered.tombstone_horizon {
                    next_expiry = Some(next_expiry.map_or(expiry, |e| e.min(expiry)));
                }
                match filtered.output {
                    Output::Keep => out.write_all(bytes)?,
                    Output::Drop => {}
                    Output::Rewritten(b) => out.write_all(&b)?,
                }
                Ok(())
            })?;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        // The commit point: from here a crash completes the swap.
        fs::rename(&cleaned, &swap)?;
        sync_dir(&dir)?;
        for c in &group[1..] {
            remove_segment_files(&dir, c.base_offset)?;
        }
        remove_index_files(&dir, base)?;
        fs::rename(&swap, dir.join(segment::file_name(base)))?;
        sync_dir(&dir)?;
        // Rebuild the indexes (and re-check what was just written).
        let (segment, _) = Segment::recover(&dir, base)?;
        stats.bytes_after += segment.size();
        let mut state = write(&partition.state);
        let Some(first) = state.segments.iter().position(|s| s.base_offset() == base) else {
            return Err(StorageError::Io(io::Error::other(
                "a segment being cleaned disappeared",
            )));
        };
        let bases: Vec<i64> = group.iter().map(|c| c.base_offset).collect();
        let count = state.segments[first..]
            .iter()
            .take_while(|s| bases.contains(&s.base_offset()))
            .count();
        state.segments.splice(first..first + count, [segment]);
    }
    {
        let mut state = write(&partition.state);
        state.first_dirty_offset = state.first_dirty_offset.max(end_offset);
        state.next_tombstone_expiry = next_expiry;
        stats.segments_after = state
            .segments
            .iter()
            .take_while(|s| s.base_offset() < end_offset)
            .count();
    }
    tracing::info!(
        partition = %partition.tp,
        segments_before = stats.segments_before,
        segments_after = stats.segments_after,
        bytes_before = stats.bytes_before,
        bytes_after = stats.bytes_after,
        records_removed = stats.records_removed,
        "compacted log"
    );
    Ok(Some(stats))
}

enum Output {
    Keep,
    Drop,
    Rewritten(Vec<u8>),
}

struct Filtered {
    output: Output,
    removed: u64,
    /// The delete horizon of the tombstones this batch keeps.
    tombstone_horizon: Option<i64>,
}

/// Decides which records of one batch survive.
fn filter_batch(
    header: &BatchHeader,
    bytes: &[u8],
    latest: &HashMap<Vec<u8>, i64>,
    now_ms: i64,
    new_horizon: i64,
    limit: usize,
) -> Result<Filtered, StorageError> {
    let section = batch::record_section(bytes, header, limit).map_err(corrupt)?;
    let existing_horizon =
        (header.attributes & DELETE_HORIZON_FLAG != 0).then_some(header.base_timestamp);
    let mut kept: Vec<RecordInfo> = Vec::new();
    let mut total = 0u64;
    let mut tombstones = 0usize;
    for record in Records::in_section(&section, header) {
        let record = record.map_err(StorageError::InvalidRecord)?;
        total += 1;
        let offset = header.base_offset + i64::from(record.offset_delta);
        let Some(key) = &record.key else {
            continue; // keyless records are invalid in a compacted log
        };
        if latest
            .get(&section[key.clone()])
            .is_some_and(|&l| offset < l)
        {
            continue; // a later record has the key
        }
        if record.value.is_none() {
            if existing_horizon.is_some_and(|h| now_ms >= h) {
                continue; // the tombstone has been readable long enough
            }
            tombstones += 1;
        }
        kept.push(record);
    }
    let removed = total - kept.len() as u64;
    if kept.is_empty() {
        return Ok(Filtered {
            output: Output::Drop,
            removed,
            tombstone_horizon: None,
        });
    }
    let horizon = match (tombstones, existing_horizon) {
        (0, _) => None,
        (_, Some(h)) => Some(h),
        (_, None) => Some(new_horizon),
    };
    let output = if removed == 0 && horizon == existing_horizon {
        Output::Keep
    } else {
        Output::Rewritten(rebuild_batch(header, bytes, &section, &kept, horizon))
    };
    Ok(Filtered {
        output,
        removed,
        tombstone_horizon: horizon,
    })
}

/// Encodes a batch holding `kept` (records of `section`, the records of
/// the original batch `bytes`), keeping the base offset, last offset delta,
/// producer fields and every record's offset delta. With a delete horizon
/// the base timestamp carries it and record timestamps are re-based on it.
/// The new batch is uncompressed (the host compresses nothing).
fn rebuild_batch(
    header: &BatchHeader,
    bytes: &[u8],
    section: &[u8],
    kept: &[RecordInfo],
    horizon: Option<i64>,
) -> Vec<u8> {
    let base_timestamp = horizon.unwrap_or(header.base_timestamp);
    let mut attributes = header.attributes & !DELETE_HORIZON_FLAG & !COMPRESSION_MASK;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    let max_timestamp = if header.is_log_append_time() {
        header.max_timestamp
    } else {
        kept.iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(header.max_timestamp)
    };
    let mut body = Vec::with_capacity(bytes.len());
    let mut record = Vec::new();
    for r in kept {
        record.clear();
        record.push(r.attributes);
        put_varint(&mut record, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut record, i64::from(r.offset_delta));
        put_bytes(&mut record, r.key.as_ref().map(|k| &section[k.clone()]));
        put_bytes(&mut record, r.value.as_ref().map(|v| &section[v.clone()]));
        record.extend_from_slice(&section[r.headers.clone()]);
        put_record(&mut body, &record);
    }
    NewBatch {
        base_offset: header.base_offset,
        partition_leader_epoch: header.partition_leader_epoch,
        attributes,
        last_offset_delta: header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        base_sequence: header.base_sequence,
        record_count: kept.len() as i32,
    }
    .write(&body)
}

/// The offset after the last whole batch of a `.swap` file (to know which
/// original segments it replaces).
pub fn swap_end_offset(path: &Path) -> io::Result<i64> {
    let file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut pos = 0u64;
    let mut end = 0i64;
    let mut head = [0u8; HEADER_SIZE];
    while pos + HEADER_SIZE as u64 <= len {
        file.read_exact_at(&mut head, pos)?;
        let Ok(header) = BatchHeader::parse(&head) else {
            break;
        };
        end = end.max(header.next_offset());
        pos += header.size() as u64;
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::super::batch::testing::*;
    use super::super::partition::OpenHints;
    use super::super::{LogConfig, TopicPartition};
    use super::*;

    fn keyed(ts: i64, key: &str, value: Option<&str>) -> Rec {
        Rec {
            timestamp: ts,
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![(b"h".to_vec(), Some(b"x".to_vec()))],
        }
    }

    fn compacted(segment_bytes: u64) -> LogConfig {
        LogConfig {
            segment_bytes,
            compact: true,
            delete: false,
            min_cleanable_dirty_ratio: 0.0,
            delete_retention_ms: 1000,
            ..LogConfig::default()
        }
    }

    /// (offset, key, value) of every record, from the log start.
    fn contents(p: &Partition) -> Vec<(i64, String, Option<String>)> {
        let mut out = Vec::new();
        let r = p.read(p.offsets().unwrap().log_start_offset, usize::MAX, true);
        let mut offset = 0;
        let mut records = r.unwrap().records;
        loop {
            let mut rest = &records[..];
            if rest.is_empty() {
                break;
            }
            while !rest.is_empty() {
                let h = BatchHeader::parse(rest).unwrap();
                let whole = &rest[..h.size()];
                assert!(batch::crc_matches(whole, &h));
                let b = &*batch::record_section(whole, &h, codec::MAX_DECOMPRESSED).unwrap();
                for r in Records::in_section(b, &h) {
                    let r = r.unwrap();
                    let key = String::from_utf8(b[r.key.clone().unwrap()].to_vec()).unwrap();
                    let value = r
                        .value
                        .clone()
                        .map(|v| String::from_utf8(b[v].to_vec()).unwrap());
                    out.push((h.base_offset + i64::from(r.offset_delta), key, value));
                }
                offset = h.next_offset();
                rest = &rest[h.size()..];
            }
            records = p.read(offset, usize::MAX, true).unwrap().records;
        }
        out
    }

    #[test]
    fn keeps_the_latest_record_per_key_and_every_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(200),
            OpenHints::default(),
        )
        .unwrap();
        // k0..k3 written three times each, one record per batch, then an
        // extra batch so the last rewrite is not in the active segment.
        for round in 0..3 {
            for k in 0..4 {
                let v = format!("v{round}");
                let batch = encode_batch(&[keyed(1000, &format!("k{k}"), Some(&v))]);
                p.append(&batch, 0).unwrap();
            }
        }
        p.append(&encode_batch(&[keyed(1000, "other", Some("x"))]), 0)
            .unwrap();
        let before = contents(&p);
        assert_eq!(before.len(), 13);
        let segments_before = read(&p.state).segments.len();
        assert!(segments_before > 3);
        let stats = clean(&p, 10_000).unwrap().unwrap();
        assert!(stats.records_removed > 0, "{stats:?}");
        let after = contents(&p);
        // Each key's latest value survives with its original offset.
        for k in 0..4 {
            let key = format!("k{k}");
            let last = before.iter().rev().find(|r| r.1 == key).unwrap();
            assert!(after.contains(last), "{key}: {after:?}");
            assert_eq!(after.iter().filter(|r| r.1 == key).count(), 1);
        }
        assert_eq!(after.last().unwrap().1, "other");
        assert_eq!(p.offsets().unwrap().high_watermark, 13);
        // A second pass has nothing dirty left.
        assert!(clean(&p, 10_000).unwrap().is_none());
        // Reopening (from the index files) gives the same log.
        drop(p);
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(200),
            OpenHints {
                clean_shutdown: true,
                ..OpenHints::default()
            },
        )
        .unwrap();
        assert_eq!(contents(&p), after);
    }

    #[test]
    fn tombstones_stay_until_their_delete_horizon_passes() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(200),
            OpenHints::default(),
        )
        .unwrap();
        p.append(&encode_batch(&[keyed(1000, "a", Some("1"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "b", Some("1"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "a", None)]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "c", Some("1"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "d", Some("1"))]), 0)
            .unwrap();
        clean(&p, 10_000).unwrap().unwrap();
        let after = contents(&p);
        assert!(after.contains(&(2, "a".into(), None)), "{after:?}");
        assert!(!after.iter().any(|r| r.0 == 0));
        // Not yet: the horizon is 10_000 + 1000.
        assert!(clean(&p, 10_500).unwrap().is_none());
        clean(&p, 11_001).unwrap().unwrap();
        let after = contents(&p);
        assert!(!after.iter().any(|r| r.1 == "a"), "{after:?}");
        assert!(after.contains(&(1, "b".into(), Some("1".into()))));
    }

    #[test]
    fn an_interrupted_swap_is_completed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let p = Partition::open(
            path.clone(),
            TopicPartition::new("t", 0),
            compacted(100),
            OpenHints::default(),
        )
        .unwrap();
        for k in ["a", "a", "b", "c"] {
            p.append(&encode_batch(&[keyed(1000, k, Some("v"))]), 0)
                .unwrap();
        }
        drop(p);
        // As if a cleaning of segments 0 and 1 died after its commit point:
        // the swap holds offset 1 only, and segment 1 is already gone.
        let seg1 = fs::read(path.join(segment::file_name(1))).unwrap();
        fs::write(path.join(format!("{}.swap", segment::file_name(0))), &seg1).unwrap();
        remove_segment_files(&path, 1).unwrap();
        fs::write(
            path.join(format!("{}.cleaned", segment::file_name(2))),
            b"junk",
        )
        .unwrap();
        let p = Partition::open(
            path.clone(),
            TopicPartition::new("t", 0),
            compacted(100),
            OpenHints::default(),
        )
        .unwrap();
        let all = contents(&p);
        assert_eq!(all.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        let names: Vec<String> = fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names
            .iter()
            .any(|n| n.ends_with(".swap") || n.ends_with(".cleaned")));
    }

    #[test]
    fn compacted_topics_refuse_records_without_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(1 << 20),
            OpenHints::default(),
        )
        .unwrap();
        let err = p.append(&simple_batch(2, 5, 0), 0).unwrap_err();
        assert!(matches!(err, StorageError::RecordErrors(_)), "{err}");
        assert_eq!(p.offsets().unwrap().high_watermark, 0);
    }

    #[test]
    fn compressed_batches_are_compacted_and_keyless_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(300),
            OpenHints::default(),
        )
        .unwrap();
        // Two keys in one compressed batch, then newer values of one of them.
        let first = gzip_batch(&encode_batch(&[
            keyed(1000, "a", Some("1")),
            keyed(1000, "b", Some("1")),
        ]));
        p.append(&first, 0).unwrap();
        p.append(
            &gzip_batch(&encode_batch(&[keyed(1000, "a", Some("2"))])),
            0,
        )
        .unwrap();
        p.append(&encode_batch(&[keyed(1000, "c", Some("1"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "d", Some("1"))]), 0)
            .unwrap();
        let keyless = gzip_batch(&simple_batch(2, 5, 0));
        assert!(matches!(
            p.append(&keyless, 0),
            Err(StorageError::RecordErrors(_))
        ));
        clean(&p, 10_000).unwrap().unwrap();
        let after = contents(&p);
        assert!(
            !after.contains(&(0, "a".into(), Some("1".into()))),
            "{after:?}"
        );
        assert!(
            after.contains(&(1, "b".into(), Some("1".into()))),
            "{after:?}"
        );
        assert!(
            after.contains(&(2, "a".into(), Some("2".into()))),
            "{after:?}"
        );
    }

    #[test]
    fn transactional_batches_are_kept_whole_and_supersede_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(
            dir.path().join("t-0"),
            TopicPartition::new("t", 0),
            compacted(300),
            OpenHints::default(),
        )
        .unwrap();
        p.append(&encode_batch(&[keyed(1000, "b", Some("plain"))]), 0)
            .unwrap();
        p.append(
            &encode_batch_with(batch::TRANSACTIONAL_FLAG, &[keyed(1000, "a", Some("txn"))]),
            0,
        )
        .unwrap();
        p.append(
            &encode_batch_with(batch::TRANSACTIONAL_FLAG, &[keyed(1000, "b", Some("txn"))]),
            0,
        )
        .unwrap();
        p.append(&encode_batch(&[keyed(1000, "a", Some("newer"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "c", Some("1"))]), 0)
            .unwrap();
        p.append(&encode_batch(&[keyed(1000, "d", Some("1"))]), 0)
            .unwrap();
        clean(&p, 10_000).unwrap().unwrap();
        let after = contents(&p);
        for kept in [
            (0, "b", "plain"),
            (1, "a", "txn"),
            (2, "b", "txn"),
            (3, "a", "newer"),
        ] {
            assert!(
                after.contains(&(kept.0, kept.1.into(), Some(kept.2.into()))),
                "{kept:?} in {after:?}"
            );
        }
    }
}
