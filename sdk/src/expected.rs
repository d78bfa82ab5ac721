//! Conditional ref moves: content states and [`check_expected`].
//!
//! `fork`, `promote` and `merge` receive the head the caller reviewed. A
//! backend with a compare-and-swap uses it directly; every backend can call
//! [`check_expected`] first to turn a mismatch into `ref-moved` before anything
//! is written. States are compared by their *content* keys: the descriptor's
//! volatile keys address a state but do not identify it.

use serde_json::Value;

use crate::backend::Expected;
use crate::error::{Error, Result};
use crate::json::canonical_json;

/// `state` without the volatile keys and without `null` members: the part
/// that identifies the data. The one rule, shared with the host
/// (`tether_contract::state`): a `null` member is an absent one, because the
/// host stores states in TOML, which has no `null`.
pub fn content_state(state: &Value, volatile_keys: &[String]) -> Value {
    tether_contract::state::content_state(state, volatile_keys)
}

/// Whether two states name the same content.
pub fn same_content(a: &Value, b: &Value, volatile_keys: &[String]) -> bool {
    tether_contract::state::same_content(a, b, volatile_keys)
}

/// Check that a ref (named `what` in the message) whose current state is
/// `current` (`None` when the ref does not exist) is where `expected` says.
/// Returns [`Error::RefMoved`] otherwise; `Expected::Unconditional` always passes.
pub fn check_expected(
    what: &str,
    current: Option<&Value>,
    expected: &Expected,
    volatile_keys: &[String],
) -> Result<()> {
    match (expected, current) {
        (Expected::Unconditional, _) | (Expected::Absent, None) => Ok(()),
        (Expected::Absent, Some(state)) => Err(Error::RefMoved(format!(
            "{what} exists (at {}) but was expected to be absent",
            canonical_json(state)
        ))),
        (Expected::At(want), None) => Err(Error::RefMoved(format!(
            "{what} does not exist but was expected at {}",
            canonical_json(want)
        ))),
        (Expected::At(want), Some(state)) if same_content(want, state, volatile_keys) => Ok(()),
        (Expected::At(want), Some(state)) => Err(Error::RefMoved(format!(
            "{what} is at {} but was expected at {}",
            canonical_json(state),
            canonical_json(want)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volatile() -> Vec<String> {
        vec!["lsn".to_owned()]
    }

    #[test]
    fn unconditional_always_passes() {
        assert!(check_expected("b", None, &Expected::Unconditional, &[]).is_ok());
        assert!(check_expected("b", Some(&json!({"a": 1})), &Expected::Unconditional, &[]).is_ok());
    }

    #[test]
    fn absent() {
        assert!(check_expected("b", None, &Expected::Absent, &[]).is_ok());
        let err =
            check_expected("branch x", Some(&json!({"a": 1})), &Expected::Absent, &[]).unwrap_err();
        assert!(
            matches!(&err, Error::RefMoved(m) if m.contains("branch x") && m.contains("absent"))
        );
    }

    #[test]
    fn at_compares_content_keys_only() {
        let want = Expected::At(json!({"id": "s1", "lsn": 10}));
        assert!(
            check_expected(
                "b",
                Some(&json!({"id": "s1", "lsn": 99})),
                &want,
                &volatile()
            )
            .is_ok()
        );
        assert!(matches!(
            check_expected(
                "b",
                Some(&json!({"id": "s2", "lsn": 10})),
                &want,
                &volatile()
            ),
            Err(Error::RefMoved(_))
        ));
        // Without the volatile key declared, the lsn difference counts.
        assert!(check_expected("b", Some(&json!({"id": "s1", "lsn": 99})), &want, &[]).is_err());
        assert!(matches!(
            check_expected("b", None, &want, &volatile()),
            Err(Error::RefMoved(_))
        ));
    }

    #[test]
    fn content_state_drops_volatile_keys() {
        assert_eq!(
            content_state(&json!({"id": 1, "lsn": 2}), &volatile()),
            json!({"id": 1})
        );
        assert_eq!(content_state(&json!("x"), &volatile()), json!("x"));
    }

    #[test]
    fn null_members_are_absent_ones() {
        // The host reads `expected` back from a TOML manifest, without nulls.
        assert_eq!(
            content_state(&json!({"id": 1, "gone": null}), &volatile()),
            json!({"id": 1})
        );
        let want = Expected::At(json!({"id": "s1"}));
        assert!(check_expected("b", Some(&json!({"id": "s1", "x": null})), &want, &[]).is_ok());
    }
}
