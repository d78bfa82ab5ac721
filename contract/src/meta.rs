//! A plugin's metadata (`describe-meta`, `wit/meta.wit`, since 0.1.5): what
//! the SDK answers for a plugin, what the host keeps and shows in `tether
//! backends` and `tether plugin list`, and what the conformance suite checks
//! a plugin says.
//!
//! Every string is the plugin's to choose, so what the host keeps is bounded
//! ([`PluginMeta::bounded`]): each field cut to a length, characters that
//! could act on a terminal dropped (a line feed becomes a space), so no
//! listing can be flooded, recoloured or forged by a plugin. A well-behaved
//! plugin says nothing the bound changes, which the conformance suite checks.

use serde::{Deserialize, Serialize};

/// Longest name, version and license kept, in characters.
pub const MAX_SHORT_CHARS: usize = 64;
/// Longest author, homepage, description and tested-against kept.
pub const MAX_LONG_CHARS: usize = 256;
/// Most authors kept.
pub const MAX_AUTHORS: usize = 16;

/// What a plugin says about itself: `[package]`-like fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PluginMeta {
    /// The plugin's own name (its crate's, `tether-plugin-neon`); not its kind.
    pub name: String,
    /// Its version (semver, which the conformance suite checks).
    pub version: String,
    /// Who wrote it (`Jane Doe <jane@example.com>`).
    pub authors: Vec<String>,
    pub description: Option<String>,
    /// A URL: Cargo's `homepage`, else its `repository`.
    pub homepage: Option<String>,
    /// An SPDX expression.
    pub license: Option<String>,
    /// What it was verified against (a system's version, a library, a
    /// stand-in server): what a user needs to judge an experimental backend.
    pub tested_against: Option<String>,
}

impl PluginMeta {
    /// The same, saying what the plugin was tested against.
    pub fn tested_against(mut self, what: impl Into<String>) -> PluginMeta {
        self.tested_against = Some(what.into());
        self
    }

    /// The same, safe to keep and show: every field cut to its bound and
    /// without characters unsafe on a terminal; an optional field left
    /// empty is `None`, an empty author is dropped.
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

/// Whether `c` can act on a terminal or hide what text says: the C0
/// controls and DEL, the C1 controls (`\u{9b}` is a one-byte CSI on some
/// terminals), and the bidirectional overrides and isolates (which reorder
/// what is shown, "trojan source").
pub fn unsafe_on_terminal(c: char) -> bool {
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
            c if unsafe_on_terminal(c) => continue,
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
            license: Some("MIT".into()),
            ..PluginMeta::default()
        }
    }

    #[test]
    fn plain_metadata_is_kept_as_given() {
        let m = meta("tether-plugin-x");
        assert_eq!(m.clone().bounded(), m);
        assert_eq!(m.summary(), "tether-plugin-x 1.0.0 by Ann");
        assert_eq!(
            m.tested_against("a fake").tested_against.as_deref(),
            Some("a fake")
        );
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
            assert!(!s.chars().any(unsafe_on_terminal), "{s:?}");
        }
    }

    #[test]
    fn unsafe_characters_are_the_controls_and_the_bidi_overrides() {
        for c in [
            '\0', '\x1b', '\x7f', '\u{85}', '\u{9b}', '\u{202e}', '\u{2066}',
        ] {
            assert!(unsafe_on_terminal(c), "{c:?}");
        }
        for c in ['a', ' ', 'é', '…', '\u{2028}', '\u{200f}'] {
            assert!(!unsafe_on_terminal(c), "{c:?}");
        }
    }
}
