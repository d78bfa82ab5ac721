//! Kind `contract-probe`: the SDK's side of what host and plugins must
//! compute alike, run as wasm. Its locator carries a dataset id, an identity
//! and a state; `identity` and `fingerprint` echo them, and `listing(state)`
//! answers with what the SDK computes for `state`: the content state (volatile
//! key `lsn` and `null` members dropped), the pin id and the listing name. The
//! host's own computation must agree (conformance/tests/contract_agreement.rs).

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::contract::ids;
use tether_sdk::{Backend, Descriptor, Result, canonical_json, cap, content_state, descriptor};

/// The volatile key the probe declares.
const VOLATILE: &str = "lsn";

#[derive(Deserialize)]
pub struct Locator {
    dataset: String,
    identity: Value,
    state: Value,
}

#[derive(Default)]
pub struct Probe;

impl Backend for Probe {
    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            volatile_keys: vec![VOLATILE.into()],
            ..descriptor("contract-probe", &[cap::FINGERPRINT, cap::DIFF])
        }
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        Ok(loc.identity.clone())
    }

    fn fingerprint(&self, loc: &Locator, _: Option<&str>) -> Result<Value> {
        Ok(loc.state.clone())
    }

    fn listing(&self, loc: &Locator, state: &Value) -> Result<Option<String>> {
        let kind = self.describe().kind;
        let content = content_state(state, &self.describe().volatile_keys);
        Ok(Some(canonical_json(&json!({
            "content_state": canonical_json(&content),
            "pin_id": ids::pin_id(&loc.dataset, &kind, &loc.identity, &content),
            "listing_name": ids::listing_name(&kind, &loc.identity, &content),
        }))))
    }
}

tether_sdk::export!(Probe);
