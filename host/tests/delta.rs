//! The `delta` plugin against the real Delta Lake library: Python
//! `deltalake` 1.6.6 (the pinned environment `cargo xtask setup` makes)
//! creates tables, appends, overwrites, deletes, evolves the schema,
//! checkpoints, cleans up the log and vacuums; the `tether` binary records
//! versions, diffs, verifies and opens them, and Python reads the versions
//! tether recorded. Local paths, and `s3://` on a local S3 server.

use std::path::Path;
use std::process::Output;

use crate::support::{Dataset, describe, lines, stdout};
use serde_json::{Value, json};
use tether_testkit::{S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY, S3Server};

/// Helpers every script starts with. `OPTS` are the `storage_options` for
/// `s3://` tables (from `DELTA_STORAGE_OPTIONS`). Scripts print one JSON
/// document.
const PRELUDE: &str = r#"
import json, os, sys, time
import datetime
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

OPTS = json.loads(os.environ.get("DELTA_STORAGE_OPTIONS") or "null")
ARGS = sys.argv[1:]

def table(uri, version=None):
    return DeltaTable(uri, version=version, storage_options=OPTS)

def write(uri, data, **kw):
    write_deltalake(uri, pa.table(data), storage_options=OPTS, **kw)

def rows(dt):
    return sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])

def history(uri):
    return [{"version": h["version"], "operation": h["operation"],
             "timestamp": h.get("timestamp"),
             "metrics": h.get("operationMetrics") or {}}
            for h in table(uri).history()]

def out(value):
    print(json.dumps(value))
"#;

/// After a script that finished: skip the interpreter's teardown, in which
/// deltalake's native threads can abort the process after every line was
/// printed (what Python read is the test, not its exit).
const EPILOGUE: &str = "\nsys.stdout.flush()\nos._exit(0)\n";

