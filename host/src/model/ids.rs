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
//!
//! The recipes shared with plugins and the conformance suite (canonical JSON,
//! content states, pin ids, listing names, ref names and generations) live in
//! the `tether-contract` crate; this module is the host's face on them, with
//! the host-only parts (random ids, `manifest_hash`).

use serde_json::{Map, Value};

use super::canonical;
use super::error::{ModelError, Result};

pub use tether_contract::ids::{
    DATASET_ID_LEN, PIN_HASH_LEN, is_dataset_id, is_listing_name, listing_name, parse_pin_id,
    pin_hash, pin_id, pin_input, sha256_hex,
};
pub use tether_contract::names::{
    MAX_GENERATION, PinRef, REF_PREFIX, SLUG_HASH_LEN, WORKING_REF_PREFIX, WorkingRef,
    bookmark_slug, parse_pin_ref, parse_working_ref, ref_for_pin, with_generation, working_ref,
    working_ref_is_for,
};

/// Length of a workspace id in hex characters.
pub const WORKSPACE_ID_LEN: usize = 32;
/// Length of the short workspace id in legacy refs and `recover-<workspace8>`.
pub const WORKSPACE_SHORT_LEN: usize = tether_contract::names::WORKSPACE_SHORT_LEN;
/// Hex characters of a `manifest_hash` as shown.
pub const MANIFEST_HASH_LEN: usize = 12;

fn random_hex(bytes: usize) -> String {
    // The OS random source failing is not something a user can fix or retry
    // around; tether cannot mint ids without it.
    try_random_hex(bytes).expect("the operating system's random source failed")
}

/// `bytes` random bytes from the operating system, as lowercase hex; `None`
/// when its random source fails (for names that can do without).
pub(crate) fn try_random_hex(bytes: usize) -> Option<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).ok()?;
    Some(hex::encode(buf))
}

/// A fresh random dataset id (8 lowercase hex).
pub fn new_dataset_id() -> String {
    random_hex(DATASET_ID_LEN / 2)
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
    tether_contract::ids::is_lower_hex(id, WORKSPACE_ID_LEN)
}

/// The short form of a workspace id (its first 8 characters), as legacy refs,
/// `recover-<workspace8>` and `forget-workspace --json` show it.
pub fn workspace_short(id: &str) -> &str {
    id.get(..WORKSPACE_SHORT_LEN).unwrap_or(id)
}

/// The content part of a state: the state less the backend's volatile
/// (address) keys, and less `null` members (absent and `null` are one value,
/// see `model::toml_json` and `tether_contract::state`). Equality, pin ids
/// and listing names use only this.
pub fn content_state(state: &Map<String, Value>, volatile_keys: &[&str]) -> Map<String, Value> {
    tether_contract::state::content_state_map(state, volatile_keys)
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
