//! A plugin's metadata (`describe-meta`, `wit/meta.wit`, since 0.1.5): its
//! name, version, authors and the like, as `tether backends` and `tether
//! plugin list` show them.
//!
//! Every string is the plugin's to choose, so what the host keeps is bounded
//! ([`PluginMeta::bounded`]): each field cut to a length, control characters
//! and bidirectional overrides dropped (a line feed becomes a space), so no
//! listing can be flooded, recoloured or forged by a plugin.

use serde::{Deserialize, Serialize};

use super::bindings::describe_meta_iface;

/// Longest name, version and license kept, in characters.
pub const MAX_SHORT_CHARS: usize = 64;
/// Longest author, homepage, description and tested-against kept.
pub const MAX_LONG_CHARS: usize = 256;
/// Most authors kept.
pub const MAX_AUTHORS: usize = 16;

/// What a plugin says about itself (`describe-meta`); `None` where a plugin
/// has no `describe-meta` (built before 0.1.5, or without the SDK).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginMeta {
    /// The plugin's own name (`tether-plugin-neon`); not its kind.
    pub name: String,
    /// Its version (semver, which the conformance suite checks).
    pub version: String,
    pub authors: Vec<String>,
    pub description: Option<String>,
    pub homepage: Option<String>,
    pub license: Option<String>,
    /// What it was verified against (`a faithful fake of the Neon API v2`).
    pub tested_against: Option<String>,
}

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

impl PluginMeta {
    /// The same, safe to keep and show: every field cut to its bound and
    /// without control characters; an optional field left empty is `None`,
    /// an empty author is dropped.
    pub fn bounded(self) -> PluginMeta {
        let short = |s: String| clean(&s, MAX_SHORT_CHARS);
        let long = |s: String| clean(&s, MAX_LONG_CHARS);
        let some = |s: String| (!s.is_empty()).then_some(s);
        PluginMeta {
            name: short(self.name),
            version: short(self.version),
            authors: self
                .authors
                .into_iter()
                .map(long)
                .filter(|a| !a.is_empty())
                .take(MAX_AUTHORS)
                .collect(),
            description: self.description.map(long).and_then(some),
            homepage: self.homepage.map(long).and_then(some),
            license: self.license.map(short).and_then(some),
            tested_against: self.tested_against.map(long).and_then(some),
        }
    }

    /// One line for a listing: `name version by A, B`.
    pub fn summary(&self) -> String {
        let mut line = format!("{} {}", self.name, self.version);
        if !self.authors.is_empty() {
            line.push_str(" by ");
            line.push_str(&self.authors.join(", "));
        }
        line
    }
}

/// Whether `c` may act on a terminal or reorder what is shown: C0 and C1
/// controls, DEL, bidirectional overrides and isolates (as
/// `model::display` escapes them).
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` on one line without unsafe characters (whitespace controls become
/// a space), trimmed, and cut to `max` characters with `…` when longer.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    for c in text.trim().chars() {
        let c = match c {
            '\n' | '\r' | '\t' => ' ',
            c if is_unsafe(c) => continue,
            c => c,
        };
        if kept == max {
            out.pop();
            out.push('…');
            break;
        }
        out.push(c);
        kept += 1;
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str) -> PluginMeta {
        PluginMeta {
            name: name.into(),
            version: "1.0.0".into(),
            authors: vec!["Ann".into()],
            description: None,
            homepage: None,
            license: Some("MIT".into()),
            tested_against: None,
        }
    }

    #[test]
    fn plain_metadata_is_kept_as_given() {
        let m = meta("tether-plugin-x");
        assert_eq!(m.clone().bounded(), m);
        assert_eq!(m.summary(), "tether-plugin-x 1.0.0 by Ann");
    }

    #[test]
    fn hostile_metadata_is_cut_and_loses_its_controls() {
        let m = PluginMeta {
            name: format!("evil\x1b[31m\u{202e}{}", "x".repeat(10_000)),
            version: "1.0.0\r\nFAKE LINE".into(),
            authors: (0..100).map(|i| format!("a{i}\x07")).collect(),
            description: Some("\u{9b}2J".into()),
            homepage: Some("   ".into()),
            license: None,
            tested_against: Some("é".repeat(1000)),
        }
        .bounded();
        assert!(m.name.starts_with("evil[31mxx"), "{}", m.name);
        assert_eq!(m.name.chars().count(), MAX_SHORT_CHARS);
        assert!(m.name.ends_with('…'));
        assert_eq!(m.version, "1.0.0  FAKE LINE");
        assert_eq!(m.authors.len(), MAX_AUTHORS);
        assert_eq!(m.authors[0], "a0");
        assert_eq!(m.description.as_deref(), Some("2J"));
        assert_eq!(m.homepage, None);
        let t = m.tested_against.unwrap();
        assert_eq!(t.chars().count(), MAX_LONG_CHARS);
        for s in [&m.name, &m.version, &t] {
            assert!(!s.chars().any(is_unsafe), "{s:?}");
        }
    }
}
