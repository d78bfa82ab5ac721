//! Kind `broken-cas`: declares `CONDITIONAL_REF` but ignores `expected` in
//! `fork`. The conformance suite's racing forks must catch it.

use memory_variant::{Memory, Variant};
use tether_plugin_memory::{Locator, MemoryBackend, MemoryHarness};
use tether_sdk::{Backend, Expected, Result, Target};

#[derive(Default)]
pub struct BrokenCas;

impl Variant for BrokenCas {
    const KIND: &'static str = "broken-cas";

    fn fork(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        source: &Target,
        name: &str,
        _: &Expected,
    ) -> Result<String> {
        memory.fork(locator, source, name, &Expected::Unconditional)
    }
}

tether_sdk::export!(Memory<BrokenCas>, harness: MemoryHarness);
