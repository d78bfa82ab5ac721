//! The host's `sql` capability (contract 0.1.3, issue 24) against a real
//! PostgreSQL (`tether_testkit::Postgres`) and SQLite files, through the
//! `sql-probe` test plugin (tests/plugins/sql-probe): it runs the steps its
//! locator lists and answers with what each did and with the locator and
//! configuration it was given, so every test sees what reached the sandbox.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tether::plugin::{Plugin, Runtime, RuntimeConfig, SqlLimits};
use tether_testkit::{Postgres, block_on, cache_dir, test_plugin};

use crate::support::{Dataset, describe, stderr, stdout};

fn runtime(limits: SqlLimits) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout: Duration::from_secs(120),
        sql: limits,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

async fn probe(rt: &Runtime) -> Arc<Plugin> {
    rt.load_file(&test_plugin("sql_probe"))
        .await
        .expect("load sql-probe")
}

/// What the probe's `fingerprint` answered for this locator and config.
async fn run(plugin: &Arc<Plugin>, locator: Value, config: Value) -> Value {
    plugin
        .object(&locator, &config)
        .fingerprint(None)
        .await
        .expect("the probe answers")
}

fn error_kind(result: &Value) -> &str {
    result["error"].as_str().unwrap_or("")
}

#[test]
fn the_probe_declares_its_sql_keys_and_nothing_else() {
    block_on(async {
        let plugin = probe(&runtime(SqlLimits::default())).await;
        assert_eq!(plugin.sql_keys(), ["db", "catalog.uri"]);
        assert!(plugin.http_grants().is_empty());
    });
}

#[test]
fn a_granted_postgres_connection_runs_typed_statements_and_never_shows_the_password() {
    let pg = Postgres::start();
    pg.psql(
        "postgres",
        "CREATE TABLE t (i int4, b bigint, f float8, s text, flag bool, data bytea, j jsonb, n int4)",
    );
    block_on(async {
        let plugin = probe(&runtime(SqlLimits::default())).await;
        let steps = json!([
            {"op": "open"},
            {"op": "dialect"},
            {"op": "execute", "sql": "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)",
             "params": [7, 9007199254740993_i64, 1.5, "héllo", true, {"blob": [0, 1, 255]}, "{\"a\": 1}", null]},
            {"op": "query", "sql": "SELECT i, b, f, s, flag, data, j, n FROM t WHERE i = $1 AND s = $2",
             "params": [7, "héllo"]},
            {"op": "query", "sql": "SELECT i FROM t WHERE i = $1", "params": [8]},
            {"op": "query", "sql": "SELECT now() AS ts"},
            {"op": "query", "sql": "SELECT 1; SELECT 2"},
            {"op": "query", "sql": "SELECT * FROM missing"},
            {"op": "open", "conn": "catalog.uri"},
            {"op": "open", "conn": "other"},
        ]);
        let state = run(
            &plugin,
            json!({"db": pg.url("postgres"), "steps": steps}),
            json!({"catalog": {"warehouse": "/w"}}),
        )
        .await;
        let r = &state["results"];
        assert_eq!(r[0], json!("opened"), "{state}");
        assert_eq!(r[1], json!("postgres"));
        assert_eq!(r[2], json!({"changed": 1}), "{state}");
        assert_eq!(
            r[3],
            json!({
                "columns": ["i", "b", "f", "s", "flag", "data", "j", "n"],
                "rows": [[7, 9007199254740993_i64, {"real": 1.5}, "héllo", true,
                          {"blob": [0, 1, 255]}, "{\"a\":1}", {"null": true}]],
            }),
            "{state}"
        );
        // No row: the columns still come back.
        assert_eq!(r[4], json!({"columns": ["i"], "rows": []}));
        // A type sql has no case for: refused with how to cast it.
        assert_eq!(error_kind(&r[5]), "invalid", "{state}");
        assert!(
            r[5]["message"].as_str().unwrap().contains("::text"),
            "{state}"
        );
        // One statement per call: the server refuses two.
        assert_eq!(error_kind(&r[6]), "database", "{state}");
        assert_eq!(r[6]["code"], json!("42601"), "{state}");
        assert_eq!(r[7]["code"], json!("42P01"), "{state}");
        // Declared but named nowhere, and not declared at all: denied.
        assert_eq!(error_kind(&r[8]), "denied", "{state}");
        assert_eq!(error_kind(&r[9]), "denied", "{state}");

        // The plugin's copy of the address has no password; its config is
        // what it was, and nothing anywhere holds the password.
        assert_eq!(
            state["locator"]["db"],
            json!(pg.url_without_password("postgres"))
        );
        assert_eq!(state["config"], json!({"catalog": {"warehouse": "/w"}}));
        assert!(!state.to_string().contains(Postgres::PASSWORD), "{state}");

        // The row is really there, typed as the columns say.
        assert_eq!(
            pg.psql(
                "postgres",
                "SELECT i, b, f, s, flag, encode(data, 'hex'), n IS NULL FROM t"
            ),
            "7|9007199254740993|1.5|héllo|t|0001ff|t\n"
        );

        // A wrong password: a connect error that holds neither password.
        let wrong = pg
            .url("postgres")
            .replace(Postgres::PASSWORD, "wrong-pw-7731");
        let state = run(
            &plugin,
            json!({"db": wrong, "steps": [{"op": "open"}]}),
            json!({}),
        )
        .await;
        let r = &state["results"][0];
        assert_eq!(error_kind(r), "connect", "{state}");
        let text = state.to_string();
        assert!(!text.contains("wrong-pw-7731"), "{text}");
        assert!(!text.contains(Postgres::PASSWORD), "{text}");
        assert!(
            r["message"].as_str().unwrap().contains("authentication"),
            "{text}"
        );
    });
}

