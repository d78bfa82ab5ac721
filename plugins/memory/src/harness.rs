//! The conformance harness: fresh systems under a scratch URI, and writes.
//!
//! Everything goes through the same layout as the backend (see `store`), the
//! way a test with plain file writes would.

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::kit::random_hex;
use tether_sdk::{Error, Harness, Result};

use crate::store::{RefKind, Snapshot, Store};
use crate::{Locator, open};

/// Makes memory systems for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryHarness;

impl Harness for MemoryHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let system = scratch_child(scratch_uri, "obj")?;
        let store = Store::open(&system)?;
        let id = store.write_snapshot(&Snapshot::initial())?;
        store.create_ref(RefKind::Branch, "main", &id)?;
        Ok(json!({ "system": system, "branch": "main" }))
    }

    fn mutate(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        let store = open(loc)?;
        let branch = working_ref.unwrap_or(&loc.branch);
        let head = store
            .read_ref(RefKind::Branch, branch)?
            .ok_or_else(|| Error::not_found(format!("branch {branch} does not exist")))?;
        let mut payload = store.require_snapshot(&head.value)?.payload;
        // A random key, so writes on two branches never conflict when merged.
        let value = json!(payload.len());
        payload.insert(format!("key-{}", random_hex(8)?), value);
        let id = store.write_snapshot(&Snapshot::child(
            vec![head.value],
            payload,
            "harness mutation",
        ))?;
        store.move_ref(RefKind::Branch, branch, &id, head.etag)?;
        Ok(())
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let system = scratch_child(scratch_uri, "fresh")?;
        Ok(json!({ "system": system, "branch": "main" }))
    }
}
