//! A plain `status` after a snapshot is served from the cached snapshot and
//! the cached plugin descriptors: no plugin is loaded, compiled or run.

mod support;

use support::{Dataset, Vcs, describe};

for_each_vcs!(
    a_cached_status_loads_no_plugin,
    a_status_without_cached_descriptors_still_knows_the_tiers,
);

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
