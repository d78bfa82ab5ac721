//! `tether-conformance` on the first-party `icechunk` plugin: every check its
//! capabilities call for passes, on a local scratch directory and on an
//! in-memory bucket (where conditional puts make `CONDITIONAL_REF` real).

mod common;

use common::{conformance, describe, stdout_lines};

fn icechunk_plugin() -> String {
    let wasm = tether::plugin::builtin::build_dir().join("tether_plugin_icechunk.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: build the host without TETHER_SKIP_PLUGIN_BUILD",
        wasm.display()
    );
    wasm.to_str().expect("UTF-8 path").to_owned()
}

fn passes(extra: &[&str], groups: &[&str]) {
    let wasm = icechunk_plugin();
    let mut args = vec![wasm.as_str()];
    args.extend_from_slice(extra);
    let out = conformance(&args);
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

#[test]
fn icechunk_plugin_passes_conformance_on_local_storage() {
    passes(
        &[],
        &[
            "fingerprint.",
            "pin.",
            "fork.",
            "promote.",
            "history.",
            "diff.",
            "addressable.",
            "create.",
        ],
    );
}

#[test]
fn icechunk_plugin_passes_conformance_on_an_object_store() {
    passes(
        &["--scratch", "memory://icechunk-conformance"],
        &["conditional_ref.", "fork.", "promote.", "create."],
    );
}
