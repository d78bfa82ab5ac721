//! `.tether/objects/<key>.toml`: any bytes parse or are refused; what parses
//! writes back to text that parses to the same manifest.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tether::model::Manifest;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("x.toml");
    if let Ok(m) = Manifest::parse(&text, "k/x", file)
        && let Ok(written) = m.to_toml_string("k/x")
    {
        assert_eq!(Manifest::parse(&written, "k/x", file).unwrap(), m);
    }
});
