//! The plugin author's path (issue 9): `cargo xtask new-plugin NAME`
//! generates a crate that builds to a component and passes
//! `tether-conformance` unmodified for what it declares.
//!
//! The crate is generated into a fresh temporary directory every run, so the
//! template is what is tested, never a committed copy; it builds into
//! `target/template-plugin` so its dependencies compile once.

use std::process::Command;

use tether_testkit::{describe, repo_root};

#[test]
fn generated_plugin_builds_and_passes_conformance() {
    let root = repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tmpl-kv");
    let clean = |c: &mut Command| {
        // The outer build's flags and wrappers must not reach these builds.
        c.env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CARGO_TARGET_DIR");
    };

    let mut generate = Command::new(&cargo);
    generate
        .current_dir(&root)
        .args([
            "run",
            "-q",
            "-p",
            "xtask",
            "--",
            "new-plugin",
            "tmpl-kv",
            "--dir",
        ])
        .arg(&dir)
        // This checkout's SDK, so the crate builds offline against the code
        // under test (the default takes it from the repository by git).
        .arg("--sdk-path")
        .arg(root.join("sdk"));
    clean(&mut generate);
    let out = generate.output().unwrap();
    assert!(out.status.success(), "new-plugin: {}", describe(&out));
    assert!(dir.join("src/lib.rs").is_file());
    // A second run refuses to overwrite.
    let again = Command::new(&cargo)
        .current_dir(&root)
        .args([
            "run",
            "-q",
            "-p",
            "xtask",
            "--",
            "new-plugin",
            "tmpl-kv",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!again.status.success(), "{}", describe(&again));

    let target = root.join("target").join("template-plugin");
    let mut build = Command::new(&cargo);
    build
        .current_dir(&dir)
        .args(["build", "--release", "--offline", "--target-dir"])
        .arg(&target);
    clean(&mut build);
    let out = build.output().unwrap();
    assert!(out.status.success(), "build: {}", describe(&out));
    let wasm = target.join("wasm32-wasip2/release/tether_plugin_tmpl_kv.wasm");
    assert!(wasm.is_file(), "{} was not built", wasm.display());

    let out = Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .arg(&wasm)
        .env("TETHER_CACHE_DIR", tether_testkit::cache_dir())
        .output()
        .unwrap();
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("tmpl-kv sha256:"), "{text}");
    assert!(stdout.contains("PASS  fingerprint.stable"), "{text}");
    assert!(stdout.contains(" passed, 0 failed,"), "{text}");
}
