//! Scale (issue 28): what the speed of a dataset of thousands of objects
//! relies on, pinned by counts, never by timings (`cargo xtask bench` times
//! it):
//!
//! - `add` reads no manifest but the one it writes;
//! - a commit syncs tether's own files a fixed number of times, whatever the
//!   number of objects, and the stores' pin writes once per filesystem, not
//!   once per put (counted from the sync log, `RUST_LOG=tether::sync=debug`);
//! - a commit reads every manifest twice (to plan, and under the lock to
//!   apply), counted from `RUST_LOG=tether::manifests=debug`;
//! - a commit killed half-way through pinning 1,000 objects re-runs to the
//!   pins and manifests its plan named, the pins it made counted as made;
//! - a commit of 1,200 objects lands under a limit of 256 open files;
//! - under jj, a `status` while jj's operation heads stand starts no jj
//!   process, and one after any jj operation (here or in another workspace,
//!   `jj undo`) starts one;
//! - a plugin call's future is small until it runs (a fan-out holds one
//!   per object), measured with `size_of_val`;
//! - plugin instances are counted by the runtime: objects on one store, asked
//!   in turn, share one instance (and objects on different stores never do);
//!   an instance that trapped is never reused; a first commit takes at most
//!   three instances per object (fingerprint, identity and capabilities in
//!   one; the apply's check of where the object stands; the pin and its
//!   listing in one), counted from `tether`'s exit log
//!   (`RUST_LOG=tether::runtime=debug`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use tether::plugin::{BackendError, Runtime, RuntimeConfig};
use tether_testkit::{block_on, cache_dir, first_party_plugin, test_plugin};

use crate::support::{Dataset, JjCallLog, MemoryStore, Vcs, describe, stderr};

/// `n` memory objects `o00000`, ..., each in a store of its own. The first is
/// registered with `tether add`; the others get its manifest with their own
/// store, written as files (what `add` writes, without `n` processes).
pub(crate) fn many(d: &Dataset, n: usize) -> Vec<MemoryStore> {
    let stores: Vec<MemoryStore> = (0..n)
        .map(|i| d.memory_store(&format!("s{i:05}")))
        .collect();
    d.add_memory("o00000", &stores[0]);
    let objects = d.root().join(".tether/objects");
    let template = std::fs::read_to_string(objects.join("o00000.toml")).unwrap();
    let first = stores[0].root.display().to_string();
    for (i, s) in stores.iter().enumerate().skip(1) {
        let text = template.replace(&first, &s.root.display().to_string());
        std::fs::write(objects.join(format!("o{i:05}.toml")), text).unwrap();
    }
    stores
}

/// A commit of more objects than the process may hold open files lands:
/// nothing in it keeps a descriptor per object (the staged manifests were
/// once each an open temporary file, so 1,024 objects, the usual limit,
/// failed with "too many open files"), and a status and a second commit
/// of them all work under the same limit.
#[test]
fn a_commit_of_more_objects_than_open_files_allowed_lands() {
    const N: usize = 1200;
    const OPEN_FILES: u64 = 256;
    let d = Dataset::init();
    let stores = many(&d, N);
    let limited = |args: &[&str]| {
        let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
        c.args(args);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                let limit = rustix::process::Rlimit {
                    current: Some(OPEN_FILES),
                    maximum: None,
                };
                let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile);
                rustix::process::setrlimit(
                    rustix::process::Resource::Nofile,
                    rustix::process::Rlimit {
                        maximum: hard.maximum,
                        ..limit
                    },
                )
                .map_err(std::io::Error::from)
            });
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "tether {} with {OPEN_FILES} open files: {}",
            args.join(" "),
            describe(&out)
        );
        out
    };
    limited(&["commit", "-m", "first pins"]);
    for (i, s) in stores.iter().enumerate() {
        assert_eq!(s.tags().len(), 1, "o{i:05} pinned once");
        s.write(json!({"round": 1}), "round 1");
    }
    limited(&["status", "--snapshot"]);
    limited(&["commit", "-m", "round 1"]);
    let recorded = || {
        for (i, s) in stores.iter().enumerate() {
            let key = format!("o{i:05}");
            assert_eq!(
                d.manifest(&key)["state"]["snapshot_id"].as_str(),
                Some(s.head().as_str()),
                "{key}"
            );
        }
    };
    recorded();

    // Each commit kept the manifests it replaced as spares, and the next
    // one writes its manifests into them (all but the first two): no file
    // created or freed per object.
    let inodes = |dir: &str| -> std::collections::BTreeSet<u64> {
        std::fs::read_dir(d.root().join(dir))
            .unwrap()
            .map(|e| std::os::unix::fs::MetadataExt::ino(&e.unwrap().metadata().unwrap()))
            .collect()
    };
    let spares = inodes(".tether/cache/spare");
    assert_eq!(spares.len(), N, "a spare per replaced manifest");
    for s in &stores {
        s.write(json!({"round": 2}), "round 2");
    }
    limited(&["commit", "-m", "round 2"]);
    recorded();
    let manifests = inodes(".tether/objects");
    assert_eq!(manifests.intersection(&spares).count(), N - 2);
    assert_eq!(inodes(".tether/cache/spare").len(), N);
    d.ok(&["status"]);
}

