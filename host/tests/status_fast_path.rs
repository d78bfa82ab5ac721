//! A plain `status` after a snapshot is served from the cached snapshot and
//! the cached plugin descriptors: no plugin is loaded, compiled or run. A
//! command that runs one kind's plugin loads that plugin only. A status with
//! nothing new in the op log or history replays its drift memo instead of
//! reading both again.

use crate::support::{Dataset, Vcs, describe};

for_each_vcs!(
    a_second_status_reads_neither_the_op_log_nor_history,
    a_cached_status_loads_no_plugin,
    a_status_without_cached_descriptors_still_knows_the_tiers,
    a_command_on_one_kind_loads_only_that_plugin,
);

/// Plugin components one logged run of `tether ARGS` loaded (compiled or
/// from the compiled-component cache), and its output.
fn loads(d: &Dataset, cache: Option<&std::path::Path>, args: &[&str]) -> (usize, String) {
    let mut cmd = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    cmd.env("RUST_LOG", "tether=debug").args(args);
    if let Some(cache) = cache {
        cmd.env("TETHER_CACHE_DIR", cache);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let n = stderr
        .lines()
        .filter(|l| l.contains("loaded plugin component"))
        .count();
    (n, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn a_command_on_one_kind_loads_only_that_plugin(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["commit", "-m", "one"]);
    // Every built-in has described itself by now (the cache is shared).
    let (n, stdout) = loads(&d, None, &["verify", "--all-history"]);
    assert_eq!(n, 1, "only the memory plugin runs:\n{stdout}");
    assert!(stdout.contains("ok "), "{stdout}");
    let (n, stdout) = loads(&d, None, &["status", "--snapshot"]);
    assert_eq!(n, 1, "only the memory plugin runs:\n{stdout}");
    assert!(stdout.contains("clean s [memory/forkable]"), "{stdout}");
    // With no cached descriptors the kinds are unknown until every built-in
    // has described itself: all of them load, and the answer is the same.
    let cache = tempfile::tempdir().unwrap();
    let (n, stdout) = loads(&d, Some(cache.path()), &["verify"]);
    assert!(n > 1, "{n} load(s):\n{stdout}");
    assert!(stdout.contains("ok "), "{stdout}");
    let (n, _) = loads(&d, Some(cache.path()), &["verify"]);
    assert_eq!(n, 1, "the first run cached every descriptor");
}

fn a_cached_status_loads_no_plugin(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["status", "--snapshot"]);
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("RUST_LOG", "tether=debug")
        .args(["status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("new s [memory/forkable]"),
        "{}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("loaded plugin component"),
        "a plugin was loaded:\n{}",
        describe(&out)
    );
}

fn a_status_without_cached_descriptors_still_knows_the_tiers(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["status", "--snapshot"]);
    // Another cache root: no descriptors there yet, so the plugins load.
    let cache = tempfile::tempdir().unwrap();
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_CACHE_DIR", cache.path())
        .args(["status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("new s [memory/forkable]"),
        "{}",
        describe(&out)
    );
    assert!(
        cache.path().join("descriptors").is_dir(),
        "describing a plugin caches its descriptor"
    );
}

/// Whether one logged `status --json` replayed the drift memo, and its JSON.
fn status_replayed(d: &Dataset) -> (bool, serde_json::Value) {
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("RUST_LOG", "tether=debug")
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let replayed = String::from_utf8_lossy(&out.stderr).contains("drift memo replayed");
    (replayed, serde_json::from_slice(&out.stdout).unwrap())
}

/// `status` checks every dataset commit the op log recorded against visible
/// history: the op log grows a few KB per commit and history is walked whole.
/// With neither changed since the last status, the conclusion is replayed;
/// a commit (new op log entry, new history) computes it again, and so does
/// a dataset commit vanishing behind tether's back, which is then reported.
fn a_second_status_reads_neither_the_op_log_nor_history(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["commit", "-m", "one"]);
    store.write(serde_json::json!({"n": 2}), "two");
    d.ok(&["commit", "-m", "two"]);
    let (replayed, first) = status_replayed(&d);
    assert!(!replayed);
    assert_eq!(first["vcs_drift"], serde_json::json!([]), "{first}");
    let (replayed, again) = status_replayed(&d);
    assert!(replayed, "nothing changed");
    assert_eq!(again, first);

    store.write(serde_json::json!({"n": 3}), "three");
    d.ok(&["commit", "-m", "three"]);
    assert!(!status_replayed(&d).0, "a commit computes it again");
    assert!(status_replayed(&d).0);

    // The newest dataset commit vanishes behind tether's back.
    match vcs {
        Vcs::Git => {
            d.git(&["reset", "--hard", "HEAD~1"]);
        }
        Vcs::Jj | Vcs::JjColocated => {
            d.jj(&["undo"]);
        }
    }
    let (replayed, after) = status_replayed(&d);
    assert!(!replayed, "history changed");
    assert_eq!(
        after["vcs_drift"].as_array().map(Vec::len),
        Some(1),
        "{after}"
    );
}
