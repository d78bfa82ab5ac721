//! `tether-conformance` on the first-party `lance` plugin beyond the local
//! scratch directory every built-in plugin is checked on
//! (`builtin_plugins.rs`): on an in-memory bucket and on an `s3://` bucket
//! of a local S3 server (moto), the credentials and endpoint given to the
//! runner by the environment. Conditional puts claim a branch ref on every
//! store, so `CONDITIONAL_REF` is checked on each.

mod common;

const CHECKS: &[&str] = &[
    "conditional_ref.",
    "fingerprint.",
    "pin.",
    "fork.",
    "history.",
    "diff.",
    "addressable.",
];

#[test]
fn lance_plugin_passes_conformance_on_an_object_store() {
    common::first_party_passes(
        "tether_plugin_lance",
        &["--scratch", "memory://lance-conformance"],
        &[],
        CHECKS,
    );
}

#[test]
fn lance_plugin_passes_conformance_on_s3() {
    let server = tether_testkit::S3Server::start("lance-conformance");
    let scratch = format!("s3://{}/scratch", server.bucket());
    common::first_party_passes(
        "tether_plugin_lance",
        &["--scratch", &scratch],
        &server.env(),
        CHECKS,
    );
}