/// `tether ARGS` with `RUST_LOG=filter`: how the tests here count what a run
/// did from its debug log.
fn logged(d: &Dataset, args: &[&str], filter: &str) -> Output {
    d.command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .args(args)
        .env("RUST_LOG", filter)
        .output()
        .unwrap()
}

/// `tether ARGS` with tether's sync log on: the output, and the files it
/// synced, one entry per sync.
fn synced(d: &Dataset, args: &[&str]) -> (Output, Vec<String>) {
    let out = logged(d, args, "tether::sync=debug");
    let syncs = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("tether::sync"))
        .map(|l| l.rsplit("path=").next().unwrap_or_default().to_string())
        .collect();
    (out, syncs)
}

#[test]
fn add_reads_no_other_manifest() {
    let d = Dataset::init();
    let a = d.memory_store("a");
    d.add_memory("a", &a);
    // A manifest add would fail to parse, had it read it.
    std::fs::write(d.root().join(".tether/objects/broken.toml"), "kind = [").unwrap();
    let b = d.memory_store("b");
    d.add_memory("b", &b);
    assert!(d.root().join(".tether/objects/b.toml").is_file());
    // The key is still checked: the file of a taken key is there.
    let system = format!("system={}", b.root.display());
    let out = d.tether(&["add", "a", "--kind", "memory", "--set", &system]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains("key \"a\" is already taken"),
        "{}",
        describe(&out)
    );
    // The broken one is still broken for whoever reads it.
    let out = d.tether(&["status"]);
    assert!(!out.status.success(), "{}", describe(&out));
}

/// A commit of 5 objects and one of 90 (more than a fan-out runs at once)
/// sync tether's files as often, the journal three times (started, the
/// pins' wave, done): nothing per object. The stores' writes of the pins
/// (each store a directory of its own here) are synced together, once for
/// their one filesystem, before the pins' wave is: no sync per put.
#[test]
fn commit_syncs_do_not_grow_with_the_objects() {
    let mut counts = Vec::new();
    for n in [5, 90] {
        let d = Dataset::init();
        let stores = many(&d, n);
        let (first, first_syncs) = synced(&d, &["commit", "-m", "first pins"]);
        assert!(first.status.success(), "{}", describe(&first));
        for s in &stores {
            s.write(json!({"n": 1}), "changed");
        }
        let (again, syncs) = synced(&d, &["commit", "-m", "all changed"]);
        assert!(again.status.success(), "{}", describe(&again));
        let journal = |s: &[String]| s.iter().filter(|p| p.ends_with("ops.jsonl")).count();
        assert_eq!(journal(&first_syncs), 3, "{n}: {first_syncs:#?}");
        assert_eq!(journal(&syncs), 3, "{n}: {syncs:#?}");
        let data = format!("{}/", d.data().display());
        let in_stores = |s: &[String]| s.iter().filter(|p| p.starts_with(&data)).count();
        assert_eq!(in_stores(&first_syncs), 1, "{n}: {first_syncs:#?}");
        assert_eq!(in_stores(&syncs), 1, "{n}: {syncs:#?}");
        // The stores are synced before the wave that records their pins
        // (the journal's second sync: started, wave, done).
        let store_sync = syncs.iter().position(|p| p.starts_with(&data)).unwrap();
        let (wave_sync, _) = syncs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.ends_with("ops.jsonl"))
            .nth(1)
            .unwrap();
        assert!(store_sync < wave_sync, "{n}: {syncs:#?}");
        let manifests = syncs.iter().filter(|p| p.contains("/objects/")).count();
        assert!(
            manifests <= 2,
            "{n}: manifests synced in one pass: {syncs:#?}"
        );
        counts.push((first_syncs.len(), syncs.len()));
    }
    assert_eq!(counts[0], counts[1], "the same syncs for 5 and 90 objects");
    assert!(counts[1].1 <= 12, "{counts:?}");
}

