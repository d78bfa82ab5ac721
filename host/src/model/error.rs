//! The one error type of the data model.
//!
//! Every variant is a refusal the user can act on, so each message says what
//! is wrong *and* what to do. [`ModelError::class`] gives the spec's error
//! class name (`ConfigError`, ...) that the CLI prints and `--json` reports:
//! the spec groups everything about `tether.toml`, manifests, keys and the
//! layout under `ConfigError`.

use std::path::PathBuf;

/// What can go wrong reading, validating or writing the files of a dataset.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A dataset id that is not 8 lowercase hex characters.
    #[error(
        "invalid dataset id {id:?}: a dataset id is 8 lowercase hex characters, like \"0a1b2c3d\""
    )]
    InvalidDatasetId {
        /// The id as given.
        id: String,
    },

    /// An object key that breaks one of the key rules (see `model::key`).
    #[error("invalid object key {key:?}: {rule}")]
    InvalidKey {
        /// The key as given or read.
        key: String,
        /// The rule it breaks, phrased as what a key may not hold.
        rule: String,
    },

    /// A `KEY...` selector that names no object.
    #[error("no object matches {selector:?} (an exact key, or a prefix ending in '/')")]
    NoMatch {
        /// The selector as given.
        selector: String,
    },

    /// `tether.toml` older than this tether. There is no `tether upgrade`
    /// yet, so the way today is the release that wrote it.
    #[error(
        "tether.toml is version {found}; this tether expects {expected}: open this dataset with the tether release that writes version {found} (this build cannot upgrade it)"
    )]
    OutdatedFormat {
        /// The version the file carries.
        found: i64,
        /// The version this tether writes.
        expected: i64,
    },

    /// `tether.toml` newer than this tether: a newer release wrote it.
    #[error(
        "tether.toml is version {found}; this tether expects {expected}: a newer tether wrote this dataset, install that release"
    )]
    NewerFormat {
        /// The version the file carries.
        found: i64,
        /// The version this tether writes.
        expected: i64,
    },

    /// A key the committed `tether.toml` may not hold (security model).
    #[error(
        "{file}: `{key}` may not be set in the committed tether.toml (a clone could use it to choose what tether runs or where credentials go); {belongs}"
    )]
    ForbiddenKey {
        /// The file that holds it.
        file: PathBuf,
        /// The dotted key, like `vcs.git_path`.
        key: String,
        /// Where it belongs instead.
        belongs: String,
    },

    /// A file that does not parse or holds an invalid field.
    #[error("{file}: {message}")]
    Invalid {
        /// The file, so the user knows what to fix.
        file: PathBuf,
        /// What is wrong with it, and what to do.
        message: String,
    },

    /// A value that cannot be stored without loss (see `model::toml_json`).
    #[error("{what}: {message}")]
    Unrepresentable {
        /// Which value (`locator of "zarr/x"`, ...).
        what: String,
        /// Why it cannot be written.
        message: String,
    },

    /// No `tether.toml` in the directory or any parent.
    #[error(
        "not inside a tether dataset: no tether.toml in {start} or any parent directory; run `tether init` to make one"
    )]
    NotADataset {
        /// Where the search started.
        start: PathBuf,
    },

    /// A filesystem operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl ModelError {
    /// The spec's error class for this error.
    pub fn class(&self) -> &'static str {
        match self {
            // I/O failures are not configuration mistakes; the spec's base
            // class is the honest name for them.
            ModelError::Io { .. } => "TetherError",
            _ => "ConfigError",
        }
    }

    /// An [`ModelError::Io`] naming `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`ModelError::Invalid`] naming `file`.
    pub fn invalid(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ModelError::Invalid {
            file: file.into(),
            message: message.into(),
        }
    }
}

/// Results of the model.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
