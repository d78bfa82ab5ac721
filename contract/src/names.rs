//! The names tether writes into stores: pin refs, working refs, generations.
//!
//! - pin ref `tether.<pin_id>`;
//! - working ref `tether.ws.<dataset_id>.<slug>` (see [`bookmark_slug`]);
//!   legacy `tether.ws.<dataset_id>.<workspace8>.<key-slug>`;
//! - generations: a store that cannot reuse or move a ref in place (a tag
//!   name Icechunk tombstoned, a Lance or Neon sibling) carries the same name
//!   at `.2` … `.1000`; generation 1 is the name itself.

use crate::ids::{PIN_HASH_LEN, is_dataset_id, is_lower_hex, sha256_hex};

/// Every name tether writes into a store starts with this.
pub const REF_PREFIX: &str = "tether.";
/// Working refs start with this.
pub const WORKING_REF_PREFIX: &str = "tether.ws.";
/// The highest generation a ref may carry (`.2` … `.1000`).
pub const MAX_GENERATION: u32 = 1000;
/// Hex characters of the sha256 appended to an escaped bookmark slug.
pub const SLUG_HASH_LEN: usize = 6;
/// Length of the short workspace id in legacy working refs.
pub const WORKSPACE_SHORT_LEN: usize = 8;

/// The native ref of a pin: `tether.<pin_id>`.
pub fn ref_for_pin(pin_id: &str) -> String {
    format!("{REF_PREFIX}{pin_id}")
}

/// `name` at a generation: generation 1 is `name` itself, 2..=1000 append
/// `.N`.
///
/// # Panics
/// On a generation outside 1..=1000, which is a caller bug.
pub fn with_generation(name: &str, generation: u32) -> String {
    assert!(
        (1..=MAX_GENERATION).contains(&generation),
        "generation {generation} outside 1..={MAX_GENERATION}"
    );
    if generation == 1 {
        name.to_string()
    } else {
        format!("{name}.{generation}")
    }
}

/// Every generation of `name`, first to last (`name`, `name.2`, … `name.1000`).
pub fn generations(name: &str) -> impl Iterator<Item = String> + '_ {
    (1..=MAX_GENERATION).map(move |g| with_generation(name, g))
}

/// Split a trailing `.N` generation (2..=1000, decimal, no leading zero)
/// off `name`; no suffix is generation 1.
pub fn split_generation(name: &str) -> (&str, u32) {
    if let Some((base, last)) = name.rsplit_once('.')
        && let Some(n) = parse_generation(last)
    {
        return (base, n);
    }
    (name, 1)
}

/// `digits` as a generation 2..=1000 (decimal, no leading zero).
fn parse_generation(digits: &str) -> Option<u32> {
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| (2..=MAX_GENERATION).contains(n))
}

/// Which generation of `base` the name `name` is: 1 for `base` itself, N for
/// `base.N`; `None` for any other name.
pub fn generation_of(base: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(base)?;
    if rest.is_empty() {
        return Some(1);
    }
    parse_generation(rest.strip_prefix('.')?)
}

/// A parsed pin ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRef {
    /// The dataset namespace it belongs to.
    pub dataset_id: String,
    /// The 16-hex content hash.
    pub hash: String,
    /// 1 for `tether.<pin_id>`, N for `tether.<pin_id>.N`.
    pub generation: u32,
}

impl PinRef {
    /// `<dataset_id>.<hash>`.
    pub fn pin_id(&self) -> String {
        format!("{}.{}", self.dataset_id, self.hash)
    }
}

/// Parse `tether.<8hex>.<16hex>[.N]`; `None` for anything else (working
/// refs, foreign names).
pub fn parse_pin_ref(name: &str) -> Option<PinRef> {
    let rest = name.strip_prefix(REF_PREFIX)?;
    let (base, generation) = split_generation(rest);
    let (dataset_id, hash) = base.split_once('.')?;
    (is_dataset_id(dataset_id) && is_lower_hex(hash, PIN_HASH_LEN)).then(|| PinRef {
        dataset_id: dataset_id.to_string(),
        hash: hash.to_string(),
        generation,
    })
}

fn is_slug_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The part of a working ref that stands for a bookmark: the bookmark itself
/// when it matches `[A-Za-z0-9_-]+`, otherwise every other character
/// (Unicode scalar value) replaced by `-`, then `-` and the first 6 hex of
/// `sha256(bookmark as UTF-8)` appended, so `feat/x` and `feat-x` differ.
pub fn bookmark_slug(bookmark: &str) -> String {
    if !bookmark.is_empty() && bookmark.chars().all(is_slug_char) {
        return bookmark.to_string();
    }
    let mut slug: String = bookmark
        .chars()
        .map(|c| if is_slug_char(c) { c } else { '-' })
        .collect();
    slug.push('-');
    slug.push_str(&sha256_hex(bookmark.as_bytes())[..SLUG_HASH_LEN]);
    slug
}

/// The store branch of a bookmark: `tether.ws.<dataset_id>.<slug>`.
pub fn working_ref(dataset_id: &str, bookmark: &str) -> String {
    format!(
        "{WORKING_REF_PREFIX}{dataset_id}.{}",
        bookmark_slug(bookmark)
    )
}

