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

/// The suite's options for one kind; what it needs kept running goes into
/// `keep` (dropped, and stopped, after the runs). Most need only a scratch
/// directory; `iceberg` needs a catalog too: a SQLite file (empty: SQLite
/// takes an empty file as an empty database, and the harness makes
/// pyiceberg's tables in it) that the configuration names, as a user's
/// secrets would; `ducklake` makes a catalog per object in a schema of a
/// real PostgreSQL database (`--scratch postgres://...`); `neon` needs a Neon
/// API: the host tests' fake, whose branches are real PostgreSQL clusters;
/// `dolt` needs a server: the Dolt stand-in, named by the SQL scratch.
fn options_for(
    kind: &str,
    scratch: &std::path::Path,
    keep: &mut Vec<Box<dyn std::any::Any>>,
) -> Options {
    if kind == "ducklake" {
        let pg = tether_testkit::Postgres::start();
        let options = Options {
            sql_scratch: Some(pg.url("postgres")),
            ..Options::default()
        };
        keep.push(Box::new(pg));
        return options;
    }
    if kind == "dolt" {
        let server = tether_testkit::DoltServer::start(&scratch.join("dolt"), &["conformance"]);
        let options = Options {
            sql_scratch: Some(server.url("conformance")),
            ..Options::default()
        };
        keep.push(Box::new(server));
        return options;
    }
    if kind == "neon" {
        let fake = NeonFake::start();
        let config = serde_json::json!({
            "api_url": fake.api, "allow_http": true, "api_key": NeonFake::KEY,
        });
        keep.push(Box::new(fake));
        return Options {
            config,
            ..Options::default()
        };
    }
    if kind != "iceberg" {
        return Options::default();
    }
    let db = scratch.join("iceberg-catalog.db");
    std::fs::write(&db, b"").unwrap();
    let dir = scratch.join("iceberg");
    std::fs::create_dir_all(&dir).unwrap();
    Options {
        scratch: tether_conformance::Scratch::Uri(dir.display().to_string()),
        config: serde_json::json!({
            "catalog": { "type": "sql", "uri": format!("sqlite:///{}", db.display()) }
        }),
        ..Options::default()
    }
}

/// `host/tests/support/neon_fake.py`, stopped (with its clusters) when dropped.
struct NeonFake {
    child: std::process::Child,
    api: String,
}

impl NeonFake {
    const KEY: &str = "conformance-neon-key";

    fn start() -> NeonFake {
        use std::io::BufRead as _;
        let script = tether_testkit::repo_root().join("host/tests/support/neon_fake.py");
        let bin = tether_testkit::postgres_bin_dir().expect("PostgreSQL is installed");
        let mut child = std::process::Command::new(tether_testkit::python())
            .arg(script)
            .arg(bin)
            .arg(Self::KEY)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the Neon fake");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let api = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the Neon fake said {line:?}"))
            .to_owned();
        NeonFake { child, api }
    }
}

impl Drop for NeonFake {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
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
    for kind in [
        "delta", "dolt", "ducklake", "file", "git", "iceberg", "icechunk", "lance", "memory",
        "neon",
    ] {
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
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let options: Vec<Options> = plugins
        .iter()
        .map(|p| options_for(p.kind(), scratch.path(), &mut keep))
        .collect();
    let runs = plugins
        .iter()
        .zip(options)
        .map(|(plugin, options)| async move {
            let report = tether_conformance::run(plugin.clone(), &options)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", plugin.kind()));
            (plugin.kind().to_owned(), report)
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
