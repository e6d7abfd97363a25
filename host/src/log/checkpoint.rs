//! Offset checkpoint files, in Kafka's text format, one per log directory:
//! `recovery-point-offset-checkpoint` (how far each partition is known to be
//! fsynced, so recovery re-validates only what comes after),
//! `log-start-offset-checkpoint` (where DeleteRecords and retention moved
//! each log's start) and `cleaner-offset-checkpoint` (where each compacted
//! log's dirty part begins).
//!
//! ```text
//! 0                  <- format version
//! 2                  <- number of entries
//! orders 0 1234      <- topic partition offset
//! orders 1 99
//! ```
//!
//! A checkpoint is replaced atomically: written to `<name>.tmp`, fsynced,
//! renamed over the old one, and the directory fsynced, so a crash leaves
//! the old or the new file, never a mix. A file that does not parse is
//! reported and ignored (every value then falls back to its safe default:
//! recover everything, start at the first segment).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;

use super::TopicPartition;

pub const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET: &str = "cleaner-offset-checkpoint";

const VERSION: u32 = 0;

/// Reads a checkpoint; a missing file is empty, a malformed one is logged
/// and treated as empty.
pub fn read(dir: &Path, name: &str) -> HashMap<TopicPartition, i64> {
    let path = dir.join(name);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot read checkpoint: {e}");
            return HashMap::new();
        }
    };
    match parse(&text) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(path = %path.display(), "ignoring malformed checkpoint: {e}");
            HashMap::new()
        }
    }
}

fn parse(text: &str) -> Result<HashMap<TopicPartition, i64>, String> {
    let mut lines = text.lines();
    let version: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no version line")?;
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no entry count")?;
    // The count comes from the file: a damaged one must not size an
    // allocation, so the map grows with the entries actually read.
    let mut entries = HashMap::new();
    for line in lines.by_ref().take(count) {
        let mut fields = line.split(' ');
        let (Some(topic), Some(partition), Some(offset), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("malformed entry {line:?}"));
        };
        let partition: i32 = partition
            .parse()
            .map_err(|_| format!("bad partition in {line:?}"))?;
        let offset: i64 = offset
            .parse()
            .map_err(|_| format!("bad offset in {line:?}"))?;
        entries.insert(TopicPartition::new(topic, partition), offset);
    }
    if entries.len() != count {
        return Err(format!(
            "{count} entries announced, {} found",
            entries.len()
        ));
    }
    Ok(entries)
}

/// Atomically replaces the checkpoint with `entries`.
pub fn write(dir: &Path, name: &str, entries: &[(TopicPartition, i64)]) -> io::Result<()> {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for (tp, offset) in entries {
        text.push_str(&format!("{} {} {offset}\n", tp.topic, tp.partition));
    }
    crate::durable::replace(dir, name, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_malformed_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path(), RECOVERY_POINT).is_empty());
        let entries = vec![
            (TopicPartition::new("a.b-c", 0), 42),
            (TopicPartition::new("x", 7), 0),
        ];
        write(dir.path(), RECOVERY_POINT, &entries).unwrap();
        let text = fs::read_to_string(dir.path().join(RECOVERY_POINT)).unwrap();
        assert_eq!(text, "0\n2\na.b-c 0 42\nx 7 0\n");
        let back = read(dir.path(), RECOVERY_POINT);
        assert_eq!(back.len(), 2);
        assert_eq!(back[&TopicPartition::new("a.b-c", 0)], 42);
        for bad in [
            "",
            "1\n0\n",
            "0\n2\na 0 1\n",
            "0\n1\na x 1\n",
            "0\n1\na 0 1 2\n",
        ] {
            fs::write(dir.path().join(LOG_START_OFFSET), bad).unwrap();
            assert!(read(dir.path(), LOG_START_OFFSET).is_empty(), "{bad:?}");
        }
    }
}
