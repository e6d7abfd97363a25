//! A crash-safe store for topic metadata.
//!
//! The state is a JSON document, `<dir>/topics.json`, amended by a
//! journal, `<dir>/topics.journal`, one line per change (a topic put or
//! removed; see [`Journal`]). A change returns once its line is durable,
//! and the in-memory copy is updated only after that, so readers never see
//! a state that a crash could take back. Once the journal holds more lines
//! than the document has topics (and at least [`COMPACT_AFTER`]), the
//! document is rewritten (write `topics.json.tmp`, fsync, rename, fsync the
//! directory) and the journal cleared: a change costs amortized O(1), where
//! rewriting the whole document per change made creating 10,000 topics one
//! by one take 207 s. A crash between the rewrite and the clearing replays
//! lines the document already holds, which changes nothing (the last line
//! per topic wins, as it did when it was written).
//!
//! Mutators take `&mut self`: the owner serializes changes (typically behind
//! the same lock that keeps its existence checks and writes together).
//!
//! A data directory of an earlier release (the document alone) opens as
//! is; a release before this one would not read the journal's changes.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::durable::{Journal, JsonFile};

const FILE_NAME: &str = "topics.json";
const JOURNAL_NAME: &str = "topics.journal";
/// The fewest journal lines that make a rewrite of the document worth it.
pub const COMPACT_AFTER: usize = 1000;
const FORMAT_VERSION: u32 = 1;

/// A topic as the broker knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub name: String,
    /// The topic id (a UUID), stored as 32 hex digits.
    #[serde(with = "hex_id")]
    pub id: [u8; 16],
    pub partitions: i32,
    /// Topic-level config overrides (`retention.ms`, ...).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// One line of the journal.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Change {
    Put(TopicRecord),
    Remove(String),
}

#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    topics: Vec<TopicRecord>,
}

/// Topic metadata persisted in a directory.
#[derive(Debug)]
pub struct MetadataStore {
    file: JsonFile,
    journal: Journal,
    topics: BTreeMap<String, TopicRecord>,
}

impl MetadataStore {
    /// Opens the store in `dir`, creating the directory if needed.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let file = JsonFile::open(dir, FILE_NAME)?;
        let mut topics = match file.load_versioned(FORMAT_VERSION, |d: &Document| d.version)? {
            Some(document) => by_name(document).map_err(|error| file.invalid(error))?,
            None => BTreeMap::new(),
        };
        let (journal, changes) = Journal::open(dir, JOURNAL_NAME)?;
        for change in changes {
            match change {
                Change::Put(topic) => topics.insert(topic.name.clone(), topic),
                Change::Remove(name) => topics.remove(&name),
            };
        }
        Ok(MetadataStore {
            file,
            journal,
            topics,
        })
    }

    /// Every topic, ordered by name.
    pub fn topics(&self) -> Vec<TopicRecord> {
        self.topics.values().cloned().collect()
    }

    /// Inserts or replaces the topic named `topic.name`; durable on return.
    pub fn put_topic(&mut self, topic: TopicRecord) -> io::Result<()> {
        self.journal.append(&Change::Put(topic.clone()))?;
        self.topics.insert(topic.name.clone(), topic);
        self.compact_if_due();
        Ok(())
    }

    /// Removes a topic, returning it if it existed; durable on return.
    pub fn remove_topic(&mut self, name: &str) -> io::Result<Option<TopicRecord>> {
        if !self.topics.contains_key(name) {
            return Ok(None);
        }
        self.journal.append(&Change::Remove(name.to_string()))?;
        let removed = self.topics.remove(name);
        self.compact_if_due();
        Ok(removed)
    }

    /// Folds the journal into the document once it outgrew it. The change
    /// that triggered it is durable already, so a failure here fails no
    /// change: it is logged and tried again after the next one.
    fn compact_if_due(&mut self) {
        if self.journal.lines() < COMPACT_AFTER.max(self.topics.len()) {
            return;
        }
        let document = Document {
            version: FORMAT_VERSION,
            topics: self.topics.values().cloned().collect(),
        };
        if let Err(error) = self
            .file
            .store(&document)
            .and_then(|()| self.journal.clear())
        {
            tracing::warn!(path = %self.file.path().display(), lines = self.journal.lines(), "cannot fold the topics journal into the document, kept the journal: {error}");
        }
    }
}

fn by_name(document: Document) -> Result<BTreeMap<String, TopicRecord>, String> {
    let mut topics = BTreeMap::new();
    for topic in document.topics {
        let name = topic.name.clone();
        if topics.insert(name.clone(), topic).is_some() {
            return Err(format!("topic {name:?} appears twice"));
        }
    }
    Ok(topics)
}

