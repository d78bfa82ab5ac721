//! Kind `busy`: memory that declares `NEEDS_QUIESCENCE`, as Neon does. Its
//! `check_quiescence` refuses while the store has a branch named `writers`
//! (the tests set and delete it), standing in for a live writer.

use memory_variant::{Memory, Variant};
use tether_plugin_memory::{Locator, MemoryBackend, MemoryHarness};
use tether_sdk::{Backend, Capability, Error, Result, Target, cap};

#[derive(Default)]
pub struct Busy;

impl Variant for Busy {
    const KIND: &'static str = "busy";
    const EXTRA_CAPABILITIES: &'static [Capability] = &[cap::NEEDS_QUIESCENCE];

    fn check_quiescence(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        _working_ref: Option<&str>,
    ) -> Result<()> {
        match memory.open(locator, &Target::WorkingRef("writers".into()), true) {
            Ok(_) => Err(Error::Other(
                "1 active writer on the store (branch `writers`)".into(),
            )),
            Err(_) => Ok(()),
        }
    }
}

tether_sdk::export!(Memory<Busy>, harness: MemoryHarness);
