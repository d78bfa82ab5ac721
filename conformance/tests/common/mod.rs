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

/// Run `tether-conformance` on the first-party plugin `crate_name`
/// (`tether_plugin_lance`) with `extra` arguments and `env`, and require it
/// to pass, with at least one passing check of each of `groups`
/// (`"fork."`). For a plugin's object-store variants beyond the local
/// scratch directory `builtin_plugins.rs` covers.
pub fn first_party_passes(
    crate_name: &str,
    extra: &[&str],
    env: &[(&str, String)],
    groups: &[&str],
) {
    let wasm = tether_testkit::first_party_plugin(crate_name);
    let mut args = vec![wasm.to_str().expect("UTF-8 path")];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .args(&args)
        .env("TETHER_CACHE_DIR", cache_dir())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run tether-conformance");
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = stdout_lines(&out);
    assert!(!lines.iter().any(|l| l.starts_with("FAIL  ")), "{text}");
    for group in groups {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("PASS  ") && l.contains(group)),
            "no {group} checks passed\n{text}"
        );
    }
}
