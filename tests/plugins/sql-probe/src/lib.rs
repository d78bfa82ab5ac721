//! A test plugin for the host's `sql` capability (`host/tests/net_sql.rs`).
//!
//! It declares the SQL keys `db` and `catalog.uri` (`describe-net`). Its
//! `fingerprint` runs the `steps` its locator lists, in order, and answers
//! with what each did, plus the locator and configuration it was given (so a
//! test sees what reached the sandbox). A step is
//! `{"op": "open" | "query" | "execute" | "begin" | "commit" | "rollback" |
//! "drop" | "dialect", "conn": NAME, "sql": ..., "params": [...],
//! "read_only": bool}`; `open` opens the connection granted under `conn`
//! (any name, granted or not), the others use the one opened under it.
//! Parameters are JSON: null, booleans, integers, floats, strings, and
//! `{"blob": [bytes]}`; cells come back the same way, except NULL as
//! `{"null": true}` and a real as `{"real": x}`. Without `steps` it runs
//! [`default_steps`].
//!
//! Its harness (for `tether-conformance --scratch <sql address>`) makes a
//! table in the granted database and counts its rows as the state.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value as Json, json};
use tether_sdk::sql::{Connection, Dialect, SqlError, Value};
use tether_sdk::{Backend, DescribeNet, Descriptor, Error, Harness, Result, cap, descriptor};

thread_local! {
    static CONFIG: RefCell<Json> = RefCell::new(json!({}));
}

#[derive(Deserialize)]
struct Step {
    op: String,
    #[serde(default = "default_conn")]
    conn: String,
    #[serde(default)]
    sql: String,
    #[serde(default)]
    params: Vec<Json>,
    #[serde(default)]
    read_only: bool,
}

fn default_conn() -> String {
    "db".into()
}

#[derive(Deserialize)]
struct Locator {
    #[serde(default)]
    steps: Vec<Step>,
    /// The harness's table, when the object is one it made.
    #[serde(default)]
    table: Option<String>,
}

fn to_value(j: &Json) -> Value {
    match j {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Text(s.clone()),
        Json::Object(o) => match o.get("blob") {
            Some(Json::Array(bytes)) => Value::Blob(
                bytes
                    .iter()
                    .map(|b| b.as_u64().unwrap_or(0) as u8)
                    .collect(),
            ),
            _ => Value::Text(Json::Object(o.clone()).to_string()),
        },
        Json::Array(_) => Value::Text(j.to_string()),
    }
}

fn to_json(v: &Value) -> Json {
    match v {
        // Not JSON's null: states are stored as TOML, which has none.
        Value::Null => json!({"null": true}),
        Value::Boolean(b) => json!(b),
        Value::Integer(i) => json!(i),
        Value::Real(x) => json!({"real": x}),
        Value::Text(s) => json!(s),
        Value::Blob(b) => json!({"blob": b}),
    }
}

fn error_json(e: &SqlError) -> Json {
    let kind = match e {
        SqlError::Denied(_) => "denied",
        SqlError::Connect(_) => "connect",
        SqlError::Database { .. } => "database",
        SqlError::Timeout(_) => "timeout",
        SqlError::TooManyRows(_) => "too-many-rows",
        SqlError::Invalid(_) => "invalid",
        SqlError::Column(_) => "column",
    };
    let mut out = json!({"error": kind, "message": e.to_string()});
    if let Some(code) = e.code() {
        out["code"] = json!(code);
    }
    out
}

fn run_steps(steps: &[Step]) -> Vec<Json> {
    let mut conns: BTreeMap<String, Connection> = BTreeMap::new();
    let mut out = Vec::new();
    for step in steps {
        let result: std::result::Result<Json, SqlError> = match step.op.as_str() {
            "open" => Connection::open(&step.conn).map(|c| {
                conns.insert(step.conn.clone(), c);
                json!("opened")
            }),
            "drop" => Ok(json!(conns.remove(&step.conn).is_some())),
            op => match conns.get(&step.conn) {
                None => Ok(json!({"error": "no-such-connection"})),
                Some(c) => {
                    let params: Vec<Value> = step.params.iter().map(to_value).collect();
                    match op {
                        "query" => c.query(&step.sql, &params).map(|rows| {
                            let cells: Vec<Json> = rows
                                .iter()
                                .map(|r| Json::Array(r.cells().iter().map(to_json).collect()))
                                .collect();
                            json!({"columns": rows.columns(), "rows": cells})
                        }),
                        "execute" => c.execute(&step.sql, &params).map(|n| json!({"changed": n})),
                        "begin" => c.begin(step.read_only).map(|()| json!("begun")),
                        "commit" => c.commit().map(|()| json!("committed")),
                        "rollback" => c.rollback().map(|()| json!("rolled back")),
                        "dialect" => Ok(json!(match c.dialect() {
                            Dialect::Postgres => "postgres",
                            Dialect::Sqlite => "sqlite",
                            Dialect::Mysql => "mysql",
                        })),
                        other => Ok(json!({"error": format!("unknown op {other}")})),
                    }
                }
            },
        };
        out.push(result.unwrap_or_else(|e| error_json(&e)));
    }
    out
}

