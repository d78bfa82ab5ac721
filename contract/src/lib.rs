//! # tether-contract: what the host, the SDK and the conformance suite agree on
//!
//! tether's host hashes and names what its plugins return, plugins name refs
//! the host later parses, and the conformance suite checks both. Whatever two
//! of them must compute alike is written once, here: plain Rust with no I/O
//! and no platform code, so the one crate builds for the host and for
//! `wasm32-wasip2` (the SDK re-exports it as `tether_sdk::contract`).
//!
//! - [`canonical`]: canonical JSON, the one byte form that is hashed;
//! - [`state`]: content states, and the one rule for `null` members;
//! - [`ids`]: pin ids and listing names;
//! - [`names`]: pin refs, working refs, bookmark slugs and generations;
//! - [`capability`]: the capability names, as the spec spells them;
//! - [`meta`]: what a plugin says about itself, and the bounds the host
//!   keeps it to;
//! - [`ABI_VERSION`]: the WIT contract version.
//!
//! Every recipe is a format (documented in `docs/formats.md`): stores keep
//! these names for years, so each has fixed test vectors, and changing one
//! breaks every existing dataset's pins.

pub mod canonical;
pub mod capability;
pub mod ids;
pub mod meta;
pub mod names;
pub mod state;

pub use capability::Capability;
pub use meta::PluginMeta;

/// The version of the `tether:backend` WIT contract (`wit/`) that the host
/// serves and the SDK builds against; a plugin's `descriptor.abi`.
pub const ABI_VERSION: &str = "0.1.5";
