//! Shared by the integration tests: where the plugins are, building the
//! deliberately broken test plugins once, and running the binary.

#![allow(dead_code)] // each test binary uses a different part

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("conformance/ has a parent")
        .to_path_buf()
}

/// One compiled-component cache for every test process of a run, so each
/// component is compiled once.
pub fn cache_dir() -> PathBuf {
    repo_root().join("target").join("conformance-test-cache")
}

/// The memory plugin component `host/build.rs` built.
pub fn memory_plugin() -> PathBuf {
    let path = tether::plugin::builtin::build_dir().join("tether_plugin_memory.wasm");
    assert!(
        path.is_file(),
        "{} is missing: build the host without TETHER_SKIP_PLUGIN_BUILD so build.rs builds plugins/",
        path.display()
    );
    path
}

/// A plugin of the test workspace `tests/plugins`, built (once per run, across
/// processes) into `target/test-plugins`. `name` is a fragment of the crate
/// name (`broken_cas`).
pub fn test_plugin(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(build_test_plugins);
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("read dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "wasm")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(name))
        })
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no test plugin matching {name:?} in {}", dir.display()))
}

fn build_test_plugins() -> PathBuf {
    let root = repo_root();
    let target = root.join("target").join("test-plugins");
    std::fs::create_dir_all(&target).expect("create target/test-plugins");
    // Test binaries run in parallel processes; one builds while the others
    // wait, then find everything fresh.
    let lock = File::create(target.join(".build-lock")).expect("create the build lock file");
    lock.lock().expect("lock target/test-plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .current_dir(root.join("tests").join("plugins"))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target)
        // Flags and wrappers of the outer build (clippy, coverage) must not
        // leak into the wasm build, as in host/build.rs.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .status()
        .expect("run cargo for tests/plugins");
    lock.unlock().expect("unlock target/test-plugins");
    assert!(status.success(), "building tests/plugins failed ({status})");
    target.join("wasm32-wasip2").join("release")
}

/// Run `tether-conformance` with `args`.
pub fn conformance(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .args(args)
        .env("TETHER_CACHE_DIR", cache_dir())
        .output()
        .expect("run tether-conformance")
}

/// Stdout, for assertions, with stderr appended so a failure shows both.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
