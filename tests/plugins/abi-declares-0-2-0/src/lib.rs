//! A plugin that declares `abi = "0.2.0"`: a contract a `0.1` host cannot
//! serve, so loading it must fail naming both versions.

use serde_json::{Value, json};
use tether_sdk::{Backend, Descriptor, Result, cap, descriptor};

#[derive(Default)]
struct FromTheFuture;

impl Backend for FromTheFuture {
    type Locator = Value;

    fn describe(&self) -> Descriptor {
        Descriptor {
            abi: "0.2.0".into(),
            ..descriptor("abi-future", &[cap::FINGERPRINT])
        }
    }

    fn identity(&self, locator: &Value) -> Result<Value> {
        Ok(locator.clone())
    }

    fn fingerprint(&self, _locator: &Value, _working_ref: Option<&str>) -> Result<Value> {
        Ok(json!({ "state": "future" }))
    }
}

tether_sdk::export!(FromTheFuture);