/// What an object without `steps` runs: one query that works, one the
/// database refuses, one name not granted.
fn default_steps() -> Vec<Step> {
    let step = |op: &str, conn: &str, sql: &str| Step {
        op: op.into(),
        conn: conn.into(),
        sql: sql.into(),
        params: Vec::new(),
        read_only: false,
    };
    vec![
        step("open", "db", ""),
        step("query", "db", "SELECT current_user AS u"),
        step("query", "db", "SELECT * FROM no_such_table"),
        step("open", "elsewhere", ""),
    ]
}

#[derive(Default)]
struct Probe;

impl Backend for Probe {
    type Locator = Json;

    fn describe(&self) -> Descriptor {
        descriptor("sql-probe", &[cap::FINGERPRINT])
    }

    fn configure(&mut self, config: Json) -> Result<()> {
        CONFIG.with(|c| *c.borrow_mut() = config);
        Ok(())
    }

    fn identity(&self, locator: &Json) -> Result<Json> {
        // No nulls: identities are stored as TOML too.
        let field = |k: &str| locator.get(k).cloned().unwrap_or(json!(""));
        Ok(json!({"db": field("db"), "table": field("table")}))
    }

    fn fingerprint(&self, raw: &Json, _working_ref: Option<&str>) -> Result<Json> {
        let locator: Locator =
            serde_json::from_value(raw.clone()).map_err(|e| Error::invalid(e.to_string()))?;
        if let Some(table) = &locator.table {
            return Ok(json!({"rows": count(table)?}));
        }
        let steps = if locator.steps.is_empty() {
            default_steps()
        } else {
            locator.steps
        };
        let results = run_steps(&steps);
        let config = CONFIG.with(|c| c.borrow().clone());
        Ok(json!({"results": results, "config": config, "locator": raw}))
    }
}

impl DescribeNet for Probe {
    fn sql_keys(&self) -> Vec<String> {
        vec!["db".into(), "catalog.uri".into()]
    }
}

fn count(table: &str) -> Result<i64> {
    let db = Connection::open("db")?;
    let rows = db.query(&format!("SELECT count(*) AS n FROM {table}"), &[])?;
    let n: i64 = rows
        .first()
        .ok_or_else(|| Error::backend("count(*) returned no row"))?
        .get("n")?;
    Ok(n)
}

#[derive(Default)]
struct ProbeHarness;

impl Harness for ProbeHarness {
    type Locator = Json;

    fn new_object(&self, _scratch_uri: &str) -> Result<Json> {
        let table = tether_sdk::kit::scratch_name("probe")?.replace('-', "_");
        let db = Connection::open("db")?;
        db.execute(&format!("CREATE TABLE {table} (n INTEGER)"), &[])?;
        // The address as the plugin sees it: the host keeps the password.
        let shown = CONFIG.with(|c| c.borrow().get("db").cloned());
        Ok(json!({"db": shown, "table": table}))
    }

    fn mutate(&self, locator: &Json, _working_ref: Option<&str>) -> Result<()> {
        let table = locator["table"]
            .as_str()
            .ok_or_else(|| Error::invalid("no table"))?;
        let db = Connection::open("db")?;
        db.execute(&format!("INSERT INTO {table} (n) VALUES (1)"), &[])?;
        Ok(())
    }

    fn fresh_locator(&self, _scratch_uri: &str) -> Result<Json> {
        Err(Error::Capability("sql-probe cannot create".into()))
    }
}

tether_sdk::export!(Probe, harness: ProbeHarness, [describe_net]);
