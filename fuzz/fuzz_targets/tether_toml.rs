//! `tether.toml`: any bytes parse or are refused; what parses writes back.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tether::model::Config;
use tether::model::config::peek_version;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("tether.toml");
    let _ = peek_version(&text, file);
    if let Ok(c) = Config::parse(&text, file) {
        let written = c.to_toml_string().unwrap();
        assert_eq!(Config::parse(&written, file).unwrap(), c);
    }
});
