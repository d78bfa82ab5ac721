//! Kind `liar`: a plugin whose `describe` claims what it does not do, for the
//! host's tests. It declares every capability of the contract (a Pinnable,
//! Forkable, Promotable, Mergeable, Creatable backend with history and
//! diffs) and storage and tree keys, but implements only `identity` and
//! `fingerprint`: every other call answers with the SDK's "not supported".
//! The host must turn each lie into a clear per-object error, never a
//! crash or a wrong record.

use serde_json::{Value, json};
use tether_sdk::{Backend, Descriptor, Result, cap, descriptor};

#[derive(Default)]
pub struct Liar;

impl Backend for Liar {
    type Locator = Value;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["root".into()],
            tree_keys: vec!["root".into()],
            ..descriptor(
                "liar",
                &[
                    cap::FINGERPRINT,
                    cap::ADDRESSABLE,
                    cap::PIN,
                    cap::FORK,
                    cap::CHEAP_FINGERPRINT,
                    cap::ATOMIC_REF,
                    cap::CONDITIONAL_REF,
                    cap::DIFF,
                    cap::HISTORY,
                    cap::PROMOTE,
                    cap::MERGE,
                    cap::CREATE,
                ],
            )
        }
    }

    fn identity(&self, locator: &Value) -> Result<Value> {
        Ok(json!({ "root": locator.get("root").cloned().unwrap_or(Value::Null) }))
    }

    fn fingerprint(&self, _: &Value, _: Option<&str>) -> Result<Value> {
        Ok(json!({ "claims": "everything" }))
    }
}

tether_sdk::export!(Liar);
