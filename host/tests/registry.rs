//! `export`, `publish` and `import` (spec/12, "Registries and SQL") through
//! the `tether` binary: an export of git, icechunk, file and memory objects
//! over branching history read back with Python's `sqlite3` and with DuckDB
//! (`read_parquet`), answering the spec's "joining a registry" query; the
//! history walk parses each distinct manifest once over 10,000 commits
//! (counted from the debug log); `publish` into a real PostgreSQL server
//! (idempotent, incremental, the password in no output); `import` from an
//! edited export, from a registry query, refused whole on a bad row, and
//! undone.

use std::path::Path;
use std::process::Command;

use crate::support::{Dataset, MemoryStore, describe, stderr, stdout};
use serde_json::{Value, json};
use tether_testkit::Postgres;

/// Run Python `script` with `args`; its stdout's last line as JSON.
fn py(script: &str, args: &[&str]) -> Value {
    let out = Command::new(tether_testkit::python())
        .arg("-c")
        .arg(format!(
            "import json, sys\n{script}\nsys.stdout.flush()\nimport os\nos._exit(0)\n"
        ))
        .args(args)
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// An Icechunk repository with array `temp` committed on `main`; the
/// snapshot id.
fn icechunk_create(path: &Path) -> String {
    py(
        r#"
import icechunk, zarr
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(sys.argv[1]))
session = repo.writable_session("main")
array = zarr.group(store=session.store).create_array("temp", shape=(2,), chunks=(2,), dtype="i4")
array[:] = [1, 2]
print(json.dumps(session.commit("first")))
"#,
        &[s(path)],
    )
    .as_str()
    .unwrap()
    .to_string()
}

/// A new commit on the repository's `main`; its snapshot id.
fn icechunk_write(path: &Path, values: [i32; 2]) -> String {
    py(
        r#"
import icechunk, zarr
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(sys.argv[1]))
session = repo.writable_session("main")
zarr.open_array(session.store, path="temp", mode="r+")[:] = json.loads(sys.argv[2])
print(json.dumps(session.commit("more")))
"#,
        &[s(path), &json!(values).to_string()],
    )
    .as_str()
    .unwrap()
    .to_string()
}

/// A code repository outside the dataset, one commit on `main`.
fn code_repo(d: &Dataset) -> std::path::PathBuf {
    let code = d.tmp().join("code");
    tether_testkit::run_ok(
        d.command("git", d.tmp())
            .args(["init", "-q", "-b", "main", "code"]),
    );
    std::fs::write(code.join("main.py"), "print(1)\n").unwrap();
    tether_testkit::run_ok(d.command("git", &code).args(["add", "-A"]));
    tether_testkit::run_ok(d.command("git", &code).args(["commit", "-q", "-m", "code"]));
    code
}

