//! Shared support for the integration tests of every crate: the repository's
//! paths, one compiled-component cache per test run, and the test-only plugins
//! of `tests/plugins/` built once (across parallel test processes).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ has a parent")
        .to_path_buf()
}

/// One compiled-component cache for every test process of a run, so each
/// component is compiled once (pass it as `TETHER_CACHE_DIR`).
pub fn cache_dir() -> PathBuf {
    repo_root().join("target").join("test-cache")
}

/// A first-party plugin component as `host/build.rs` built it
/// (`tether_plugin_memory`).
pub fn first_party_plugin(file_stem: &str) -> PathBuf {
    let path = repo_root()
        .join("target/wasm-plugins/wasm32-wasip2/release")
        .join(format!("{file_stem}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build the host (without TETHER_SKIP_PLUGIN_BUILD) so build.rs builds plugins/",
        path.display()
    );
    path
}

/// A plugin of the test workspace `tests/plugins` (`hostile`, `broken_cas`),
/// built once per run into `target/test-plugins`.
pub fn test_plugin(file_stem: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(build_test_plugins);
    let path = dir.join(format!("{file_stem}.wasm"));
    assert!(
        path.is_file(),
        "no test plugin {} in {}",
        file_stem,
        dir.display()
    );
    path
}

fn build_test_plugins() -> PathBuf {
    let root = repo_root();
    let target = root.join("target").join("test-plugins");
    std::fs::create_dir_all(&target).expect("create target/test-plugins");
    // Test binaries run in parallel processes: one builds while the others
    // wait on the lock, then find everything fresh.
    let lock = File::create(target.join(".build-lock")).expect("create the build lock file");
    lock.lock().expect("lock target/test-plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .current_dir(root.join("tests").join("plugins"))
        .args(["build", "--release", "--workspace", "--target-dir"])
        .arg(&target)
        // The outer build's flags and wrappers (clippy, coverage) must not
        // reach the wasm build, as in host/build.rs.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo for tests/plugins");
    lock.unlock().expect("unlock target/test-plugins");
    assert!(status.success(), "building tests/plugins failed ({status})");
    target.join("wasm32-wasip2").join("release")
}

/// The jj version `cargo xtask setup` installs for the tests.
pub const JJ_VERSION: &str = "0.45.1";

/// The jj executable the tests run: `target/tools/bin/jj`, which `cargo xtask
/// setup` installs (jj-cli from crates.io). Missing, the test fails saying so:
/// the jj suites are never skipped silently.
pub fn jj() -> PathBuf {
    let exe = repo_root()
        .join("target")
        .join("tools")
        .join("bin")
        .join(format!("jj{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.is_file(),
        "{} is missing: run `cargo xtask setup`, which installs jj {JJ_VERSION} there for the tests",
        exe.display()
    );
    exe
}

/// Stdout and stderr of a finished command, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The interpreter of the pinned Python environment (`icechunk`, `zarr`)
/// that `cargo xtask setup` makes at `target/pyenv`. Panics, saying what to
/// run, when it is missing: the interop tests never skip silently.
pub fn python() -> PathBuf {
    let root = repo_root().join("target").join("pyenv");
    let python = root.join("bin").join("python");
    assert!(
        python.is_file() && root.join("tether-pins.txt").is_file(),
        "the pinned Python environment {} is missing or incomplete: run `cargo xtask setup`",
        root.display()
    );
    python
}
