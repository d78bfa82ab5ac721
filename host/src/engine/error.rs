//! `TetherError`: every way a command can fail, mirroring the spec's error
//! classes (`ConfigError`, `BackendError`, `MultiObjectError`,
//! `StalePlanError`, ...). Module errors are wrapped whole so their messages,
//! which already say what to do, reach the user unchanged.

use crate::lock::LockError;
use crate::model::ModelError;
use crate::oplog::OplogError;
use crate::plan::PlanError;
use crate::plugin::{BackendError, MultiObjectError, PluginError};
use crate::vcs::VcsError;

#[derive(Debug, thiserror::Error)]
pub enum TetherError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Vcs(#[from] VcsError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Oplog(#[from] OplogError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// One object's backend failed.
    #[error("{key}: {error}")]
    Backend { key: String, error: BackendError },
    /// Several objects failed in one fan-out; each is named.
    #[error(transparent)]
    MultiObject(#[from] MultiObjectError),
    /// No installed plugin serves this kind.
    #[error(
        "unknown kind {kind:?}{suggestion}: the kinds this tether has are {known}; `tether backends` lists them"
    )]
    UnknownKind {
        kind: String,
        known: String,
        /// ` (did you mean "x"?)` or empty ([`crate::model::suggest`]).
        suggestion: String,
    },
    /// A key that is already registered.
    #[error(
        "key {key:?} is already taken: give this object a key of its own, or `tether remove {key}` first"
    )]
    KeyTaken { key: String },
    /// A key that is not registered.
    #[error("no object {key:?} in this dataset{suggestion}: `tether status` lists the keys")]
    NoSuchObject {
        key: String,
        /// ` (did you mean "x"?)` or empty ([`crate::model::suggest`]).
        suggestion: String,
    },
    /// A refusal (the spec's `TetherError`): why, and apart from it what to
    /// do about it. Shown as `REASON: HINT; HINT`, and in `--json` as
    /// `message` and `hints`. Made with [`TetherError::refused`] and
    /// [`TetherError::hint`].
    #[error("{reason}{}", hint_suffix(.hints))]
    Refusal { reason: String, hints: Vec<String> },
    /// An immutable object whose content changed (`ImmutableObjectModified`).
    #[error(
        "[{key}] immutable object '{key}' changed since it was committed; re-register with acceptance to record the new state"
    )]
    ImmutableModified { key: String },
    /// A pin that points at another state than its manifest records
    /// (`PinDriftError`): reading it would hand back the wrong data under a
    /// commit's name.
    #[error(
        "{key}: pin {pin_ref} has moved ({detail}); it no longer holds the state {rev} recorded, \
         so tether refuses to read it. `tether verify -r {rev}` reports it; put the ref back \
         where the manifest says, or re-register the object"
    )]
    PinDrift {
        key: String,
        rev: String,
        pin_ref: String,
        detail: String,
    },
    /// A SQL database or an export/import file (`export`, `publish`,
    /// `import`) failed; `message` never holds a DSN's password.
    #[error("{what}: {message}")]
    Registry { what: String, message: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl TetherError {
    /// No object `key`, suggesting the closest of the dataset's `keys`.
    pub fn no_such_object<'a>(key: &str, keys: impl IntoIterator<Item = &'a str>) -> TetherError {
        TetherError::NoSuchObject {
            key: key.to_string(),
            suggestion: crate::model::suggest::did_you_mean(key, keys),
        }
    }

    /// No plugin serves `kind`; `known` are the kinds that are served.
    pub fn unknown_kind<'a>(kind: &str, known: impl IntoIterator<Item = &'a str>) -> TetherError {
        let known: Vec<&str> = known.into_iter().collect();
        TetherError::UnknownKind {
            kind: kind.to_string(),
            suggestion: crate::model::suggest::did_you_mean(kind, known.iter().copied()),
            known: known.join(", "),
        }
    }

    /// The spec's error class.
    pub fn class(&self) -> &'static str {
        match self {
            TetherError::Model(e) => e.class(),
            TetherError::Plan(e) if e.is_stale() => "StalePlanError",
            TetherError::Lock(_) => "LockTimeout",
            TetherError::Backend { error, .. } => error.class(),
            TetherError::MultiObject(_) => "MultiObjectError",
            TetherError::UnknownKind { .. } | TetherError::KeyTaken { .. } => "ConfigError",
            TetherError::ImmutableModified { .. } => "ImmutableObjectModified",
            TetherError::PinDrift { .. } => "PinDriftError",
            TetherError::Vcs(_) => "VcsError",
            _ => "TetherError",
        }
    }

    /// A refusal for `reason`; add what to do with [`TetherError::hint`].
    pub fn refused(reason: impl Into<String>) -> TetherError {
        TetherError::Refusal {
            reason: reason.into(),
            hints: Vec::new(),
        }
    }

    /// This refusal, with one more thing to do about it (a sentence or a
    /// command). Other errors are returned as they are.
    pub fn hint(mut self, hint: impl Into<String>) -> TetherError {
        if let TetherError::Refusal { hints, .. } = &mut self {
            hints.push(hint.into());
        }
        self
    }

    /// What to do about the error, kept apart from its reason (empty when
    /// the message says it all).
    pub fn hints(&self) -> &[String] {
        match self {
            TetherError::Refusal { hints, .. } => hints,
            _ => &[],
        }
    }

    /// What went wrong, without the hints.
    pub fn reason(&self) -> String {
        match self {
            TetherError::Refusal { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }

    pub fn backend(key: &str, error: BackendError) -> TetherError {
        TetherError::Backend {
            key: key.to_string(),
            error,
        }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> TetherError {
        TetherError::Io {
            what: what.into(),
            source,
        }
    }
}

/// `: HINT; HINT` after a refusal's reason (nothing without hints).
fn hint_suffix(hints: &[String]) -> String {
    if hints.is_empty() {
        String::new()
    } else {
        format!(": {}", hints.join("; "))
    }
}

pub type Result<T, E = TetherError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::TetherError;

    #[test]
    fn a_refusal_keeps_its_reason_and_hints_apart() {
        let e =
            TetherError::refused("a commit message is required").hint("`tether commit -m MESSAGE`");
        assert_eq!(
            e.to_string(),
            "a commit message is required: `tether commit -m MESSAGE`"
        );
        assert_eq!(e.reason(), "a commit message is required");
        assert_eq!(e.hints(), ["`tether commit -m MESSAGE`"]);
        assert_eq!(e.class(), "TetherError");
        let two = TetherError::refused("no").hint("a").hint("b");
        assert_eq!(two.to_string(), "no: a; b");
        let bare = TetherError::refused("it cannot be dropped");
        assert_eq!(bare.to_string(), "it cannot be dropped");
        assert!(bare.hints().is_empty());
        let other = TetherError::no_such_object("k", []).hint("ignored");
        assert!(other.hints().is_empty());
        assert_eq!(other.reason(), other.to_string());
    }
}