/// Run `script` (after the prelude) with `args` as `ARGS`, the table's
/// storage options (for S3) in the environment; its JSON.
fn py_with(options: Option<&Value>, script: &str, args: &[&str]) -> Value {
    let mut cmd = std::process::Command::new(tether_testkit::python());
    cmd.arg("-c")
        .arg(format!("{PRELUDE}\n{script}{EPILOGUE}"))
        .args(args);
    if let Some(o) = options {
        cmd.env("DELTA_STORAGE_OPTIONS", o.to_string());
    }
    let out = cmd.output().expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

fn py(script: &str, args: &[&str]) -> Value {
    py_with(None, script, args)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The rows of `uri` at `version`, as Python reads them.
fn rows_at(uri: &str, version: u64) -> Value {
    py(
        "out(rows(table(ARGS[0], int(ARGS[1]))))",
        &[uri, &version.to_string()],
    )
}

/// The table's id and version as Python sees them.
fn python_head(uri: &str) -> (String, u64) {
    let v = py(
        "dt = table(ARGS[0])\nout([dt.metadata().id, dt.version()])",
        &[uri],
    );
    (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
}

/// The recorded state of `key` in the working tree's manifest.
fn recorded(d: &Dataset, key: &str) -> (u64, String) {
    let m = d.manifest(key);
    let state = &m["state"];
    (
        state["version"].as_integer().expect("version") as u64,
        state["table_id"].as_str().expect("table_id").to_owned(),
    )
}

/// `tether ARGS --json`, any exit code; the exit code and the JSON.
fn json_of(d: &Dataset, args: &[&str]) -> (Option<i32>, Value) {
    let mut args = args.to_vec();
    args.push("--json");
    let out = d.tether(&args);
    let v = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("tether {args:?}: not JSON ({e}):\n{}", describe(&out)));
    (out.status.code(), v)
}

/// The version `open -r REV --json` hands out: the address is
/// `<uri>#version=<N>`.
fn opened_version(d: &Dataset, key: &str, rev: &str, uri: &str) -> u64 {
    let (code, v) = json_of(d, &["open", key, "-r", rev]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["type"], "DeltaHandle", "{v}");
    assert_eq!(v["read_only"], true, "{v}");
    let address = v["address"].as_str().unwrap();
    let (at, version) = address.rsplit_once("#version=").expect("uri#version=N");
    assert_eq!(at, uri, "{v}");
    version.parse().unwrap()
}

/// What `diff --content` should say of a commit, from the metrics
/// `DeltaTable.history()` reports for it (delta-rs's snake_case names).
fn expected_detail(entry: &Value) -> String {
    let m = &entry["metrics"];
    let n = |k: &str| m.get(k).and_then(Value::as_i64).unwrap_or(0);
    let parts: Vec<String> = [
        ("+", n("num_added_rows"), "rows"),
        ("-", n("num_deleted_rows"), "rows"),
        ("~", n("num_updated_rows"), "rows"),
        ("+", n("num_added_files"), "files"),
        ("-", n("num_removed_files"), "files"),
    ]
    .iter()
    .filter(|(_, v, _)| *v != 0)
    .map(|(sign, v, unit)| format!("{sign}{v} {unit}"))
    .collect();
    let op = entry["operation"].as_str().unwrap();
    if parts.is_empty() {
        op.to_owned()
    } else {
        format!("{op}: {}", parts.join(", "))
    }
}

/// `diff A B --content --json`'s entries for `key`: (path, change, detail).
fn content_diff(
    d: &Dataset,
    a: &str,
    b: &str,
    key: &str,
) -> (Vec<(String, String, String)>, Value) {
    let (code, diff) = json_of(d, &["diff", a, b, "--content"]);
    assert_eq!(code, Some(0), "{diff}");
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == key)
        .unwrap_or_else(|| panic!("{key} changed: {diff}"))
        .clone();
    let detail = change["detail"].clone();
    assert_eq!(detail["unit"], "commits", "{diff}");
    let entries = detail["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["change"].as_str().unwrap().to_owned(),
                e["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (entries, detail)
}

/// The report `verify` gives each label of `key` (`key` or `<rev>:key`).
fn verify_reports(d: &Dataset, args: &[&str], key: &str) -> (Option<i32>, Vec<(String, Value)>) {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    let (code, v) = json_of(d, &all);
    let reports = v
        .as_object()
        .unwrap_or_else(|| panic!("verify --json is an object: {v}"))
        .iter()
        .filter(|(label, _)| *label == key || label.ends_with(&format!(":{key}")))
        .map(|(l, r)| (l.clone(), r.clone()))
        .collect();
    (code, reports)
}

/// Python writes a table over several commits (append, delete, schema
/// evolution, overwrite) while tether records three of its versions; Python
/// reads each recorded version back with the same rows; `diff --content`
/// lists each commit with what `DeltaTable.history()` reports; `log` is
/// the history newest first; `verify` is `unknown` until `--deep` looks at
/// the data files.
#[test]
fn recorded_versions_read_back_in_python_and_diff_like_history() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    py(
        r#"
write(ARGS[0], {"id": [1, 2, 3], "v": ["a", "b", "c"]})
write(ARGS[0], {"id": [4, 5], "v": ["d", "e"]}, mode="append")
out(None)
"#,
        &[&uri],
    );
    let added = d.ok(&["add", "tbl", "../data/events", "--kind", "delta"]);
    assert_eq!(added, "added tbl [delta]\n");
    assert_eq!(
        d.manifest("tbl")["locator"]["uri"].as_str(),
        Some(uri.as_str()),
        "the relative uri is stored absolute"
    );
    let status = d.ok(&["status"]);
    assert!(status.contains("new tbl [delta/addressable]"), "{status}");
    let out = d.ok(&["commit", "-m", "first"]);
    assert!(out.contains("tbl"), "{out}");
    let first = d.rev("HEAD");
    let (id, head) = python_head(&uri);
    assert_eq!(
        recorded(&d, "tbl"),
        (1, id.clone()),
        "records Python's version and table id"
    );
    assert_eq!(head, 1);
    let first_rows = rows_at(&uri, 1);

    // Delete, then an append that adds a column.
    py(
        r#"
table(ARGS[0]).delete("id = 2")
write(ARGS[0], {"id": [6], "v": ["f"], "w": [1.5]}, mode="append", schema_mode="merge")
out(None)
"#,
        &[&uri],
    );
    let status = d.ok(&["status", "--snapshot"]);
    assert!(
        lines(&status)
            .iter()
            .any(|l| l.starts_with("behind tbl [delta/addressable]")),
        "status sees Python's commits (on the trunk, behind the pin):\n{status}"
    );
    d.ok(&["pull", "-m", "second"]);
    let second = d.rev("HEAD");
    assert_eq!(recorded(&d, "tbl"), (3, id.clone()));
    let second_rows = rows_at(&uri, 3);
    assert_eq!(second_rows.as_array().unwrap().len(), 5, "{second_rows}");

    py(
        r#"write(ARGS[0], {"id": [7, 8], "v": ["g", "h"], "w": [1.0, 2.0]}, mode="overwrite")
out(None)"#,
        &[&uri],
    );
    d.ok(&["pull", "-m", "third"]);
    assert_eq!(recorded(&d, "tbl"), (4, id.clone()));

    // Python opens what each commit recorded, and reads what it read then.
    assert_eq!(opened_version(&d, "tbl", &first, &uri), 1);
    assert_eq!(
        rows_at(&uri, opened_version(&d, "tbl", &first, &uri)),
        first_rows
    );
    assert_eq!(
        rows_at(&uri, opened_version(&d, "tbl", &second, &uri)),
        second_rows
    );
    assert_eq!(opened_version(&d, "tbl", "HEAD", &uri), 4);

    // diff --content: one entry per commit in (1, 4], as history() says.
    let history = py("out(history(ARGS[0]))", &[&uri]);
    let by_version = |v: u64| {
        history
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["version"] == v)
            .unwrap_or_else(|| panic!("history has {v}: {history}"))
            .clone()
    };
    let (entries, _) = content_diff(&d, &first, "HEAD", "tbl");
    let want: Vec<(String, String, String)> = (2..=4)
        .map(|v| {
            (
                format!("v{v}"),
                "added".to_owned(),
                expected_detail(&by_version(v)),
            )
        })
        .collect();
    assert_eq!(entries, want);
    assert_eq!(want[0].2, "DELETE: -1 rows, +1 files, -1 files");
    assert_eq!(want[1].2, "WRITE: +1 rows, +1 files");
    // Backwards, the same commits are removed.
    let (back, _) = content_diff(&d, "HEAD", &first, "tbl");
    assert_eq!(back.len(), 3);
    assert!(
        back.iter().all(|(_, change, _)| change == "removed"),
        "{back:?}"
    );
    let human = d.ok(&["diff", &second, "HEAD", "--content"]);
    assert!(
        human.contains("v4") && human.contains("WRITE: +2 rows, +1 files, -3 files"),
        "{human}"
    );

    // log: the transaction log newest first, with operations and metrics.
    let (code, log) = json_of(&d, &["log", "tbl"]);
    assert_eq!(code, Some(0), "{log}");
    let log = log
        .as_array()
        .unwrap_or_else(|| panic!("log --json: {log}"));
    let ids: Vec<&str> = log.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["4", "3", "2", "1", "0"]);
    let newest = log[0]["message"].as_str().unwrap();
    assert!(
        newest.starts_with("WRITE (mode=Overwrite")
            && newest.ends_with(": +2 rows, +1 files, -3 files"),
        "{newest}"
    );
    assert!(
        log[0]["when"].as_str().is_some_and(|w| w.ends_with('Z')),
        "{log:?}"
    );

    // verify: the log rebuilds every recorded version, which only --deep
    // can call ok.
    let (code, reports) = verify_reports(&d, &["--all-history"], "tbl");
    assert_eq!(code, Some(1), "unknown is not ok: {reports:?}");
    assert_eq!(reports.len(), 3, "{reports:?}");
    for (label, r) in &reports {
        assert_eq!(r["status"], "unknown", "{label}: {r}");
        let msg = r["message"].as_str().unwrap();
        assert!(msg.contains("can be rebuilt from the log"), "{msg}");
        assert!(
            msg.contains("delta.logRetentionDuration = interval 30 days (default)")
                && msg.contains("delta.deletedFileRetentionDuration = interval 1 weeks (default)")
                && msg.contains("log cleanup may remove it in 29d"),
            "{msg}"
        );
    }
    let (code, reports) = verify_reports(&d, &["--all-history", "--deep"], "tbl");
    assert_eq!(code, Some(0), "{reports:?}");
    assert!(
        reports.iter().all(|(_, r)| r["status"] == "ok"),
        "{reports:?}"
    );
}

