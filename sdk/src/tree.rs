//! A convenience wrapper around the host's `tree` capability: local
//! directories walked, stat'ed and hashed natively by the host.
//!
//! A backend that describes a local directory by its content (the `file`
//! backend) never reads the bytes itself: the host walks the tree, computes
//! sha256 in parallel and caches it by stat key, and the plugin gets entries
//! in pages. Only paths under the locator's `tree-keys` values are reachable;
//! anything else is [`TreeError::Denied`]. See `wit/tree.wit` for the walk
//! order and the symlink rules (the host reports a file symlink with its
//! target's sha256, any other symlink by its target alone).
//!
//! ```no_run
//! use tether_sdk::tree;
//! # fn f() -> tether_sdk::Result<()> {
//! let mut total = 0;
//! tree::walk("/data/plate1", true, |entry| -> tether_sdk::Result<()> {
//!     total += entry.size;
//!     Ok(())
//! })?;
//! # Ok(()) }
//! ```

use crate::bindings::tether::backend::tree as wit;
use crate::error::Error;

pub use wit::{ContentSummary, Entry, EntryKind, WalkPage};

/// Entries one walk page asks for: big enough that a 100,000-file tree
/// crosses the boundary in a few dozen calls, small enough to keep each
/// page's memory modest.
pub const PAGE: u32 = 5000;

/// Why a tree call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The path is not granted to this call.
    #[error("path access denied: {0}")]
    Denied(String),
    /// Nothing is at the path.
    #[error("not found: {0}")]
    NotFound(String),
    /// A malformed request or an entry of the wrong kind.
    #[error("invalid tree request: {0}")]
    Invalid(String),
    /// The filesystem failed.
    #[error("tree I/O error: {0}")]
    Io(String),
}

impl From<wit::TreeError> for TreeError {
    fn from(e: wit::TreeError) -> Self {
        match e {
            wit::TreeError::Denied(m) => Self::Denied(m),
            wit::TreeError::NotFound(m) => Self::NotFound(m),
            wit::TreeError::Invalid(m) => Self::Invalid(m),
            wit::TreeError::Io(m) => Self::Io(m),
        }
    }
}

impl From<TreeError> for Error {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::Denied(_) => Self::Denied(e.to_string()),
            TreeError::NotFound(_) => Self::NotFound(e.to_string()),
            TreeError::Invalid(_) => Self::Invalid(e.to_string()),
            TreeError::Io(_) => Self::Backend(e.to_string()),
        }
    }
}

/// One page of the walk of `root`, after `cursor`.
pub fn walk_page(
    root: &str,
    hash: bool,
    cursor: Option<&str>,
    limit: u32,
) -> Result<WalkPage, TreeError> {
    let options = wit::WalkOptions {
        hash,
        cursor: cursor.map(str::to_owned),
        limit,
    };
    Ok(wit::walk(root, &options)?)
}

/// Every entry under `root`, in key order, page by page: `each` sees one
/// entry at a time, so a huge tree is never held twice.
pub fn walk<E: From<TreeError>>(
    root: &str,
    hash: bool,
    mut each: impl FnMut(Entry) -> Result<(), E>,
) -> Result<(), E> {
    let mut cursor: Option<String> = None;
    loop {
        let page = walk_page(root, hash, cursor.as_deref(), PAGE)?;
        for entry in page.entries {
            each(entry)?;
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}

/// The content summary of the directory at `root`: the hashed walk reduced
/// by the host to `count`, `size` and `digest` (and the listing text when
/// `listing`), so no entry crosses the boundary. The recipe is fixed by
/// `wit/tree.wit` (`summarize`); a backend with its own recipe walks instead.
pub fn summarize(root: &str, listing: bool) -> Result<ContentSummary, TreeError> {
    Ok(wit::summarize(root, listing)?)
}

/// Whether the directory at `root` has no entry the walk reports (the owner
/// marker does not count). A missing directory is `NotFound`.
pub fn is_empty(root: &str) -> Result<bool, TreeError> {
    Ok(walk_page(root, false, None, 1)?.entries.is_empty())
}

/// The entry at `path`, not following a final symlink; `None` when absent.
pub fn stat(path: &str) -> Result<Option<Entry>, TreeError> {
    Ok(wit::stat(path)?)
}

/// sha256 (lowercase hex) of the regular file at `path`, through the cache.
pub fn hash_file(path: &str) -> Result<String, TreeError> {
    Ok(wit::hash_file(path)?)
}

/// `path` with every symlink resolved (a missing tail kept as written).
pub fn realpath(path: &str) -> Result<String, TreeError> {
    Ok(wit::realpath(path)?)
}

/// Remove the empty directory at `path`; `false` when already gone. A
/// directory with anything in it is refused (`Invalid`) and kept.
pub fn remove_empty_dir(path: &str) -> Result<bool, TreeError> {
    Ok(wit::remove_empty_dir(path)?)
}