/// Serde for a 16-byte id as 32 lowercase hex digits.
mod hex_id {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        let text: String = id.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let text = String::deserialize(d)?;
        let digits = text.as_bytes();
        if digits.len() != 32 {
            return Err(D::Error::custom(format!(
                "topic id {text:?} is not 32 hex digits"
            )));
        }
        let mut id = [0u8; 16];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            let pair = std::str::from_utf8(pair).map_err(D::Error::custom)?;
            id[i] = u8::from_str_radix(pair, 16)
                .map_err(|_| D::Error::custom(format!("topic id {text:?} is not hex")))?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs;

    const TMP_NAME: &str = "topics.json.tmp";

    fn topic(name: &str, partitions: i32) -> TopicRecord {
        let mut id = [0u8; 16];
        id[0] = name.len() as u8;
        id[15] = 0xfe;
        TopicRecord {
            name: name.to_string(),
            id,
            partitions,
            configs: BTreeMap::from([("cleanup.policy".to_string(), "delete".to_string())]),
        }
    }

    #[test]
    fn round_trip_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = MetadataStore::open(dir.path()).unwrap();
        assert!(store.topics().is_empty());
        store.put_topic(topic("b", 3)).unwrap();
        store.put_topic(topic("a", 1)).unwrap();
        store.put_topic(topic("a", 2)).unwrap(); // replaces
        assert_eq!(store.topics(), vec![topic("a", 2), topic("b", 3)]);
        drop(store);

        let mut store = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(store.topics(), vec![topic("a", 2), topic("b", 3)]);
        assert_eq!(store.remove_topic("a").unwrap(), Some(topic("a", 2)));
        assert_eq!(store.remove_topic("a").unwrap(), None);
        drop(store);

        let store = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(store.topics(), vec![topic("b", 3)]);
        let text = fs::read_to_string(dir.path().join(JOURNAL_NAME)).unwrap();
        assert!(
            text.contains("\"id\":\"010000000000000000000000000000fe\""),
            "{text}"
        );
        assert!(text.ends_with("{\"remove\":\"a\"}\n"), "{text}");
    }

    #[test]
    fn the_journal_is_folded_into_the_document_once_it_outgrows_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = MetadataStore::open(dir.path()).unwrap();
        for i in 0..COMPACT_AFTER + 5 {
            store.put_topic(topic(&format!("t{i}"), 1)).unwrap();
        }
        store.remove_topic("t0").unwrap();
        // Folded at the COMPACT_AFTER-th change: the document holds those
        // topics, the journal the 6 changes since.
        let document: Document =
            serde_json::from_slice(&fs::read(dir.path().join(FILE_NAME)).unwrap()).unwrap();
        assert_eq!(document.topics.len(), COMPACT_AFTER);
        let journal = fs::read_to_string(dir.path().join(JOURNAL_NAME)).unwrap();
        assert_eq!(journal.lines().count(), 6);
        drop(store);
        let store = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(store.topics().len(), COMPACT_AFTER + 4);
        assert!(!store.topics().iter().any(|t| t.name == "t0"));
    }

    #[test]
    fn a_crash_between_rewrite_and_clearing_replays_to_the_same_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = MetadataStore::open(dir.path()).unwrap();
        store.put_topic(topic("a", 1)).unwrap();
        store.put_topic(topic("b", 1)).unwrap();
        store.put_topic(topic("a", 2)).unwrap();
        store.remove_topic("b").unwrap();
        let expected = store.topics();
        // The document rewritten with the final state, the journal not
        // yet cleared.
        store
            .file
            .store(&Document {
                version: FORMAT_VERSION,
                topics: expected.clone(),
            })
            .unwrap();
        drop(store);
        let store = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(store.topics(), expected);
        assert_eq!(expected, vec![topic("a", 2)]);
    }

    #[test]
    fn unfinished_write_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = MetadataStore::open(dir.path()).unwrap();
        store.put_topic(topic("a", 1)).unwrap();
        drop(store);
        // A crash after writing the temp file but before the rename.
        fs::write(
            dir.path().join(TMP_NAME),
            b"{\"version\":1,\"topics\":[{\"na",
        )
        .unwrap();
        let store = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(store.topics(), vec![topic("a", 1)]);
        assert!(!dir.path().join(TMP_NAME).exists());
    }

    #[test]
    fn corrupt_file_is_an_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), b"{ not json").unwrap();
        let err = MetadataStore::open(dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        fs::write(dir.path().join(FILE_NAME), br#"{"version":7,"topics":[]}"#).unwrap();
        assert!(MetadataStore::open(dir.path()).is_err());
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"topics":[{"name":"a","id":"zz","partitions":1}]}"#,
        )
        .unwrap();
        assert!(MetadataStore::open(dir.path()).is_err());
    }

    #[test]
    fn configs_default_to_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"topics":[{"name":"a","id":"000102030405060708090a0b0c0d0e0f","partitions":4}]}"#,
        )
        .unwrap();
        let store = MetadataStore::open(dir.path()).unwrap();
        let a = store.topics().remove(0);
        assert_eq!(a.id, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(a.partitions, 4);
        assert!(a.configs.is_empty());
    }
}
