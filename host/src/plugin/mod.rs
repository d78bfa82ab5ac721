//! Plugins: the WebAssembly runtime that runs every storage backend, the host
//! capabilities it grants them, and the built-in plugins.
//!
//! - [`Runtime`] compiles (once, cached), links and instantiates components;
//! - [`ObjectClient`] makes typed calls for one object;
//! - [`fan_out`] runs calls for many objects concurrently, collecting failures
//!   per object;
//! - [`builtin`] holds the first-party plugins embedded in this binary;
//! - [`registry`] resolves a dataset's pinned plugins and checks trust;
//! - `storage`, `tree`, `sql` and `host` implement what plugins import, `http`
//!   the policy of their `wasi:http` requests.

mod bindings;
pub mod builtin;
mod cache;
mod client;
mod error;
mod fanout;
pub(crate) mod fs_grants;
mod git_guard;
mod host;
mod http;
mod meta;
pub mod registry;
mod runtime;
pub mod sql;
pub mod storage;
pub mod tree;
mod types;

pub(crate) use cache::read_descriptor as cached_descriptor;
pub use cache::{default_cache_root, on_compile};
pub use client::{HarnessClient, ObjectClient};
pub use error::{BackendError, PluginError};
pub use fanout::{FanOut, FanOutTask, FanOutWatcher, MultiObjectError, fan_out, watch_fan_outs};
pub use http::HttpLimits;
pub use meta::PluginMeta;
pub use runtime::{
    KNOWN_CAPABILITIES, Plugin, PluginSource, Runtime, RuntimeConfig, StatsSnapshot,
    parse_descriptor,
};
pub use sql::{SqlGrants, SqlLimits};
pub use types::{
    Capability, ChangeEntry, Descriptor, Expected, HOST_ABI, Handle, HistoryEntry, HttpGrant,
    ObjectDiff, PinRef, Target, VerifyReport, VerifyStatus,
};
