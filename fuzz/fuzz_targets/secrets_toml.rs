//! `.tether/secrets.toml`: any bytes parse or are refused.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tether::model::Secrets;

fuzz_target!(|data: &[u8]| {
    let _ = Secrets::parse(&String::from_utf8_lossy(data), Path::new("secrets.toml"));
});
