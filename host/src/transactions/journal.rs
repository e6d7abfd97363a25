//! The transaction coordinator's store of earlier releases, read once to
//! migrate it into `__transaction_state`.
//!
//! Earlier releases kept one JSON line per change in
//! `transactions.journal` (the latest line per id winning; a torn last
//! line from a crash ignored), and before that one JSON document,
//! `transactions.json`. [`read`] reads both as they were written;
//! [`retire`] renames them `*.migrated` once their records are in the
//! topic, so an operator can still recover them. The writer ([`Journal`])
//! is the earlier releases' own code, kept for the tests that build such
//! a data directory.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::Path;
#[cfg(test)]
use std::{fs::OpenOptions, io::Write, path::PathBuf, sync::Mutex};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::TransactionalProducer;

pub(super) const JOURNAL: &str = "transactions.journal";
/// The snapshot of the previous store format (one JSON document).
const LEGACY_FILE: &str = "transactions.json";
/// What a migrated file is renamed to: its name with this suffix.
const RETIRED_SUFFIX: &str = ".migrated";

/// Every record, by transactional id.
pub(super) type Records = BTreeMap<String, TransactionalProducer>;

#[derive(Serialize, Deserialize)]
struct JournalLine {
    id: String,
    /// None: the id was removed.
    record: Option<TransactionalProducer>,
}

/// Whether an earlier release's store is in `dir`.
pub(super) fn exists(dir: &Path) -> bool {
    dir.join(JOURNAL).exists() || dir.join(LEGACY_FILE).exists()
}

/// Every record of the earlier stores in `dir` (none: empty): the
/// single-document store first, then the journal's lines in order.
pub(super) fn read(dir: &Path) -> Result<Records> {
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
    Ok(records)
}

/// Renames the earlier stores in `dir` out of the way, durably.
pub(super) fn retire(dir: &Path) -> Result<()> {
    for name in [LEGACY_FILE, JOURNAL] {
        let from = dir.join(name);
        if from.exists() {
            let to = dir.join(format!("{name}{RETIRED_SUFFIX}"));
            fs::rename(&from, &to)
                .with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
        }
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// The journal file, open for appending.
#[cfg(test)]
struct Appender {
    file: File,
}

/// The earlier releases' writer.
#[cfg(test)]
pub(super) struct Journal {
    dir: PathBuf,
    appender: Mutex<Option<Appender>>,
}

#[cfg(test)]
impl Journal {
    /// Reads the records under `dir` (none yet: empty; the older
    /// single-document store is read too) and rewrites them as a fresh
    /// journal.
    pub(super) fn open(dir: &Path) -> Result<(Self, Records)> {
        let records = read(dir)?;
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
        Ok(())
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
        *crate::sync::lock(&self.appender) = Some(Appender { file });
        Ok(())
    }
}
