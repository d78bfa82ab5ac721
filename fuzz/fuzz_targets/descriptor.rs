//! Cached plugin descriptors: any bytes are a valid descriptor or refused; a
//! valid one writes back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tether::plugin::parse_descriptor;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = parse_descriptor(data) {
        let again = parse_descriptor(&serde_json::to_vec(&d).unwrap()).unwrap();
        assert_eq!(again, d);
    }
});
