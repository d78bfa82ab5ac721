//! The error type every backend method returns.
//!
//! [`Error`] mirrors the contract's `error` variant case for case, so a plugin
//! chooses the spec's error class (BackendError, CapabilityError, RefMovedError,
//! ...) by choosing the variant. The glue converts it at the boundary.

use crate::bindings::tether::backend::types as wit;

/// Shorthand for results of backend methods.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a backend call failed. The host maps each case onto one of the spec's
/// error classes; the message is shown to the user, so say what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The system failed or refused (BackendError).
    #[error("{0}")]
    Backend(String),
    /// The operation is not supported by this backend or object (CapabilityError).
    #[error("{0}")]
    Capability(String),
    /// A ref was not where the caller expected; nothing moved (RefMovedError).
    #[error("{0}")]
    RefMoved(String),
    /// A merge conflicted on these units; nothing changed (MergeConflict).
    #[error("merge conflict in {}", .0.join(", "))]
    MergeConflict(Vec<String>),
    /// A pin points at another state than the one recorded (PinDriftError).
    #[error("{0}")]
    PinDrift(String),
    /// An immutable object's content changed (ImmutableModifiedError).
    #[error("{0}")]
    ImmutableModified(String),
    /// A ref, state or store does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The host refused access (a storage URI or path not granted).
    #[error("{0}")]
    Denied(String),
    /// A locator or config is invalid (ConfigError).
    #[error("{0}")]
    Invalid(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// `Error::Backend` from anything printable.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::Backend(message.into())
    }

    /// `Error::RefMoved` from anything printable.
    pub fn ref_moved(message: impl Into<String>) -> Self {
        Self::RefMoved(message.into())
    }

    /// `Error::NotFound` from anything printable.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// `Error::Invalid` from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    /// The capability error the SDK's defaults return for `method`.
    pub fn unsupported(method: &str, kind: &str) -> Self {
        Self::Capability(format!("{method} is not supported by {kind}"))
    }
}

impl From<Error> for wit::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Backend(m) => Self::Backend(m),
            Error::Capability(m) => Self::Capability(m),
            Error::RefMoved(m) => Self::RefMoved(m),
            Error::MergeConflict(units) => Self::MergeConflict(units),
            Error::PinDrift(m) => Self::PinDrift(m),
            Error::ImmutableModified(m) => Self::ImmutableModified(m),
            Error::NotFound(m) => Self::NotFound(m),
            Error::Denied(m) => Self::Denied(m),
            Error::Invalid(m) => Self::Invalid(m),
            Error::Other(m) => Self::Other(m),
        }
    }
}
