//! Ids and the names tether writes into stores (DESIGN §6, `docs/formats.md`).
//!
//! These recipes are formats: stores keep the names for years, and another
//! clone (or another implementation) must derive the same name from the same
//! manifest. Every recipe has fixed test vectors below; changing one breaks
//! every existing dataset's pins.
//!
//! - dataset id: 8 lowercase hex, random; the namespace of a dataset's refs;
//! - workspace id: 32 lowercase hex, random; `workspace8` is its first 8;
//! - pin id `<dataset_id>.<h16>`, `h16` = first 16 hex of
//!   `sha256(canonical_json([kind, identity, content_state]))`;
//! - pin ref `tether.<pin_id>`, generations `tether.<pin_id>.2` … `.1000`;
//! - working ref `tether.ws.<dataset_id>.<slug>` (see [`bookmark_slug`]),
//!   generations likewise; legacy `tether.ws.<dataset_id>.<workspace8>.<key-slug>`;
//! - listing name: the full 64-hex sha256 of the same bytes as `h16`.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::canonical;
use super::error::{ModelError, Result};
use super::toml_json::strip_nulls;

/// Length of a dataset id in hex characters.
pub const DATASET_ID_LEN: usize = 8;
/// Length of a workspace id in hex characters.
pub const WORKSPACE_ID_LEN: usize = 32;
/// Length of the short workspace id in legacy refs and `recover-<workspace8>`.
pub const WORKSPACE_SHORT_LEN: usize = 8;
/// Hex characters of the content hash in a pin id.
pub const PIN_HASH_LEN: usize = 16;
/// Hex characters of a `manifest_hash` as shown.
pub const MANIFEST_HASH_LEN: usize = 12;
/// Hex characters of the sha256 appended to an escaped bookmark slug.
pub const SLUG_HASH_LEN: usize = 6;
/// The highest generation a ref may carry (`.2` … `.1000`).
pub const MAX_GENERATION: u32 = 1000;
/// Every name tether writes into a store starts with this.
pub const REF_PREFIX: &str = "tether.";
/// Working refs start with this.
pub const WORKING_REF_PREFIX: &str = "tether.ws.";

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The OS random source failing is not something a user can fix or retry
    // around; tether cannot mint ids without it.
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    hex::encode(buf)
}

/// `sha256(bytes)` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A fresh random dataset id (8 lowercase hex).
pub fn new_dataset_id() -> String {
    random_hex(DATASET_ID_LEN / 2)
}

/// Whether `id` is a dataset id.
pub fn is_dataset_id(id: &str) -> bool {
    is_lower_hex(id, DATASET_ID_LEN)
}

/// Refuse anything but 8 lowercase hex (`init --dataset-id`, `tether.toml`).
pub fn validate_dataset_id(id: &str) -> Result<()> {
    if is_dataset_id(id) {
        Ok(())
    } else {
        Err(ModelError::InvalidDatasetId { id: id.to_string() })
    }
}

/// A fresh random workspace id (32 lowercase hex).
pub fn new_workspace_id() -> String {
    random_hex(WORKSPACE_ID_LEN / 2)
}

/// Whether `id` is a workspace id.
pub fn is_workspace_id(id: &str) -> bool {
    is_lower_hex(id, WORKSPACE_ID_LEN)
}

/// The short form of a workspace id (its first 8 characters), as legacy refs,
/// `recover-<workspace8>` and `forget-workspace --json` show it.
pub fn workspace_short(id: &str) -> &str {
    id.get(..WORKSPACE_SHORT_LEN).unwrap_or(id)
}

/// The content part of a state: the state less the backend's volatile
/// (address) keys, and less `null` members (absent and `null` are one value,
/// see `model::toml_json`). Equality, pin ids and listing names use only this.
pub fn content_state(state: &Map<String, Value>, volatile_keys: &[&str]) -> Map<String, Value> {
    state
        .iter()
        .filter(|(k, v)| !v.is_null() && !volatile_keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), strip_nulls(v)))
        .collect()
}

