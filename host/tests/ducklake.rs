//! The `ducklake` plugin against real DuckDB 1.5.5 and its DuckLake
//! extension (the project's pinned venv; every extension is loaded from its
//! PyPI package's file, with autoinstall and autoload off, so nothing is
//! downloaded): Python makes a catalog and writes snapshots; tether records
//! them through the `tether` binary, reading the catalog's tables through
//! the host's `sql` capability; DuckDB then reads what tether's handle
//! names, and expires and recreates the catalog under it.
//!
//! The same story runs on a SQLite catalog (DuckDB's `sqlite_scanner`, rows
//! inlined in the catalog) and on a PostgreSQL catalog
//! (`tether_testkit::Postgres`, `postgres_scanner`, rows in parquet files),
//! whose password only `.tether/secrets.toml` holds.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::{Value, json};
use tether_testkit::Postgres;

/// Helpers every script starts with: `connect()` is a DuckDB connection
/// with the DuckLake extension and the catalog's scanner loaded from their
/// packages' files; `ATTACH` (argv[1]) attaches the catalog as `lake`.
const PRELUDE: &str = r#"
import glob, importlib, json, os, sys
import duckdb

ATTACH = sys.argv[1]
ARGS = sys.argv[2:]

def extension(package, name):
    mod = importlib.import_module(package)
    found = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", name + ".duckdb_extension"))
    assert found, f"{package} has no {name} extension file"
    return found[0]

def connect():
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    con.execute(f"LOAD '{extension('duckdb_extension_ducklake', 'ducklake')}'")
    scanner = "postgres_scanner" if ":postgres:" in ATTACH else "sqlite_scanner"
    con.execute(f"LOAD '{extension('duckdb_extension_' + scanner, scanner)}'")
    return con

def lake():
    con = connect()
    con.execute(ATTACH)
    return con

def head(con):
    return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]

def ids(con, sql):
    return [r[0] for r in con.execute(sql).fetchall()]

def out(value):
    print(json.dumps(value))
"#;

/// A catalog the story runs on.
struct Lake {
    /// The locator's `metadata`, as committed (no password).
    metadata: String,
    /// How `tether add` is given it (a relative SQLite path, stored absolute).
    add_as: String,
    data_path: PathBuf,
    /// How Python attaches it to write (`ATTACH ... AS lake (...)`).
    attach: String,
    /// The environment Python needs (the PostgreSQL password).
    env: Vec<(String, String)>,
    /// What `.tether/secrets.toml` holds.
    secrets: String,
}

/// Run `script` (after the prelude) against `lake`; its last line as JSON.
fn py(lake: &Lake, script: &str, args: &[&str]) -> Value {
    let out = Command::new(tether_testkit::python())
        .arg("-c")
        .arg(format!("{PRELUDE}\n{script}"))
        .arg(&lake.attach)
        .args(args)
        .envs(lake.env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

fn sqlite_lake(d: &Dataset) -> Lake {
    let db = d.data().join("catalog.sqlite");
    let data_path = d.data().join("files");
    let metadata = format!("ducklake:sqlite:{}", db.display());
    Lake {
        add_as: "ducklake:sqlite:../data/catalog.sqlite".into(),
        attach: format!(
            "ATTACH '{metadata}' AS lake (DATA_PATH '{}/')",
            data_path.display()
        ),
        metadata,
        data_path,
        env: Vec::new(),
        secrets: String::new(),
    }
}

fn postgres_lake(d: &Dataset, pg: &Postgres) -> Lake {
    pg.create_database("lake");
    let data_path = d.data().join("files");
    let metadata = format!(
        "ducklake:postgres:dbname=lake host=127.0.0.1 port={} user={}",
        pg.port(),
        Postgres::USER
    );
    Lake {
        // Parquet files rather than rows inlined in the catalog.
        attach: format!(
            "ATTACH '{metadata}' AS lake (DATA_PATH '{}/', DATA_INLINING_ROW_LIMIT 0)",
            data_path.display()
        ),
        env: vec![("PGPASSWORD".into(), Postgres::PASSWORD.into())],
        // The catalog's password, by its address as the plugin sees it.
        secrets: format!(
            "[uris.\"{metadata}\"]\npassword = \"{}\"\n",
            Postgres::PASSWORD
        ),
        add_as: metadata.clone(),
        metadata,
        data_path,
    }
}

/// Every output of every tether command the story ran, to check for the password.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    fn run(&mut self, d: &Dataset, args: &[&str]) -> Output {
        let out = d.tether(args);
        self.0.push(format!("{}{}", stdout(&out), stderr(&out)));
        out
    }

    fn ok(&mut self, d: &Dataset, args: &[&str]) -> String {
        let out = self.run(d, args);
        assert!(out.status.success(), "tether {args:?}:\n{}", describe(&out));
        stdout(&out)
    }
}

