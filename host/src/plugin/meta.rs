//! A plugin's metadata as the host takes it from `describe-meta`
//! (`wit/meta.wit`, since 0.1.5). The record and the bounds it is kept to
//! are the contract crate's ([`tether_contract::meta`]), shared with the SDK
//! that answers it and the conformance suite that checks it.

pub use tether_contract::meta::PluginMeta;

use super::bindings::describe_meta_iface;

/// The WIT record as given, not yet bounded ([`PluginMeta::bounded`]).
impl From<describe_meta_iface::PluginMeta> for PluginMeta {
    fn from(m: describe_meta_iface::PluginMeta) -> Self {
        PluginMeta {
            name: m.name,
            version: m.version,
            authors: m.authors,
            description: m.description,
            homepage: m.homepage,
            license: m.license,
            tested_against: m.tested_against,
        }
    }
}
