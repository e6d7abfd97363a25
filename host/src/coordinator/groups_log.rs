//! The group store's file, `<log dir>/groups/groups.log`: what a cluster
//! node keeps group state in until the group coordinator moves to the
//! leaders of `__consumer_offsets` partitions, and what a single node of an
//! earlier release left behind (migrated into the topic at the first start
//! and then retired, [`retire`]).
//!
//! - Each record is `[length u32][crc32c u32][payload]` (big-endian), the
//!   payload a small JSON [`Record`]. Later records win.
//! - An append is one `write` of whole records, acknowledged once it is in
//!   the page cache, as Kafka acknowledges offset commits by default; the
//!   file is fsynced on clean shutdown and whenever it is rewritten.
//! - Replay stops at the first record that is short or fails its CRC (a
//!   write torn by a crash), truncates the file there and goes on: that is
//!   Kafka's recovery of the active segment.
//! - When the file has grown past twice its size after the last rewrite
//!   (and past a floor), the coordinator hands over its live state and the
//!   file is rewritten: `groups.log.tmp`, fsync, rename, fsync the
//!   directory. A crash before the rename leaves the old file whole.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use super::store::{Record, Snapshot};

pub const FILE_NAME: &str = "groups.log";
/// What a migrated file is renamed to (kept for the operator, never read).
pub const RETIRED_NAME: &str = "groups.log.migrated";
const HEADER: usize = 8;
/// A record larger than this is corruption, not data.
const MAX_RECORD: usize = 64 << 20;
/// Never rewrite a file smaller than this.
const COMPACT_FLOOR: u64 = 4 << 20;

/// Whether `dir` holds a groups.log.
pub fn exists(dir: &Path) -> bool {
    dir.join(FILE_NAME).exists()
}

/// Renames a migrated groups.log out of the way, durably.
pub fn retire(dir: &Path) -> io::Result<()> {
    fs::rename(dir.join(FILE_NAME), dir.join(RETIRED_NAME))?;
    File::open(dir)?.sync_all()
}

pub struct GroupsLog {
    dir: PathBuf,
    file: File,
    len: u64,
    /// Size right after the last rewrite (or open).
    base_len: u64,
}

impl GroupsLog {
    /// Opens (creating) the store in `dir` and replays it.
    pub fn open(dir: &Path) -> io::Result<(Self, Snapshot)> {
        fs::create_dir_all(dir)?;
        crate::durable::discard_unfinished(dir, FILE_NAME)?;
        let path = dir.join(FILE_NAME);
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let (snapshot, valid) = replay(&bytes);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)?;
        if valid < bytes.len() {
            warn!(
                file = %path.display(),
                valid_bytes = valid,
                dropped_bytes = bytes.len() - valid,
                "groups.log: truncating a torn or corrupt tail"
            );
            file.set_len(valid as u64)?;
            file.sync_all()?;
        }
        let len = valid as u64;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                file,
                len,
                base_len: len,
            },
            snapshot,
        ))
    }

    /// Appends records in one write. On failure the file is cut back to
    /// its last good length so that a later append does not land after a
    /// partial record.
    pub fn append(&mut self, records: &[Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for record in records {
            encode(record, &mut buf)?;
        }
        if let Err(error) = self.file.write_all(&buf) {
            let _ = self.file.set_len(self.len);
            return Err(error);
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Whether the log has grown enough that a rewrite pays off.
    pub fn wants_compaction(&self) -> bool {
        self.len > COMPACT_FLOOR && self.len > self.base_len.saturating_mul(2)
    }

    /// Replaces the log with `live`, the complete current state.
    pub fn rewrite(&mut self, live: &[Record]) -> io::Result<()> {
        let mut buf = Vec::new();
        for record in live {
            encode(record, &mut buf)?;
        }
        crate::durable::replace(&self.dir, FILE_NAME, &buf)?;
        let path = self.dir.join(FILE_NAME);
        self.file = OpenOptions::new().append(true).read(true).open(&path)?;
        self.len = buf.len() as u64;
        self.base_len = self.len;
        Ok(())
    }

    /// fsync (clean shutdown).
    pub fn flush(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    pub fn len(&self) -> u64 {
        self.len
    }
}

fn encode(record: &Record, buf: &mut Vec<u8>) -> io::Result<()> {
    let payload = serde_json::to_vec(record).map_err(io::Error::other)?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| (*len as usize) <= MAX_RECORD)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "group record too large"))?;
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    buf.extend_from_slice(&payload);
    Ok(())
}

