//! Errors of the plugin runtime: loading a component (`PluginError`) and
//! calling one (`BackendError`, the spec's per-object backend error classes).

use std::time::Duration;

/// A backend call failed. The first cases are the contract's `error` variant
/// (what the plugin said); the rest are what the host saw happen to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The system failed or refused (the spec's `BackendError`).
    #[error("{0}")]
    Backend(String),
    /// The operation is not supported (`CapabilityError`).
    #[error("not supported: {0}")]
    Capability(String),
    /// A ref was not where the caller expected; nothing moved (`RefMovedError`).
    #[error("ref moved: {0}")]
    RefMoved(String),
    /// A merge conflicted on these units; nothing changed (`MergeConflict`).
    #[error("merge conflict in {}", .0.join(", "))]
    MergeConflict(Vec<String>),
    /// A pin points at another state than the one recorded (`PinDriftError`).
    #[error("pin drift: {0}")]
    PinDrift(String),
    /// An immutable object's content changed (`ImmutableModifiedError`).
    #[error("{0}")]
    ImmutableModified(String),
    /// A ref, state or store does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The host refused access to something the call was not granted.
    #[error("access denied: {0}")]
    Denied(String),
    /// An invalid locator or configuration (`ConfigError`).
    #[error("invalid: {0}")]
    Invalid(String),
    /// Anything else the plugin reported.
    #[error("{0}")]
    Other(String),
    /// The call ran past its deadline and was stopped.
    #[error("the {kind} plugin ran past its deadline of {limit:?} and was stopped")]
    Deadline { kind: String, limit: Duration },
    /// The call tried to grow memory past the limit and was stopped.
    #[error("the {kind} plugin tried to use more than {limit} bytes of memory and was stopped")]
    MemoryLimit { kind: String, limit: u64 },
    /// The plugin trapped (a panic, an invalid access); `detail` has the trap
    /// and whatever the plugin wrote to stderr.
    #[error("the {kind} plugin crashed: {detail}")]
    Crashed { kind: String, detail: String },
    /// The host could not run the call at all.
    #[error("the {kind} plugin could not be run: {detail}")]
    Runtime { kind: String, detail: String },
}

impl BackendError {
    /// The spec's error class this maps onto (`BackendError`, `CapabilityError`, ...).
    pub fn class(&self) -> &'static str {
        match self {
            BackendError::Capability(_) => "CapabilityError",
            BackendError::RefMoved(_) => "RefMovedError",
            BackendError::MergeConflict(_) => "MergeConflict",
            BackendError::PinDrift(_) => "PinDriftError",
            BackendError::ImmutableModified(_) => "ImmutableModifiedError",
            BackendError::Invalid(_) => "ConfigError",
            _ => "BackendError",
        }
    }

    /// Whether the plugin was stopped by the host (deadline, memory, trap)
    /// rather than returning an error itself.
    pub fn is_contained_fault(&self) -> bool {
        matches!(
            self,
            BackendError::Deadline { .. }
                | BackendError::MemoryLimit { .. }
                | BackendError::Crashed { .. }
        )
    }
}

impl From<super::bindings::types::Error> for BackendError {
    /// What the plugin said, each message bounded: it is shown, logged and
    /// reported in `--json`, and a plugin's message may be of any length.
    fn from(e: super::bindings::types::Error) -> Self {
        use super::bindings::types::Error as E;
        use crate::model::display::{MESSAGE_BYTES, bound};
        let bounded = |m: String| match bound(&m, MESSAGE_BYTES) {
            std::borrow::Cow::Borrowed(_) => m,
            std::borrow::Cow::Owned(cut) => cut,
        };
        let e = match e {
            E::Backend(m) => E::Backend(bounded(m)),
            E::Capability(m) => E::Capability(bounded(m)),
            E::RefMoved(m) => E::RefMoved(bounded(m)),
            E::MergeConflict(units) => E::MergeConflict(units.into_iter().map(bounded).collect()),
            E::PinDrift(m) => E::PinDrift(bounded(m)),
            E::ImmutableModified(m) => E::ImmutableModified(bounded(m)),
            E::NotFound(m) => E::NotFound(bounded(m)),
            E::Denied(m) => E::Denied(bounded(m)),
            E::Invalid(m) => E::Invalid(bounded(m)),
            E::Other(m) => E::Other(bounded(m)),
        };
        match e {
            E::Backend(m) => BackendError::Backend(m),
            E::Capability(m) => BackendError::Capability(m),
            E::RefMoved(m) => BackendError::RefMoved(m),
            E::MergeConflict(units) => BackendError::MergeConflict(units),
            E::PinDrift(m) => BackendError::PinDrift(m),
            E::ImmutableModified(m) => BackendError::ImmutableModified(m),
            E::NotFound(m) => BackendError::NotFound(m),
            E::Denied(m) => BackendError::Denied(m),
            E::Invalid(m) => BackendError::Invalid(m),
            E::Other(m) => BackendError::Other(m),
        }
    }
}

/// A component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The bytes are not a WebAssembly component, or wasmtime rejected them.
    #[error("{source_name} is not a valid plugin component: {detail}")]
    Invalid { source_name: String, detail: String },
    /// The component does not implement a compatible `tether:backend`, or
    /// imports something the host does not provide.
    #[error(
        "{source_name} is not compatible with this tether (tether:backend@{host_abi}): {detail}"
    )]
    Incompatible {
        source_name: String,
        host_abi: &'static str,
        detail: String,
    },
    /// `describe` failed or returned something unusable.
    #[error("{source_name} could not describe itself: {detail}")]
    Describe { source_name: String, detail: String },
    /// Reading the plugin or the compiled-component cache failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The engine could not be set up.
    #[error("the plugin runtime could not start: {0}")]
    Engine(String),
}
