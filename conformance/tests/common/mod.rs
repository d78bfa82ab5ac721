//! Shared by the integration tests: running the binary. Where components are
//! and building the test plugins come from `tether-testkit`.

#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::process::{Command, Output};

#[allow(unused_imports)] // each test binary uses a different part
pub use tether_testkit::{cache_dir, describe};

/// The memory plugin component `host/build.rs` built.
pub fn memory_plugin() -> PathBuf {
    tether_testkit::first_party_plugin("tether_plugin_memory")
}

/// A plugin of the test workspace `tests/plugins` (`broken_cas`).
pub fn test_plugin(name: &str) -> PathBuf {
    tether_testkit::test_plugin(name)
}

/// Run `tether-conformance` with `args`.
pub fn conformance(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .args(args)
        .env("TETHER_CACHE_DIR", cache_dir())
        .output()
        .expect("run tether-conformance")
}

pub fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
