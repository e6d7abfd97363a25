//! Which segment files are open.
//!
//! A broker with tens of thousands of partitions cannot keep a descriptor
//! per segment file: three files per segment (log and two indexes) against
//! a soft limit of a few tens of thousands ran out at about 6,600
//! partitions. So descriptors follow use, not the number of files:
//! - the index files hold no descriptor at all: their entries live in
//!   memory and are written when the log is flushed (see `index`);
//! - a segment being written (the active one) pins its log file once the
//!   first append needs it, until it is sealed by a roll;
//! - every other segment file is opened when a read needs it and kept in a
//!   small process-wide cache of at most [`CAPACITY`] handles (fewer under
//!   a low descriptor limit: an eighth of it) with second-chance (CLOCK)
//!   eviction, so a hit costs no lock beyond the segment's own.
//!
//! A reader holds its handle (an `Arc<File>`) for as long as it reads, so an
//! evicted or deleted file stays readable to it, as before. A segment that
//! still has a live handle somewhere (a reader, the cleaner) gets that one
//! back rather than reopening by name: a compaction swap or a move renames
//! another file into the same path, and reopening by name then would give
//! a different file. A reopened file is checked to be the same inode for
//! the same reason.
//!
//! Running out of descriptors (EMFILE) fails only the operation that needed
//! a new one; before failing, the cache gives up half its handles and the
//! open is tried once more ([`retrying`], used for every log file open).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use crate::sync::lock;

/// Handles of segments not being written that the cache keeps open.
pub const CAPACITY: usize = 512;

/// The cache's size: [`CAPACITY`], or an eighth of a lower descriptor limit.
static LIMIT: LazyLock<usize> = LazyLock::new(|| {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return CAPACITY;
    }
    usize::try_from(limit.rlim_cur / 8)
        .unwrap_or(CAPACITY)
        .clamp(8, CAPACITY)
});

/// One segment file's handle slot, shared by the segment and the cache.
#[derive(Debug)]
pub struct FileSlot {
    path: PathBuf,
    /// Device and inode of the file the segment was opened on.
    identity: (u64, u64),
    held: Mutex<Held>,
    /// Used since the cache last looked (second chance).
    used: AtomicBool,
}

#[derive(Debug, Default)]
struct Held {
    /// The cache's reference: `Some` while the slot is in the cache.
    cached: Option<Arc<File>>,
    /// Any live handle (a reader's, the pin's), to reuse rather than reopen.
    live: Weak<File>,
}

fn identity(file: &File) -> io::Result<(u64, u64)> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

impl FileSlot {
    /// A slot for the file just opened at `path`, which the cache now holds.
    pub fn new(path: PathBuf, file: File) -> io::Result<Arc<FileSlot>> {
        let identity = identity(&file)?;
        let file = Arc::new(file);
        let slot = Arc::new(FileSlot {
            path,
            identity,
            held: Mutex::new(Held {
                cached: Some(Arc::clone(&file)),
                live: Arc::downgrade(&file),
            }),
            used: AtomicBool::new(true),
        });
        CACHE.admit(&slot);
        Ok(slot)
    }

    /// A handle on the file: a live one if there is one, else opened again
    /// (and cached).
    pub fn get(self: &Arc<Self>) -> io::Result<Arc<File>> {
        self.used.store(true, Ordering::Relaxed);
        let mut held = lock(&self.held);
        if let Some(file) = &held.cached {
            return Ok(Arc::clone(file));
        }
        let file = match held.live.upgrade() {
            Some(file) => file,
            None => {
                let open = || OpenOptions::new().read(true).write(true).open(&self.path);
                let file = Arc::new(retrying(open)?);
                if identity(&file)? != self.identity {
                    return Err(io::Error::other(format!(
                        "{} was replaced while the segment was in use",
                        self.path.display()
                    )));
                }
                held.live = Arc::downgrade(&file);
                file
            }
        };
        held.cached = Some(Arc::clone(&file));
        drop(held);
        CACHE.admit(self);
        Ok(file)
    }

    /// Gives up the cache's reference (eviction); live handles stay.
    fn release(&self) {
        lock(&self.held).cached = None;
    }
}

/// Runs `open` (anything that opens a log file); on EMFILE/ENFILE the
/// cache releases half its handles and it is tried once more.
/// Logged either way, saying whether the operation went through: a
/// failure here is what fails a request (a first write to a partition, a
/// roll, a read of an evicted segment).
pub fn retrying<T>(open: impl Fn() -> io::Result<T>) -> io::Result<T> {
    match open() {
        Err(e) if is_out_of_descriptors(&e) => {
            let released = CACHE.shrink(*LIMIT / 2);
            let again = open();
            match &again {
                Ok(_) => tracing::warn!(
                    released,
                    "out of file descriptors: released cached segment handles, then the open succeeded"
                ),
                Err(e) => tracing::warn!(
                    released,
                    "out of file descriptors: released cached segment handles, the open still failed ({e}): the operation that needed it fails"
                ),
            }
            again
        }
        other => other,
    }
}