/// After Python checkpoints and cleans up the log, only the checkpoint
/// (parquet; re-encoded with snappy, as Spark writes them) holds the
/// table's metadata and early files: tether still fingerprints (the table
/// id from the checkpoint), records, verifies and diffs through it, and
/// says plainly which recorded version the log can no longer rebuild.
#[test]
fn checkpoints_carry_the_table_through_log_cleanup() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    py(
        r#"
write(ARGS[0], {"id": [1, 2], "v": ["a", "b"]})
write(ARGS[0], {"id": [3], "v": ["c"]}, mode="append")
out(None)
"#,
        &[&uri],
    );
    d.ok(&["add", "tbl", &uri, "--kind", "delta"]);
    d.ok(&["commit", "-m", "v1"]);
    let v1 = d.rev("HEAD");
    // Three more commits, a checkpoint at the last, and a cleanup that keeps
    // nothing older (log retention 0 seconds).
    let listing = py(
        r#"
import pyarrow.parquet as pq
write(ARGS[0], {"id": [4], "v": ["d"]}, mode="append")
table(ARGS[0]).alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
write(ARGS[0], {"id": [5], "v": ["e"]}, mode="append")
dt = table(ARGS[0])
dt.create_checkpoint()
time.sleep(0.05)
dt.cleanup_metadata()
log = os.path.join(ARGS[0], "_delta_log")
cp = [f for f in os.listdir(log) if f.endswith(".checkpoint.parquet")][0]
# The same checkpoint as Spark would compress it.
pq.write_table(pq.read_table(os.path.join(log, cp)), os.path.join(log, cp), compression="snappy")
assert pq.ParquetFile(os.path.join(log, cp)).metadata.row_group(0).column(0).compression == "SNAPPY"
assert rows(table(ARGS[0])) == [{"id": i, "v": c} for i, c in zip(range(1, 6), "abcde")]
out(sorted(os.listdir(log)))
"#,
        &[&uri],
    );
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "00000000000000000004.checkpoint.parquet",
            "00000000000000000004.json",
            "_last_checkpoint"
        ],
        "only the checkpoint's version is left"
    );
    // The metaData action is only in the checkpoint now.
    let (id, _) = python_head(&uri);
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("behind tbl"), "{status}");
    d.ok(&["pull", "-m", "v4"]);
    let v4 = d.rev("HEAD");
    assert_eq!(recorded(&d, "tbl"), (4, id.clone()));
    assert_eq!(
        rows_at(&uri, opened_version(&d, "tbl", &v4, &uri))
            .as_array()
            .unwrap()
            .len(),
        5
    );

    // A version after the checkpoint diffs from the commits after it.
    py(
        r#"write(ARGS[0], {"id": [6], "v": ["f"]}, mode="append")
out(None)"#,
        &[&uri],
    );
    d.ok(&["pull", "-m", "v5"]);
    let (entries, _) = content_diff(&d, &v4, "HEAD", "tbl");
    assert_eq!(
        entries,
        [(
            "v5".to_owned(),
            "added".to_owned(),
            "WRITE: +1 rows, +1 files".to_owned()
        )]
    );
    // Across the cleanup: the commits it removed are counted and said to be gone.
    let (entries, detail) = content_diff(&d, &v1, "HEAD", "tbl");
    assert_eq!(entries.len(), 4, "{entries:?}");
    assert_eq!(
        entries[0],
        ("v2".into(), "added".into(), "(no longer in the log)".into())
    );
    assert_eq!(entries[3].2, "WRITE: +1 rows, +1 files");
    assert!(
        detail["note"]
            .as_str()
            .unwrap()
            .contains("2 of the commits"),
        "{detail}"
    );

    // v1's commits are gone: missing, with the oldest version still there.
    let (code, reports) = verify_reports(&d, &["-r", &v1], "tbl");
    assert_eq!(code, Some(1));
    let r = &reports[0].1;
    assert_eq!(r["status"], "missing", "{r}");
    let msg = r["message"].as_str().unwrap();
    assert!(
        msg.contains("version 1 can no longer be reconstructed")
            && msg.contains("oldest version the log can still rebuild is 4")
            && msg.contains("delta.logRetentionDuration = interval 0 seconds,"),
        "{msg}"
    );
    // The versions from the checkpoint on verify, data files included.
    let (code, reports) = verify_reports(&d, &["-r", &v4, "--deep"], "tbl");
    assert_eq!(code, Some(0), "{reports:?}");
    let msg = reports[0].1["message"].as_str().unwrap();
    assert!(msg.contains("all 4 data files"), "{msg}");
    // `open` of the cleaned-up version is refused rather than guessed.
    let out = d.tether(&["open", "tbl", "-r", &v1]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        describe(&out).contains("version 1 can no longer be reconstructed"),
        "{}",
        describe(&out)
    );
}

