//! `tether-conformance` on the first-party `file` plugin: every check its
//! capabilities call for passes (exit 0), and the CREATE and DIFF groups ran.

mod common;

use common::{conformance, describe, stdout_lines};

#[test]
fn file_plugin_passes_conformance() {
    let wasm = tether::plugin::builtin::build_dir().join("tether_plugin_file.wasm");
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
    for group in ["fingerprint.", "diff.", "create."] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("PASS  ") && l.contains(group)),
            "no {group} checks passed\n{text}"
        );
    }
}
