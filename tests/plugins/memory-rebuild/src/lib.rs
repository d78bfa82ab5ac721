//! Kind `memory`, built apart from the built-in: stands for "the built-in
//! memory plugin of another tether release". A dataset pinned to this digest
//! must keep working on a tether whose built-in memory differs, once this
//! component is present in `.tether/plugins/`, and refuse clearly otherwise.

use memory_variant::{Memory, Variant};
use tether_plugin_memory::MemoryHarness;

#[derive(Default)]
pub struct OtherRelease;

impl Variant for OtherRelease {
    const KIND: &'static str = "memory";
}

tether_sdk::export!(Memory<OtherRelease>, harness: MemoryHarness);