/// `vacuum(retention_hours=0)` deletes the files a recorded version needs:
/// `verify --deep` names exactly those and exits 1, while the shallow check
/// (the log still rebuilds the version) stays `unknown`; Python cannot read
/// the version either.
#[test]
fn vacuum_makes_deep_verify_name_the_missing_files() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    let files = py(
        r#"
write(ARGS[0], {"id": [1, 2], "v": ["a", "b"]})
write(ARGS[0], {"id": [3], "v": ["c"]}, mode="append")
out(sorted(os.path.basename(f) for f in table(ARGS[0]).file_uris()))
"#,
        &[&uri],
    );
    d.ok(&["add", "tbl", &uri, "--kind", "delta"]);
    d.ok(&["commit", "-m", "v1"]);
    let v1 = d.rev("HEAD");
    let vacuumed = py(
        r#"
write(ARGS[0], {"id": [9], "v": ["z"]}, mode="overwrite")
gone = table(ARGS[0]).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
try:
    table(ARGS[0], 1).to_pyarrow_table()
    readable = True
except Exception:
    readable = False
out({"gone": sorted(os.path.basename(f) for f in gone), "readable": readable})
"#,
        &[&uri],
    );
    assert_eq!(vacuumed["gone"], files, "vacuum removed version 1's files");
    assert_eq!(
        vacuumed["readable"], false,
        "Python cannot read version 1 now"
    );
    d.ok(&["pull", "-m", "after vacuum"]);

    let (code, reports) = verify_reports(&d, &["-r", &v1], "tbl");
    assert_eq!(code, Some(1));
    assert_eq!(reports[0].1["status"], "unknown", "{reports:?}");
    let (code, reports) = verify_reports(&d, &["-r", &v1, "--deep"], "tbl");
    assert_eq!(code, Some(1), "verify exits 1 when a report is not ok");
    let r = &reports[0].1;
    assert_eq!(r["status"], "missing", "{r}");
    let msg = r["message"].as_str().unwrap();
    assert!(
        msg.contains("needs 2 of its 2 data files that are gone"),
        "{msg}"
    );
    for f in files.as_array().unwrap() {
        assert!(msg.contains(f.as_str().unwrap()), "{f} named: {msg}");
    }
    assert!(
        msg.contains("VACUUM") && msg.contains("delta.deletedFileRetentionDuration"),
        "{msg}"
    );
    // The text report says the same, and the newest version is whole.
    let out = d.fails(&["verify", "--all-history", "--deep"], 1);
    let text = stdout(&out);
    assert!(
        lines(&text)
            .iter()
            .any(|l| l.starts_with("missing") && l.contains(":tbl")),
        "{text}"
    );
    let (code, reports) = verify_reports(&d, &["--deep"], "tbl");
    assert_eq!(code, Some(0), "{reports:?}");
}