/// The diff entry for `path` in `diff --content --json`'s output for `lake`.
fn entry(diff: &Value, path: &str) -> Value {
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "lake")
        .unwrap_or_else(|| panic!("lake changed: {diff}"));
    assert_eq!(change["detail"]["unit"], "tables", "{diff}");
    change["detail"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("no entry {path}: {diff}"))
}

/// The verify line for `lake`.
fn verify_line(text: &str) -> String {
    text.lines()
        .find(|l| l.contains("lake"))
        .unwrap_or_else(|| panic!("verify names lake:\n{text}"))
        .to_owned()
}

/// The whole story on one catalog (see the module docs); what tether printed.
fn story(d: &Dataset, lake: &Lake) -> Seen {
    let mut seen = Seen::default();
    if !lake.secrets.is_empty() {
        let path = d.root().join(".tether/secrets.toml");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&lake.secrets);
        std::fs::write(&path, text).unwrap();
    }
    // Python: a catalog, a table, two snapshots of rows.
    let made = py(
        lake,
        r#"
con = lake()
con.execute("CREATE TABLE lake.t (id BIGINT)")
con.execute("INSERT INTO lake.t VALUES (1), (2)")
first = head(con)
con.execute("INSERT INTO lake.t VALUES (3), (4), (5)")
out([first, head(con)])
"#,
        &[],
    );
    let (s1, s2) = (made[0].as_i64().unwrap(), made[1].as_i64().unwrap());
    assert!(s2 > s1, "{made}");

    // tether records the head through the catalog's tables. The data path
    // is given relative and stored absolute.
    let rel = format!(
        "../{}/",
        lake.data_path.strip_prefix(d.tmp()).unwrap().display()
    );
    let added = seen.ok(
        d,
        &[
            "add",
            "lake",
            &lake.add_as,
            "--kind",
            "ducklake",
            "--table",
            "main.t",
            "--set",
            &format!("data_path={rel}"),
        ],
    );
    assert!(added.starts_with("added lake [ducklake]"), "{added}");
    let manifest = d.manifest("lake");
    let locator = manifest.get("locator").unwrap_or(&manifest).to_string();
    assert!(
        locator.contains(&lake.data_path.display().to_string()) && locator.contains(&lake.metadata),
        "paths stored absolute: {locator}"
    );
    seen.ok(d, &["commit", "-m", "first"]);
    let first_commit = d.rev("HEAD");
    let state = d.manifest("lake");
    let state = state.to_string();
    assert!(
        state.contains(&format!("snapshot_id = {s2}")) && state.contains("snapshot_time_us"),
        "{state}"
    );

    // More writes: rows deleted and added, a table in a new schema whose
    // name needs quoting.
    let more = py(
        lake,
        r#"
con = lake()
con.execute("DELETE FROM lake.t WHERE id = 1")
con.execute("INSERT INTO lake.t VALUES (6), (7), (8), (9)")
con.execute("CREATE SCHEMA lake.s2")
con.execute('CREATE TABLE lake.s2."a.b" (x INT)')
con.execute('INSERT INTO lake.s2."a.b" VALUES (10)')
out(head(con))
"#,
        &[],
    );
    let s3 = more.as_i64().unwrap();
    let status = seen.ok(d, &["status", "--snapshot"]);
    assert!(status.contains("lake"), "{status}");
    // The commit is planned first; the plan file holds no password either.
    let plan = d.tmp().join("plan.json");
    seen.ok(
        d,
        &["commit", "-m", "second", "--plan", plan.to_str().unwrap()],
    );
    seen.ok(d, &["commit", "--from-plan", plan.to_str().unwrap()]);
    let plan_text = std::fs::read_to_string(&plan).unwrap();
    seen.0.push(plan_text);
    // A catalog has no branches: on the trunk the commit leaves it at its
    // pin, behind, and `pull` records where it moved (spec/06, "Positions").
    assert!(seen.ok(d, &["status"]).contains("behind lake"));
    seen.ok(d, &["pull", "-m", "second"]);
    assert!(
        d.manifest("lake")
            .to_string()
            .contains(&format!("snapshot_id = {s3}"))
    );

    // DuckDB reads the recorded snapshot through tether's handle: the
    // attach statement it gives, and AT (VERSION => n) on the catalog.
    let opened: Value =
        serde_json::from_str(&seen.ok(d, &["open", "lake", "-r", &first_commit, "--json"]))
            .unwrap();
    assert_eq!(
        opened["address"],
        format!("{}#snapshot={s2}", lake.metadata),
        "{opened}"
    );
    assert_eq!(opened["type"], "DuckLakeHandle", "{opened}");
    assert_eq!(opened["read_only"], true, "{opened}");
    // The handle's typed fields (the library's, not the CLI's JSON shape).
    let fields = tether_testkit::block_on(async {
        let repo = tether::engine::Repo::find(&d.root()).expect("the dataset");
        let opts = tether::engine::open::OpenOptions {
            key: "lake".into(),
            rev: Some(first_commit.clone()),
            ..Default::default()
        };
        tether::engine::open::open(&repo, &opts)
            .await
            .expect("open the recorded snapshot")
            .fields
    });
    seen.0.push(fields.to_string());
    let attach = find_str(&fields, "attach_sql");
    assert!(
        attach.contains(&format!("SNAPSHOT_VERSION {s2}"))
            && attach.contains(&lake.metadata)
            && attach.contains("READ_ONLY"),
        "{fields}"
    );
    assert_eq!(find_str(&fields, "table_ref"), "lake.main.t", "{fields}");
    // The CLI shows the same typed fields: under `fields` in --json (the
    // spec's four keys unchanged), and for a person as `name: value` lines
    // on stderr, stdout staying the address alone.
    assert_eq!(opened["fields"], fields, "{opened}");
    let human = seen.run(d, &["open", "lake", "-r", &first_commit]);
    assert!(human.status.success(), "{}", describe(&human));
    assert_eq!(
        stdout(&human).trim_end(),
        format!("{}#snapshot={s2}", lake.metadata),
        "{}",
        describe(&human)
    );
    assert!(
        stderr(&human).contains(&format!("  attach_sql: {attach}"))
            && stderr(&human).contains("  table_ref: lake.main.t"),
        "{}",
        describe(&human)
    );
    let read = py(
        lake,
        r#"
con = connect()
con.execute(ARGS[0])
via_handle = ids(con, "SELECT id FROM lake.main.t ORDER BY id")
other = connect()
other.execute(ATTACH)
at = ids(other, f"SELECT id FROM lake.t AT (VERSION => {int(ARGS[1])}) ORDER BY id")
out({"handle": via_handle, "at": at})
"#,
        &[&attach, &s2.to_string()],
    );
    assert_eq!(read["handle"], json!([1, 2, 3, 4, 5]), "{read}");
    assert_eq!(read["handle"], read["at"], "{read}");

    // The content diff: tables, with row counts, from the change records.
    let diff: Value =
        serde_json::from_str(&seen.ok(d, &["diff", &first_commit, "HEAD", "--content", "--json"]))
            .unwrap();
    let t = entry(&diff, "main.t");
    assert_eq!(t["change"], "modified", "{diff}");
    assert_eq!(t["detail"], "+4 rows, -1 rows", "{diff}");
    let ab = entry(&diff, "s2.\"a.b\"");
    assert_eq!(ab["change"], "added", "{diff}");
    assert_eq!(ab["detail"], "created, +1 rows, -0 rows", "{diff}");

    // History: the catalog's snapshots, newest first, with their changes.
    let log = seen.ok(d, &["log", "lake"]);
    assert!(log.contains("inserted into main.t"), "{log}");
    assert!(log.contains("created table s2.\"a.b\""), "{log}");

    // verify: the snapshot is there (its files only --deep checks).
    let out = seen.run(d, &["verify"]);
    assert!(
        verify_line(&stdout(&out)).starts_with("unknown"),
        "{}",
        describe(&out)
    );
    let deep = seen.ok(d, &["verify", "--deep"]);
    assert!(verify_line(&deep).starts_with("ok"), "{deep}");

    // Expired: one more snapshot, then the recorded one expired.
    py(
        lake,
        r#"
con = lake()
con.execute("INSERT INTO lake.t VALUES (11)")
con.execute(f"CALL ducklake_expire_snapshots('lake', versions => [{int(ARGS[0])}])")
out(ids(con, "SELECT snapshot_id FROM lake.snapshots()"))
"#,
        &[&s3.to_string()],
    );
    let out = seen.run(d, &["verify"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let line = verify_line(&stdout(&out));
    assert!(
        line.starts_with("missing") && line.contains(&format!("snapshot {s3} is gone")),
        "{}",
        describe(&out)
    );
    let opened = seen.run(d, &["open", "lake", "-r", "HEAD", "--json"]);
    assert!(!opened.status.success(), "{}", describe(&opened));

    // Recreated: the same address, a new catalog.
    if lake.metadata.contains(":postgres:") {
        let port = lake.metadata.split("port=").nth(1).unwrap();
        let port = port.split(' ').next().unwrap();
        py(
            lake,
            r#"
import psycopg
with psycopg.connect(f"dbname=lake host=127.0.0.1 port={ARGS[0]} user=tether") as c:
    c.execute("DROP SCHEMA public CASCADE")
    c.execute("CREATE SCHEMA public")
out(True)
"#,
            &[port],
        );
    } else {
        let db = lake.metadata.strip_prefix("ducklake:sqlite:").unwrap();
        std::fs::remove_file(db).unwrap();
    }
    // (A SQLite catalog's rows are inlined: it may have made no files.)
    let _ = std::fs::remove_dir_all(&lake.data_path);
    py(
        lake,
        r#"
con = lake()
con.execute("CREATE TABLE lake.t (id BIGINT)")
con.execute("INSERT INTO lake.t VALUES (1)")
out(head(con))
"#,
        &[],
    );
    let out = seen.run(d, &["verify"]);
    let line = verify_line(&stdout(&out));
    assert!(
        line.starts_with("drifted") && line.contains("made again"),
        "{}",
        describe(&out)
    );
    seen
}

/// The first value under `key` anywhere in `v`.
fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(key).or_else(|| m.values().find_map(|c| find(c, key))),
        Value::Array(a) => a.iter().find_map(|c| find(c, key)),
        _ => None,
    }
}

