//! `.tether/listings/<name>.jsonl`: any bytes normalise (stably) or are
//! refused; entries that parse write back to the same entries.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tether::model::listing;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let what = Path::new("l.jsonl");
    if let Ok(normal) = listing::normalize(&text, what) {
        assert_eq!(listing::normalize(&normal, what).unwrap(), normal);
    }
    if let Ok(entries) = listing::parse_entries(&text, what) {
        let written = listing::entries_to_text(&entries);
        assert_eq!(listing::parse_entries(&written, what).unwrap(), entries);
    }
});
