//! The `tether-conformance` binary against real components: the memory
//! plugin passes everything; the deliberately broken test plugins fail the
//! check that catches them; usage and load errors exit as documented.

mod common;

use common::{conformance, describe, memory_plugin, stdout_lines, test_plugin};

/// The lines of a human report must end with `N passed, N failed, N skipped`.
fn summary(lines: &[String]) -> (usize, usize, usize) {
    let last = lines.last().expect("some output");
    let nums: Vec<usize> = last
        .split(", ")
        .map(|part| {
            part.split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .expect("a count")
        })
        .collect();
    assert_eq!(nums.len(), 3, "summary line {last:?}");
    assert!(last.ends_with(" skipped"), "summary line {last:?}");
    (nums[0], nums[1], nums[2])
}

#[test]
fn memory_plugin_passes_every_check() {
    let wasm = memory_plugin();
    let out = conformance(&[wasm.to_str().unwrap()]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = stdout_lines(&out);
    let checks: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("PASS  ") || l.starts_with("FAIL  "))
        .collect();
    assert!(checks.iter().all(|l| l.starts_with("PASS  ")), "{text}");
    // The reference backend has every tier the suite checks (its descriptor
    // says which); none of those may be skipped for lack of a harness.
    assert!(!text.contains("effective-capabilities)"), "{text}");
    for group in ["fingerprint.", "pin.", "fork."] {
        assert!(
            checks.iter().any(|l| l.contains(group)),
            "no {group} checks ran\n{text}"
        );
    }
    let (passed, failed, _) = summary(&lines);
    assert_eq!(failed, 0, "{text}");
    assert_eq!(passed, checks.len(), "{text}");
}

#[test]
fn memory_plugin_json_report() {
    let wasm = memory_plugin();
    let out = conformance(&[
        wasm.to_str().unwrap(),
        "--json",
        "--scratch",
        "memory://conformance-cli-json",
    ]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect(&text);
    assert_eq!(report["kind"], "memory", "{text}");
    assert!(
        report["digest"].as_str().unwrap().starts_with("sha256:"),
        "{text}"
    );
    let checks = report["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    for c in checks {
        assert!(c["name"].is_string() && c["capability"].is_string(), "{c}");
        assert!(c["status"] == "pass" || c["status"] == "skip", "{c}");
    }
    assert_eq!(report["failed"], 0);
}

#[test]
fn only_restricts_to_the_named_capabilities() {
    let wasm = memory_plugin();
    let out = conformance(&[wasm.to_str().unwrap(), "--only", "fork", "--only", "PIN"]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = stdout_lines(&out);
    for l in lines.iter().filter(|l| l.starts_with("PASS  ")) {
        assert!(
            l.starts_with("PASS  fork.") || l.starts_with("PASS  pin."),
            "{text}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l == "SKIP  fingerprint: not selected (--only)"),
        "{text}"
    );
}

/// `--only` a capability the plugin does not have runs nothing, and says
/// so with a failure instead of "0 passed": the `file` plugin cannot fork.
#[test]
fn only_a_capability_the_plugin_lacks_says_so_and_fails() {
    let wasm = tether_testkit::first_party_plugin("tether_plugin_file");
    let out = conformance(&[wasm.to_str().unwrap(), "--only", "fork"]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nothing to check: the file plugin does not have FORK"),
        "{text}"
    );
    assert!(err.contains("it declares FINGERPRINT"), "{text}");
    assert!(
        !stdout_lines(&out).iter().any(|l| l.contains("passed")),
        "{text}"
    );
    // One capability it has among those asked for: that one is checked.
    let out = conformance(&[wasm.to_str().unwrap(), "--only", "fork", "--only", "diff"]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        stdout_lines(&out)
            .iter()
            .any(|l| l.starts_with("PASS  diff.")),
        "{text}"
    );
}

/// Piped into `head`, which stops reading after one line: the suite still
/// runs to its end and exits with its own status, with no "Broken pipe".
#[test]
fn a_reader_that_stops_early_is_no_error() {
    let wasm = memory_plugin();
    let dir = tempfile::tempdir().unwrap();
    let err_file = dir.path().join("err.txt");
    // `sh` has no PIPESTATUS: the conformance runner's status is written by
    // a wrapper around it, on the left of the pipe.
    let script = r#"{ "$0" "$1" 2>"$2"; echo "$?" >"$3"; } | head -n 1"#;
    let status_file = dir.path().join("status.txt");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_tether-conformance"))
        .arg(&wasm)
        .arg(&err_file)
        .arg(&status_file)
        .env("TETHER_CACHE_DIR", common::cache_dir())
        .output()
        .expect("run sh");
    let text = describe(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        1,
        "{text}"
    );
    let err = std::fs::read_to_string(&err_file).unwrap();
    assert!(!err.to_lowercase().contains("broken pipe"), "{err}");
    let status = std::fs::read_to_string(&status_file).unwrap();
    assert_eq!(status.trim(), "0", "stderr: {err}");
}

#[test]
fn broken_cas_fails_the_race() {
    let wasm = test_plugin("broken_cas");
    let out = conformance(&[wasm.to_str().unwrap()]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let lines = stdout_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL  conditional_ref.one-winner: ")),
        "{text}"
    );
    let (_, failed, _) = summary(&lines);
    assert!(failed >= 1, "{text}");
}

#[test]
fn unstable_fingerprint_fails_stability() {
    let wasm = test_plugin("unstable_fingerprint");
    let out = conformance(&[wasm.to_str().unwrap(), "--json"]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect(&text);
    let stable = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fingerprint.stable")
        .unwrap_or_else(|| panic!("no fingerprint.stable check\n{text}"));
    assert_eq!(stable["status"], "fail", "{text}");
    assert!(
        stable["reason"].as_str().unwrap().contains("differ"),
        "{text}"
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(conformance(&[]).status.code(), Some(2));
    assert_eq!(
        conformance(&["x.wasm", "--only", "teleport"]).status.code(),
        Some(2)
    );
    assert_eq!(conformance(&["x.wasm", "--bogus"]).status.code(), Some(2));
}

#[test]
fn a_file_that_is_not_a_plugin_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-plugin.wasm");
    std::fs::write(&path, b"definitely not wasm").unwrap();
    let out = conformance(&[path.to_str().unwrap()]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot load the plugin") && stderr.contains("not a WebAssembly component"),
        "{text}"
    );

    let out = conformance(&[dir.path().join("missing.wasm").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn a_plugin_without_harness_exits_1() {
    // `hostile` (tests/plugins) exports only the backend.
    let wasm = test_plugin("hostile");
    let out = conformance(&[wasm.to_str().unwrap()]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the conformance suite needs the plugin to export tether:backend/harness"),
        "{text}"
    );
}

#[test]
fn a_sql_plugin_passes_with_a_database_scratch_whose_password_stays_with_the_host() {
    let pg = tether_testkit::Postgres::start();
    let wasm = test_plugin("sql_probe");
    let dir = tempfile::tempdir().unwrap();
    let url = pg.url("postgres");
    let out = conformance(&[
        wasm.to_str().unwrap(),
        "--json",
        "--scratch",
        dir.path().to_str().unwrap(),
        "--scratch",
        &url,
    ]);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains(tether_testkit::Postgres::PASSWORD), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let checks = report["checks"].as_array().expect("checks");
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "fingerprint.stable" && c["status"] == "pass"),
        "{text}"
    );
    // The harness really made its tables in the scratch database.
    let tables = pg.psql(
        "postgres",
        "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'probe_%'",
    );
    assert_ne!(tables.trim(), "0", "{text}");
}
