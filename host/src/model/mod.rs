//! The data model: canonical JSON, and (as the engine grows) tether.toml,
//! manifests, workspace state, pin ids and ref names.

pub mod canonical;