/// A table deleted and recreated at the same path has a new id: what was
/// recorded verifies as drifted, with what to do, and does not open.
#[test]
fn a_recreated_table_is_drifted() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    py(
        r#"write(ARGS[0], {"id": [1], "v": ["a"]})
write(ARGS[0], {"id": [2], "v": ["b"]}, mode="append")
out(None)"#,
        &[&uri],
    );
    d.ok(&["add", "tbl", &uri, "--kind", "delta"]);
    d.ok(&["commit", "-m", "old table"]);
    let (old_id, _) = python_head(&uri);
    std::fs::remove_dir_all(&path).unwrap();
    // The new table is even at a later version than the one recorded.
    py(
        r#"
for i in range(3):
    write(ARGS[0], {"id": [i], "v": ["n"]}, mode="append")
out(None)"#,
        &[&uri],
    );
    let (new_id, _) = python_head(&uri);
    assert_ne!(old_id, new_id);
    let (code, reports) = verify_reports(&d, &[], "tbl");
    assert_eq!(code, Some(1));
    let r = &reports[0].1;
    assert_eq!(r["status"], "drifted", "{r}");
    let msg = r["message"].as_str().unwrap();
    assert!(
        msg.contains("was recreated")
            && msg.contains(&new_id)
            && msg.contains(&old_id)
            && msg.contains("`tether commit` records the new table"),
        "{msg}"
    );
    let out = d.tether(&["open", "tbl", "-r", "HEAD"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        describe(&out).contains("was recreated"),
        "{}",
        describe(&out)
    );
    // Recording the new table is a change of state.
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("behind tbl"), "{status}");
    d.ok(&["pull", "-m", "new table"]);
    assert_eq!(recorded(&d, "tbl"), (2, new_id));
    let (entries, detail) = content_diff(&d, "HEAD~1", "HEAD", "tbl");
    assert_eq!(entries[0].0, "table", "{detail}");
}

