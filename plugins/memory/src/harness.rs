//! The conformance harness: fresh systems under a scratch URI, and writes.
//!
//! Everything goes through the same layout as the backend (see `store`), the
//! way a test with plain file writes would.

use serde_json::{Value, json};
use tether_sdk::harness::child_uri;
use tether_sdk::{Error, Harness, Result};

use crate::store::{RefKind, Snapshot, Store};
use crate::{Locator, open};

/// Makes memory systems for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryHarness;

/// 16 random hex digits (wasi:random), so concurrent runs never share a name.
fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| Error::Other(format!("no randomness: {e}")))?;
    Ok(hex::encode(bytes))
}

impl Harness for MemoryHarness {
    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let system = child_uri(scratch_uri, &format!("obj-{}", random_hex()?));
        let store = Store::open(&system)?;
        let id = store.write_snapshot(&Snapshot::initial())?;
        store.create_ref(RefKind::Branch, "main", &id)?;
        Ok(json!({ "system": system, "branch": "main" }))
    }

    fn mutate(&self, locator: &Value, working_ref: Option<&str>) -> Result<()> {
        let (loc, store): (Locator, Store) = open(locator)?;
        let branch = working_ref.unwrap_or(&loc.branch);
        let head = store
            .read_ref(RefKind::Branch, branch)?
            .ok_or_else(|| Error::not_found(format!("branch {branch} does not exist")))?;
        let mut payload = store.require_snapshot(&head.value)?.payload;
        // A random key, so writes on two branches never conflict when merged.
        let value = json!(payload.len());
        payload.insert(format!("key-{}", random_hex()?), value);
        let id = store.write_snapshot(&Snapshot::child(
            vec![head.value],
            payload,
            "harness mutation",
        ))?;
        store.move_ref(RefKind::Branch, branch, &id, head.etag)?;
        Ok(())
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let system = child_uri(scratch_uri, &format!("fresh-{}", random_hex()?));
        Ok(json!({ "system": system, "branch": "main" }))
    }
}
