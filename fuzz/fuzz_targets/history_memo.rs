//! `.tether/cache/history.bin`: any bytes are taken as this tether's memo
//! or ignored, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tether::engine::history::decode_memo;

fuzz_target!(|data: &[u8]| {
    let _ = decode_memo(data, ".tether/objects");
});
