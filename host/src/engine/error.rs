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
        "unknown kind {kind:?}: the kinds this tether has are {known}; `tether backends` lists them"
    )]
    UnknownKind { kind: String, known: String },
    /// A key that is already registered.
    #[error(
        "key {key:?} is already taken: give this object a key of its own, or `tether remove {key}` first"
    )]
    KeyTaken { key: String },
    /// A key that is not registered.
    #[error("no object {key:?} in this dataset: `tether status` lists the keys")]
    NoSuchObject { key: String },
    /// A refusal with its reason (the spec's `TetherError`).
    #[error("{0}")]
    Refused(String),
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
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl TetherError {
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

    /// What to do about the error, kept apart from its reason (empty when
    /// the message says it all).
    pub fn hints(&self) -> &[String] {
        &[]
    }

    /// What went wrong, without the hints.
    pub fn reason(&self) -> String {
        self.to_string()
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

pub type Result<T, E = TetherError> = std::result::Result<T, E>;
