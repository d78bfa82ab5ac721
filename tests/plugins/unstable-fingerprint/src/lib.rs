//! Kind `unstable-fingerprint`: memory, except that every fingerprint carries
//! a fresh random nonce, so the state changes on every call with nothing
//! written. The suite's stability check must catch it.

use memory_variant::{Memory, Variant};
use serde_json::{Value, json};
use tether_plugin_memory::{Locator, MemoryBackend, MemoryHarness};
use tether_sdk::{Backend, Error, Result};

#[derive(Default)]
pub struct UnstableFingerprint;

impl Variant for UnstableFingerprint {
    const KIND: &'static str = "unstable-fingerprint";

    fn fingerprint(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        working_ref: Option<&str>,
    ) -> Result<Value> {
        let mut state = memory.fingerprint(locator, working_ref)?;
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| Error::Other(e.to_string()))?;
        state["nonce"] = json!(hex::encode(nonce));
        Ok(state)
    }
}

tether_sdk::export!(Memory<UnstableFingerprint>, harness: MemoryHarness);
