//! Shared by the integration tests: running the binary. Where components are
//! and building the test plugins come from `tether-testkit`.

#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
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

/// `cargo` in `dir`, without the outer build's flags and wrappers: the
/// template crates build on their own.
pub fn clean_cargo(dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut c = Command::new(cargo);
    c.current_dir(dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// `cargo xtask new-plugin NAME --dir DIR`, as an author runs it.
pub fn new_plugin(name: &str, dir: &Path) -> Output {
    let root = tether_testkit::repo_root();
    clean_cargo(&root)
        .args([
            "run",
            "-q",
            "-p",
            "xtask",
            "--",
            "new-plugin",
            name,
            "--dir",
        ])
        .arg(dir)
        // This checkout's SDK, so the crate builds offline against the code
        // under test (the default takes it from the repository by git).
        .arg("--sdk-path")
        .arg(root.join("sdk"))
        .output()
        .expect("run cargo xtask new-plugin")
}

/// Build the crate `new-plugin` generated at `dir` (`name`) into
/// `target/template-plugin`, so its dependencies compile once; its component.
pub fn build_template(dir: &Path, name: &str) -> PathBuf {
    let target = tether_testkit::repo_root()
        .join("target")
        .join("template-plugin");
    let out = clean_cargo(dir)
        .args(["build", "--release", "--offline", "--target-dir"])
        .arg(&target)
        .output()
        .expect("run cargo build");
    assert!(out.status.success(), "build: {}", describe(&out));
    let wasm = target.join(format!(
        "wasm32-wasip2/release/tether_plugin_{}.wasm",
        name.replace('-', "_")
    ));
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    wasm
}

/// A `tether-conformance` run that passed: exit 0, `fingerprint.stable`
/// among the passes, nothing failed.
pub fn assert_passed(out: &Output) {
    let text = describe(out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PASS  fingerprint.stable"), "{text}");
    assert!(stdout.contains(" passed, 0 failed,"), "{text}");
}
