//! Canonical JSON: the one byte form tether hashes and stores.
//!
//! Object keys sorted by code point, no insignificant whitespace, serde_json's
//! string escaping and number printing. Locators, states and configs cross the
//! plugin boundary in this form, so a plugin and the host always hash the same
//! bytes for the same value. The sort is done here, not left to serde_json's
//! map type, so a `preserve_order` feature enabled anywhere in the dependency
//! graph cannot change the format.
//!
//! The format itself is `tether_contract::canonical`, shared with the SDK
//! and the conformance suite; this module keeps the host's names for it.

use serde_json::Value;

pub use tether_contract::canonical::{map_to_string, to_string};

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
