//! `tether-conformance` on the first-party `git` plugin: every check its
//! capabilities call for passes (exit 0), and each capability group ran.

mod common;

use common::{conformance, describe, stdout_lines};

#[test]
fn git_plugin_passes_conformance() {
    let wasm = tether::plugin::builtin::build_dir().join("tether_plugin_git.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: build the host without TETHER_SKIP_PLUGIN_BUILD",
        wasm.display()
    );
    let out = conformance(&[wasm.to_str().unwrap()]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = stdout_lines(&out);
    assert!(!lines.iter().any(|l| l.starts_with("FAIL  ")), "{text}");
    for group in [
        "fingerprint.",
        "diff.",
        "history.",
        "addressable.",
        "pin.",
        "fork.",
        "conditional_ref.",
        "promote.",
        "merge.",
        "create.",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("PASS  ") && l.contains(group)),
            "no {group} checks passed\n{text}"
        );
    }
}