/// The bytes pin ids and listing names hash: the canonical JSON of
/// `[kind, identity, content_state]` (nulls stripped from both objects).
pub fn pin_input(kind: &str, identity: &Value, content_state: &Value) -> String {
    canonical::to_string(&Value::Array(vec![
        Value::String(kind.to_string()),
        strip_nulls(identity),
        strip_nulls(content_state),
    ]))
}

/// `h16`: the first 16 hex of `sha256(pin_input(...))`.
pub fn pin_hash(kind: &str, identity: &Value, content_state: &Value) -> String {
    let mut h = sha256_hex(pin_input(kind, identity, content_state).as_bytes());
    h.truncate(PIN_HASH_LEN);
    h
}

/// The pin id `<dataset_id>.<h16>` of a content state. Callers pass the
/// *content* state ([`content_state`]) and the backend's identity of the
/// locator.
pub fn pin_id(dataset_id: &str, kind: &str, identity: &Value, content_state: &Value) -> String {
    format!("{dataset_id}.{}", pin_hash(kind, identity, content_state))
}

/// The listing name of a state: the full sha256 hex of the pin id's input,
/// without the dataset id, so datasets sharing a store share listings, and
/// the first 16 characters equal the pin id's hash.
pub fn listing_name(kind: &str, identity: &Value, content_state: &Value) -> String {
    sha256_hex(pin_input(kind, identity, content_state).as_bytes())
}

/// Whether `name` is a listing name (64 lowercase hex).
pub fn is_listing_name(name: &str) -> bool {
    is_lower_hex(name, 64)
}

/// The native ref of a pin: `tether.<pin_id>`.
pub fn ref_for_pin(pin_id: &str) -> String {
    format!("{REF_PREFIX}{pin_id}")
}

/// `name` at a generation: generation 1 is `name` itself, 2..=1000 append
/// `.N`. Used for pins and working refs of stores that cannot move a ref in
/// place (Lance, Neon make siblings).
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

/// Split a trailing `.N` generation (2..=1000, decimal, no leading zero)
/// off `name`; no suffix is generation 1.
fn split_generation(name: &str) -> (&str, u32) {
    if let Some((base, last)) = name.rsplit_once('.')
        && !last.is_empty()
        && !last.starts_with('0')
        && last.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = last.parse::<u32>()
        && (2..=MAX_GENERATION).contains(&n)
    {
        return (base, n);
    }
    (name, 1)
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

/// Parse a pin id `<8hex>.<16hex>` into (dataset id, hash).
pub fn parse_pin_id(pin_id: &str) -> Option<(&str, &str)> {
    let (d, h) = pin_id.split_once('.')?;
    (is_dataset_id(d) && is_lower_hex(h, PIN_HASH_LEN)).then_some((d, h))
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

/// The bytes `manifest_hash` digests: the canonical JSON of the array of
/// `[key, manifest_json]` pairs sorted by key (code point order). Keys hold
/// no control characters and canonical JSON is unambiguous, so the encoding
/// is injective.
pub fn manifest_hash_input<'a>(manifests: impl IntoIterator<Item = (&'a str, Value)>) -> String {
    let mut pairs: Vec<(&str, Value)> = manifests.into_iter().collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let arr = pairs
        .into_iter()
        .map(|(k, v)| Value::Array(vec![Value::String(k.to_string()), v]))
        .collect();
    canonical::to_string(&Value::Array(arr))
}

