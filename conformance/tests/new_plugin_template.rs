//! The plugin author's path (issue 9): `cargo xtask new-plugin NAME`
//! generates a crate that builds to a component and passes
//! `tether-conformance` unmodified for what it declares.
//!
//! The crate is generated into a fresh temporary directory every run, so the
//! template is what is tested, never a committed copy; it builds into
//! `target/template-plugin` so its dependencies compile once.

mod common;

use common::{assert_passed, build_template, conformance, describe, new_plugin};

#[test]
fn generated_plugin_builds_and_passes_conformance() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tmpl-kv");
    let out = new_plugin("tmpl-kv", &dir);
    assert!(out.status.success(), "new-plugin: {}", describe(&out));
    assert!(dir.join("src/lib.rs").is_file());
    // A second run refuses to overwrite.
    let again = new_plugin("tmpl-kv", &dir);
    assert!(!again.status.success(), "{}", describe(&again));

    let wasm = build_template(&dir, "tmpl-kv");
    let out = conformance(&[wasm.to_str().unwrap()]);
    assert_passed(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("tmpl-kv sha256:"), "{}", describe(&out));
}
