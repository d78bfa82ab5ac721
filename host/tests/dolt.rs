//! The `dolt` plugin against the Dolt stand-in (`tether_testkit::DoltServer`,
//! `support/dolt_server.py`): a server speaking the real MySQL wire protocol
//! whose statements DoltHub's embedded engine doltlite executes, so tags,
//! branches, merges and conflicts are Dolt's, and the plugin's SQL goes
//! through the host's sqlx MySQL driver as it would to `dolt sql-server`.
//!
//! The tests write as a Dolt user would, over the same protocol (sqlx's
//! MySQL client, text protocol): on the trunk through the database, on a
//! bookmark through the handle's revision database (`USE `db/branch``).

use serde_json::Value;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{AssertSqlSafe, ConnectOptions as _, Executor as _, Row as _};
use tether_testkit::{DoltServer, block_on};

use crate::support::{Dataset, describe, stderr, stdout};

/// Run `statements` in one session as the server's user; the last one's
/// rows, every cell as text (NULL as "NULL").
fn sql(server: &DoltServer, statements: &[&str]) -> Vec<Vec<String>> {
    block_on(async {
        let options: MySqlConnectOptions = server.url("").parse().expect("a MySQL URL");
        let mut conn: MySqlConnection = options.connect().await.expect("connect to the stand-in");
        let mut last = Vec::new();
        for statement in statements {
            let rows = conn
                .fetch_all(AssertSqlSafe(statement.to_string()))
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
            last = rows
                .iter()
                .map(|row| {
                    (0..row.len())
                        .map(|i| {
                            if let Ok(v) = row.try_get::<Option<String>, _>(i) {
                                return v.unwrap_or_else(|| "NULL".into());
                            }
                            match row.try_get::<Option<i64>, _>(i) {
                                Ok(v) => v.map_or("NULL".into(), |n| n.to_string()),
                                Err(e) => panic!("{statement}: column {i}: {e}"),
                            }
                        })
                        .collect()
                })
                .collect();
        }
        last
    })
}

/// The one cell a query returns.
fn one(server: &DoltServer, statements: &[&str]) -> String {
    let rows = sql(server, statements);
    assert_eq!(rows.len(), 1, "{statements:?} returned {rows:?}");
    rows[0][0].clone()
}

fn head(server: &DoltServer, branch: &str) -> String {
    one(
        server,
        &[
            "USE lab",
            &format!("SELECT hash FROM dolt_branches WHERE name = '{branch}'"),
        ],
    )
}

fn tags(server: &DoltServer) -> Vec<(String, String)> {
    sql(
        server,
        &[
            "USE lab",
            "SELECT tag_name, tag_hash FROM dolt_tags ORDER BY tag_name",
        ],
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone()))
    .collect()
}

fn branches(server: &DoltServer) -> Vec<String> {
    sql(
        server,
        &["USE lab", "SELECT name FROM dolt_branches ORDER BY name"],
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect()
}

/// A stand-in serving database `lab` with a table `t` of two committed rows,
/// and a dataset whose secrets.toml gives the server's credentials by its
/// `[uris."mysql://host:port"]` entry.
fn setup() -> (Dataset, DoltServer) {
    let d = Dataset::init();
    let server = DoltServer::start(&d.data().join("dolt"), &["lab"]);
    sql(
        &server,
        &[
            "USE lab",
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32))",
            "INSERT INTO t VALUES (1, 'one'), (2, 'two')",
            "CALL DOLT_COMMIT('-Am', 'two rows')",
        ],
    );
    std::fs::write(
        d.root().join(".tether/secrets.toml"),
        format!(
            "[uris.\"{}\"]\nuser = \"{}\"\npassword = \"{}\"\n",
            server.server_uri(),
            DoltServer::USER,
            DoltServer::PASSWORD
        ),
    )
    .unwrap();
    (d, server)
}

/// The tag a commit's output says it pinned `db` with.
fn pinned_tag(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("pinned db -> "))
        .unwrap_or_else(|| panic!("the commit pins db:\n{out}"))
        .trim()
        .to_owned()
}

/// Run tether, keep everything it printed (for the password check), and
/// require success.
fn ok(d: &Dataset, printed: &mut String, args: &[&str]) -> String {
    let out = d.tether(args);
    printed.push_str(&stdout(&out));
    printed.push_str(&stderr(&out));
    assert!(out.status.success(), "tether {args:?}:\n{}", describe(&out));
    stdout(&out)
}

