//! `behind` (spec/06, "Positions, and `tether pull`"; spec/09, `status`):
//! an object whose system has no branches (a Delta table, a directory) sits
//! at its pin on every bookmark, the trunk included. On the trunk, its
//! system moving past the pin shows as `behind` (exit 0, with and without a
//! fresh snapshot), `commit` leaves it at its pin, and `pull` takes it.
//! Real Delta tables written by Python's `deltalake`, on git and jj.

use std::path::Path;

use crate::support::{Dataset, Vcs, describe};
use serde_json::{Value, json};

/// Write rows `ids` to the Delta table at `uri` with Python's deltalake
/// (`mode` "append" or "overwrite"); the table's version after it.
fn delta_write(uri: &Path, ids: &[i64], mode: &str) -> u64 {
    const SCRIPT: &str = r#"
import json, os, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
uri, ids, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
write_deltalake(uri, pa.table({"id": ids}), mode=mode)
print(DeltaTable(uri).version())
sys.stdout.flush()
os._exit(0)
"#;
    let out = std::process::Command::new(tether_testkit::python())
        .args(["-c", SCRIPT])
        .arg(uri)
        .arg(serde_json::to_string(ids).unwrap())
        .arg(mode)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "deltalake failed:\n{}",
        describe(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("python printed:\n{}", describe(&out)))
}

/// Each object's `state` in `status ARGS --json` (which must exit 0).
fn states(d: &Dataset, args: &[&str]) -> Value {
    let r = d.json(args, 0);
    let mut out = serde_json::Map::new();
    for o in r["objects"].as_array().expect("objects") {
        out.insert(o["key"].as_str().unwrap().to_owned(), o["state"].clone());
    }
    Value::Object(out)
}

fn version(d: &Dataset, key: &str) -> i64 {
    d.manifest(key)["state"]["version"]
        .as_integer()
        .unwrap_or_else(|| panic!("a version in {:?}", d.manifest(key)))
}

fn a_branchless_object_past_its_pin_is_behind_until_pull(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let events = d.data().join("events");
    assert_eq!(delta_write(&events, &[1, 2], "overwrite"), 0);
    let dir = d.data().join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "one").unwrap();
    let store = d.memory_store("labels");
    d.add_memory("mem", &store);
    d.ok(&["add", "tbl", "--kind", "delta", events.to_str().unwrap()]);
    d.ok(&[
        "add",
        "scratch",
        "--kind",
        "file",
        "--file",
        "versioned",
        dir.to_str().unwrap(),
    ]);
    d.ok(&["commit", "-m", "baseline"]);
    assert_eq!(version(&d, "tbl"), 0);
    let scratch_state = d.manifest("scratch")["state"].clone();

    // Another tool writes the table and the directory; the store's branch moves.
    assert_eq!(delta_write(&events, &[3], "append"), 1);
    std::fs::write(dir.join("a.txt"), "two, longer").unwrap();
    store.write(json!({"labels": "1"}), "relabel");

    let fresh = states(&d, &["status", "--snapshot"]);
    assert_eq!(
        fresh,
        json!({"mem": "modified", "scratch": "behind", "tbl": "behind"}),
        "on the trunk a branch-less object past its pin is behind"
    );
    let (out, err) = d.run(&["status", "--snapshot"], 0);
    assert!(
        out.lines().any(|l| l.starts_with("behind tbl [delta/")),
        "{out}"
    );
    assert_eq!(err, "", "behind is news, not an error");
    // The cached snapshot says the same without contacting anything.
    assert_eq!(states(&d, &["status", "--no-snapshot"]), fresh);

    // commit pins the moved branch and leaves the branch-less objects at their pins.
    let history = d.history();
    let out = d.ok(&["commit", "-m", "relabel"]);
    assert!(out.contains("pinned mem -> "), "{out}");
    assert!(
        !out.contains("tbl") && !out.contains("scratch"),
        "commit does not take what only pull takes:\n{out}"
    );
    assert_eq!(d.history().len(), history.len() + 1);
    assert_eq!(version(&d, "tbl"), 0);
    assert_eq!(d.manifest("scratch")["state"], scratch_state);
    assert_eq!(
        states(&d, &["status", "--snapshot"]),
        json!({"mem": "clean", "scratch": "behind", "tbl": "behind"})
    );
    // Named on its own, or with --no-snapshot, it is still not committed.
    let history = d.history();
    for args in [
        &["commit", "tbl", "-m", "only the table"][..],
        &["commit", "-m", "cached", "--no-snapshot"],
    ] {
        let out = d.ok(args);
        assert!(out.contains("nothing to commit"), "{args:?}: {out}");
        assert_eq!(d.history(), history, "{args:?} made no commit");
    }
    let r = d.json(&["commit", "-m", "json"], 0);
    assert_eq!(r["pinned"], json!({}), "{r}");
    assert_eq!(r["vcs_commit"], Value::Null, "{r}");

    // pull takes both, in one commit.
    let out = d.ok(&["pull"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("pulled tbl version=0 -> version=1")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("pulled scratch ")),
        "{out}"
    );
    assert_eq!(d.history().len(), history.len() + 1);
    assert_eq!(version(&d, "tbl"), 1);
    assert_ne!(d.manifest("scratch")["state"], scratch_state);
    assert_eq!(
        states(&d, &["status", "--snapshot"]),
        json!({"mem": "clean", "scratch": "clean", "tbl": "clean"})
    );
    assert!(d.uncommitted().is_empty(), "{:?}", d.uncommitted());

    // Off the trunk the table sits at its pin and is not read: clean; back
    // on the trunk it is behind again.
    d.ok(&["new", "-b", "side"]);
    assert_eq!(delta_write(&events, &[4], "append"), 2);
    assert_eq!(
        states(&d, &["status", "--snapshot"])["tbl"],
        "clean",
        "a bookmark does not read a branch-less object"
    );
    d.ok(&["new", "main"]);
    assert_eq!(states(&d, &["status", "--snapshot"])["tbl"], "behind");
    d.ok(&["pull"]);
    assert_eq!(version(&d, "tbl"), 2);
}

