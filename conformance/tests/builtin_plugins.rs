//! The conformance suite on every first-party plugin the `tether` binary
//! embeds (`tether::plugin::builtin`), so a backend is covered by being built
//! in: each must export the harness, pass every check its objects' capabilities
//! call for, and pass at least one check of each such capability the suite
//! has checks for. (Object-store scratch variants of one plugin are in their
//! own files, e.g. `icechunk_plugin.rs`.)

mod common;

use std::collections::BTreeSet;

use tether::plugin::{Runtime, RuntimeConfig, builtin};
use tether_conformance::{Options, Report, Status};

/// What is wrong with one plugin's report; empty when nothing is.
fn problems(report: &Report) -> Vec<String> {
    let mut out: Vec<String> = report.failures().map(|f| f.to_string()).collect();
    for capability in &report.tested {
        let checks: Vec<_> = report
            .checks
            .iter()
            .filter(|c| &c.capability == capability)
            .collect();
        if !checks.is_empty() && !checks.iter().any(|c| c.status == Status::Pass) {
            out.push(format!("no {capability} check passed"));
        }
    }
    out
}

/// The suite's options for one kind, and the server it needs kept running.
/// Most need only a scratch directory; `iceberg` needs a catalog too: a
/// SQLite file (empty: SQLite takes an empty file as an empty database, and
/// the harness makes pyiceberg's tables in it) that the configuration names,
/// as a user's secrets would; `dolt` needs a server: the Dolt stand-in,
/// named by the SQL scratch.
fn options_for(
    kind: &str,
    scratch: &std::path::Path,
) -> (Options, Option<tether_testkit::DoltServer>) {
    if kind == "dolt" {
        let server = tether_testkit::DoltServer::start(&scratch.join("dolt"), &["conformance"]);
        let options = Options {
            sql_scratch: Some(server.url("conformance")),
            ..Options::default()
        };
        return (options, Some(server));
    }
    if kind != "iceberg" {
        return (Options::default(), None);
    }
    let db = scratch.join("iceberg-catalog.db");
    std::fs::write(&db, b"").unwrap();
    let dir = scratch.join("iceberg");
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        scratch: tether_conformance::Scratch::Uri(dir.display().to_string()),
        config: serde_json::json!({
            "catalog": { "type": "sql", "uri": format!("sqlite:///{}", db.display()) }
        }),
        ..Options::default()
    };
    (options, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_plugin_passes_conformance() {
    let config = RuntimeConfig {
        cache_root: common::cache_dir(),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config).unwrap();
    let plugins = builtin::load_all(&runtime).await.unwrap();
    let kinds: BTreeSet<&str> = plugins.iter().map(|p| p.kind()).collect();
    // The ones this test was written with; any later one is covered too.
    for kind in ["delta", "file", "git", "icechunk", "lance", "memory"] {
        assert!(kinds.contains(kind), "{kind} is not built in: {kinds:?}");
    }
    for plugin in &plugins {
        assert!(
            plugin.has_harness(),
            "built-in plugin {} exports no harness, so conformance cannot cover it",
            plugin.kind()
        );
    }
    let scratch = tempfile::tempdir().unwrap();
    let runs = plugins.iter().map(|plugin| {
        let (options, server) = options_for(plugin.kind(), scratch.path());
        async move {
            let _server = server;
            let report = tether_conformance::run(plugin.clone(), &options)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", plugin.kind()));
            (plugin.kind().to_owned(), report)
        }
    });
    let mut failed = Vec::new();
    for (kind, report) in futures::future::join_all(runs).await {
        assert_eq!(report.kind, kind);
        assert!(report.passed() > 0, "{kind}: nothing passed");
        let problems = problems(&report);
        if !problems.is_empty() {
            failed.push(format!("{kind}:\n  {}", problems.join("\n  ")));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
