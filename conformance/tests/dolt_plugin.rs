//! `tether-conformance` on the first-party `dolt` plugin against the Dolt
//! stand-in (`tether_testkit::DoltServer`: the MySQL wire protocol in front
//! of doltlite): the harness makes a database per object on the server the
//! SQL scratch names, the password kept by the host.

mod common;

#[test]
fn dolt_plugin_passes_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let server = tether_testkit::DoltServer::start(dir.path(), &["conformance"]);
    let scratch = server.url("conformance");
    common::first_party_passes(
        "tether_plugin_dolt",
        &["--scratch", &scratch],
        &[],
        &[
            "fingerprint.",
            "addressable.",
            "pin.",
            "fork.",
            "promote.",
            "merge.",
            "diff.",
            "history.",
        ],
    );
}
