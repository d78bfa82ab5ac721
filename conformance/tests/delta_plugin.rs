//! `tether-conformance` on the first-party `delta` plugin beyond the local
//! scratch directory every built-in plugin is checked on
//! (`builtin_plugins.rs`): on an `s3://` bucket of a local S3 server (moto),
//! the credentials and endpoint given to the runner by the environment, as
//! the issue asks (local directory and S3).

mod common;

use common::{describe, stdout_lines};

#[test]
fn delta_plugin_passes_conformance_on_s3() {
    let wasm = tether::plugin::builtin::build_dir().join("tether_plugin_delta.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: build the host without TETHER_SKIP_PLUGIN_BUILD",
        wasm.display()
    );
    let server = tether_testkit::S3Server::start("delta-conformance");
    let scratch = format!("s3://{}/scratch", server.bucket());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .arg(&wasm)
        .args(["--scratch", &scratch])
        .env("TETHER_CACHE_DIR", common::cache_dir())
        .envs(server.env())
        .output()
        .expect("run tether-conformance");
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = stdout_lines(&out);
    assert!(!lines.iter().any(|l| l.starts_with("FAIL  ")), "{text}");
    // Every capability group delta declares and the suite has checks for.
    for group in ["fingerprint.", "addressable.", "history.", "diff."] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("PASS  ") && l.contains(group)),
            "no {group} checks passed\n{text}"
        );
    }
}
