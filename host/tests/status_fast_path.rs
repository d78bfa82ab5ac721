//! A plain `status` after a snapshot is served from the cached snapshot and
//! the cached plugin descriptors: no plugin is loaded, compiled or run. A
//! command that runs one kind's plugin loads that plugin only.

mod support;

use support::{Dataset, Vcs, describe};

for_each_vcs!(
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
