//! How a long hash is going: the tree capability tells a process-wide
//! watcher (the CLI's progress display) how many bytes it is about to read
//! and as it reads them, so the first snapshot of a large directory, which
//! reads every byte, is not minutes of silence. With no watcher installed,
//! nothing is reported and nothing is counted.

use std::sync::{Arc, RwLock};

/// Whoever shows hashing progress.
pub trait HashWatcher: Send + Sync {
    /// `files` files of `bytes` bytes in all are about to be read for
    /// `what` (a directory, or a file). The task lives until they are.
    fn start(&self, what: &str, files: u64, bytes: u64) -> Box<dyn HashTask>;
}

/// One run of reads; dropped when they are over (or failed).
pub trait HashTask: Send + Sync {
    /// `bytes` more were read.
    fn advance(&self, bytes: u64);
}

static WATCHER: RwLock<Option<Arc<dyn HashWatcher>>> = RwLock::new(None);

/// Report every hash from now on to `watcher` (replacing any before it).
pub fn watch_hashing(watcher: Arc<dyn HashWatcher>) {
    *WATCHER.write().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
}

/// A task for the installed watcher, if there is one.
pub(super) fn start(what: &str, files: u64, bytes: u64) -> Option<Box<dyn HashTask>> {
    let watcher = WATCHER.read().unwrap_or_else(|e| e.into_inner()).clone()?;
    Some(watcher.start(what, files, bytes))
}