/// `add --at` takes a version, or a timestamp naming the newest version
/// committed at or before it (as `DeltaTable.load_as_version` picks).
#[test]
fn at_takes_a_version_or_a_timestamp() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    let picked = py(
        r#"
for i in range(3):
    write(ARGS[0], {"id": [i], "v": ["x"]}, mode="append")
    time.sleep(1.1)
h = {e["version"]: e["timestamp"] for e in history(ARGS[0])}
# Half a second after version 1 was committed.
at = datetime.datetime.fromtimestamp((h[1] + 500) / 1000, tz=datetime.timezone.utc)
dt = table(ARGS[0])
dt.load_as_version(at)
out({"at": at.isoformat().replace("+00:00", "Z"), "version": dt.version()})
"#,
        &[&uri],
    );
    assert_eq!(picked["version"], 1, "{picked}");
    d.ok(&["add", "by_version", &uri, "--kind", "delta", "--at", "0"]);
    d.ok(&[
        "add",
        "by_time",
        &uri,
        "--kind",
        "delta",
        "--at",
        picked["at"].as_str().unwrap(),
    ]);
    d.ok(&["commit", "-m", "pinned positions"]);
    assert_eq!(recorded(&d, "by_version").0, 0);
    assert_eq!(recorded(&d, "by_time").0, 1);
    // `log --ref` starts at a version too.
    let (_, log) = json_of(&d, &["log", "by_version", "--ref", "1"]);
    let ids: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "0"]);
    let out = d.tether(&["add", "bad", &uri, "--kind", "delta", "--at", "yesterday"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        describe(&out).contains("neither a Delta version number nor a timestamp"),
        "{}",
        describe(&out)
    );
}