/// `tether ARGS --json` with exit 0, parsed.
fn json_ok(d: &Dataset, args: &[&str]) -> Value {
    let out = d.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

/// The dataset of the must-show: a memory store, a directory, a code
/// repository and an Icechunk repository; c1 on main, c3 on bookmark
/// `feat` off c1 (the memory object written on its branch), c2 on main
/// after Icechunk moved. Returns (dataset, [c1, c2, c3], [snapshot A, B]).
fn branching_dataset() -> (Dataset, [String; 3], [String; 2]) {
    let d = Dataset::init();
    let mem = d.memory_store("mem");
    mem.write(json!({"n": 1}), "one");
    d.add_memory("mem", &mem);
    std::fs::create_dir_all(d.data().join("raw")).unwrap();
    std::fs::write(d.data().join("raw/a.txt"), "a").unwrap();
    d.ok(&["add", "raw", "--kind", "file", "../data/raw"]);
    code_repo(&d);
    d.ok(&["add", "code", "--kind", "git", "../code"]);
    let cube = d.data().join("cube.icechunk");
    let snap_a = icechunk_create(&cube);
    d.ok(&[
        "add",
        "zarr/cube",
        "--kind",
        "icechunk",
        "../data/cube.icechunk",
    ]);
    d.ok(&["commit", "-m", "one"]);
    let c1 = d.rev("HEAD");

    let wr = d.fork_bookmark("feat", "mem");
    mem.write_on(&wr, json!({"n": 2}), "on feat");
    d.ok(&["commit", "-m", "three"]);
    let c3 = d.rev("HEAD");

    d.ok(&["new", "main"]);
    let snap_b = icechunk_write(&cube, [3, 4]);
    d.ok(&["commit", "-m", "two"]);
    let c2 = d.rev("HEAD");
    assert_ne!(c2, c3);
    (d, [c1, c2, c3], [snap_a, snap_b])
}

#[test]
fn an_export_of_branching_history_answers_the_registry_join_in_sqlite_and_duckdb() {
    let (d, [c1, c2, c3], [snap_a, snap_b]) = branching_dataset();
    let out = d.tether(&["export", "t.sqlite", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("experimental"),
        "the one-line note: {}",
        describe(&out)
    );
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["format"], "sqlite");
    assert_eq!(report["head"], c2.as_str());
    assert_eq!(
        report["rows"]["objects"], 12,
        "4 objects x 3 commits: {report}"
    );
    let out = d.ok(&["export", "dump", "--format", "parquet", "--listings"]);
    assert!(out.contains("exported"), "{out}");

    let uri = d.manifest("zarr/cube")["locator"]["uri"]
        .as_str()
        .unwrap()
        .to_string();
    let db = d.root().join("t.sqlite");
    // The spec's join, in SQLite (json_extract) over the file.
    let got = py(
        r#"
import sqlite3, hashlib
con = sqlite3.connect(":memory:")
con.execute("ATTACH ? AS t", (sys.argv[1],))
con.execute("CREATE TABLE runs (run_id TEXT, tether_rev TEXT)")
con.executemany("INSERT INTO runs VALUES (?, ?)", [("r1", sys.argv[3]), ("r2", sys.argv[4]), ("r3", sys.argv[5])])
con.execute("CREATE TABLE catalog (uri TEXT, name TEXT)")
con.execute("INSERT INTO catalog VALUES (?, 'imaging')", (sys.argv[2],))
rows = con.execute("""
SELECT r.run_id, c.name, json_extract(o.state_json, '$.snapshot_id') AS snapshot_id, o.pin_ref
FROM runs r JOIN t.objects o ON o.commit_id = r.tether_rev AND o.kind = 'icechunk'
JOIN catalog c ON c.uri = o.uri ORDER BY r.run_id""").fetchall()
master = con.execute("SELECT type, name FROM t.sqlite_master WHERE type IN ('table', 'view') ORDER BY name").fetchall()
head = con.execute("SELECT key, kind FROM t.objects_head ORDER BY key").fetchall()
pins = con.execute("SELECT kind, commits FROM t.object_pins WHERE kind = 'icechunk' ORDER BY commits").fetchall()
parents = con.execute("SELECT commit_id, parent_id, position FROM t.commit_parents").fetchall()
refs = con.execute("SELECT name, kind, commit_id FROM t.refs ORDER BY name").fetchall()
meta = dict(con.execute("SELECT key, value FROM t.tether_meta").fetchall())
# identity_hash is blake2b of the canonical JSON of [kind, identity].
ident = con.execute("SELECT DISTINCT kind, identity_json, identity_hash FROM t.objects").fetchall()
ok = all(
    hashlib.blake2b(json.dumps([k, json.loads(i)], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest() == h
    for k, i, h in ident
)
states = con.execute("SELECT COUNT(*) FROM t.object_states WHERE kind = 'icechunk'").fetchone()[0]
print(json.dumps({"rows": rows, "master": master, "head": head, "pins": pins, "parents": parents,
                  "refs": refs, "meta": meta, "hashes_ok": ok, "ident": len(ident), "states": states}))
"#,
        &[s(&db), &uri, &c1, &c2, &c3],
    );
    assert_eq!(
        got["rows"],
        json!([
            [
                "r1",
                "imaging",
                snap_a,
                format!(
                    "tether.{}",
                    d.manifest_at(&c1, "zarr/cube")["pin"]["id"]
                        .as_str()
                        .unwrap()
                )
            ],
            [
                "r2",
                "imaging",
                snap_b,
                format!(
                    "tether.{}",
                    d.manifest_at(&c2, "zarr/cube")["pin"]["id"]
                        .as_str()
                        .unwrap()
                )
            ],
            [
                "r3",
                "imaging",
                snap_a,
                format!(
                    "tether.{}",
                    d.manifest_at(&c1, "zarr/cube")["pin"]["id"]
                        .as_str()
                        .unwrap()
                )
            ],
        ]),
        "{got}"
    );
    let master: Vec<(String, String)> = got["master"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().into(), r[1].as_str().unwrap().into()))
        .collect();
    for table in [
        "commits",
        "commit_parents",
        "refs",
        "objects",
        "object_states",
        "tether_meta",
    ] {
        assert!(
            master.contains(&("table".into(), table.into())),
            "{master:?}"
        );
    }
    for view in ["objects_head", "object_pins"] {
        assert!(master.contains(&("view".into(), view.into())), "{master:?}");
    }
    assert_eq!(
        got["head"],
        json!([
            ["code", "git"],
            ["mem", "memory"],
            ["raw", "file"],
            ["zarr/cube", "icechunk"]
        ])
    );
    assert_eq!(
        got["pins"],
        json!([["icechunk", 1], ["icechunk", 2]]),
        "A at c1 and c3, B at c2"
    );
    assert_eq!(got["states"], 2);
    assert_eq!(got["hashes_ok"], true, "{got}");
    assert_eq!(got["ident"], 4, "one identity per object: {got}");
    let parents = got["parents"].as_array().unwrap();
    assert!(parents.contains(&json!([c2, c1, 0])), "{parents:?}");
    assert!(parents.contains(&json!([c3, c1, 0])), "{parents:?}");
    let refs = got["refs"].as_array().unwrap();
    assert!(refs.contains(&json!(["main", "branch", c2])), "{refs:?}");
    assert!(refs.contains(&json!(["feat", "branch", c3])), "{refs:?}");
    assert!(refs.contains(&json!(["HEAD", "head", c2])), "{refs:?}");
    assert_eq!(got["meta"]["head"], c2.as_str());
    assert_eq!(got["meta"]["vcs"], "git");
    assert_eq!(got["meta"]["schema_version"], "1");

    // The same join in DuckDB over the Parquet directory.
    let dump = d.root().join("dump");
    let got = py(
        r#"
import duckdb, os
d = sys.argv[1]
con = duckdb.connect()
con.execute(f"CREATE VIEW objects AS SELECT * FROM read_parquet('{d}/objects.parquet')")
con.execute("CREATE TABLE runs (run_id TEXT, tether_rev TEXT)")
con.execute("INSERT INTO runs VALUES ('r1', ?), ('r2', ?), ('r3', ?)", [sys.argv[3], sys.argv[4], sys.argv[5]])
con.execute("CREATE TABLE catalog (uri TEXT, name TEXT)")
con.execute("INSERT INTO catalog VALUES (?, 'imaging')", [sys.argv[2]])
rows = con.execute("""
SELECT r.run_id, c.name, json_extract_string(o.state_json, '$.snapshot_id') AS snapshot_id
FROM runs r JOIN objects o ON o.commit_id = r.tether_rev AND o.kind = 'icechunk'
JOIN catalog c ON c.uri = o.uri ORDER BY r.run_id""").fetchall()
schema = json.load(open(os.path.join(d, "schema.json")))
files = sorted(f for f in os.listdir(d))
entries = con.execute(f"SELECT path FROM read_parquet('{d}/listing_entries.parquet')").fetchall()
print(json.dumps({"rows": rows, "tables": [t["name"] for t in schema["tables"]], "files": files, "entries": entries}))
"#,
        &[s(&dump), &uri, &c1, &c2, &c3],
    );
    assert_eq!(
        got["rows"],
        json!([
            ["r1", "imaging", snap_a],
            ["r2", "imaging", snap_b],
            ["r3", "imaging", snap_a]
        ]),
        "{got}"
    );
    assert!(
        got["tables"]
            .as_array()
            .unwrap()
            .contains(&json!("listing_entries"))
    );
    assert!(
        got["files"]
            .as_array()
            .unwrap()
            .contains(&json!("schema.json"))
    );
    assert_eq!(
        got["entries"],
        json!([["a.txt"]]),
        "the directory's listing: {got}"
    );

    // --rev: one commit, and objects_head is its objects.
    let one = json_ok(&d, &["export", "c1.sqlite", "--rev", &c1, "--json"]);
    assert_eq!(one["head"], c1.as_str());
    assert_eq!(one["rows"]["commits"], 1);
    assert_eq!(one["rows"]["objects"], 4);
    // CSV and JSONL directories, and --append into the existing file.
    for format in ["csv", "jsonl"] {
        d.ok(&["export", format, "--format", format]);
        let text =
            std::fs::read_to_string(d.root().join(format!("{format}/objects.{format}"))).unwrap();
        assert!(text.contains(&snap_b), "{format}: {text}");
    }
    let appended = json_ok(&d, &["export", "c1.sqlite", "--append", "--json"]);
    assert_eq!(appended["rows"]["commits"], 3);
}

impl Dataset {
    /// The manifest of `key` at commit `rev`, as JSON.
    fn manifest_at(&self, rev: &str, key: &str) -> Value {
        let text = self.git(&["show", &format!("{rev}:.tether/objects/{key}.toml")]);
        let v: toml::Value = toml::from_str(&text).unwrap();
        serde_json::to_value(v).unwrap()
    }
}

/// `tether export` with the debug log: (its report, manifests the history
/// walk parsed, as the log counts them).
fn logged_export(d: &Dataset, path: &str) -> (Value, u64) {
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .args(["export", path, "--json"])
        .env("RUST_LOG", "tether=debug")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let log = stderr(&out);
    let line = log
        .lines()
        .find(|l| l.contains("history walked"))
        .unwrap_or_else(|| panic!("no walk in the log:\n{log}"));
    let parsed = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("parsed="))
        .unwrap_or_else(|| panic!("no parse count: {line}"))
        .parse()
        .unwrap();
    (serde_json::from_str(&stdout(&out)).unwrap(), parsed)
}

#[test]
fn exporting_ten_thousand_commits_parses_each_distinct_manifest_once() {
    let d = Dataset::init();
    let mut stores = Vec::new();
    for i in 0..5 {
        let st = d.memory_store(&format!("s{i}"));
        d.add_memory(&format!("k{i}"), &st);
        stores.push(st);
    }
    d.ok(&["commit", "-m", "base"]);
    // 10,000 commits by fast-import, each rewriting one manifest to one of
    // 7 captured_at values: 35 distinct manifests beyond the base's 5.
    let base: Vec<String> = (0..5)
        .map(|i| d.git(&["show", &format!("HEAD:.tether/objects/k{i}.toml")]))
        .collect();
    let at: Vec<String> = base
        .iter()
        .map(|m| {
            m.lines()
                .find(|l| l.starts_with("captured_at"))
                .expect("committed manifests have captured_at")
                .to_string()
        })
        .collect();
    let mut distinct = std::collections::BTreeSet::new();
    for (i, text) in base.iter().enumerate() {
        distinct.insert((i, text.clone()));
    }
    let commits: Vec<(String, Vec<(String, String)>)> = (0..10_000u32)
        .map(|n| {
            let k = (n % 5) as usize;
            let variant = base[k].replace(
                &at[k],
                &format!("captured_at = \"2026-01-0{}T00:00:00Z\"", 1 + n % 7),
            );
            distinct.insert((k, variant.clone()));
            (
                format!("c{n}"),
                vec![(format!(".tether/objects/k{k}.toml"), variant)],
            )
        })
        .collect();
    d.fast_import(&commits);

    let (report, parsed) = logged_export(&d, "big.sqlite");
    let commits: u64 = d
        .git(&["rev-list", "--count", "HEAD"])
        .trim()
        .parse()
        .unwrap();
    assert!(commits > 10_000);
    assert_eq!(report["rows"]["commits"], commits, "{report}");
    assert_eq!(report["rows"]["objects"], 5 * 10_001, "{report}");
    assert_eq!(
        parsed,
        distinct.len() as u64,
        "each distinct manifest parsed once, not once per commit"
    );
    // Again: the memo holds every set, so nothing is parsed.
    let (_, parsed) = logged_export(&d, "again.sqlite");
    assert_eq!(parsed, 0);
}

/// A dataset of two memory objects committed twice.
fn small_dataset() -> (Dataset, MemoryStore) {
    let d = Dataset::init();
    let a = d.memory_store("a");
    let b = d.memory_store("b");
    d.add_memory("a", &a);
    d.add_memory("b", &b);
    d.ok(&["commit", "-m", "one"]);
    a.write(json!({"n": 2}), "two");
    d.ok(&["commit", "-m", "two"]);
    (d, a)
}

#[test]
fn publish_upserts_into_postgres_idempotently_and_never_shows_the_password() {
    let pg = Postgres::start();
    pg.create_database("catalog");
    let (d, a) = small_dataset();
    let url = pg.url("catalog");
    let mut outputs = Vec::new();
    let mut run = |d: &Dataset, args: &[&str], env: Option<&str>| -> std::process::Output {
        let mut cmd = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
        cmd.args(args);
        if let Some(dsn) = env {
            cmd.env("TETHER_PUBLISH_DSN", dsn);
        }
        let out = cmd.output().unwrap();
        outputs.push(format!("{}{}", stdout(&out), stderr(&out)));
        out
    };

    // A dry run counts and writes nothing.
    let out = run(&d, &["publish", "--to", &url, "--dry-run", "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["command"], "publish");
    let upserts: Vec<&Value> = plan["actions"].as_array().unwrap().iter().collect();
    assert!(upserts.iter().all(|a| a["op"] == "upsert"), "{plan}");
    let commits = upserts.iter().find(|a| a["target"] == "commits").unwrap();
    assert_eq!(commits["params"]["rows"], 2, "{plan}");
    assert_eq!(
        pg.psql(
            "catalog",
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'tether'"
        )
        .trim(),
        "0",
        "a dry run creates nothing"
    );

    let out = run(&d, &["publish", "--json"], Some(&url));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(first["schema"], "tether");
    assert_eq!(first["upserted"]["commits"], 2, "{first}");
    assert_eq!(first["upserted"]["objects"], 4, "{first}");
    assert_eq!(first["skipped_commits"], 0);
    let tables = pg.psql(
        "catalog",
        "SELECT table_type || ' ' || table_name FROM information_schema.tables \
         WHERE table_schema = 'tether' ORDER BY table_name",
    );
    for t in [
        "BASE TABLE commits",
        "BASE TABLE commit_parents",
        "BASE TABLE objects",
        "BASE TABLE object_states",
        "BASE TABLE refs",
        "BASE TABLE tether_meta",
        "VIEW objects_head",
        "VIEW object_pins",
    ] {
        assert!(tables.lines().any(|l| l == t), "{t} in:\n{tables}");
    }
    assert_eq!(
        pg.psql(
            "catalog",
            "SELECT data_type FROM information_schema.columns WHERE table_schema = 'tether' \
             AND table_name = 'objects' AND column_name IN ('state_json', 'captured_at') ORDER BY column_name"
        )
        .trim(),
        "timestamp with time zone\njsonb"
    );
    let head_snap = pg.psql(
        "catalog",
        "SELECT key || ' ' || (state_json->>'snapshot_id') FROM tether.objects_head ORDER BY key",
    );
    assert!(
        head_snap.contains(&format!("a {}", a.head())),
        "{head_snap}"
    );

    // The same history again: nothing written.
    let out = run(&d, &["publish", "--to", &url, "--json"], None);
    let again: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let total: u64 = again["upserted"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 0, "{again}");
    assert_eq!(again["skipped_commits"], 2);

    // One more commit: exactly its rows (and the refs and head it moved).
    a.write(json!({"n": 3}), "three");
    d.ok(&["commit", "-m", "three"]);
    let out = run(&d, &["publish", "--to", &url], None);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("published ") && text.contains("(2 commit(s) already present)"),
        "{text}"
    );
    let counts = pg.psql(
        "catalog",
        "SELECT (SELECT count(*) FROM tether.commits) || ' ' || (SELECT count(*) FROM tether.objects)",
    );
    assert_eq!(counts.trim(), "3 6");
    assert!(text.contains("commits 1 row(s)"), "{text}");
    assert!(text.contains("commit_parents 1 row(s)"), "{text}");
    assert!(text.contains("objects 2 row(s)"), "{text}");
    assert!(text.contains("object_states 1 row(s)"), "{text}");
    assert!(
        text.contains("refs 2 row(s)"),
        "main and HEAD moved: {text}"
    );

    // The published objects import back from PostgreSQL as an empty plan
    // (locator_json read as JSONB).
    let out = run(
        &d,
        &[
            "import",
            &url,
            "--query",
            "SELECT key, kind, locator_json, policy_file, policy_pin FROM tether.objects_head",
            "--dry-run",
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ops: Vec<&str> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["unchanged", "unchanged"], "{plan}");
    assert!(
        plan["context"]["source"]
            .as_str()
            .unwrap()
            .contains(":***@"),
        "{plan}"
    );

    // A failure names the server, not the password.
    let wrong = url.replace("/catalog", "/nosuchdb");
    let out = run(&d, &["publish", "--to", &wrong], None);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("***"), "{}", describe(&out));
    for o in &outputs {
        assert!(!o.contains(Postgres::PASSWORD), "the password leaked:\n{o}");
    }
}

/// Every manifest file under `.tether/objects`, relative, sorted.
fn manifest_keys(d: &Dataset) -> Vec<String> {
    let dir = d.root().join(".tether/objects");
    crate::support::files_under(&dir, &dir)
        .into_iter()
        .filter_map(|f| f.strip_suffix(".toml").map(str::to_string))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn import_round_trips_an_edited_export_syncs_a_registry_refuses_bad_rows_and_undoes() {
    let d = Dataset::init();
    let stores: Vec<MemoryStore> = ["a", "b", "scratch_c"]
        .iter()
        .map(|n| d.memory_store(n))
        .collect();
    d.add_memory("a", &stores[0]);
    d.add_memory("b", &stores[1]);
    d.add_memory("scratch/c", &stores[2]);
    d.ok(&["commit", "-m", "one"]);

    // An unmodified export imports as an empty plan.
    d.ok(&["export", "snap.sqlite"]);
    let q = "SELECT key, kind, locator_json, policy_file, policy_pin FROM objects_head";
    let plan = json_ok(
        &d,
        &[
            "import",
            "snap.sqlite",
            "--sync",
            "--query",
            q,
            "--dry-run",
            "--json",
        ],
    );
    let ops: Vec<&str> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["unchanged", "unchanged", "unchanged"], "{plan}");

    // Edited: scratch/ objects become pin = record; the state is kept.
    let state_before = d.manifest("scratch/c")["state"].clone();
    py(
        r#"
import sqlite3
con = sqlite3.connect(sys.argv[1])
con.execute("UPDATE objects SET policy_pin = 'record' WHERE key LIKE 'scratch/%'")
con.commit()
print("{}")
"#,
        &[s(&d.root().join("snap.sqlite"))],
    );
    let out = d.ok(&["import", "snap.sqlite", "--sync", "--query", q]);
    assert!(out.contains("updated scratch/c"), "{out}");
    assert_eq!(
        d.manifest("scratch/c")["policy"]["pin"].as_str(),
        Some("record")
    );
    assert_eq!(
        d.manifest("scratch/c")["state"],
        state_before,
        "committed state kept"
    );
    assert_eq!(d.manifest("a")["policy"]["pin"].as_str(), Some("native"));
    d.ok(&["commit", "-m", "record scratch"]);

    // A registry query: 3 objects added and 1 removed, in one plan.
    let new_stores: Vec<MemoryStore> = ["r1", "r2", "r3"]
        .iter()
        .map(|n| d.memory_store(n))
        .collect();
    let registry = d.tmp().join("registry.db");
    py(
        r#"
import sqlite3
con = sqlite3.connect(sys.argv[1])
con.execute("CREATE TABLE catalog (name TEXT, path TEXT, fmt TEXT, owner TEXT)")
rows = [("a", sys.argv[2], "mem", "x"), ("b", sys.argv[3], "mem", "y")]
rows += [(f"run{i}", p, "mem", "z") for i, p in enumerate(sys.argv[4:7], 1)]
con.executemany("INSERT INTO catalog VALUES (?, ?, ?, ?)", rows)
con.commit()
print("{}")
"#,
        &[
            s(&registry),
            s(&stores[0].root),
            s(&stores[1].root),
            s(&new_stores[0].root),
            s(&new_stores[1].root),
            s(&new_stores[2].root),
        ],
    );
    let query = "SELECT CASE WHEN name LIKE 'run%' THEN 'runs/' || name ELSE name END AS key, \
                 'memory' AS kind, json_object('system', path) AS locator_json, owner \
                 FROM catalog WHERE fmt = 'mem'";
    let registry_arg = registry.to_str().unwrap();
    let plan = json_ok(
        &d,
        &[
            "import",
            registry_arg,
            "--query",
            query,
            "--sync",
            "--dry-run",
            "--json",
        ],
    );
    let mut by_op: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for a in plan["actions"].as_array().unwrap() {
        by_op
            .entry(a["op"].as_str().unwrap().into())
            .or_default()
            .push(a["key"].as_str().unwrap().into());
    }
    assert_eq!(
        by_op["add"],
        ["runs/run1", "runs/run2", "runs/run3"],
        "{plan}"
    );
    assert_eq!(by_op["remove"], ["scratch/c"], "{plan}");
    assert_eq!(by_op["unchanged"], ["a", "b"], "{plan}");
    assert!(
        plan["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("owner")),
        "the ignored column is named: {plan}"
    );
    // Saved and applied from the plan file.
    let plan_file = d.tmp().join("import.plan");
    d.ok(&[
        "import",
        registry_arg,
        "--query",
        query,
        "--sync",
        "--plan",
        plan_file.to_str().unwrap(),
    ]);
    let before = manifest_keys(&d);
    let report = json_ok(
        &d,
        &[
            "import",
            registry_arg,
            "--from-plan",
            plan_file.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(
        report["added"],
        json!(["runs/run1", "runs/run2", "runs/run3"])
    );
    assert_eq!(report["removed"], json!(["scratch/c"]));
    assert_eq!(
        manifest_keys(&d),
        ["a", "b", "runs/run1", "runs/run2", "runs/run3"]
    );
    assert_eq!(
        d.manifest("runs/run2")["locator"]["system"].as_str(),
        Some(s(&new_stores[1].root))
    );
    assert_eq!(d.newest_op()["command"], "import");

    // undo restores the manifests as they were.
    d.ok(&["undo"]);
    assert_eq!(manifest_keys(&d), before);
    assert_eq!(
        d.manifest("scratch/c")["policy"]["pin"].as_str(),
        Some("record")
    );

    // A bad row refuses the whole import, naming its row; nothing is written.
    let csv = d.tmp().join("reg.csv");
    std::fs::write(
        &csv,
        format!(
            "key,kind,uri,locator_json\nnew1,memory,,\"{{\"\"system\"\": \"\"{}\"\"}}\"\nnew2,nosuchkind,/x,\nnew1,memory,,\"{{\"\"system\"\": \"\"/y\"\"}}\"\n",
            new_stores[0].root.display()
        ),
    )
    .unwrap();
    let written = d.written();
    let out = d.tether(&["import", csv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("row 2: kind \"nosuchkind\""), "{err}");
    assert!(
        err.contains("row 3: key \"new1\" is also on row 1"),
        "{err}"
    );
    assert_eq!(d.written(), written, "nothing written");
}

#[test]
fn an_export_on_jj_names_its_bookmarks_and_exports_at_the_working_copy_parent() {
    let d = Dataset::init_in(crate::support::Vcs::Jj);
    let a = d.memory_store("a");
    d.add_memory("a", &a);
    d.ok(&["commit", "-m", "one"]);
    a.write(json!({"n": 2}), "two");
    d.ok(&["commit", "-m", "two"]);
    let head = d.head();
    d.jj(&["tag", "set", "v1", "-r", &head]);
    let report = json_ok(&d, &["export", "../jj.sqlite", "--json"]);
    assert_eq!(report["head"], head.as_str());
    let got = py(
        r#"
import sqlite3
con = sqlite3.connect(sys.argv[1])
print(json.dumps({
    "refs": con.execute("SELECT name, kind FROM refs ORDER BY name").fetchall(),
    "tags": con.execute("SELECT name, commit_id FROM refs WHERE kind = 'tag'").fetchall(),
    "head": con.execute("SELECT commit_id, json_extract(state_json, '$.snapshot_id') FROM objects_head").fetchall(),
    "messages": [m for (m,) in con.execute("SELECT message FROM commits")],
    "change_ids": dict(con.execute("SELECT commit_id, change_id FROM commits").fetchall()),
}))
"#,
        &[s(&d.tmp().join("jj.sqlite"))],
    );
    assert_eq!(got["head"], json!([[head, a.head()]]), "{got}");
    assert_eq!(got["tags"], json!([["v1", head]]), "{got}");
    // Every exported commit carries the change id jj itself gives it.
    let change_ids = got["change_ids"].as_object().unwrap();
    assert!(change_ids.len() >= 2, "{got}");
    for (commit, change) in change_ids {
        let want = d.jj(&["log", "--no-graph", "-r", commit, "-T", "change_id"]);
        assert_eq!(change.as_str(), Some(want.trim()), "{commit}: {got}");
    }
    let bookmark = d.current_bookmark();
    assert!(
        !bookmark.is_empty(),
        "a dataset commit moves the trunk bookmark"
    );
    assert!(
        got["refs"]
            .as_array()
            .unwrap()
            .contains(&json!([bookmark, "bookmark"])),
        "{got}"
    );
    let messages = got["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("two")),
        "{got}"
    );
}

#[test]
fn an_export_on_git_names_its_tags_and_leaves_change_ids_empty() {
    let (d, a) = small_dataset();
    let first = d.rev("HEAD~1");
    let second = d.rev("HEAD");
    d.git(&["tag", "v1", &first]);
    // An annotated tag is named by the commit it tags.
    d.git(&["tag", "-a", "v2", "-m", "release two", &second]);
    a.write(json!({"n": 3}), "three");
    d.ok(&["export", "../git.sqlite"]);
    let got = py(
        r#"
import sqlite3
con = sqlite3.connect(sys.argv[1])
print(json.dumps({
    "tags": con.execute("SELECT name, commit_id FROM refs WHERE kind = 'tag' ORDER BY name").fetchall(),
    "change_ids": [c for (c,) in con.execute("SELECT DISTINCT change_id FROM commits")],
}))
"#,
        &[s(&d.tmp().join("git.sqlite"))],
    );
    assert_eq!(got["tags"], json!([["v1", first], ["v2", second]]), "{got}");
    assert_eq!(
        got["change_ids"],
        json!([null]),
        "git has no change ids: {got}"
    );
}

/// A registry in PostgreSQL whose columns are not text: the key from an
/// INT4, `at` from a TIMESTAMPTZ (read as RFC 3339, as an export writes
/// timestamps), and NUMERIC, UUID, BOOL, DATE and TIMESTAMPTZ columns the
/// import does not use, which it reads, ignores and names (spec/12: "Other
/// columns are ignored (and named in the plan)").
#[test]
fn import_reads_postgres_columns_of_every_type() {
    let pg = Postgres::start();
    pg.create_database("registry");
    let d = Dataset::init();
    let stores: Vec<MemoryStore> = ["p1", "p2"].iter().map(|n| d.memory_store(n)).collect();
    pg.psql(
        "registry",
        &format!(
            "CREATE TABLE runs (n INT4, path TEXT, taken TIMESTAMPTZ, size NUMERIC(10,2), \
             id UUID, ok BOOL, day DATE, seen TIMESTAMPTZ); \
             INSERT INTO runs VALUES \
             (1, '{}', '2026-01-02 03:04:05+02', 12.50, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '2026-01-02', now()), \
             (2, '{}', '2026-01-03 00:00:00.25+00', 0.5, 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', false, '2026-01-03', NULL);",
            s(&stores[0].root),
            s(&stores[1].root)
        ),
    );
    let query = "SELECT n AS key, 'memory' AS kind, json_build_object('system', path) AS locator_json, \
                 taken AS at, size, id, ok, day, seen FROM runs ORDER BY n";
    let url = pg.url("registry");
    let plan = json_ok(
        &d,
        &["import", &url, "--query", query, "--dry-run", "--json"],
    );
    let adds: Vec<(&str, &Value)> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key"].as_str().unwrap(), &a["params"]))
        .collect();
    assert_eq!(adds.len(), 2, "{plan}");
    assert_eq!(adds[0].0, "1", "{plan}");
    assert_eq!(adds[1].0, "2", "{plan}");
    let notes = plan["notes"].to_string();
    assert!(
        notes.contains("ignored column(s): size, id, ok, day, seen"),
        "{plan}"
    );
    d.ok(&["import", &url, "--query", query]);
    assert_eq!(
        d.manifest("1")["locator"]["at"].as_str(),
        Some("2026-01-02T01:04:05Z")
    );
    assert_eq!(
        d.manifest("2")["locator"]["at"].as_str(),
        Some("2026-01-03T00:00:00.250Z")
    );
    assert_eq!(
        d.manifest("2")["locator"]["system"].as_str(),
        Some(s(&stores[1].root))
    );
    // Still one statement, read-only: a second statement is refused.
    let out = d.tether(&[
        "import",
        &url,
        "--query",
        "SELECT 1 AS key; DROP TABLE runs",
    ]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert_eq!(pg.psql("registry", "SELECT count(*) FROM runs").trim(), "2");
}
