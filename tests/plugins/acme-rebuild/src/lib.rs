//! Kind `acme` again, as a different build: the same behaviour with other
//! bytes (its fingerprint passes through one more function), so a dataset
//! pinned to `acme` must refuse it, naming both digests.

use memory_variant::{Memory, Variant};
use serde_json::Value;
use tether_plugin_memory::{Locator, MemoryBackend, MemoryHarness};
use tether_sdk::{Backend, Result};

#[derive(Default)]
pub struct AcmeRebuild;

impl Variant for AcmeRebuild {
    const KIND: &'static str = "acme";

    fn fingerprint(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        working_ref: Option<&str>,
    ) -> Result<Value> {
        // A distinct marker keeps this build's bytes distinct from `acme`'s.
        std::hint::black_box("acme rebuild");
        memory.fingerprint(locator, working_ref)
    }
}

tether_sdk::export!(Memory<AcmeRebuild>, harness: MemoryHarness);