/// A reader feature tether does not know is refused by name, before
/// anything is recorded.
#[test]
fn unknown_reader_features_are_refused_by_name() {
    let d = Dataset::init();
    let path = d.data().join("events");
    let uri = s(&path).to_owned();
    py(
        r#"write(ARGS[0], {"id": [1], "v": ["a"]})
out(None)"#,
        &[&uri],
    );
    let protocol = json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["columnMapping", "hyperspaceIndexes"],
        "writerFeatures": ["columnMapping"]}});
    let info = json!({"commitInfo": {"timestamp": 1, "operation": "UPGRADE PROTOCOL"}});
    std::fs::write(
        path.join("_delta_log/00000000000000000001.json"),
        format!("{info}\n{protocol}\n"),
    )
    .unwrap();
    // `add` reads nothing; the first fingerprint refuses the table.
    d.ok(&["add", "tbl", &uri, "--kind", "delta"]);
    let out = d.fails(&["commit", "-m", "x"], 1);
    let text = describe(&out);
    assert!(
        text.contains("reader feature tether does not understand: hyperspaceIndexes"),
        "{text}"
    );
    assert!(
        d.manifest("tbl").get("state").is_none(),
        "nothing was recorded"
    );
}

/// spec/03's loop with a Delta table beside a directory and a memory store:
/// add, status, commit, open at the commit, a bookmark on which the memory
/// store gets a commit while Python writes the (branch-less) table, commit,
/// diff, promote, `pull` on the trunk to record the table's new version, and
/// `verify --all-history` (Delta `unknown` until `--deep`).
#[test]
fn getting_started_loop_with_a_delta_table() {
    let d = Dataset::init();
    let events = d.data().join("events");
    let uri = s(&events).to_owned();
    py(
        r#"write(ARGS[0], {"id": [1, 2], "v": ["a", "b"]})
out(None)"#,
        &[&uri],
    );
    let raw = d.data().join("raw/plate1");
    std::fs::create_dir_all(&raw).unwrap();
    for i in 0..3u8 {
        std::fs::write(raw.join(format!("well_{i}.tif")), [i; 64]).unwrap();
    }
    let store = d.memory_store("labels");
    d.add_memory("mem/labels", &store);
    d.ok(&["add", "raw/plate1", "--kind", "file", "../data/raw/plate1/"]);
    d.ok(&["add", "tables/events", "--kind", "delta", "../data/events"]);
    let status = d.ok(&["status"]);
    assert!(
        status.contains("new tables/events [delta/addressable]"),
        "{status}"
    );
    let out = d.ok(&["commit", "-m", "Baseline"]);
    assert!(out.contains("mem/labels"), "{out}");
    let baseline = d.rev("HEAD");
    assert_eq!(opened_version(&d, "tables/events", &baseline, &uri), 0);

    d.ok(&["new", "-b", "relabel", "--eager"]);
    store.write_on(&d.working_ref("relabel"), json!({"labels": 1}), "relabel");
    // Delta has no branch: Python writes the one live table.
    py(
        r#"write(ARGS[0], {"id": [3], "v": ["c"]}, mode="append")
out(None)"#,
        &[&uri],
    );
    d.ok(&["commit", "-m", "Relabel"]);
    // A branch-less object sits at its pin on every bookmark but the trunk
    // (spec/06, "Positions"): the relabel commit did not record Python's write.
    let (code, diff) = json_of(&d, &["diff", "main", "relabel", "--content"]);
    assert_eq!(code, Some(0), "{diff}");
    let keys: Vec<&str> = diff
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["mem/labels"], "{diff}");
    d.ok(&["promote"]);
    // Back on the trunk, `pull` records the table's current version.
    d.ok(&["new", "main"]);
    d.ok(&["pull"]);
    let (entries, _) = content_diff(&d, &baseline, "main", "tables/events");
    assert_eq!(
        entries,
        [(
            "v1".into(),
            "added".into(),
            "WRITE: +1 rows, +1 files".into()
        )]
    );
    let (code, v) = json_of(&d, &["verify", "--all-history"]);
    assert_eq!(code, Some(1), "Delta reports unknown without --deep: {v}");
    for (label, r) in v.as_object().unwrap() {
        let want = if label.ends_with(":tables/events") {
            "unknown"
        } else {
            "ok"
        };
        assert_eq!(r["status"], want, "{label}: {r}");
    }
    let (code, v) = json_of(&d, &["verify", "--all-history", "--deep"]);
    assert_eq!(code, Some(0), "{v}");
    assert!(
        v.as_object()
            .unwrap()
            .keys()
            .any(|l| l.ends_with(":tables/events")),
        "{v}"
    );
}