/// The first 12 hex of `sha256(manifest_hash_input(...))`: the dataset's
/// "tree id", shown by `status`. `manifest::manifest_hash` passes each
/// manifest's JSON form.
pub fn manifest_hash_of<'a>(manifests: impl IntoIterator<Item = (&'a str, Value)>) -> String {
    let mut h = sha256_hex(manifest_hash_input(manifests).as_bytes());
    h.truncate(MANIFEST_HASH_LEN);
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dataset_and_workspace_ids() {
        let d = new_dataset_id();
        assert!(is_dataset_id(&d), "{d}");
        assert_ne!(d, new_dataset_id());
        validate_dataset_id("0a1b2c3d").unwrap();
        for bad in [
            "0A1B2C3D",
            "0a1b2c3",
            "0a1b2c3d4",
            "0a1b2c3g",
            "",
            " 0a1b2c3",
        ] {
            let e = validate_dataset_id(bad).unwrap_err();
            assert!(e.to_string().contains("8 lowercase hex"), "{e}");
            assert_eq!(e.class(), "ConfigError");
        }
        let w = new_workspace_id();
        assert!(is_workspace_id(&w) && w.len() == 32, "{w}");
        assert_eq!(
            workspace_short("7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d"),
            "7c1e0a4d"
        );
    }

    #[test]
    fn content_state_drops_volatile_and_null() {
        let s = json!({"lsn": "0/1", "commit_xid": 7, "branch": "main", "gone": null});
        let Value::Object(s) = s else { panic!() };
        assert_eq!(
            Value::Object(content_state(&s, &["lsn"])),
            json!({"commit_xid": 7, "branch": "main"})
        );
    }

    #[test]
    fn pin_id_vectors() {
        let identity = json!({"uri": "s3://lab/greetings.icechunk"});
        let state = json!({"snapshot_id": "K3F7Q2ZJ1XN4Y8W0"});
        assert_eq!(
            pin_input("icechunk", &identity, &state),
            r#"["icechunk",{"uri":"s3://lab/greetings.icechunk"},{"snapshot_id":"K3F7Q2ZJ1XN4Y8W0"}]"#
        );
        assert_eq!(
            pin_id("0a1b2c3d", "icechunk", &identity, &state),
            "0a1b2c3d.e7a279c1973a37ef"
        );
        assert_eq!(
            listing_name("icechunk", &identity, &state),
            "e7a279c1973a37ef90fded8db271694d180b89450264a0c9b906774911ec8c72"
        );
        let file_identity = json!({"uri": "/data/raw"});
        let file_state = json!({"type": "dir", "count": 3, "size": 1024, "digest": "ab"});
        assert_eq!(
            pin_id("ffffffff", "file", &file_identity, &file_state),
            "ffffffff.36c721961ea717fe"
        );
        // Key order and nulls do not matter; the listing name shares the hash.
        let reordered = json!({"size": 1024, "digest": "ab", "type": "dir", "count": 3, "x": null});
        assert_eq!(
            pin_hash("file", &file_identity, &reordered),
            listing_name("file", &file_identity, &file_state)[..16]
        );
    }

    #[test]
    fn pin_refs_and_generations() {
        assert_eq!(
            ref_for_pin("0a1b2c3d.0123456789abcdef"),
            "tether.0a1b2c3d.0123456789abcdef"
        );
        let r = "tether.0a1b2c3d.0123456789abcdef";
        assert_eq!(with_generation(r, 1), r);
        assert_eq!(with_generation(r, 2), format!("{r}.2"));
        assert_eq!(with_generation(r, 1000), format!("{r}.1000"));
        let p = parse_pin_ref(r).unwrap();
        assert_eq!(
            (p.dataset_id.as_str(), p.hash.as_str(), p.generation),
            ("0a1b2c3d", "0123456789abcdef", 1)
        );
        assert_eq!(p.pin_id(), "0a1b2c3d.0123456789abcdef");
        assert_eq!(parse_pin_ref(&format!("{r}.17")).unwrap().generation, 17);
        for bad in [
            format!("{r}.1"),
            format!("{r}.01"),
            format!("{r}.1001"),
            format!("{r}.x"),
            "tether.0a1b2c3d.0123456789ABCDEF".to_string(),
            "tether.ws.0a1b2c3d.main".to_string(),
            "other.0a1b2c3d.0123456789abcdef".to_string(),
        ] {
            assert_eq!(parse_pin_ref(&bad), None, "{bad}");
        }
        assert_eq!(
            parse_pin_id("0a1b2c3d.0123456789abcdef"),
            Some(("0a1b2c3d", "0123456789abcdef"))
        );
    }

    #[test]
    #[should_panic(expected = "generation 1001")]
    fn generation_bounds() {
        with_generation("x", 1001);
    }

    #[test]
    fn slug_vectors() {
        assert_eq!(bookmark_slug("relabel"), "relabel");
        assert_eq!(bookmark_slug("Feat_2-x"), "Feat_2-x");
        assert_eq!(bookmark_slug("feat/x"), "feat-x-79b4cc");
        assert_eq!(bookmark_slug("café"), "caf--850f7d");
        assert_eq!(bookmark_slug("a.b"), "a-b-2e7336");
        assert_ne!(bookmark_slug("feat/x"), bookmark_slug("feat-x"));
        assert_eq!(
            working_ref("0a1b2c3d", "relabel"),
            "tether.ws.0a1b2c3d.relabel"
        );
        assert_eq!(
            working_ref("0a1b2c3d", "feat/x"),
            "tether.ws.0a1b2c3d.feat-x-79b4cc"
        );
    }

    #[test]
    fn working_ref_parsing() {
        let b = |slug: &str, generation| WorkingRef::Bookmark {
            dataset_id: "0a1b2c3d".into(),
            slug: slug.into(),
            generation,
        };
        assert_eq!(
            parse_working_ref("tether.ws.0a1b2c3d.relabel"),
            Some(b("relabel", 1))
        );
        assert_eq!(
            parse_working_ref("tether.ws.0a1b2c3d.relabel.3"),
            Some(b("relabel", 3))
        );
        assert_eq!(
            parse_working_ref("tether.ws.0a1b2c3d.deadbeef.2"),
            Some(b("deadbeef", 2))
        );
        assert_eq!(
            parse_working_ref("tether.ws.0a1b2c3d.ab12cd34.imaging-3f2a1b"),
            Some(WorkingRef::Legacy {
                dataset_id: "0a1b2c3d".into(),
                workspace: "ab12cd34".into(),
                key_slug: "imaging-3f2a1b".into(),
                generation: 1
            })
        );
        let legacy = parse_working_ref("tether.ws.0a1b2c3d.ab12cd34.imaging-3f2a1b.2").unwrap();
        assert_eq!(legacy.generation(), 2);
        assert_eq!(legacy.dataset_id(), "0a1b2c3d");
        for bad in [
            "tether.ws.0a1b2c3d",
            "tether.ws.0a1b2c3d.",
            "tether.ws.XYZ.main",
            "tether.ws.0a1b2c3d.not8hex.key",
            "tether.0a1b2c3d.0123456789abcdef",
            "tether.ws.0a1b2c3d.a.b.c",
        ] {
            assert_eq!(parse_working_ref(bad), None, "{bad}");
        }
        assert!(working_ref_is_for(
            "tether.ws.0a1b2c3d.feat-x-79b4cc.2",
            "0a1b2c3d",
            "feat/x"
        ));
        assert!(!working_ref_is_for(
            "tether.ws.0a1b2c3d.feat-x",
            "0a1b2c3d",
            "feat/x"
        ));
    }

    #[test]
    fn manifest_hash_vectors() {
        assert_eq!(manifest_hash_input([]), "[]");
        assert_eq!(manifest_hash_of([]), "4f53cda18c2b");
        let a = json!({"kind": "file", "locator": {"uri": "/d/a.csv"}});
        let b = json!({"kind": "file", "locator": {"uri": "/d/b"}});
        assert_eq!(
            manifest_hash_input([("b", b.clone()), ("a", a.clone())]),
            r#"[["a",{"kind":"file","locator":{"uri":"/d/a.csv"}}],["b",{"kind":"file","locator":{"uri":"/d/b"}}]]"#
        );
        let h = manifest_hash_of([("b", b.clone()), ("a", a.clone())]);
        assert_eq!(h, manifest_hash_of([("a", a), ("b", b)]));
        assert_eq!(h, "5d3d8c41ac26");
    }
}