/// How many times one `tether` run read every manifest, from its log.
fn manifest_reads(d: &Dataset, args: &[&str]) -> usize {
    let out = logged(d, args, "tether::manifests=debug");
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("read every manifest"))
        .count()
}

/// A commit reads the manifests once to plan (its bookmark and staleness
/// checks share that read) and once under the lock to apply, whether it
/// pins every object or some; a `status` reads them once.
#[test]
fn a_commit_reads_every_manifest_twice() {
    let d = Dataset::init();
    let stores = many(&d, 30);
    assert_eq!(manifest_reads(&d, &["status"]), 1);
    assert_eq!(manifest_reads(&d, &["commit", "-m", "first pins"]), 2);
    stores[3].write(json!({"n": 1}), "changed");
    assert_eq!(manifest_reads(&d, &["commit", "-m", "one changed"]), 2);
}

/// The `started` record of the newest operation in `d`'s journal, with the
/// `progress` details recorded for it.
fn newest_entry(d: &Dataset) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(d.root().join(".tether/ops.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let started = records
        .iter()
        .rev()
        .find(|r| r["record"] == "started")
        .unwrap()
        .clone();
    let progress = records
        .iter()
        .filter(|r| r["record"] == "progress" && r["op"] == started["id"])
        .map(|r| r["detail"].clone())
        .collect();
    (started, progress)
}

/// `commit` of 1,000 objects killed right after its 500th pin was journaled:
/// the journal holds a record for every pin that landed before the kill but
/// those in flight, running the commit again pins the rest and lands the
/// manifests its plan named, and every pin the first run recorded as made
/// is recorded as made by this commit (as if it had not been interrupted).
#[test]
fn a_commit_killed_mid_way_through_1000_objects_reruns_to_the_same_pins() {
    const N: usize = 1000;
    const KILLED_AFTER: usize = 500;
    let d = Dataset::init();
    let stores = many(&d, N);
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .args(["commit", "-m", "first pins"])
        .env("TETHER_FAULT", format!("journal.progress#{KILLED_AFTER}"))
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(9), "killed: {}", describe(&out));

    let (started, progress) = newest_entry(&d);
    assert_eq!(started["command"], "commit");
    assert_eq!(
        progress.len(),
        KILLED_AFTER,
        "each landed pin recorded as it landed"
    );
    let planned: BTreeMap<String, (String, Value)> = started["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["key"].as_str().unwrap().to_string(),
                (
                    a["params"]["pin_id"].as_str().unwrap().to_string(),
                    a["params"]["state"].clone(),
                ),
            )
        })
        .collect();
    assert_eq!(planned.len(), N);
    let made_first: BTreeSet<String> = progress
        .iter()
        .filter(|p| p["created"] == true)
        .map(|p| p["pinned"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(made_first.len(), KILLED_AFTER);
    let tags: usize = stores.iter().map(|s| s.tags().len()).sum();
    // The pins in flight when the process died may have landed unrecorded.
    assert!(
        (KILLED_AFTER..=KILLED_AFTER + 64).contains(&tags),
        "{tags} pins in the stores after the kill"
    );

    d.ok(&["commit", "-m", "first pins"]);
    let mut found = 0;
    for (i, s) in stores.iter().enumerate() {
        let key = format!("o{i:05}");
        let m = d.manifest(&key);
        let (pin_id, state) = &planned[&key];
        assert_eq!(m["pin"]["id"].as_str(), Some(pin_id.as_str()), "{key}");
        let pin_ref = format!("tether.{pin_id}");
        assert_eq!(m["pin"]["ref"].as_str(), Some(pin_ref.as_str()), "{key}");
        assert_eq!(
            m["state"]["snapshot_id"].as_str(),
            state["snapshot_id"].as_str(),
            "{key}"
        );
        assert_eq!(s.tags(), vec![pin_ref], "{key}: exactly its one pin");
        // `[pin] created = false` is written only for a pin found there.
        let made = m["pin"].get("created").is_none();
        if made_first.contains(&key) {
            assert!(made, "{key}: the first run made it, as its journal says");
        } else if !made {
            found += 1;
        }
    }
    // Only a pin in flight at the kill (landed, its record not yet written)
    // reads as found.
    assert!(found <= 64, "{found} pins read as found");
    d.ok(&["verify"]);
    assert!(d.uncommitted().is_empty(), "{:?}", d.uncommitted());
}

/// The jj processes `tether status` starts, with their arguments, through a
/// logging wrapper.
fn jj_calls_of_status(d: &Dataset, jj: &JjCallLog) -> (String, Vec<String>) {
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_JJ", &jj.wrapper)
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    (String::from_utf8_lossy(&out.stdout).into_owned(), jj.take())
}

#[test]
fn status_on_jj_starts_no_jj_process_while_the_operation_heads_stand() {
    let d = Dataset::init_in(Vcs::Jj);
    let s = d.memory_store("s");
    s.write(json!({"n": 0}), "first");
    d.add_memory("obj", &s);
    d.ok(&["commit", "-m", "baseline"]);
    let jj = JjCallLog::new(&d.tmp().join("counting"));
    // The first run through the wrapper checks its version (remembered per
    // executable): not counted.
    jj_calls_of_status(&d, &jj);
    let (before, calls) = jj_calls_of_status(&d, &jj);
    assert_eq!(calls, Vec::<String>::new(), "no jj process");
    let (_, calls) = jj_calls_of_status(&d, &jj);
    assert!(calls.is_empty(), "{calls:#?}");

    // An operation in another workspace moves the heads: one `jj log`.
    let other = d.tmp().join("second");
    d.add_workspace(&other);
    let out = d
        .command(tether_testkit::jj(), &other)
        .args(["new", "-m", "elsewhere"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let (after, calls) = jj_calls_of_status(&d, &jj);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert!(calls[0].contains("--ignore-working-copy log"), "{calls:#?}");
    assert_eq!(after, before, "nothing this checkout sees changed");
    let (_, calls) = jj_calls_of_status(&d, &jj);
    assert!(calls.is_empty(), "{calls:#?}");

    // `jj new` here leaves the bookmark: the next status reads jj again and
    // says so, and `jj undo` takes it back, read again too.
    d.jj(&["new"]);
    let (left, calls) = jj_calls_of_status(&d, &jj);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let left: Value = serde_json::from_str(&left).unwrap();
    assert_ne!(left["bookmark_drift"], json!([]), "{left:#}");
    d.jj(&["undo"]);
    let (back, calls) = jj_calls_of_status(&d, &jj);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let back: Value = serde_json::from_str(&back).unwrap();
    assert_eq!(back["bookmark_drift"], json!([]), "{back:#}");
    let (_, calls) = jj_calls_of_status(&d, &jj);
    assert!(calls.is_empty(), "{calls:#?}");
}

fn counting_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout: Duration::from_millis(1500),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// The memory plugin, loaded into `rt`.
async fn memory_plugin(rt: &Runtime) -> std::sync::Arc<tether::plugin::Plugin> {
    rt.load_file(&first_party_plugin("tether_plugin_memory"))
        .await
        .expect("load memory")
}

/// A fan-out holds one future per object before any runs (10,000 for a
/// commit of 10,000 objects): a plugin call's future stays small until it
/// runs, its call state boxed (held inline, it was tens of kilobytes).
#[test]
fn a_waiting_plugin_call_is_small() {
    block_on(async {
        let rt = counting_runtime();
        let memory = memory_plugin(&rt).await;
        let object = memory.object(&json!({"system": "/nonexistent"}), &json!({}));
        let state = json!({"snapshot_id": "x"});
        let sizes = [
            (
                "fingerprint",
                std::mem::size_of_val(&object.fingerprint(None)),
            ),
            ("identity", std::mem::size_of_val(&object.identity())),
            ("pin", std::mem::size_of_val(&object.pin(&state, "p"))),
            (
                "verify",
                std::mem::size_of_val(&object.verify(&state, None, false)),
            ),
        ];
        for (call, size) in sizes {
            assert!(size <= 2048, "a waiting {call} is {size} bytes");
        }
    });
}

/// Twenty memory objects on one store (a branch each), each asked its
/// identity and fingerprinted in turn, take one instance between them: they
/// reach exactly the same things. Five objects on five stores take five.
#[test]
fn objects_on_one_store_share_one_instance_and_other_stores_do_not() {
    block_on(async {
        let rt = counting_runtime();
        let memory = memory_plugin(&rt).await;
        let dir = tempfile::tempdir().unwrap();
        let made = |name: &str| {
            let scratch = dir.path().join(name);
            let harness = memory
                .harness(scratch.to_str().unwrap(), &json!({}))
                .expect("harness");
            async move { harness.new_object().await.expect("a memory store") }
        };
        let one = made("one").await;
        let before = rt.stats();
        for i in 0..20 {
            let mut locator = one.clone();
            locator["branch"] = json!(format!("b{i}"));
            let object = memory.object(&locator, &json!({}));
            assert_eq!(object.identity().await.unwrap()["system"], one["system"]);
            let state = object.fingerprint(Some("main")).await.unwrap();
            assert!(state["snapshot_id"].is_string(), "{state}");
        }
        let after = rt.stats();
        assert_eq!(after.instantiated - before.instantiated, 1, "{after:?}");
        assert_eq!(after.reused - before.reused, 39, "{after:?}");

        let mut others = Vec::new();
        for i in 0..5 {
            others.push(made(&format!("other{i}")).await);
        }
        let before = rt.stats();
        for locator in &others {
            let object = memory.object(locator, &json!({}));
            object.fingerprint(None).await.unwrap();
        }
        let after = rt.stats();
        assert_eq!(after.instantiated - before.instantiated, 5, "{after:?}");
        assert_eq!(
            after.reused, before.reused,
            "no store's instance served another"
        );
    });
}

/// A warm instance serves the next object with the same grants only while
/// its calls end cleanly: one that panics or runs past its deadline on it is
/// dropped, and the next call starts afresh. The deadline applies to each
/// call on a reused instance as to a fresh one.
#[test]
fn an_instance_that_trapped_is_never_reused() {
    block_on(async {
        let rt = counting_runtime();
        let hostile = rt
            .load_file(&test_plugin("hostile"))
            .await
            .expect("load hostile");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("granted");
        std::fs::create_dir_all(&root).unwrap();
        let object =
            |attack: &str| hostile.object(&json!({"root": root, "attack": attack}), &json!({}));
        let normal = object("none");
        let before = rt.stats();
        assert_eq!(normal.fingerprint(None).await.unwrap(), json!({"ok": true}));
        for attack in ["panic", "loop"] {
            // The warm instance the normal object left takes the attack...
            let reused = rt.stats().reused;
            let err = object(attack).fingerprint(None).await.unwrap_err();
            assert_eq!(rt.stats().reused, reused + 1, "{attack}");
            match attack {
                "panic" => assert!(matches!(err, BackendError::Crashed { .. }), "{err:?}"),
                _ => assert!(matches!(err, BackendError::Deadline { .. }), "{err:?}"),
            }
            // ...and is gone: the normal object gets a fresh one.
            let instantiated = rt.stats().instantiated;
            assert_eq!(normal.fingerprint(None).await.unwrap(), json!({"ok": true}));
            assert_eq!(rt.stats().instantiated, instantiated + 1, "{attack}");
        }
        assert_eq!(rt.stats().instantiated - before.instantiated, 3);
    });
}

/// The plugin instances one `tether` run started, from its exit log.
fn instances(d: &Dataset, args: &[&str]) -> (Output, u64) {
    let out = logged(d, args, "tether::runtime=debug");
    let log = String::from_utf8_lossy(&out.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("plugin instances"))
        .unwrap_or_else(|| panic!("no instance count logged: {}", describe(&out)));
    let count = line
        .split("instantiated=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable count: {line}"));
    (out, count)
}

/// A first commit of 90 memory objects (each a store of its own) takes no
/// more than three instances per object, and a `status --snapshot` one
/// (each also describing the built-in plugins, once each at most).
#[test]
fn a_commit_takes_three_instances_per_object() {
    const N: u64 = 90;
    let d = Dataset::init();
    many(&d, N as usize);
    // Besides the objects' instances, a command may describe each built-in
    // plugin once (an instance each): a constant, whatever the count.
    let describing = tether::plugin::builtin::BUILTIN_PLUGINS.len() as u64;
    let (out, n) = instances(&d, &["commit", "-m", "first pins"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(n <= 3 * N + describing, "{n} instances for {N} objects");
    let (out, n) = instances(&d, &["status", "--snapshot"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(n <= N + describing, "{n} instances for {N} objects");
}
