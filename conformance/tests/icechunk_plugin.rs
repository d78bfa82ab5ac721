//! `tether-conformance` on the first-party `icechunk` plugin beyond the local
//! scratch directory every built-in plugin is checked on
//! (`builtin_plugins.rs`): on an in-memory bucket (where conditional puts make `CONDITIONAL_REF` real) and
//! on an `s3://` bucket of a local S3 server (moto), the credentials and
//! endpoint given to the runner by the environment.

mod common;

fn passes(extra: &[&str], groups: &[&str]) {
    passes_with_env(extra, &[], groups);
}

fn passes_with_env(extra: &[&str], env: &[(&str, String)], groups: &[&str]) {
    common::first_party_passes("tether_plugin_icechunk", extra, env, groups);
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
