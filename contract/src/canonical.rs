//! Canonical JSON: the one byte form tether hashes and stores.
//!
//! Object keys sorted by code point, no insignificant whitespace, serde_json's
//! string escaping and number printing. Locators, states and configs cross the
//! plugin boundary in this form, so a plugin and the host always hash the same
//! bytes for the same value. The sort is done here, not left to serde_json's
//! map type, so a `preserve_order` feature enabled anywhere in the dependency
//! graph cannot change the format.

use serde_json::{Map, Value};

/// The canonical JSON text of `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The canonical JSON text of an object, without making it a [`Value`]
/// first (a manifest's state is a map, and `verify` sends thousands).
pub fn map_to_string(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(map, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_map(map, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_str(s, out),
        // Null, booleans and numbers print the same in every serde_json mode.
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_map(map: &Map<String, Value>, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    // `str` ordering is byte ordering, which for UTF-8 is code point order.
    entries.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(k, out);
        out.push(':');
        write(v, out);
    }
    out.push('}');
}

fn write_str(s: &str, out: &mut String) {
    // serde_json's escaping is the canonical one; a `str` serialises infallibly.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_by_code_point_and_drops_whitespace() {
        let v = json!({"b": 1, "a": [true, null, {"z": "x", "Z": 2}], "é": 0, "aa": {}});
        assert_eq!(
            to_string(&v),
            r#"{"a":[true,null,{"Z":2,"z":"x"}],"aa":{},"b":1,"é":0}"#
        );
    }

    #[test]
    fn code_point_order_beyond_the_bmp() {
        // U+FF61 sorts before U+1F600 by code point (UTF-16 order would differ).
        let v = json!({"\u{1F600}": 1, "\u{FF61}": 2});
        assert_eq!(to_string(&v), "{\"\u{FF61}\":2,\"\u{1F600}\":1}");
    }

    #[test]
    fn serde_json_escaping_and_numbers() {
        let v = json!({"s": "quote\" back\\ nl\n tab\t ctl\u{1}", "n": [0, -1, 1.5, 1e20, 12345678901234567890u64]});
        assert_eq!(
            to_string(&v),
            r#"{"n":[0,-1,1.5,1e+20,12345678901234567890],"s":"quote\" back\\ nl\n tab\t ctl\u0001"}"#
        );
    }

    #[test]
    fn scalars_empty_containers_and_maps() {
        assert_eq!(to_string(&json!(null)), "null");
        assert_eq!(to_string(&json!("x")), r#""x""#);
        assert_eq!(to_string(&json!({})), "{}");
        assert_eq!(to_string(&json!([])), "[]");
        let map = json!({"é\"": {"b": [1], "a": null}, "A": "x"});
        assert_eq!(map_to_string(map.as_object().unwrap()), to_string(&map));
    }
}