/// The same on `s3://` (a local S3 server): Python writes with
/// `storage_options`, tether reads through the host's S3 client with the
/// endpoint from `.tether/secrets.toml`; the recorded version reads back in
/// Python; after vacuum, `verify --deep` names the missing files.
#[test]
fn on_s3_records_and_verifies_what_python_wrote() {
    let server = S3Server::start("tether-delta");
    let uri = format!("s3://{}/lab/events", server.bucket());
    let options = json!({
        "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET_ACCESS_KEY,
        "AWS_REGION": S3_REGION,
        "AWS_ENDPOINT_URL": server.endpoint(),
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "conditional_put": "etag",
    });
    let py_s3 = |script: &str| py_with(Some(&options), script, &[&uri]);
    py_s3(
        r#"
write(ARGS[0], {"id": [1, 2], "v": ["a", "b"]})
write(ARGS[0], {"id": [3], "v": ["c"]}, mode="append")
out(None)"#,
    );
    let d = Dataset::init();
    let secrets = d.root().join(".tether/secrets.toml");
    std::fs::write(&secrets, server.secrets_toml()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let run = |args: &[&str]| -> Output {
        let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
        for v in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "AWS_ENDPOINT_URL",
        ] {
            c.env_remove(v);
        }
        c.args(args).output().expect("run tether")
    };
    let ok = |args: &[&str]| {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}:\n{}", describe(&out));
        stdout(&out)
    };
    ok(&["add", "tbl", &uri, "--kind", "delta"]);
    ok(&["commit", "-m", "v1"]);
    let v1 = d.rev("HEAD");
    assert_eq!(recorded(&d, "tbl").0, 1);
    let opened: Value = serde_json::from_str(&ok(&["open", "tbl", "-r", &v1, "--json"])).unwrap();
    assert_eq!(opened["address"], format!("{uri}#version=1"));
    let read = py_s3("out(rows(table(ARGS[0], 1)))");
    assert_eq!(read.as_array().unwrap().len(), 3);

    let gone = py_s3(
        r#"
write(ARGS[0], {"id": [9], "v": ["z"]}, mode="overwrite")
out(sorted(f.rsplit("/", 1)[-1] for f in table(ARGS[0]).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)))
"#,
    );
    assert_eq!(gone.as_array().unwrap().len(), 2, "{gone}");
    ok(&["pull", "-m", "v2"]);
    let (entries, _) = content_diff(&d, &v1, "HEAD", "tbl");
    assert_eq!(
        entries.len(),
        3,
        "the write and VACUUM START/END: {entries:?}"
    );
    let out = run(&["verify", "-r", &v1, "--deep", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let (_, r) = v
        .as_object()
        .unwrap()
        .iter()
        .find(|(label, _)| label.ends_with("tbl"))
        .unwrap_or_else(|| panic!("a report for tbl: {v}"));
    let msg = r["message"].as_str().unwrap();
    assert_eq!(r["status"], "missing", "{v}");
    for f in gone.as_array().unwrap() {
        assert!(msg.contains(f.as_str().unwrap()), "{msg}");
    }
    assert!(!describe(&out).contains(S3_SECRET_ACCESS_KEY));
    let out = run(&["verify", "--deep", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}
