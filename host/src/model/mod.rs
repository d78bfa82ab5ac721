//! The data model: the files a dataset is made of, and the ids and names
//! tether writes into stores.
//!
//! - [`canonical`] — canonical JSON, the one byte form tether hashes;
//! - [`ids`] — dataset and workspace ids, pin ids and refs, working refs,
//!   `manifest_hash`, listing names (the recipes are formats: `docs/formats.md`);
//! - [`key`] — object keys, key derivation, `KEY...` selectors;
//! - [`config`] — `tether.toml`;
//! - [`policy`] — per-object policy;
//! - [`manifest`] — `.tether/objects/<key>.toml`;
//! - [`listing`] — `.tether/listings/<name>.jsonl`;
//! - [`workspace`] — `.tether/workspace.toml`;
//! - [`secrets`] — `.tether/secrets.toml` and credential resolution;
//! - [`layout`] — where each file lives, and finding the dataset root;
//! - [`display`] — escaping and excerpts of text tether did not write;
//! - [`toml_json`] — how JSON locators and states are stored in TOML;
//! - [`time`] — the timestamp form; [`fsutil`]: atomic writes and file stamps;
//! - [`error`] — [`ModelError`].

pub mod canonical;
pub mod config;
pub mod display;
pub mod error;
pub mod fsutil;
pub mod ids;
pub mod key;
pub mod layout;
pub mod listing;
pub mod manifest;
pub mod policy;
#[cfg(test)]
mod proptests;
pub mod secrets;
#[cfg(target_os = "linux")]
pub(crate) mod spares;
pub mod suggest;
pub mod time;
pub mod toml_json;
pub mod workspace;

pub use config::Config;
pub use error::ModelError;
pub use layout::Layout;
pub use manifest::{Manifest, Origin, Pin};
pub use policy::{FileMode, PinMode, Policy};
pub use secrets::Secrets;
pub use workspace::WorkspaceState;