/// EMFILE (process limit) or ENFILE (system limit).
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// The process-wide cache: slots in admission order, evicted with a
/// second chance for the ones used since.
struct Cache {
    slots: Mutex<VecDeque<Weak<FileSlot>>>,
}

static CACHE: Cache = Cache {
    slots: Mutex::new(VecDeque::new()),
};

impl Cache {
    fn admit(&self, slot: &Arc<FileSlot>) {
        let evicted = {
            let mut slots = lock(&self.slots);
            slots.push_back(Arc::downgrade(slot));
            Self::evict_over(&mut slots, *LIMIT)
        };
        // Released outside the cache lock: closing a file may take a while.
        for slot in evicted {
            slot.release();
        }
    }

    /// Pops slots until at most `keep` are left, giving each used one a
    /// second chance (once round). Returns the slots to release.
    fn evict_over(slots: &mut VecDeque<Weak<FileSlot>>, keep: usize) -> Vec<Arc<FileSlot>> {
        let mut evicted = Vec::new();
        let mut chances = slots.len();
        while slots.len() > keep {
            let Some(weak) = slots.pop_front() else {
                break;
            };
            // A dropped segment's slot has already closed its file.
            let Some(slot) = weak.upgrade() else {
                continue;
            };
            if chances > 0 && slot.used.swap(false, Ordering::Relaxed) {
                chances -= 1;
                slots.push_back(weak);
                continue;
            }
            evicted.push(slot);
        }
        evicted
    }

    /// Releases handles until at most `keep` are cached; how many went.
    fn shrink(&self, keep: usize) -> usize {
        let evicted = {
            let mut slots = lock(&self.slots);
            let mut evicted = Vec::new();
            while slots.len() > keep {
                match slots.pop_front().and_then(|w| w.upgrade()) {
                    Some(slot) => evicted.push(slot),
                    None => continue,
                }
            }
            evicted
        };
        for slot in &evicted {
            slot.release();
        }
        evicted.len()
    }
}

/// How many slots the cache holds (live or not yet popped).
#[cfg(test)]
pub fn cached() -> usize {
    lock(&CACHE.slots).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_reopens_the_same_file_and_refuses_a_replaced_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, b"first").unwrap();
        let slot = FileSlot::new(path.clone(), File::open(&path).unwrap()).unwrap();
        slot.release();
        let f = slot.get().unwrap();
        let mut buf = [0u8; 5];
        std::os::unix::fs::FileExt::read_exact_at(&*f, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"first");
        // While a handle is live the same file comes back, even after the
        // path was replaced.
        std::fs::write(dir.path().join("b.log"), b"other").unwrap();
        std::fs::rename(dir.path().join("b.log"), &path).unwrap();
        slot.release();
        let again = slot.get().unwrap();
        assert!(Arc::ptr_eq(&f, &again));
        drop((f, again));
        slot.release();
        let err = slot.get().unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
    }

    #[test]
    fn out_of_descriptors_is_retried_once_and_other_errors_not() {
        let emfile = || io::Error::from_raw_os_error(libc::EMFILE);
        let calls = std::cell::Cell::new(0);
        let once = retrying(|| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                Err(emfile())
            } else {
                Ok(calls.get())
            }
        });
        assert_eq!(once.unwrap(), 2);
        // Still out after the release: the error comes back, no loop.
        calls.set(0);
        let err = retrying(|| -> io::Result<()> {
            calls.set(calls.get() + 1);
            Err(emfile())
        })
        .unwrap_err();
        assert!(is_out_of_descriptors(&err));
        assert_eq!(calls.get(), 2);
        calls.set(0);
        let err = retrying(|| -> io::Result<()> {
            calls.set(calls.get() + 1);
            Err(io::Error::from(io::ErrorKind::NotFound))
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut slots = Vec::new();
        for i in 0..*LIMIT + 100 {
            let path = dir.path().join(format!("{i}.log"));
            std::fs::write(&path, b"x").unwrap();
            slots.push(FileSlot::new(path.clone(), File::open(&path).unwrap()).unwrap());
            assert!(cached() <= *LIMIT);
        }
        let open = slots
            .iter()
            .filter(|s| lock(&s.held).cached.is_some())
            .count();
        assert!(open <= *LIMIT, "{open} handles cached");
        // The oldest went first, and a read brings one back.
        assert!(lock(&slots[0].held).cached.is_none());
        slots[0].get().unwrap();
        assert!(lock(&slots[0].held).cached.is_some());
    }
}