/// A parsed working ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkingRef {
    /// `tether.ws.<dataset_id>.<slug>[.N]`: a bookmark's branch.
    Bookmark {
        /// The dataset namespace.
        dataset_id: String,
        /// The bookmark slug ([`bookmark_slug`]); an escaped one cannot be
        /// turned back into the bookmark, only compared with a slug.
        slug: String,
        /// 1, or N for a `.N` sibling.
        generation: u32,
    },
    /// `tether.ws.<dataset_id>.<workspace8>.<key-slug>[.N]`: a per-workspace
    /// branch from before bookmarks.
    Legacy {
        /// The dataset namespace.
        dataset_id: String,
        /// The first 8 hex of the workspace id that made it.
        workspace: String,
        /// The object key's slug, as the old scheme wrote it.
        key_slug: String,
        /// 1, or N for a `.N` sibling.
        generation: u32,
    },
}

impl WorkingRef {
    /// The dataset namespace of either form.
    pub fn dataset_id(&self) -> &str {
        match self {
            WorkingRef::Bookmark { dataset_id, .. } | WorkingRef::Legacy { dataset_id, .. } => {
                dataset_id
            }
        }
    }

    /// The generation of either form.
    pub fn generation(&self) -> u32 {
        match self {
            WorkingRef::Bookmark { generation, .. } | WorkingRef::Legacy { generation, .. } => {
                *generation
            }
        }
    }
}

/// Parse a working ref; `None` for pins and foreign names.
///
/// A slug never holds a `.`, so `tether.ws.<id>.<slug>` has one part after
/// the id. Two parts are either a generation (`<slug>.N`, N in 2..=1000 with
/// no leading zero) or, when the first is 8 lowercase hex and the second is
/// not such a number, the legacy `<workspace8>.<key-slug>`. A legacy name
/// whose key slug is itself a number in 2..=1000 would read as a generation;
/// the legacy scheme appended a hash to key slugs, so it never wrote one.
pub fn parse_working_ref(name: &str) -> Option<WorkingRef> {
    let rest = name.strip_prefix(WORKING_REF_PREFIX)?;
    let (dataset_id, rest) = rest.split_once('.')?;
    if !is_dataset_id(dataset_id) {
        return None;
    }
    let (base, generation) = split_generation(rest);
    let parts: Vec<&str> = base.split('.').collect();
    let valid_slug = |s: &str| !s.is_empty() && s.chars().all(is_slug_char);
    match parts.as_slice() {
        [slug] if valid_slug(slug) => Some(WorkingRef::Bookmark {
            dataset_id: dataset_id.to_string(),
            slug: slug.to_string(),
            generation,
        }),
        [ws, key_slug] if is_lower_hex(ws, WORKSPACE_SHORT_LEN) && !key_slug.is_empty() => {
            Some(WorkingRef::Legacy {
                dataset_id: dataset_id.to_string(),
                workspace: ws.to_string(),
                key_slug: key_slug.to_string(),
                generation,
            })
        }
        _ => None,
    }
}

/// Whether a working ref (any generation) stands for `bookmark` in `dataset_id`.
pub fn working_ref_is_for(name: &str, dataset_id: &str, bookmark: &str) -> bool {
    matches!(parse_working_ref(name),
        Some(WorkingRef::Bookmark { dataset_id: d, slug, .. })
            if d == dataset_id && slug == bookmark_slug(bookmark))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_of_a_name() {
        let r = "tether.0a1b2c3d.0123456789abcdef";
        assert_eq!(with_generation(r, 1), r);
        assert_eq!(with_generation(r, 1000), format!("{r}.1000"));
        assert_eq!(generation_of(r, r), Some(1));
        assert_eq!(generation_of(r, &format!("{r}.2")), Some(2));
        assert_eq!(generation_of(r, &format!("{r}.1000")), Some(1000));
        for bad in [".1", ".01", ".1001", ".x", "x", ".2.2"] {
            assert_eq!(generation_of(r, &format!("{r}{bad}")), None, "{bad}");
        }
        let all: Vec<String> = generations(r).collect();
        assert_eq!(all.len(), 1000);
        assert_eq!(all[1], format!("{r}.2"));
        assert_eq!(split_generation("a.b.17"), ("a.b", 17));
        assert_eq!(split_generation("a.b.1"), ("a.b.1", 1));
    }

    #[test]
    fn slugs_and_refs() {
        assert_eq!(bookmark_slug("feat/x"), "feat-x-79b4cc");
        assert_eq!(bookmark_slug("café"), "caf--850f7d");
        assert_eq!(
            working_ref("0a1b2c3d", "feat/x"),
            "tether.ws.0a1b2c3d.feat-x-79b4cc"
        );
        assert_eq!(
            parse_pin_ref("tether.0a1b2c3d.0123456789abcdef.3")
                .unwrap()
                .pin_id(),
            "0a1b2c3d.0123456789abcdef"
        );
        assert!(working_ref_is_for(
            "tether.ws.0a1b2c3d.feat-x-79b4cc.2",
            "0a1b2c3d",
            "feat/x"
        ));
    }
}
