//! The transaction coordinator's journal: its records, kept durable.
//!
//! Why a journal: changes are small and frequent (several per
//! transaction), so each is one JSON line appended to
//! `transactions.journal` and fsynced, the latest line per id winning on
//! load; a torn last line from a crash is ignored. When the journal grows
//! it is rewritten as a snapshot (`durable::replace`), so a crash leaves
//! the old or the new file, never a mix. Completing a transaction is not
//! fsynced: if a crash loses it, the Prepare record finishes it again.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::TransactionalProducer;

pub(super) const JOURNAL: &str = "transactions.journal";
/// The snapshot of the previous store format (one JSON document).
const LEGACY_FILE: &str = "transactions.json";
/// Journal lines after which it is rewritten as a snapshot.
const COMPACT_AFTER_LINES: usize = 10_000;

/// Every record, by transactional id.
pub(super) type Records = BTreeMap<String, TransactionalProducer>;

#[derive(Serialize, Deserialize)]
struct JournalLine {
    id: String,
    /// None: the id was removed.
    record: Option<TransactionalProducer>,
}

/// The journal file, open for appending.
struct Appender {
    file: File,
    lines: usize,
}

pub(super) struct Journal {
    dir: PathBuf,
    appender: Mutex<Option<Appender>>,
}

impl Journal {
    /// Reads the records under `dir` (none yet: empty; the older
    /// single-document store is read too) and rewrites them as a fresh
    /// journal.
    pub(super) fn open(dir: &Path) -> Result<(Self, Records)> {
        let mut records: Records = match fs::read(dir.join(LEGACY_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", dir.join(LEGACY_FILE).display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(error).context("reading transactional ids"),
        };
        let path = dir.join(JOURNAL);
        match File::open(&path) {
            Ok(file) => {
                for line in BufReader::new(file).lines() {
                    let line = line.with_context(|| format!("reading {}", path.display()))?;
                    // A torn last line (a crash mid-append) is skipped.
                    let Ok(entry) = serde_json::from_str::<JournalLine>(&line) else {
                        tracing::warn!("skipping an unreadable line of {}", path.display());
                        continue;
                    };
                    match entry.record {
                        Some(record) => records.insert(entry.id, record),
                        None => records.remove(&entry.id),
                    };
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("opening {}", path.display())),
        }
        let journal = Self {
            dir: dir.to_path_buf(),
            appender: Mutex::new(None),
        };
        journal.write_snapshot(&records)?;
        let legacy = dir.join(LEGACY_FILE);
        if legacy.exists() {
            fs::remove_file(&legacy).with_context(|| format!("removing {}", legacy.display()))?;
        }
        Ok((journal, records))
    }

    /// Appends `id`'s record (None: removed). `durable` fsyncs.
    pub(super) fn append(
        &self,
        id: &str,
        record: Option<TransactionalProducer>,
        durable: bool,
    ) -> Result<()> {
        let line = JournalLine {
            id: id.to_string(),
            record,
        };
        let mut bytes = serde_json::to_vec(&line)?;
        bytes.push(b'\n');
        let mut appender = crate::sync::lock(&self.appender);
        let appender = appender
            .as_mut()
            .context("the transaction journal is not open")?;
        appender.file.write_all(&bytes)?;
        if durable {
            appender.file.sync_data()?;
        }
        appender.lines += 1;
        Ok(())
    }

    /// Rewrites the journal as `records` once it is long enough to pay.
    pub(super) fn maybe_compact(&self, records: &Records) {
        let lines = crate::sync::lock(&self.appender)
            .as_ref()
            .map_or(0, |appender| appender.lines);
        if lines >= COMPACT_AFTER_LINES.max(records.len() * 2) {
            if let Err(error) = self.write_snapshot(records) {
                tracing::warn!("compacting the transaction journal failed: {error:#}");
            }
        }
    }

    /// Replaces the journal with one line per id and appends after it.
    fn write_snapshot(&self, records: &Records) -> Result<()> {
        let path = self.dir.join(JOURNAL);
        let mut bytes = Vec::new();
        for (id, record) in records {
            serde_json::to_writer(
                &mut bytes,
                &JournalLine {
                    id: id.clone(),
                    record: Some(record.clone()),
                },
            )?;
            bytes.push(b'\n');
        }
        crate::durable::replace(&self.dir, JOURNAL, &bytes)
            .with_context(|| format!("replacing {}", path.display()))?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        *crate::sync::lock(&self.appender) = Some(Appender {
            file,
            lines: records.len(),
        });
        Ok(())
    }
}
