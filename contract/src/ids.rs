//! Pin ids and listing names (DESIGN §6).
//!
//! - pin id `<dataset_id>.<h16>`, `h16` = first 16 hex of
//!   `sha256(canonical_json([kind, identity, content_state]))`, with `null`
//!   members stripped from identity and state ([`crate::state`]);
//! - listing name: the full 64-hex sha256 of the same bytes, without the
//!   dataset id, so datasets sharing a store share listings.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::state::strip_nulls;

/// Length of a dataset id in hex characters.
pub const DATASET_ID_LEN: usize = 8;
/// Hex characters of the content hash in a pin id.
pub const PIN_HASH_LEN: usize = 16;
/// Hex characters of a listing name.
pub const LISTING_NAME_LEN: usize = 64;

/// Whether `s` is `len` lowercase hex digits.
pub fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `sha256(bytes)` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `id` is a dataset id (8 lowercase hex).
pub fn is_dataset_id(id: &str) -> bool {
    is_lower_hex(id, DATASET_ID_LEN)
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

/// The pin id `<dataset_id>.<h16>` of a *content* state
/// ([`crate::state::content_state`]) under the backend's identity.
pub fn pin_id(dataset_id: &str, kind: &str, identity: &Value, content_state: &Value) -> String {
    format!("{dataset_id}.{}", pin_hash(kind, identity, content_state))
}

/// The listing name of a content state: the full sha256 hex of the pin id's
/// input; its first 16 characters are the pin id's hash.
pub fn listing_name(kind: &str, identity: &Value, content_state: &Value) -> String {
    sha256_hex(pin_input(kind, identity, content_state).as_bytes())
}

/// Whether `name` is a listing name (64 lowercase hex).
pub fn is_listing_name(name: &str) -> bool {
    is_lower_hex(name, LISTING_NAME_LEN)
}

/// Parse a pin id `<8hex>.<16hex>` into (dataset id, hash).
pub fn parse_pin_id(pin_id: &str) -> Option<(&str, &str)> {
    let (d, h) = pin_id.split_once('.')?;
    (is_dataset_id(d) && is_lower_hex(h, PIN_HASH_LEN)).then_some((d, h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::content_state;
    use serde_json::json;

    #[test]
    fn fixed_vectors() {
        // The same vectors as the host's `model::ids` tests.
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
        assert_eq!(
            parse_pin_id("0a1b2c3d.e7a279c1973a37ef"),
            Some(("0a1b2c3d", "e7a279c1973a37ef"))
        );
        assert_eq!(parse_pin_id("0a1b2c3d.E7A279C1973A37EF"), None);
    }

    #[test]
    fn nulls_and_non_ascii_keys() {
        let identity = json!({"uri": "/données/ß", "extra": null});
        let with_nulls = json!({"clé": "é", "n": null, "deep": {"x": null, "y": 1}, "lsn": 3});
        let without = json!({"clé": "é", "deep": {"y": 1}});
        let a = content_state(&with_nulls, &["lsn"]);
        assert_eq!(a, without);
        assert_eq!(
            pin_id("0a1b2c3d", "memory", &identity, &a),
            pin_id(
                "0a1b2c3d",
                "memory",
                &json!({"uri": "/données/ß"}),
                &without
            )
        );
        // Raw states with nulls hash as their content (pin_input strips too).
        assert_eq!(
            listing_name(
                "memory",
                &identity,
                &json!({"clé": "é", "n": null, "deep": {"y": 1, "x": null}})
            ),
            listing_name("memory", &identity, &without)
        );
        assert_eq!(
            pin_input("memory", &identity, &a),
            r#"["memory",{"uri":"/données/ß"},{"clé":"é","deep":{"y":1}}]"#
        );
    }
}
