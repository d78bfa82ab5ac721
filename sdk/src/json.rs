//! Canonical JSON and typed parsing of locators, states and configs.
//!
//! Everything JSON that crosses the boundary is canonical (object keys sorted
//! by code point, no whitespace, serde_json's string escaping and number
//! printing), because the host hashes it byte for byte into pin ids and
//! manifests. [`canonical_json`] is the one way this crate prints JSON: the
//! contract crate's, which the host uses too.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

/// `value` as canonical JSON text (`tether_contract::canonical`, the
/// host's own implementation).
pub fn canonical_json(value: &Value) -> String {
    tether_contract::canonical::to_string(value)
}

/// Parse JSON text that crossed the boundary. `what` names it in the error
/// (`locator`, `state`, `config`, ...).
pub fn parse(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::Invalid(format!("{what} is not valid JSON: {e}")))
}

/// Deserialize a value into `T`, mapping failures to [`Error::Invalid`] that
/// name `what` and say what was wrong.
pub fn from_value<T: DeserializeOwned>(what: &str, value: &Value) -> Result<T> {
    T::deserialize(value).map_err(|e| Error::Invalid(format!("invalid {what}: {e}")))
}

/// A typed locator: `let loc: MyLocator = tether_sdk::locator(locator)?;`.
pub fn locator<T: DeserializeOwned>(value: &Value) -> Result<T> {
    from_value("locator", value)
}

/// A typed state. A state that does not parse is one this backend never
/// produced, so it is a backend error rather than a config error.
pub fn state<T: DeserializeOwned>(value: &Value) -> Result<T> {
    T::deserialize(value)
        .map_err(|e| Error::Backend(format!("invalid state {}: {e}", canonical_json(value))))
}

/// A typed config (`[backends.<kind>]`).
pub fn config<T: DeserializeOwned>(value: &Value) -> Result<T> {
    from_value("config", value)
}

/// Serialize `value` into a JSON value (for states and handle fields built
/// from typed structs).
pub fn to_value<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Other(format!("cannot serialise: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Canonical JSON itself is tested once, in tether-contract, which
    // `canonical_json` delegates to.

    #[test]
    fn typed_locator_errors_are_invalid() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code, reason = "only the parse result matters")]
        struct Loc {
            system: String,
        }
        let err = locator::<Loc>(&json!({"branch": "main"})).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains("invalid locator") && m.contains("system"))
        );
        assert!(matches!(parse("state", "{"), Err(Error::Invalid(_))));
    }
}
