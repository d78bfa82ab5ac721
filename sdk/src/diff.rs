//! [`ObjectDiff`]: a builder for the native content diff `diff` returns.
//!
//! Counts are exact however many changes there are; entries stop at
//! [`MAX_DIFF_ENTRIES`] and `truncated` says so, so a huge diff stays cheap to
//! send across the boundary and to print.

use std::fmt;

use crate::bindings::tether::backend::types as wit;

/// The most entries a diff carries (the spec's cap).
pub const MAX_DIFF_ENTRIES: usize = 2000;

/// What happened to one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Modified,
}

impl Change {
    /// The contract's spelling: `added`, `removed`, `modified`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Modified => "modified",
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A content diff under construction.
///
/// ```
/// use tether_sdk::{Change, ObjectDiff};
/// let mut diff = ObjectDiff::new("keys");
/// diff.add("a", Change::Added, "");
/// diff.add("b", Change::Modified, "1 -> 2");
/// assert_eq!((diff.added(), diff.modified()), (1, 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDiff {
    unit: String,
    added: u64,
    removed: u64,
    modified: u64,
    entries: Vec<wit::ChangeEntry>,
    truncated: bool,
    note: String,
}

impl ObjectDiff {
    /// An empty diff counting `unit`s (`files`, `tables`, `keys`, ...).
    pub fn new(unit: impl Into<String>) -> Self {
        Self {
            unit: unit.into(),
            added: 0,
            removed: 0,
            modified: 0,
            entries: Vec::new(),
            truncated: false,
            note: String::new(),
        }
    }

    /// Record one change. Always counted; kept as an entry while under the cap.
    pub fn add(
        &mut self,
        path: impl Into<String>,
        change: Change,
        detail: impl Into<String>,
    ) -> &mut Self {
        match change {
            Change::Added => self.added += 1,
            Change::Removed => self.removed += 1,
            Change::Modified => self.modified += 1,
        }
        if self.entries.len() < MAX_DIFF_ENTRIES {
            self.entries.push(wit::ChangeEntry {
                path: path.into(),
                change: change.as_str().to_owned(),
                detail: detail.into(),
            });
        } else {
            self.truncated = true;
        }
        self
    }

    /// A free-text note (e.g. why the diff is only a summary).
    pub fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.note = note.into();
        self
    }

    pub fn added(&self) -> u64 {
        self.added
    }

    pub fn removed(&self) -> u64 {
        self.removed
    }

    pub fn modified(&self) -> u64 {
        self.modified
    }

    /// Whether any change was recorded.
    pub fn is_empty(&self) -> bool {
        self.added + self.removed + self.modified == 0
    }

    /// The entries kept (at most [`MAX_DIFF_ENTRIES`]).
    pub fn entries(&self) -> &[wit::ChangeEntry] {
        &self.entries
    }

    /// Whether entries were left out.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl From<ObjectDiff> for wit::ObjectDiff {
    fn from(d: ObjectDiff) -> Self {
        Self {
            unit: d.unit,
            added: d.added,
            removed: d.removed,
            modified: d.modified,
            entries: d.entries,
            truncated: d.truncated,
            note: d.note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_and_entries_capped() {
        let mut diff = ObjectDiff::new("files");
        for i in 0..2500 {
            let change = [Change::Added, Change::Removed, Change::Modified][i % 3];
            diff.add(format!("f{i}"), change, "");
        }
        assert_eq!(
            (diff.added(), diff.removed(), diff.modified()),
            (834, 833, 833)
        );
        assert_eq!(diff.entries().len(), MAX_DIFF_ENTRIES);
        assert!(diff.truncated());
        let wire: wit::ObjectDiff = diff.into();
        assert_eq!(wire.added + wire.removed + wire.modified, 2500);
        assert_eq!(wire.entries[0].change, "added");
        assert_eq!(wire.entries[1999].path, "f1999");
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        let mut diff = ObjectDiff::new("keys");
        for i in 0..MAX_DIFF_ENTRIES {
            diff.add(i.to_string(), Change::Modified, "x");
        }
        assert!(!diff.truncated());
        diff.add("one more", Change::Added, "");
        assert!(diff.truncated());
        assert_eq!(diff.added(), 1);
    }

    #[test]
    fn empty_diff() {
        let mut diff = ObjectDiff::new("keys");
        assert!(diff.is_empty());
        diff.note("summary only");
        let wire: wit::ObjectDiff = diff.into();
        assert_eq!(
            (wire.unit.as_str(), wire.note.as_str(), wire.truncated),
            ("keys", "summary only", false)
        );
    }
}
