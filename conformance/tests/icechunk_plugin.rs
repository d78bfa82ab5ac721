//! `tether-conformance` on the first-party `icechunk` plugin beyond the local
//! scratch directory every built-in plugin is checked on
//! (`builtin_plugins.rs`): on an in-memory bucket (where conditional puts make `CONDITIONAL_REF` real) and
//! on an `s3://` bucket of a local S3 server (moto), the credentials and
//! endpoint given to the runner by the environment.

mod common;

use common::{describe, stdout_lines};

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
    passes_with_env(extra, &[], groups);
}

fn passes_with_env(extra: &[&str], env: &[(&str, String)], groups: &[&str]) {
    let wasm = icechunk_plugin();
    let mut args = vec![wasm.as_str()];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tether-conformance"))
        .args(&args)
        .env("TETHER_CACHE_DIR", common::cache_dir())
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

#[test]
fn icechunk_plugin_passes_conformance_on_an_object_store() {
    passes(
        &["--scratch", "memory://icechunk-conformance"],
        &["conditional_ref.", "fork.", "promote.", "create."],
    );
}

#[test]
fn icechunk_plugin_passes_conformance_on_s3() {
    let server = tether_testkit::S3Server::start("icechunk-conformance");
    let scratch = format!("s3://{}/scratch", server.bucket());
    passes_with_env(
        &["--scratch", &scratch],
        &server.env(),
        &[
            "conditional_ref.",
            "fingerprint.",
            "pin.",
            "fork.",
            "promote.",
            "history.",
            "diff.",
            "create.",
        ],
    );
}