#[test]
fn an_address_in_the_configuration_or_the_secrets_entry_is_granted_without_its_password() {
    let pg = Postgres::start();
    block_on(async {
        let plugin = probe(&runtime(SqlLimits::default())).await;
        let steps = json!([
            {"op": "open", "conn": "catalog.uri"},
            {"op": "query", "conn": "catalog.uri", "sql": "SELECT current_user AS u"},
        ]);
        // In the configuration (secrets.toml's [backends.<kind>]), nested.
        let config = json!({"catalog": {"uri": pg.url("postgres").replace("postgres://", "postgresql+psycopg://")}});
        let state = run(&plugin, json!({"steps": steps.clone()}), config).await;
        assert_eq!(
            state["results"][1],
            json!({"columns": ["u"], "rows": [["tether"]]}),
            "{state}"
        );
        assert_eq!(
            state["config"]["catalog"]["uri"],
            json!(
                pg.url_without_password("postgres")
                    .replace("postgres://", "postgresql+psycopg://")
            )
        );
        assert!(!state.to_string().contains(Postgres::PASSWORD), "{state}");

        // In the object's own secrets entry, which reaches the plugin's
        // config (stripped) under the same key.
        let secret = json!({"catalog.uri": pg.url("postgres")});
        let client = plugin.object_with_secrets(
            &json!({"steps": steps}),
            &json!({}),
            secret.as_object().unwrap(),
        );
        let state = client.fingerprint(None).await.expect("probe");
        assert_eq!(state["results"][1]["rows"], json!([["tether"]]), "{state}");
        // Under the same key, as a table path like the TOML it came from.
        assert_eq!(
            state["config"]["catalog"]["uri"],
            json!(pg.url_without_password("postgres"))
        );
        assert!(!state.to_string().contains(Postgres::PASSWORD), "{state}");
    });
}

#[test]
fn transactions_commit_roll_back_and_end_when_the_connection_is_dropped() {
    let pg = Postgres::start();
    pg.psql("postgres", "CREATE TABLE tx (k int PRIMARY KEY, v text)");
    pg.psql("postgres", "INSERT INTO tx VALUES (0, 'start')");
    block_on(async {
        let limits = SqlLimits {
            statement_timeout: Duration::from_secs(5),
            ..SqlLimits::default()
        };
        let plugin = probe(&runtime(limits)).await;
        let steps = json!([
            {"op": "open"},
            {"op": "begin"},
            {"op": "execute", "sql": "INSERT INTO tx VALUES (1, 'rolled back')"},
            {"op": "rollback"},
            {"op": "query", "sql": "SELECT count(*) AS n FROM tx WHERE k = 1"},
            // An open transaction holding row 0's lock, then dropped.
            {"op": "begin"},
            {"op": "execute", "sql": "UPDATE tx SET v = 'dropped' WHERE k = 0"},
            {"op": "drop"},
            // Another connection takes the same row lock: it could not
            // while the dropped one's transaction were open.
            {"op": "open", "conn": "db"},
            {"op": "execute", "sql": "UPDATE tx SET v = 'second' WHERE k = 0"},
            {"op": "begin"},
            {"op": "execute", "sql": "INSERT INTO tx VALUES (2, 'committed')"},
            {"op": "commit"},
            {"op": "begin", "read_only": true},
            {"op": "execute", "sql": "INSERT INTO tx VALUES (3, 'read-only')"},
            {"op": "rollback"},
            {"op": "commit"},
            {"op": "begin"},
            {"op": "begin"},
            {"op": "execute", "sql": "COMMIT"},
        ]);
        let state = run(
            &plugin,
            json!({"db": pg.url("postgres"), "steps": steps}),
            json!({}),
        )
        .await;
        let r = &state["results"];
        assert_eq!(r[3], json!("rolled back"), "{state}");
        assert_eq!(r[4]["rows"], json!([[0]]), "{state}");
        assert_eq!(r[7], json!(true), "{state}");
        assert_eq!(r[9], json!({"changed": 1}), "{state}");
        assert_eq!(r[12], json!("committed"), "{state}");
        // Read-only where asked: PostgreSQL refuses the write.
        assert_eq!(r[14]["code"], json!("25006"), "{state}");
        // Out of order, and transaction control outside the interface.
        assert_eq!(error_kind(&r[16]), "invalid", "{state}");
        assert_eq!(r[17], json!("begun"), "{state}");
        assert_eq!(error_kind(&r[18]), "invalid", "{state}");
        assert_eq!(error_kind(&r[19]), "invalid", "{state}");
    });
    // The call is over: its open transaction (steps 17-19) was rolled back
    // with the connection, and only what was committed is there.
    assert_eq!(
        pg.psql("postgres", "SELECT k, v FROM tx ORDER BY k"),
        "0|second\n2|committed\n"
    );
}

