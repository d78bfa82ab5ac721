//! The library API: `run` in-process, as other tools and per-plugin tests
//! call it.

mod common;

use tether::plugin::{Runtime, RuntimeConfig};
use tether_conformance::{Options, Scratch, Status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_reports_every_check_of_the_memory_plugin() {
    let config = RuntimeConfig {
        cache_root: common::cache_dir(),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config).unwrap();
    let plugin = runtime.load_file(&common::memory_plugin()).await.unwrap();
    let options = Options {
        scratch: Scratch::Uri("memory://conformance-library-test".into()),
        ..Options::default()
    };
    let mut streamed = 0;
    let report = tether_conformance::run_with(plugin.clone(), &options, |_| streamed += 1)
        .await
        .unwrap();
    assert_eq!(streamed, report.checks.len());
    let failures: Vec<String> = report.failures().map(ToString::to_string).collect();
    assert!(report.success(), "{failures:#?}");
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.name == "fingerprint.stable" && c.status == Status::Pass)
    );
    assert_eq!(report.kind, plugin.kind());

    // `--only` narrows; everything else is reported as skipped.
    let only = Options {
        only: vec!["fingerprint".into()],
        ..options
    };
    let report = tether_conformance::run(plugin, &only).await.unwrap();
    assert!(
        report
            .checks
            .iter()
            .filter(|c| c.capability != "FINGERPRINT")
            .all(|c| c.status == Status::Skip)
    );
    assert!(report.passed() >= 4);
}
