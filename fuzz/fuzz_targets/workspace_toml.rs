//! `.tether/workspace.toml`: any bytes parse or are refused; what parses
//! writes back.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tether::model::WorkspaceState;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("workspace.toml");
    if let Ok(w) = WorkspaceState::parse(&text, file) {
        let written = w.to_toml_string().unwrap();
        assert_eq!(WorkspaceState::parse(&written, file).unwrap(), w);
    }
});
