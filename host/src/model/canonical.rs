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
        // serde_json's escaping; a `str` serialises infallibly.
        out.push_str(&serde_json::to_string(k.as_str()).unwrap_or_default());
        out.push(':');
        write(v, out);
    }
    out.push('}');
}

/// Parse JSON text a plugin returned, naming what it was in the error.
pub fn parse(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "{what} is not valid JSON ({e}): {}",
            super::display::excerpt(text, 200)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fixed_vectors() {
        assert_eq!(
            to_string(&json!({"b": 1, "a": [true, null, "x"]})),
            r#"{"a":[true,null,"x"],"b":1}"#
        );
        assert_eq!(
            to_string(&json!({"é": 1, "z": 2, "A": 3})),
            r#"{"A":3,"z":2,"é":1}"#
        );
        assert_eq!(
            to_string(&json!({"s": "line\n\"q\"\u{1}"})),
            r#"{"s":"line\n\"q\"\u0001"}"#
        );
        // serde_json 1.0.154 prints exponents with a sign; pinned by Cargo.lock.
        assert_eq!(to_string(&json!(1.5e300)), "1.5e+300");
        assert_eq!(
            to_string(&json!({"n": {"y": 0, "x": -1}})),
            r#"{"n":{"x":-1,"y":0}}"#
        );
        let map = json!({"é\"": {"b": [1], "a": null}, "A": "x"});
        assert_eq!(
            map_to_string(map.as_object().unwrap()),
            to_string(&map),
            "a map and the same map as a value are one text"
        );
    }
}
