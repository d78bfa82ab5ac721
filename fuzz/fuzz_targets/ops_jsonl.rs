//! `.tether/ops.jsonl`: any bytes are read (damaged lines skipped), folded
//! into entries and searched, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tether::oplog::{Journal, jsonl};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tether-fuzz-ops-{}.jsonl", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let journal = Journal::open(&path);
    let _ = journal.entries();
    let _ = journal.incomplete();
    let _ = journal.undo_target(None);
    let _ = jsonl::read(&path);
});
