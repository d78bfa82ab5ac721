//! Kind `acme`: a third-party plugin as a dataset would ship it (the memory
//! backend under another kind). Never embedded in tether; the plugin
//! lifecycle tests `tether plugin add` it to a dataset.

use memory_variant::{Memory, Variant};
use tether_plugin_memory::MemoryHarness;

#[derive(Default)]
pub struct Acme;

impl Variant for Acme {
    const KIND: &'static str = "acme";
}

tether_sdk::export!(Memory<Acme>, harness: MemoryHarness);