#[test]
fn the_statement_timeout_and_the_row_cap_hold() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    create_sqlite(&db, &[]);
    block_on(async {
        let plugin = probe(&runtime(SqlLimits {
            statement_timeout: Duration::from_secs(1),
            max_rows: 10,
        }))
        .await;
        let steps = json!([
            {"op": "open"},
            {"op": "query", "sql": "SELECT pg_sleep(30)"},
            {"op": "query", "sql": "SELECT 1 AS one"},
            {"op": "query", "sql": "SELECT generate_series(1, 10) AS n"},
            {"op": "query", "sql": "SELECT generate_series(1, 11) AS n"},
        ]);
        let state = run(
            &plugin,
            json!({"db": pg.url("postgres"), "steps": steps}),
            json!({}),
        )
        .await;
        let r = &state["results"];
        assert_eq!(error_kind(&r[1]), "timeout", "{state}");
        // The server cancelled the statement; the connection goes on.
        assert_eq!(r[2]["rows"], json!([[1]]), "{state}");
        assert_eq!(r[3]["rows"].as_array().unwrap().len(), 10, "{state}");
        assert_eq!(error_kind(&r[4]), "too-many-rows", "{state}");
        assert!(r[4]["message"].as_str().unwrap().contains("10"), "{state}");

        // SQLite: a statement that never ends is interrupted.
        let steps = json!([
            {"op": "open"},
            {"op": "query", "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"},
            {"op": "query", "sql": "SELECT 2 AS two"},
        ]);
        let state = run(
            &plugin,
            json!({"db": format!("sqlite://{}", db.display()), "steps": steps}),
            json!({}),
        )
        .await;
        assert_eq!(error_kind(&state["results"][1]), "timeout", "{state}");
        assert_eq!(state["results"][2]["rows"], json!([[2]]), "{state}");
    });
}

/// Make a SQLite database file at `path` with these statements run.
fn create_sqlite(path: &std::path::Path, statements: &[&str]) {
    use sqlx::{ConnectOptions as _, Executor as _};
    block_on(async {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .connect()
            .await
            .expect("create a SQLite database");
        for s in statements {
            conn.execute(sqlx::AssertSqlSafe(s.to_string()))
                .await
                .expect("set up the SQLite database");
        }
    });
}

