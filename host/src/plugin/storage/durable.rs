//! Durability of local writes, per put or per batch.
//!
//! Alone, a local put syncs its file before renaming it into place (one
//! `fsync` per put). A commit pinning 10,000 objects made 10,000 of them,
//! and they dominated its time, though nothing needs each pin durable on its
//! own: pins are content-addressed (re-pinning after a crash is idempotent)
//! and the journal, synced once per wave, is what tells a re-run what was
//! done. So while a [`DeferredSyncs`] scope is open, local puts skip their
//! own sync and leave their file's filesystem here instead; ending the
//! scope ([`DeferredSyncs::sync`]) makes every one of them durable with one
//! `syncfs` per filesystem, before the caller syncs its journal wave. A
//! process kill loses nothing either way (written data is in the page
//! cache); a power loss before the scope's sync can lose pins whose journal
//! records were not synced either, which a re-run recreates.
//!
//! The scope is process-wide (the puts run inside plugin calls, far from
//! the engine that opens it). A put that finds no scope open syncs itself;
//! one that began inside a scope but finds it ended when it is done syncs
//! itself too, so no write is ever left unsynced by a scope it missed. Only
//! Linux has `syncfs`; elsewhere every put syncs itself.

use std::fs::File;
use std::os::fd::AsFd;
use std::sync::Mutex;

/// The open scopes and the filesystems their puts wrote to.
struct Pending {
    scopes: usize,
    /// One open file per filesystem written (by device id), for `syncfs`.
    filesystems: Vec<(u64, File, String)>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    scopes: 0,
    filesystems: Vec::new(),
});

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a put starting now may leave its sync to an open scope.
pub(super) fn deferring() -> bool {
    cfg!(target_os = "linux") && pending().scopes > 0
}

/// A put that skipped its own sync ([`deferring`]) hands over its written
/// file (`path` names it, for the sync log). Returns the file when no scope
/// is open any more: the caller syncs it itself.
pub(super) fn hand_over(file: File, path: &str) -> std::io::Result<Option<File>> {
    let mut p = pending();
    if p.scopes == 0 {
        return Ok(Some(file));
    }
    // `st_dev`'s type differs between platforms.
    #[allow(clippy::unnecessary_cast)]
    let dev = rustix::fs::fstat(file.as_fd())?.st_dev as u64;
    if !p.filesystems.iter().any(|(d, _, _)| *d == dev) {
        p.filesystems.push((dev, file, path.to_string()));
    }
    Ok(None)
}

/// An open scope of deferred local-store syncs (module docs). Dropping it
/// unsynced still syncs what it deferred, best effort.
#[must_use = "a scope's writes are made durable by DeferredSyncs::sync"]
pub struct DeferredSyncs {
    open: bool,
}

/// Open a scope: local puts from now until its [`DeferredSyncs::sync`] leave
/// their sync to it.
pub fn defer_syncs() -> DeferredSyncs {
    pending().scopes += 1;
    DeferredSyncs { open: true }
}

impl DeferredSyncs {
    /// Make every put deferred so far durable: one `syncfs` per filesystem
    /// written. Returns how many filesystems were synced.
    pub fn sync(mut self) -> std::io::Result<usize> {
        self.open = false;
        end_scope()
    }
}

impl Drop for DeferredSyncs {
    fn drop(&mut self) {
        if self.open
            && let Err(e) = end_scope()
        {
            tracing::warn!("could not sync the stores' deferred writes: {e}");
        }
    }
}

/// Close one scope and sync what is pending. The files are taken under the
/// lock and synced outside it, so puts of other scopes are not held up.
fn end_scope() -> std::io::Result<usize> {
    let filesystems = {
        let mut p = pending();
        p.scopes -= 1;
        std::mem::take(&mut p.filesystems)
    };
    let n = filesystems.len();
    for (_, file, path) in filesystems {
        sync_filesystem(&file, &path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("syncing the store written at {path}: {e}"),
            )
        })?;
    }
    Ok(n)
}

/// `syncfs` on Linux; a put syncs itself elsewhere, so nothing is pending there.
fn sync_filesystem(file: &File, path: &str) -> std::io::Result<()> {
    tracing::debug!(target: "tether::sync", path = %path, "store syncfs");
    #[cfg(target_os = "linux")]
    {
        rustix::fs::syncfs(file).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    file.sync_all()
}

/// A put's own sync of the file it wrote, logged like every other sync.
pub(super) fn sync_file(file: impl AsFd, path: &str) -> std::io::Result<()> {
    tracing::debug!(target: "tether::sync", path = %path, "store sync");
    rustix::fs::fsync(file).map_err(std::io::Error::from)
}