/// Applies every whole, valid record; returns the state and the length of
/// the valid prefix.
fn replay(bytes: &[u8]) -> (Snapshot, usize) {
    let mut snapshot = Snapshot::default();
    let mut pos = 0;
    while let Some(header) = bytes.get(pos..pos + HEADER) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        if len > MAX_RECORD {
            break;
        }
        let Some(payload) = bytes.get(pos + HEADER..pos + HEADER + len) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        match serde_json::from_slice::<Record>(payload) {
            Ok(record) => snapshot.apply(record),
            Err(error) => {
                warn!("groups.log: skipping a record that does not parse: {error}");
            }
        }
        pos += HEADER + len;
    }
    (snapshot, pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::store::{GroupRecord, MemberRecord, OffsetRecord};

    const TMP_NAME: &str = "groups.log.tmp";

    fn offset(group: &str, partition: i32, offset: i64) -> Record {
        Record::Offset {
            group: group.into(),
            topic: "t".into(),
            partition,
            value: OffsetRecord {
                offset,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp: 7,
                expire_timestamp: None,
            },
        }
    }

    fn group(generation: i32) -> Record {
        Record::Group {
            group: "g".into(),
            value: GroupRecord {
                protocol_type: Some("consumer".into()),
                generation,
                protocol: Some("range".into()),
                leader: Some("m-1".into()),
                state_timestamp: 5,
                members: vec![MemberRecord {
                    member_id: "m-1".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: vec![0, 1, 2],
                    assignment: vec![9],
                }],
            },
        }
    }

    #[test]
    fn later_records_win_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, snapshot) = GroupsLog::open(dir.path()).unwrap();
        assert_eq!(snapshot, Snapshot::default());
        store
            .append(&[offset("g", 0, 1), offset("g", 1, 2)])
            .unwrap();
        store
            .append(&[offset("g", 0, 3), group(1), group(2)])
            .unwrap();
        store
            .append(&[Record::OffsetDeleted {
                group: "g".into(),
                topic: "t".into(),
                partition: 1,
            }])
            .unwrap();
        store.append(&[offset("h", 0, 4)]).unwrap();
        store
            .append(&[Record::GroupDeleted { group: "h".into() }])
            .unwrap();
        drop(store);
        let (_, snapshot) = GroupsLog::open(dir.path()).unwrap();
        assert_eq!(snapshot.groups.len(), 1);
        assert_eq!(snapshot.groups["g"].generation, 2);
        assert_eq!(snapshot.groups["g"].members[0].assignment, vec![9]);
        let offsets = &snapshot.offsets["g"];
        assert_eq!(offsets.len(), 1);
        assert_eq!(offsets[&("t".to_string(), 0)].offset, 3);
        assert!(!snapshot.offsets.contains_key("h"));
    }

    #[test]
    fn torn_and_corrupt_tails_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = GroupsLog::open(dir.path()).unwrap();
        store.append(&[offset("g", 0, 1)]).unwrap();
        let good = store.len();
        store.append(&[offset("g", 0, 2)]).unwrap();
        drop(store);
        let path = dir.path().join(FILE_NAME);
        // A crash in the middle of the second record.
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let (mut store, snapshot) = GroupsLog::open(dir.path()).unwrap();
        assert_eq!(snapshot.offsets["g"][&("t".to_string(), 0)].offset, 1);
        assert_eq!(store.len(), good);
        assert_eq!(fs::metadata(&path).unwrap().len(), good);
        // Appends after recovery are readable.
        store.append(&[offset("g", 0, 5)]).unwrap();
        drop(store);
        // A flipped bit in the last record: it is dropped, the rest stays.
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let (_, snapshot) = GroupsLog::open(dir.path()).unwrap();
        assert_eq!(snapshot.offsets["g"][&("t".to_string(), 0)].offset, 1);
    }

    #[test]
    fn rewrite_keeps_only_the_live_state() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = GroupsLog::open(dir.path()).unwrap();
        for i in 0..1000 {
            store.append(&[offset("g", 0, i)]).unwrap();
        }
        let before = store.len();
        store.rewrite(&[offset("g", 0, 999), group(3)]).unwrap();
        assert!(store.len() < before / 100);
        store.append(&[offset("g", 1, 1)]).unwrap();
        drop(store);
        // A leftover temp file from a crashed rewrite is ignored.
        fs::write(dir.path().join(TMP_NAME), b"garbage").unwrap();
        let (_, snapshot) = GroupsLog::open(dir.path()).unwrap();
        assert_eq!(snapshot.offsets["g"].len(), 2);
        assert_eq!(snapshot.offsets["g"][&("t".to_string(), 0)].offset, 999);
        assert_eq!(snapshot.groups["g"].generation, 3);
        assert!(!dir.path().join(TMP_NAME).exists());
    }

    #[test]
    fn compaction_waits_for_growth() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = GroupsLog::open(dir.path()).unwrap();
        assert!(!store.wants_compaction());
        let big = Record::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: OffsetRecord {
                offset: 1,
                leader_epoch: -1,
                metadata: "x".repeat(4000),
                commit_timestamp: 0,
                expire_timestamp: None,
            },
        };
        while store.len() <= COMPACT_FLOOR {
            store.append(std::slice::from_ref(&big)).unwrap();
        }
        assert!(store.wants_compaction());
        store.rewrite(std::slice::from_ref(&big)).unwrap();
        assert!(!store.wants_compaction());
    }
}