#[test]
fn a_sqlite_file_is_granted_by_path_typed_one_statement_at_a_time_and_never_followed_or_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    create_sqlite(
        &db,
        &["CREATE TABLE t (i INTEGER, f REAL, s TEXT, b BLOB, n INTEGER)"],
    );
    let other = dir.path().join("other.db");
    block_on(async {
        let plugin = probe(&runtime(SqlLimits::default())).await;
        let steps = json!([
            {"op": "open"},
            {"op": "dialect"},
            {"op": "execute", "sql": "INSERT INTO t VALUES (?, ?, ?, ?, ?)",
             "params": [-3, 2.25, "ünï", {"blob": [9, 8]}, null]},
            {"op": "query", "sql": "SELECT i, f, s, b, n FROM t WHERE i = ?", "params": [-3]},
            {"op": "query", "sql": "SELECT 1; DELETE FROM t"},
            {"op": "execute", "sql": format!("ATTACH DATABASE '{}' AS o", other.display())},
            {"op": "execute", "sql": format!("VACUUM INTO '{}'", other.display())},
            // The same file under the other key, spelled as SQLAlchemy does.
            {"op": "open", "conn": "catalog.uri"},
            {"op": "query", "conn": "catalog.uri", "sql": "SELECT count(*) AS n FROM t"},
        ]);
        let state = run(
            &plugin,
            json!({"db": format!("sqlite://{}", db.display()), "steps": steps}),
            json!({"catalog": {"uri": format!("sqlite:///{}", db.display())}}),
        )
        .await;
        let r = &state["results"];
        assert_eq!(r[1], json!("sqlite"), "{state}");
        assert_eq!(r[2], json!({"changed": 1}), "{state}");
        assert_eq!(
            r[3],
            json!({"columns": ["i", "f", "s", "b", "n"],
                   "rows": [[-3, {"real": 2.25}, "ünï", {"blob": [9, 8]}, {"null": true}]]}),
            "{state}"
        );
        assert_eq!(error_kind(&r[4]), "invalid", "{state}");
        assert_eq!(error_kind(&r[5]), "invalid", "{state}");
        assert_eq!(error_kind(&r[6]), "invalid", "{state}");
        assert!(!other.exists(), "a statement reached another file");
        // The DELETE after `;` never ran.
        assert_eq!(r[8]["rows"], json!([[1]]), "{state}");

        // A symlink to the database is not followed; a missing file is
        // not created.
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&db, &link).unwrap();
        let missing = dir.path().join("missing.db");
        for (path, why) in [(&link, "symlink"), (&missing, "does not exist")] {
            let state = run(
                &plugin,
                json!({"db": format!("sqlite:{}", path.display()), "steps": [{"op": "open"}]}),
                json!({}),
            )
            .await;
            let r = &state["results"][0];
            assert_eq!(error_kind(r), "connect", "{state}");
            assert!(r["message"].as_str().unwrap().contains(why), "{state}");
        }
        assert!(!missing.exists());
    });
}

#[test]
fn the_password_from_secrets_never_reaches_the_plugin_the_manifest_or_verbose_output() {
    let pg = Postgres::start();
    let d = Dataset::init();
    let root = d.root();
    let probe = test_plugin("sql_probe");
    d.ok(&[
        "plugin",
        "add",
        probe.to_str().unwrap(),
        "--kind",
        "sql-probe",
    ]);
    // The address is committed without a password; secrets.toml gives it
    // by the address's prefix.
    let secrets = root.join(".tether/secrets.toml");
    let mut text = std::fs::read_to_string(&secrets).unwrap_or_default();
    text.push_str(&format!(
        "\n[uris.\"postgres://tether@127.0.0.1:{}/\"]\npassword = \"{}\"\n",
        pg.port(),
        Postgres::PASSWORD
    ));
    std::fs::write(&secrets, text).unwrap();
    let address = pg.url_without_password("postgres");
    d.ok(&[
        "add",
        "probe",
        "--kind",
        "sql-probe",
        "--set",
        &format!("db={address}"),
    ]);
    let out = d.tether(&["-vv", "snapshot", "--json"]);
    assert!(out.status.success(), "{}", describe(&out));
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(
        !o.contains(Postgres::PASSWORD) && !e.contains(Postgres::PASSWORD),
        "{e}"
    );
    // -v says which connection was opened, by its address without password.
    assert!(e.contains("sql: connected") && e.contains(&address), "{e}");

    let snapshot: Value = serde_json::from_str(&o).expect("snapshot JSON");
    let state = find_key(&snapshot, "results").expect("the probe's state");
    let results = state.as_array().expect("results");
    assert_eq!(results[1]["rows"], json!([["tether"]]), "{state}");
    assert_eq!(results[2]["error"], json!("database"), "{state}");
    assert_eq!(results[2]["code"], json!("42P01"), "{state}");
    assert_eq!(results[3]["error"], json!("denied"), "{state}");
    for file in ["tether.toml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(!text.contains(Postgres::PASSWORD), "{file}");
    }
    // `tether backends` says which host capabilities each plugin imports.
    let rows: Vec<Value> = serde_json::from_str(&d.ok(&["backends", "--json"])).unwrap();
    let imports = |kind: &str| {
        rows.iter()
            .find(|r| r["kind"] == json!(kind))
            .map(|r| r["imports"].clone())
    };
    assert_eq!(imports("sql-probe"), Some(json!(["sql"])), "{rows:?}");
    assert_eq!(imports("memory"), Some(json!(["storage"])), "{rows:?}");
    assert!(d.ok(&["backends"]).contains("imports sql\n"));

    let manifests = crate::support::files_under(&root, &root.join(".tether"));
    for m in manifests.iter().filter(|m| !m.ends_with("secrets.toml")) {
        if let Ok(text) = std::fs::read_to_string(root.join(m)) {
            assert!(!text.contains(Postgres::PASSWORD), "{m}");
        }
    }
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