/// The spec's story: pin, fork, write on the branch, a merge that conflicts
/// (reported by table, nothing written), promote, drop and gc; the password
/// in no output and no file tether wrote.
#[test]
fn pin_fork_write_conflict_promote_gc() {
    let (d, server) = setup();
    let mut printed = String::new();
    let url = format!("mysql://127.0.0.1:{}/lab", server.port());
    let added = ok(
        &d,
        &mut printed,
        &[
            "add",
            "db",
            "--kind",
            "dolt",
            "--set",
            &format!("url={url}"),
        ],
    );
    assert!(added.starts_with("added db [dolt]"), "{added}");
    assert!(
        added.contains("experimental: what it was tested against is in the user guide, docs/guide/backends/dolt.md"),
        "{added}"
    );

    // Pin: a Dolt tag at main's head.
    let main1 = head(&server, "main");
    let out = ok(&d, &mut printed, &["commit", "-m", "first"]);
    let first_commit = d.rev("HEAD");
    let tag1 = pinned_tag(&out);
    assert!(
        tag1.starts_with(&format!("tether.{}.", d.dataset_id())),
        "{tag1}"
    );
    assert_eq!(tags(&server), vec![(tag1.clone(), main1.clone())]);

    // Fork: `new -b` makes the working branch at the pin; a writable open
    // names its revision database.
    let out = ok(&d, &mut printed, &["new", "-b", "feat", "--eager"]);
    let working = format!("tether.ws.{}.feat", d.dataset_id());
    assert!(out.contains(&working), "{out}");
    assert_eq!(head(&server, &working), main1);
    let opened: Value =
        serde_json::from_str(&ok(&d, &mut printed, &["open", "db", "--json"])).unwrap();
    assert_eq!(opened["read_only"], false, "{opened}");
    assert_eq!(opened["type"], "DoltHandle", "{opened}");
    let address = opened["address"].as_str().unwrap().to_owned();
    assert_eq!(address, format!("{url}/{working}"));
    let database_ref = address
        .rsplit_once(&format!("{}/", server.port()))
        .unwrap()
        .1
        .to_owned();

    // Write on the branch through its revision database, as a Dolt client.
    sql(
        &server,
        &[
            &format!("USE `{database_ref}`"),
            "INSERT INTO t VALUES (3, 'three'), (4, 'four')",
            "UPDATE t SET v = 'uno' WHERE id = 1",
            "CALL DOLT_COMMIT('-Am', 'feature rows')",
        ],
    );
    assert_eq!(
        head(&server, "main"),
        main1,
        "the write went to the branch only"
    );
    let status = ok(&d, &mut printed, &["status", "--snapshot"]);
    assert!(status.contains("modified db"), "{status}");
    let out = ok(&d, &mut printed, &["commit", "-m", "feature rows"]);
    let tag2 = pinned_tag(&out);
    let feature = head(&server, &working);
    assert!(tags(&server).contains(&(tag2.clone(), feature.clone())));

    // The native diff: table t, two rows added and one modified.
    let diff: Value = serde_json::from_str(&ok(
        &d,
        &mut printed,
        &["diff", &first_commit, "HEAD", "--content", "--json"],
    ))
    .unwrap();
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "db")
        .unwrap_or_else(|| panic!("db changed: {diff}"));
    assert_eq!(change["detail"]["unit"], "tables", "{diff}");
    let entries = change["detail"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{diff}");
    assert_eq!(entries[0]["path"], "t", "{diff}");
    assert_eq!(entries[0]["detail"], "+2 rows, ~1 rows", "{diff}");

    // Someone changes row 1 on main too: promote must merge, and the merge
    // conflicts on t. Nothing is written: main stays, no conflict is left.
    sql(
        &server,
        &[
            "USE lab",
            "UPDATE t SET v = 'eins' WHERE id = 1",
            "CALL DOLT_COMMIT('-Am', 'theirs')",
        ],
    );
    let main2 = head(&server, "main");
    let out = d.tether(&["promote", "--json"]);
    printed.push_str(&stdout(&out));
    printed.push_str(&stderr(&out));
    assert!(!out.status.success(), "{}", describe(&out));
    let report: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("promote --json: {e}\n{}", describe(&out)));
    assert_eq!(
        report["conflicts"]["db"],
        serde_json::json!(["t"]),
        "{report}"
    );
    assert_eq!(
        head(&server, "main"),
        main2,
        "a conflicting merge wrote nothing"
    );
    assert_eq!(
        one(&server, &["USE lab", "SELECT v FROM t WHERE id = 1"]),
        "eins"
    );
    assert_eq!(one(&server, &["USE lab", "SELECT count(*) FROM t"]), "2");
    assert_eq!(
        one(&server, &["USE lab", "SELECT count(*) FROM dolt_conflicts"]),
        "0",
        "no conflict left behind"
    );

    // Take their change back: promote fast-forwards main to the branch.
    sql(&server, &["USE lab", "CALL DOLT_RESET('--hard', 'HEAD~1')"]);
    assert_eq!(head(&server, "main"), main1);
    let promoted = ok(&d, &mut printed, &["promote"]);
    assert!(promoted.contains(&feature), "{promoted}");
    assert_eq!(head(&server, "main"), feature);
    assert_eq!(one(&server, &["USE lab", "SELECT count(*) FROM t"]), "4");

    // History, newest first, from dolt_log.
    let log = ok(&d, &mut printed, &["log", "db"]);
    assert!(log.contains("feature rows"), "{log}");

    // drop: the feature bookmark's branch goes; gc: a pin no commit
    // references any more goes, and only it.
    ok(&d, &mut printed, &["drop", "feat", "--no-dry-run"]);
    assert!(
        !branches(&server).contains(&working),
        "{:?}",
        branches(&server)
    );
    sql(
        &server,
        &[
            "USE lab",
            "INSERT INTO t VALUES (5, 'five')",
            "CALL DOLT_COMMIT('-Am', 'forgotten')",
        ],
    );
    let out = ok(&d, &mut printed, &["commit", "-m", "forgotten"]);
    let tag3 = pinned_tag(&out);
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    ok(&d, &mut printed, &["gc", "--no-dry-run"]);
    let names: Vec<String> = tags(&server).into_iter().map(|(n, _)| n).collect();
    let mut want = vec![tag1.clone(), tag2.clone()];
    want.sort();
    assert_eq!(names, want, "exactly the forgotten pin's tag went ({tag3})");
    let verified = ok(&d, &mut printed, &["verify"]);
    assert!(!verified.contains("missing"), "{verified}");

    // The password reached no output and no file tether wrote.
    assert!(!printed.contains(DoltServer::PASSWORD), "{printed}");
    let root = d.root();
    for f in crate::support::files_under(&root, &root) {
        if f.ends_with("secrets.toml") || f.starts_with(".git/") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(root.join(&f)) {
            assert!(
                !text.contains(DoltServer::PASSWORD),
                "{f} holds the password"
            );
        }
    }
}

