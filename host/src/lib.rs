//! tether: version control for datasets that span several storage systems.
//!
//! The host owns the VCS, plans, the operation log, locks and credentials; every
//! storage backend is a sandboxed WebAssembly component behind one WIT contract
//! (`wit/`), run by [`plugin::Runtime`]. The CLI (`cli`) parses and prints; the
//! engine decides; plugins know formats.

pub mod cli;
pub mod engine;
pub mod model;
pub mod plugin;
