//! Content states, and the one rule for `null`.
//!
//! A state (what `fingerprint` returns) may carry *volatile* keys, which
//! address a state without identifying it (a Neon LSN); its *content state*
//! is the state less those keys. Equality of states, `expected` checks, pin
//! ids and listing names all use only the content state.
//!
//! ## `null` members are absent
//!
//! A `null` member of an object, at any depth, is the same value as no
//! member: [`content_state`] and [`strip_nulls`] drop them (a `null` element
//! of an array stays: it has a position). The reason is storage: manifests and
//! `workspace.toml` are TOML, which has no `null`, so the host writes a state
//! `{"a": 1, "b": null}` as `a = 1` and reads it back as `{"a": 1}`. Were
//! `null` kept, the same state would hash to one pin id before the manifest
//! was written and another after it was read back, and a plugin comparing an
//! `expected` state the host read from a manifest with the head it just
//! fingerprinted would report a moved ref that did not move. Dropping them
//! also kept every existing pin id: the host always hashed this way.

use serde_json::{Map, Value};

/// `value` without `null` object members, at any depth.
pub fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_nulls_map(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// [`strip_nulls`] of an object.
pub fn strip_nulls_map(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), strip_nulls(v)))
        .collect()
}

/// The content part of a state object: less the volatile keys and less
/// `null` members (see the module docs).
pub fn content_state_map<K: AsRef<str>>(
    state: &Map<String, Value>,
    volatile_keys: &[K],
) -> Map<String, Value> {
    state
        .iter()
        .filter(|(k, v)| !v.is_null() && !volatile_keys.iter().any(|vk| vk.as_ref() == k.as_str()))
        .map(|(k, v)| (k.clone(), strip_nulls(v)))
        .collect()
}

/// [`content_state_map`] of any value: a state that is not an object has no
/// volatile keys, only its nulls are dropped.
pub fn content_state<K: AsRef<str>>(state: &Value, volatile_keys: &[K]) -> Value {
    match state {
        Value::Object(map) => Value::Object(content_state_map(map, volatile_keys)),
        other => strip_nulls(other),
    }
}

/// Whether two states name the same content.
pub fn same_content<K: AsRef<str>>(a: &Value, b: &Value, volatile_keys: &[K]) -> bool {
    content_state(a, volatile_keys) == content_state(b, volatile_keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_volatile_keys_and_nulls_at_any_depth() {
        let s = json!({"lsn": "0/1", "xid": 7, "gone": null, "deep": {"x": null, "y": [null, 1]}});
        assert_eq!(
            content_state(&s, &["lsn"]),
            json!({"xid": 7, "deep": {"y": [null, 1]}})
        );
        assert_eq!(content_state(&json!("x"), &["lsn"]), json!("x"));
        assert_eq!(
            content_state(&json!([{"a": null}]), &[] as &[&str]),
            json!([{}])
        );
    }

    #[test]
    fn null_and_absent_are_one_content() {
        let vol = ["lsn".to_string()];
        assert!(same_content(
            &json!({"id": "s1", "x": null, "lsn": 1}),
            &json!({"id": "s1", "lsn": 2}),
            &vol
        ));
        assert!(!same_content(
            &json!({"id": "s1"}),
            &json!({"id": "s2"}),
            &vol
        ));
    }
}