/// A pin refuses a branch with uncommitted changes (`dolt_branches.dirty`).
#[test]
fn a_dirty_branch_is_refused_at_pin_time() {
    let (d, server) = setup();
    let url = format!("mysql://127.0.0.1:{}/lab", server.port());
    d.ok(&[
        "add",
        "db",
        "--kind",
        "dolt",
        "--set",
        &format!("url={url}"),
    ]);
    // A write nobody committed: Dolt keeps it in the branch's working set.
    sql(&server, &["USE lab", "INSERT INTO t VALUES (9, 'nine')"]);
    let out = d.tether(&["commit", "-m", "dirty"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("uncommitted changes"), "{text}");
    assert!(tags(&server).is_empty(), "no tag was made");
}

/// Without a `[uris]` entry the server gets no password, and says so; the
/// locator's host/port/database alone are refused with the `url` to write.
#[test]
fn credentials_come_only_from_the_servers_secrets_entry() {
    let (d, server) = setup();
    std::fs::write(d.root().join(".tether/secrets.toml"), "").unwrap();
    let url = format!("mysql://dolt@127.0.0.1:{}/lab", server.port());
    d.ok(&[
        "add",
        "db",
        "--kind",
        "dolt",
        "--set",
        &format!("url={url}"),
    ]);
    let out = d.tether(&["status", "--snapshot"]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("cannot reach the Dolt server")
            || text.contains("Access denied")
            || text.contains("cannot connect"),
        "{}",
        describe(&out)
    );
    let out = d.tether(&[
        "add",
        "db2",
        "--kind",
        "dolt",
        "--host",
        "127.0.0.1",
        "--database",
        "lab",
    ]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("--set url="), "{}", describe(&out));
}

/// A hostile plugin given the same server (the `sql-probe` test plugin,
/// which answers with everything that reached its sandbox: its locator, its
/// configuration, what each SQL call did) gets a working connection, opened
/// by the host with the server's credentials, and never the password.
#[test]
fn a_hostile_plugin_cannot_read_the_password() {
    let (d, server) = setup();
    let probe = tether_testkit::test_plugin("sql_probe");
    d.ok(&[
        "plugin",
        "add",
        probe.to_str().unwrap(),
        "--kind",
        "sql-probe",
    ]);
    let url = format!("mysql://127.0.0.1:{}/lab", server.port());
    d.ok(&[
        "add",
        "probe",
        "--kind",
        "sql-probe",
        "--set",
        &format!("db={url}"),
    ]);
    let out = d.tether(&["-vv", "snapshot", "--json"]);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !o.contains(DoltServer::PASSWORD) && !e.contains(DoltServer::PASSWORD),
        "{o}\n{e}"
    );
    let snapshot: Value = serde_json::from_str(&o).expect("snapshot JSON");
    let state = find_key(&snapshot, "results").expect("the probe's state");
    // The host connected with the [uris] entry's user and password ...
    assert_eq!(state[0], "opened", "{state}");
    // ... and a name the plugin was not granted stays closed.
    assert_eq!(state[3]["error"], "denied", "{state}");
    assert!(e.contains("sql: connected"), "{e}");
}

/// The first value under `key` anywhere in `v`.
fn find_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m
            .get(key)
            .or_else(|| m.values().find_map(|c| find_key(c, key))),
        Value::Array(a) => a.iter().find_map(|c| find_key(c, key)),
        _ => None,
    }
}
