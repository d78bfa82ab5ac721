//! tether: version control for datasets that span several storage systems.
//!
//! The host owns the VCS, plans, the operation log, locks and credentials; every
//! storage backend is a sandboxed WebAssembly component behind one WIT contract
//! (`wit/`), run by [`plugin::Runtime`].
//!
//! - [`model`]: the files on disk and the ids and names tether writes;
//! - [`vcs`]: the dataset's version control (git through git2; jj);
//! - [`plan`]: store-writing work as previewable, saveable plans;
//! - [`oplog`]: the operation journal and the repository's indexes;
//! - [`lock`]: the checkout and repository locks;
//! - [`engine`]: what each command decides;
//! - [`plugin`]: the WebAssembly runtime and host capabilities;
//! - [`cli`]: parse, call the engine, print;
//! - [`fault`]: crash points at each side effect, armed only in test builds.

pub mod cli;
pub mod engine;
pub mod fault;
pub mod lock;
pub mod model;
pub mod oplog;
pub mod plan;
pub mod plugin;
pub mod vcs;