/// The first string under `key` anywhere in `v`.
fn find_str(v: &Value, key: &str) -> String {
    find(v, key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .to_owned()
}

#[test]
fn sqlite_catalog_story() {
    let d = Dataset::init();
    let lake = sqlite_lake(&d);
    story(&d, &lake);
}

#[test]
fn postgres_catalog_story_never_shows_the_password() {
    let pg = Postgres::start();
    let d = Dataset::init();
    let lake = postgres_lake(&d, &pg);
    let seen = story(&d, &lake);
    for text in &seen.0 {
        assert!(
            !text.contains(Postgres::PASSWORD),
            "output holds the password:\n{text}"
        );
    }
    let root = d.root();
    for f in crate::support::files_under(&root, &root) {
        if f.ends_with("secrets.toml") || f.starts_with(".git/") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(root.join(&f)) {
            assert!(!text.contains(Postgres::PASSWORD), "{f} holds the password");
        }
    }
}

/// A plugin given the same catalog address connects (the host holds the
/// password) but never sees the password: not in its locator, not in its
/// configuration, not in what its queries return.
#[test]
fn a_hostile_plugin_uses_the_catalog_connection_but_cannot_read_its_password() {
    let pg = Postgres::start();
    let d = Dataset::init();
    let lake = postgres_lake(&d, &pg);
    let path = d.root().join(".tether/secrets.toml");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&lake.secrets);
    std::fs::write(&path, text).unwrap();
    let probe = tether_testkit::test_plugin("sql_probe");
    d.ok(&[
        "plugin",
        "add",
        probe.to_str().unwrap(),
        "--kind",
        "sql-probe",
    ]);
    d.ok(&[
        "add",
        "probe",
        "--kind",
        "sql-probe",
        "--set",
        &format!("db={}", lake.metadata),
    ]);
    let out = d.tether(&["-vv", "snapshot", "--json"]);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!all.contains(Postgres::PASSWORD), "{all}");
    // The connection worked (its default steps ask `current_user`): the
    // host logged in with the password.
    let snapshot: Value = serde_json::from_str(&stdout(&out)).expect("snapshot JSON");
    let results = find(&snapshot, "results").expect("the probe's results");
    assert_eq!(results[1]["rows"], json!([["tether"]]), "{results}");
    // The address reached the plugin without it.
    assert!(all.contains("dbname=lake"), "{all}");
    let committed = std::fs::read_to_string(d.root().join("tether.toml")).unwrap();
    assert!(!committed.contains(Postgres::PASSWORD));
}