crate::for_each_vcs!(a_branchless_object_past_its_pin_is_behind_until_pull);

/// A remote `file --file versioned` object is Addressable through its
/// version id once committed (spec/11, `file`, "Tier"): `status` says so and
/// marks it recoverable, where a plain directory is Observed.
#[test]
fn status_shows_a_versioned_remote_file_as_addressable() {
    use tether_testkit::S3Server;
    let server = S3Server::start("tether-tier");
    let bucket = server.bucket();
    crate::file_cloud::s3(
        &server,
        &[
            &["versioning", bucket],
            &["put", bucket, "raw/plate1.csv", "first"],
        ],
    );
    let d = Dataset::init();
    d.write_secrets(&server.secrets_toml());
    let uri = format!("s3://{bucket}/raw/plate1.csv");
    d.ok(&[
        "add",
        "plate",
        &uri,
        "--kind",
        "file",
        "--file",
        "versioned",
    ]);
    d.ok(&["commit", "-m", "first"]);
    let r = d.json(&["status", "--snapshot"], 0);
    let plate = &r["objects"][0];
    assert_eq!(plate["key"], "plate", "{r}");
    assert_eq!(plate["tier"], "addressable", "{r}");
    assert_eq!(plate["recoverable"], true, "{r}");
    let out = d.ok(&["status"]);
    let line = out
        .lines()
        .find(|l| l.contains(" plate "))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(line, "clean plate [file/addressable]", "{out}");

    // A new version on the trunk: behind, which pull records.
    crate::file_cloud::s3(&server, &[&["put", bucket, "raw/plate1.csv", "second"]]);
    let r = d.json(&["status", "--snapshot"], 0);
    assert_eq!(r["objects"][0]["state"], "behind", "{r}");
    d.ok(&["pull"]);
    let r = d.json(&["status", "--snapshot"], 0);
    assert_eq!(r["objects"][0]["state"], "clean", "{r}");
    assert_eq!(r["objects"][0]["tier"], "addressable", "{r}");
}
