//! A plugin's metadata (`describe-meta`, since 0.1.5): its name, version and
//! authors, as `tether backends` and `tether plugin list` show them.
//!
//! [`export!`](crate::export) exports it from every SDK plugin, filled from
//! the plugin crate's own Cargo metadata at the macro's call site
//! (`CARGO_PKG_NAME`, `CARGO_PKG_VERSION`, `CARGO_PKG_AUTHORS`, ...); a
//! backend adds what Cargo cannot say (what it was tested against) in
//! [`Backend::meta`].

use crate::backend::Backend;
use crate::describe_meta_bindings::exports::tether::backend::describe_meta::PluginMeta;

/// What a plugin says about itself: `[package]`-like fields. The contract
/// crate's record, which the host bounds the same way whatever plugin sent
/// it ([`PluginMeta::bounded`](tether_contract::meta::PluginMeta::bounded)).
pub use tether_contract::meta::PluginMeta as Meta;

/// [`Meta`] from Cargo's `CARGO_PKG_*` values as `env!` gives them: empty
/// means unset, and `authors` is colon-separated.
pub fn from_cargo(
    name: &str,
    version: &str,
    authors: &str,
    description: &str,
    homepage: &str,
    repository: &str,
    license: &str,
) -> Meta {
    let given = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
    Meta {
        name: name.to_string(),
        version: version.to_string(),
        authors: authors
            .split(':')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect(),
        description: given(description),
        homepage: given(homepage).or_else(|| given(repository)),
        license: given(license),
        tested_against: None,
    }
}

/// What `export!`'s `describe-meta` export answers: `package` as backend `B`
/// amends it. Not API.
#[doc(hidden)]
pub fn answer<B: Backend>(package: Meta) -> PluginMeta {
    let m = B::default().meta(package);
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

#[cfg(test)]
mod tests {
    use super::from_cargo;

    #[test]
    fn cargo_values_become_fields_and_empty_ones_none() {
        let m = from_cargo(
            "tether-plugin-x",
            "1.2.3",
            "Ann <ann@example.com>:Bo",
            "",
            "",
            "https://example.com/x",
            "MIT",
        );
        assert_eq!(m.name, "tether-plugin-x");
        assert_eq!(m.version, "1.2.3");
        assert_eq!(m.authors, ["Ann <ann@example.com>", "Bo"]);
        assert_eq!(m.description, None);
        assert_eq!(m.homepage.as_deref(), Some("https://example.com/x"));
        assert_eq!(m.license.as_deref(), Some("MIT"));
        let none = from_cargo("n", "0.0.0", "", "", "", "", "");
        assert!(none.authors.is_empty() && none.homepage.is_none());
        assert_eq!(
            none.tested_against("a fake").tested_against.as_deref(),
            Some("a fake")
        );
    }
}