/// A DuckDB-file catalog is refused at `add`, naming what is read; so is
/// `init_sql` in a locator.
#[test]
fn duckdb_file_catalogs_and_committed_init_sql_are_refused() {
    let d = Dataset::init();
    let file = d.data().join("lake.ducklake");
    std::fs::write(&file, b"").unwrap();
    for metadata in [
        format!("ducklake:{}", file.display()),
        format!("ducklake:duckdb:{}", file.display()),
    ] {
        let out = d.tether(&["add", "lake", &metadata, "--kind", "ducklake"]);
        assert!(!out.status.success(), "{}", describe(&out));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            text.contains("DuckDB-file") && text.contains("SQLite") && text.contains("PostgreSQL"),
            "{text}"
        );
    }
    let db = d.data().join("c.sqlite");
    let out = d.tether(&[
        "add",
        "lake",
        &format!("ducklake:sqlite:{}", db.display()),
        "--kind",
        "ducklake",
        "--set",
        "init_sql=[\"CREATE SECRET x (TYPE s3)\"]",
    ]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("secrets.toml") || stdout(&out).contains("secrets.toml"));
}

/// Row counts when rows of one data file are deleted in several snapshots.
/// DuckLake then replaces the file's delete file with one holding every
/// delete so far, keeping its `begin_snapshot` and recording the last
/// snapshot as `partial_max`; the catalog keeps only the total
/// `delete_count`. A diff whose ends both lie outside such a file's span is
/// exact; one that ends inside it gives the inserted rows and marks the
/// deleted ones `?`, saying why in the note.
#[test]
fn deletes_of_one_data_file_in_several_snapshots() {
    let d = Dataset::init();
    let mut lake = sqlite_lake(&d);
    // Parquet files, not rows inlined in the catalog.
    lake.attach = lake.attach.replace("/')", "/', DATA_INLINING_ROW_LIMIT 0)");
    py(
        &lake,
        r#"
con = lake()
con.execute("CREATE TABLE lake.t (id BIGINT)")
con.execute("INSERT INTO lake.t SELECT range FROM range(10)")
out(head(con))
"#,
        &[],
    );
    d.ok(&[
        "add",
        "lake",
        &lake.add_as,
        "--kind",
        "ducklake",
        "--table",
        "main.t",
        "--set",
        &format!("data_path={}/", lake.data_path.display()),
    ]);
    d.ok(&["commit", "-m", "ten rows"]);
    let c1 = d.rev("HEAD");
    // Snapshot by snapshot: 3 rows deleted from the first file; 2 more from
    // it; 2 rows added in a second file and 1 of them deleted.
    let steps = [
        "DELETE FROM lake.t WHERE id < 3",
        "DELETE FROM lake.t WHERE id IN (5, 6)",
        "INSERT INTO lake.t VALUES (100), (101)",
        "DELETE FROM lake.t WHERE id = 100",
    ];
    let mut commits = vec![c1];
    for (i, sql) in steps.iter().enumerate() {
        py(
            &lake,
            "con = lake()\ncon.execute(ARGS[0])\nout(head(con))",
            &[sql],
        );
        // DuckLake has no branches: on the trunk `pull` takes its new
        // snapshot (spec/06, "Positions").
        d.ok(&["pull", "-m", &format!("step {i}")]);
        commits.push(d.rev("HEAD"));
    }
    // What DuckLake wrote: one delete file for the first data file,
    // spanning the two delete snapshots.
    let files = py(
        &lake,
        r#"
con = lake()
out(con.execute("SELECT begin_snapshot, partial_max, delete_count FROM __ducklake_metadata_lake.ducklake_delete_file WHERE end_snapshot IS NULL ORDER BY begin_snapshot").fetchall())
"#,
        &[],
    );
    assert_eq!(
        files[0][2], 5,
        "one delete file holds both deletes: {files}"
    );
    assert!(
        files[0][1].as_i64() > files[0][0].as_i64(),
        "it spans snapshots: {files}"
    );
    let diff = |a: &str, b: &str| -> (Value, String) {
        let text = d.ok(&["diff", a, b, "--content", "--json"]);
        let v: Value = serde_json::from_str(&text).unwrap();
        let note = v
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == "lake")
            .map(|c| c["detail"]["note"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        (entry(&v, "main.t"), note)
    };
    // Ends outside the span: exact, forward and back.
    let (t, note) = diff(&commits[0], &commits[2]);
    assert_eq!(t["detail"], "+0 rows, -5 rows", "{t} {note}");
    assert!(note.is_empty(), "{note}");
    let (t, _) = diff(&commits[2], &commits[0]);
    assert_eq!(t["detail"], "+5 rows, -0 rows", "{t}");
    let (t, note) = diff(&commits[0], &commits[4]);
    assert_eq!(t["detail"], "+2 rows, -6 rows", "{t} {note}");
    assert!(note.is_empty(), "{note}");
    let (t, _) = diff(&commits[2], &commits[4]);
    assert_eq!(t["detail"], "+2 rows, -1 rows", "{t}");
    // An end inside the span: the first 3 deletes and the next 2 are one
    // total in the catalog. The deleted count is not given, and the note
    // says which file and what only it can tell.
    for (a, b) in [(0, 1), (1, 2), (1, 4)] {
        let (t, note) = diff(&commits[a], &commits[b]);
        let plus = if b == 4 { 2 } else { 0 };
        assert_eq!(
            t["detail"],
            format!("+{plus} rows, -? rows"),
            "{a}..{b}: {t}"
        );
        assert!(
            note.contains("main.t: a delete file live at snapshot")
                && note.contains("delete_count")
                && note.contains("_ducklake_internal_snapshot_id"),
            "{note}"
        );
    }
    // The human output prints the note.
    let text = d.ok(&["diff", &commits[0], &commits[1], "--content"]);
    assert!(text.contains("-? rows") && text.contains("note:"), "{text}");
}
