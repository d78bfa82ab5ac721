//! `tether import SOURCE` (experimental): a registry says which objects to
//! track, and tether writes their manifests (spec/12, "Import").
//!
//! Rows carry the canonical columns ([`CANONICAL_COLUMNS`]) and come from a
//! PostgreSQL DSN or a SQLite file (`--table`, `--query`, or the standing
//! `[import] query` of `.tether/secrets.toml`; an export's file without
//! either reads its `objects_head`), a `.csv`, a `.jsonl`, or an export's
//! directory (its `objects` rows at the exported head). Every row is checked
//! before anything is planned, and one bad row refuses the whole import,
//! naming its row number. The plan adds, updates (the committed state and
//! pin are kept) or, with `--sync`, removes manifests; applying it is
//! journaled with the manifests before, so `undo` restores them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};
use sqlx::AssertSqlSafe;

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::export::{self, Format, sql_error};
use super::publish::{redact_dsn, scrub};
use super::repo::Repo;
use crate::model::{FileMode, Manifest, PinMode, Policy, canonical, key, manifest};
use crate::oplog::NewOp;
use crate::plan::{Action, Plan, Precondition, verb};

/// The columns `import` reads; any other is ignored (and named in the plan).
pub const CANONICAL_COLUMNS: [&str; 7] = [
    "key",
    "kind",
    "uri",
    "locator_json",
    "policy_file",
    "policy_pin",
    "at",
];

/// At most this many bad rows are named in a refusal.
const MAX_ROW_ERRORS: usize = 20;

/// What `tether import` was given.
#[derive(Debug, Clone, Default)]
pub struct ImportRequest {
    /// A PostgreSQL DSN, or a path (SQLite file, `.csv`, `.jsonl`, export
    /// directory).
    pub source: String,
    pub table: Option<String>,
    pub query: Option<String>,
    /// `--sync`: also remove registered objects the source does not list.
    pub sync: bool,
    /// Where relative paths (the source, local locators) are read from.
    pub cwd: PathBuf,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub added: Vec<String>,
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    pub unchanged: Vec<String>,
}

/// The rows of a source: column names, and each row's values as text
/// (`None`: NULL or missing).
#[derive(Debug, Default)]
struct Rows {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

impl Rows {
    fn from_objects(objects: Vec<Map<String, Value>>) -> Rows {
        let mut columns: Vec<String> = Vec::new();
        for o in &objects {
            for k in o.keys() {
                if !columns.contains(k) {
                    columns.push(k.clone());
                }
            }
        }
        let rows = objects
            .into_iter()
            .map(|o| {
                columns
                    .iter()
                    .map(|c| o.get(c).and_then(value_text))
                    .collect()
            })
            .collect();
        Rows { columns, rows }
    }
}

/// A JSON value as a cell's text: strings as they are, NULL as `None`,
/// anything else as its JSON.
fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(canonical::to_string(other)),
    }
}

/// Whether `source` names a PostgreSQL database.
fn is_dsn(source: &str) -> bool {
    source.starts_with("postgres://") || source.starts_with("postgresql://")
}

/// A description of the source for the plan and messages, without a
/// password.
fn describe_source(source: &str) -> String {
    if is_dsn(source) {
        redact_dsn(source)
    } else {
        source.to_owned()
    }
}

/// Read the source's rows.
async fn read_source(repo: &Repo, req: &ImportRequest) -> Result<Rows> {
    if req.table.is_some() && req.query.is_some() {
        return Err(TetherError::refused("give --table or --query, not both"));
    }
    let sql = |default_export: bool| -> Result<Option<String>> {
        if let Some(q) = &req.query {
            return Ok(Some(q.clone()));
        }
        if let Some(t) = &req.table {
            return Ok(Some(format!("SELECT * FROM {}", quote_ident(t)?)));
        }
        if let Some(q) = &repo.secrets().import_query {
            return Ok(Some(q.clone()));
        }
        Ok(default_export.then(|| "SELECT * FROM objects_head".to_owned()))
    };
    if is_dsn(&req.source) {
        let Some(q) = sql(false)? else {
            return Err(no_query());
        };
        return read_postgres(&req.source, &q).await;
    }
    let path = req.cwd.join(&req.source);
    if path.is_dir() {
        if req.table.is_some() || req.query.is_some() {
            return Err(TetherError::refused(
                "--table and --query are for SQL sources; an export directory is read at its head",
            ));
        }
        return read_export_dir(&path);
    }
    let what = format!("reading {}", path.display());
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if ext == "csv" || ext == "jsonl" || ext == "ndjson" {
        if req.table.is_some() || req.query.is_some() {
            return Err(TetherError::refused(format!(
                "--table and --query are for SQL sources, not a .{ext} file"
            )));
        }
        let text = read_bounded(&path)?;
        return if ext == "csv" {
            parse_csv(&text).map_err(|e| sql_error(&what, e))
        } else {
            parse_jsonl(&text).map_err(|e| sql_error(&what, e))
        };
    }
    let mut magic = [0u8; 16];
    let is_sqlite = std::fs::File::open(&path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && &magic == b"SQLite format 3\0";
    if !is_sqlite {
        return Err(TetherError::refused(format!(
            "{} is not a source tether reads",
            path.display()
        ))
        .hint(
            "give a postgresql:// DSN, a SQLite file, a .csv, a .jsonl, or an export's directory",
        ));
    }
    let Some(q) = sql(true)? else {
        return Err(no_query());
    };
    read_sqlite(&path, &q).await
}

fn no_query() -> TetherError {
    TetherError::refused("which rows? give --table or --query").hint(
        "or keep a standing query as `[import] query` in .tether/secrets.toml (never tether.toml)",
    )
}

/// A table name as a quoted SQL identifier (`schema.table` allowed).
fn quote_ident(name: &str) -> Result<String> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2
        || parts
            .iter()
            .any(|p| p.is_empty() || p.contains(['"', '\0']) || p.chars().any(char::is_control))
    {
        return Err(TetherError::refused(format!(
            "--table {name:?} is not a table name"
        )));
    }
    Ok(parts
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join("."))
}

/// A source file read whole, at most 1 GiB.
fn read_bounded(path: &Path) -> Result<String> {
    const MAX: u64 = 1 << 30;
    let f = std::fs::File::open(path)
        .map_err(|e| TetherError::io(format!("reading {}", path.display()), e))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX + 1), &mut text)
        .map_err(|e| TetherError::io(format!("reading {}", path.display()), e))?;
    if text.len() as u64 > MAX {
        return Err(TetherError::refused(format!(
            "{} is larger than 1 GiB",
            path.display()
        )));
    }
    Ok(text)
}

/// RFC 4180 CSV: a header line, then rows; an unquoted empty field is NULL.
fn parse_csv(text: &str) -> std::result::Result<Rows, String> {
    let mut records: Vec<Vec<Option<String>>> = Vec::new();
    let mut record: Vec<Option<String>> = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    in_quotes = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !quoted => {
                quoted = true;
                in_quotes = true;
            }
            ',' => {
                record.push(take_field(&mut field, &mut quoted));
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => {
                record.push(take_field(&mut field, &mut quoted));
                records.push(std::mem::take(&mut record));
                any = false;
            }
            other => field.push(other),
        }
    }
    if in_quotes {
        return Err("a quoted field is not closed".into());
    }
    if any {
        record.push(take_field(&mut field, &mut quoted));
        records.push(record);
    }
    // Blank lines are no rows.
    records.retain(|r| !(r.len() == 1 && r[0].is_none()));
    let mut it = records.into_iter();
    let Some(header) = it.next() else {
        return Ok(Rows::default());
    };
    let columns: Vec<String> = header
        .into_iter()
        .map(|c| c.unwrap_or_default().trim().to_owned())
        .collect();
    let mut rows = Vec::new();
    for (i, mut r) in it.enumerate() {
        if r.len() > columns.len() {
            return Err(format!(
                "row {} has {} fields; the header names {}",
                i + 1,
                r.len(),
                columns.len()
            ));
        }
        r.resize(columns.len(), None);
        rows.push(r);
    }
    Ok(Rows { columns, rows })
}

fn take_field(field: &mut String, quoted: &mut bool) -> Option<String> {
    let f = std::mem::take(field);
    let was_quoted = std::mem::replace(quoted, false);
    (was_quoted || !f.is_empty()).then_some(f)
}

/// One JSON object per line.
fn parse_jsonl(text: &str) -> std::result::Result<Rows, String> {
    let mut objects = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => objects.push(o),
            Ok(_) => return Err(format!("line {} is not a JSON object", i + 1)),
            Err(e) => return Err(format!("line {}: {e}", i + 1)),
        }
    }
    Ok(Rows::from_objects(objects))
}

/// An export directory: its `objects` rows at the exported head.
fn read_export_dir(dir: &Path) -> Result<Rows> {
    let what = format!("reading the export in {}", dir.display());
    let schema: Value = serde_json::from_str(&read_bounded(&dir.join("schema.json"))?)
        .map_err(|e| sql_error(&what, format!("schema.json: {e}")))?;
    let format: Format = schema
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .parse()
        .map_err(|e: String| sql_error(&what, e))?;
    let head = schema
        .get("head")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let path = export::table_file(dir, "objects", format);
    let rows = match format {
        Format::Csv => parse_csv(&read_bounded(&path)?),
        Format::Jsonl => parse_jsonl(&read_bounded(&path)?),
        Format::Parquet => read_parquet(&path),
        Format::Sqlite => Err("schema.json names the sqlite format".into()),
    }
    .map_err(|e| sql_error(&what, e))?;
    let Some(at) = rows.columns.iter().position(|c| c == "commit_id") else {
        return Err(sql_error(&what, "its objects table has no commit_id"));
    };
    Ok(Rows {
        rows: rows
            .rows
            .into_iter()
            .filter(|r| r[at].as_deref() == head.as_deref())
            .collect(),
        columns: rows.columns,
    })
}

fn read_parquet(path: &Path) -> std::result::Result<Rows, String> {
    use arrow_array::{Array, BooleanArray, Int64Array, StringArray};
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    let mut out = Rows::default();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        if out.columns.is_empty() {
            out.columns = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
        }
        for i in 0..batch.num_rows() {
            let row = batch
                .columns()
                .iter()
                .map(|col| {
                    if col.is_null(i) {
                        return None;
                    }
                    let any = col.as_any();
                    if let Some(a) = any.downcast_ref::<StringArray>() {
                        Some(a.value(i).to_owned())
                    } else if let Some(a) = any.downcast_ref::<Int64Array>() {
                        Some(a.value(i).to_string())
                    } else {
                        any.downcast_ref::<BooleanArray>()
                            .map(|a| a.value(i).to_string())
                    }
                })
                .collect();
            out.rows.push(row);
        }
    }
    Ok(out)
}

/// A cell of a SQL row as text, whatever its SQL type.
fn sql_text<'r, R>(row: &'r R, i: usize) -> std::result::Result<Option<String>, String>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<f64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<bool>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<serde_json::Value>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    if let Ok(v) = row.try_get::<Option<String>, _>(i) {
        return Ok(v);
    }
    if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
        return Ok(v.map(|v| v.to_string()));
    }
    if let Ok(v) = row.try_get::<Option<bool>, _>(i) {
        return Ok(v.map(|v| v.to_string()));
    }
    if let Ok(v) = row.try_get::<Option<f64>, _>(i) {
        return Ok(v.map(|v| v.to_string()));
    }
    if let Ok(v) = row.try_get::<Option<serde_json::Value>, _>(i) {
        return Ok(v.as_ref().and_then(value_text));
    }
    Err(format!(
        "column {} has a SQL type tether does not read: cast it to text in the query",
        sqlx::Column::name(&row.columns()[i])
    ))
}

fn to_rows<R>(rows: &[R]) -> std::result::Result<Rows, String>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<f64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<bool>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<serde_json::Value>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = Rows::default();
    if let Some(first) = rows.first() {
        out.columns = first
            .columns()
            .iter()
            .map(|c| sqlx::Column::name(c).to_owned())
            .collect();
    }
    for r in rows {
        out.rows.push(
            (0..out.columns.len())
                .map(|i| sql_text(r, i))
                .collect::<std::result::Result<_, _>>()?,
        );
    }
    Ok(out)
}

/// Run `query` on a SQLite file opened read-only.
async fn read_sqlite(path: &Path, query: &str) -> Result<Rows> {
    use sqlx::ConnectOptions as _;
    use sqlx::Connection as _;
    let what = format!("reading {}", path.display());
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .map_err(|e| sql_error(&what, e))?;
    let rows = sqlx::query(AssertSqlSafe(query.to_owned()))
        .fetch_all(&mut conn)
        .await
        .map_err(|e| sql_error(&what, e))?;
    let _ = conn.close().await;
    to_rows(&rows).map_err(|e| sql_error(&what, e))
}

/// Run `query` as one statement in a read-only transaction. Every column
/// type PostgreSQL has is read: the statement is prepared first (which
/// refuses more than one statement and names the columns and their types),
/// then run through the simple query protocol, in which the server sends
/// every value as its own text (TIMESTAMPTZ, NUMERIC, UUID, INT4, arrays,
/// ...; [`pg_text`] evens out the few whose text differs from an export's).
async fn read_postgres(dsn: &str, query: &str) -> Result<Rows> {
    use sqlx::Connection as _;
    use sqlx::Executor as _;
    use sqlx::Row as _;
    use sqlx::SqlSafeStr as _;
    use sqlx::TypeInfo as _;
    use sqlx::ValueRef as _;
    let what = format!("reading {}", redact_dsn(dsn));
    let fail = |e: sqlx::Error| sql_error(&what, scrub(&e.to_string(), dsn));
    let mut conn = sqlx::PgConnection::connect(dsn).await.map_err(fail)?;
    let mut tx = conn.begin().await.map_err(fail)?;
    // ISO dates in UTC: what `pg_text` turns into an export's RFC 3339.
    sqlx::raw_sql(
        "SET TRANSACTION READ ONLY; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL TimeZone = 'UTC'",
    )
    .execute(&mut *tx)
    .await
    .map_err(fail)?;
    let statement = (&mut *tx)
        .prepare(AssertSqlSafe(query.to_owned()).into_sql_str())
        .await
        .map_err(fail)?;
    let columns: Vec<(String, String)> = sqlx::Statement::columns(&statement)
        .iter()
        .map(|c| {
            (
                sqlx::Column::name(c).to_owned(),
                sqlx::Column::type_info(c).name().to_owned(),
            )
        })
        .collect();
    let rows = sqlx::raw_sql(AssertSqlSafe(query.to_owned()))
        .fetch_all(&mut *tx)
        .await
        .map_err(fail)?;
    let _ = tx.rollback().await;
    let _ = conn.close().await;
    let mut out = Rows {
        columns: columns.iter().map(|(n, _)| n.clone()).collect(),
        rows: Vec::with_capacity(rows.len()),
    };
    for row in &rows {
        let mut cells = Vec::with_capacity(columns.len());
        for (i, (name, ty)) in columns.iter().enumerate() {
            let value = row.try_get_raw(i).map_err(fail)?;
            if value.is_null() {
                cells.push(None);
                continue;
            }
            let text = value
                .as_str()
                .map_err(|e| sql_error(&what, format!("column {name}: {e}")))?;
            cells.push(pg_text(ty, text));
        }
        out.rows.push(cells);
    }
    Ok(out)
}

/// A PostgreSQL value's text (DateStyle ISO, UTC) as a cell, the way an
/// export writes the same value: timestamps in RFC 3339, booleans as
/// `true`/`false`, a JSON string as the string itself; anything else as
/// PostgreSQL writes it.
fn pg_text(ty: &str, text: &str) -> Option<String> {
    match ty {
        "TIMESTAMPTZ" => Some(
            chrono::DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z")
                .map(|t| {
                    t.with_timezone(&chrono::Utc)
                        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                })
                .unwrap_or_else(|_| text.to_owned()),
        ),
        "TIMESTAMP" => Some(text.replacen(' ', "T", 1)),
        "BOOL" => Some(
            match text {
                "t" => "true",
                "f" => "false",
                other => other,
            }
            .to_owned(),
        ),
        "JSON" | "JSONB" => match serde_json::from_str::<Value>(text) {
            Ok(v) => value_text(&v),
            Err(_) => Some(text.to_owned()),
        },
        _ => Some(text.to_owned()),
    }
}

/// One row, checked.
struct Spec {
    row: usize,
    key: String,
    kind: String,
    locator: Map<String, Value>,
    file: Option<FileMode>,
    pin: Option<PinMode>,
}

/// Check every row; all problems at once, each with its row number.
fn validate(
    rows: &Rows,
    kinds: &BTreeSet<String>,
    existing: &BTreeMap<String, Manifest>,
) -> std::result::Result<Vec<Spec>, Vec<String>> {
    let col = |name: &str| rows.columns.iter().position(|c| c == name);
    let (Some(key_col), Some(kind_col)) = (col("key"), col("kind")) else {
        let missing: Vec<&str> = ["key", "kind"]
            .into_iter()
            .filter(|c| col(c).is_none())
            .collect();
        return Err(vec![format!(
            "the source has no {} column (its columns: {})",
            missing.join(" or "),
            rows.columns.join(", ")
        )]);
    };
    let (uri_col, loc_col) = (col("uri"), col("locator_json"));
    if uri_col.is_none() && loc_col.is_none() {
        return Err(vec![
            "the source has neither a uri nor a locator_json column".into(),
        ]);
    }
    let (file_col, pin_col, at_col) = (col("policy_file"), col("policy_pin"), col("at"));
    let get = |r: &[Option<String>], c: Option<usize>| c.and_then(|c| r[c].clone());
    let mut errors = Vec::new();
    let mut specs = Vec::new();
    let mut first_row: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in rows.rows.iter().enumerate() {
        let n = i + 1;
        let mut bad = |m: String| errors.push(format!("row {n}: {m}"));
        let key = get(r, Some(key_col)).unwrap_or_default();
        let kind = get(r, Some(kind_col)).unwrap_or_default();
        if key.is_empty() {
            bad("key is empty".into());
            continue;
        }
        if let Err(e) = key::validate_key(&key) {
            bad(format!("key {key:?}: {e}"));
            continue;
        }
        if let Some(first) = first_row.insert(key.clone(), n) {
            bad(format!("key {key:?} is also on row {first}"));
            continue;
        }
        if !kinds.contains(&kind) {
            bad(format!(
                "kind {kind:?} is not a backend kind here ({})",
                kinds.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
            continue;
        }
        if let Some(m) = existing.get(&key)
            && m.kind != kind
        {
            bad(format!(
                "{key} is a {} object and the row says {kind}; a kind does not change: \
                 `tether remove {key}`, then import it again",
                m.kind
            ));
            continue;
        }
        let mut locator = Map::new();
        if let Some(uri) = get(r, uri_col) {
            locator.insert("uri".into(), Value::String(uri));
        }
        if let Some(text) = get(r, loc_col) {
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(o)) => locator.extend(o),
                _ => {
                    bad(format!("locator_json of {key} is not a JSON object"));
                    continue;
                }
            }
        }
        if locator.is_empty() {
            bad(format!("{key} has neither a uri nor a locator_json"));
            continue;
        }
        if let Some(at) = get(r, at_col) {
            if at.trim().is_empty() {
                bad(format!("at of {key} is empty"));
                continue;
            }
            locator.insert("at".into(), Value::String(at));
        }
        let file = match get(r, file_col).map(|s| s.parse::<FileMode>()).transpose() {
            Ok(f) => f,
            Err(e) => {
                bad(format!("policy_file of {key}: {e}"));
                continue;
            }
        };
        let pin = match get(r, pin_col).map(|s| s.parse::<PinMode>()).transpose() {
            Ok(p) => p,
            Err(e) => {
                bad(format!("policy_pin of {key}: {e}"));
                continue;
            }
        };
        specs.push(Spec {
            row: n,
            key,
            kind,
            locator,
            file,
            pin,
        });
    }
    if errors.is_empty() {
        Ok(specs)
    } else {
        Err(errors)
    }
}

/// Read the source and plan the import.
pub async fn plan(repo: &Repo, req: &ImportRequest) -> Result<Plan> {
    let rows = read_source(repo, req).await?;
    let existing = repo.manifests()?;
    let descriptors = repo.descriptors().await?;
    let kinds: BTreeSet<String> = descriptors.keys().cloned().collect();
    let source = describe_source(&req.source);
    let mut specs = match validate(&rows, &kinds, &existing) {
        Ok(specs) => specs,
        Err(errors) => {
            let shown = errors.len().min(MAX_ROW_ERRORS);
            let more = errors.len() - shown;
            let mut reason = format!(
                "import from {source} refused: {} row problem(s), nothing was written:\n  {}",
                errors.len(),
                errors[..shown].join("\n  ")
            );
            if more > 0 {
                reason.push_str(&format!("\n  ... and {more} more"));
            }
            return Err(TetherError::refused(reason)
                .hint("fix the rows (or the query that makes them) and import again"));
        }
    };
    // Locators checked by their backends, all at once, before any plan.
    for s in &mut specs {
        super::add::resolve_local_paths(&mut s.locator, &descriptors[&s.kind], &req.cwd);
    }
    let mut calls = Vec::new();
    for s in &specs {
        let plugin = repo.plugin(&s.kind).await?;
        let client = repo.client_for_key(&plugin, &Value::Object(s.locator.clone()), &s.key);
        calls.push((s.row, async move { client.validate_locator().await }));
    }
    let mut bad: Vec<String> = Vec::new();
    for (row, r) in crate::plugin::fan_out(calls).await.results {
        if let Err(e) = r {
            bad.push(format!("row {row}: {e}"));
        }
    }
    if !bad.is_empty() {
        bad.sort_by_key(|l| {
            l.split(':')
                .next()
                .and_then(|r| r.trim_start_matches("row ").parse::<usize>().ok())
        });
        let shown = bad.len().min(MAX_ROW_ERRORS);
        return Err(TetherError::refused(format!(
            "import from {source} refused: {} locator(s) the backend refuses, nothing was written:\n  {}",
            bad.len(),
            bad[..shown].join("\n  ")
        )));
    }

    let defaults = repo.config.defaults;
    let mut p = Plan::new("import");
    p.context.insert("source".into(), json!(source));
    p.context.insert("sync".into(), json!(req.sync));
    p.require(Precondition::ManifestHash {
        expected: manifest::manifest_hash(&existing),
    });
    let ignored: Vec<&String> = rows
        .columns
        .iter()
        .filter(|c| !CANONICAL_COLUMNS.contains(&c.as_str()))
        .collect();
    if !ignored.is_empty() {
        p.note(format!(
            "ignored column(s): {}",
            ignored
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let listed: BTreeSet<&str> = specs.iter().map(|s| s.key.as_str()).collect();
    for s in &specs {
        let target = s
            .locator
            .get("uri")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| canonical::map_to_string(&s.locator));
        match existing.get(&s.key) {
            None => {
                let policy = Policy {
                    file: s.file.unwrap_or(defaults.file),
                    pin: s.pin.unwrap_or(defaults.pin),
                };
                let m = Manifest::new(&s.kind, s.locator.clone(), policy);
                p.push(
                    Action::new(verb::ADD, &s.key)
                        .with_kind(&s.kind)
                        .with_target(target)
                        .with_detail("register")
                        .with_param("manifest", m.to_json())
                        .with_param("row", json!(s.row)),
                );
            }
            Some(old) => {
                let policy = Policy {
                    file: s.file.unwrap_or(old.policy.file),
                    pin: s.pin.unwrap_or(old.policy.pin),
                };
                let fresh = Manifest::new(&s.kind, s.locator.clone(), policy);
                let mut why = Vec::new();
                if fresh.locator != old.locator {
                    why.push("locator changed");
                }
                if policy != old.policy {
                    why.push("policy changed");
                }
                if why.is_empty() {
                    p.push(Action::new(verb::UNCHANGED, &s.key).with_kind(&s.kind));
                    continue;
                }
                let mut m = old.clone();
                m.locator = fresh.locator;
                m.policy = policy;
                if m.is_committed() {
                    why.push("committed state kept");
                }
                p.push(
                    Action::new(verb::UPDATE, &s.key)
                        .with_kind(&s.kind)
                        .with_target(target)
                        .with_detail(why.join("; "))
                        .with_param("manifest", m.to_json())
                        .with_param("row", json!(s.row)),
                );
            }
        }
    }
    if req.sync {
        for (k, m) in &existing {
            if !listed.contains(k.as_str()) {
                p.push(
                    Action::new(verb::REMOVE, k)
                        .with_kind(&m.kind)
                        .with_detail("not in the source; its working branch is left for `gc`"),
                );
            }
        }
    }
    Ok(p)
}

/// Apply an import plan: check it still fits the manifests, journal the
/// manifests before, write them all, and record what they became.
pub fn apply(repo: &Repo, plan: &Plan) -> Result<ImportReport> {
    let _locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let existing = repo.manifests()?;
    let mut report = ImportReport::default();
    let mut writes: Vec<(String, Option<Manifest>)> = Vec::new();
    for a in &plan.actions {
        match a.verb.as_str() {
            verb::ADD | verb::UPDATE => {
                let m = a
                    .params
                    .get("manifest")
                    .and_then(Value::as_object)
                    .ok_or_else(|| {
                        TetherError::refused(format!(
                            "the plan's {} {} has no manifest",
                            a.verb, a.key
                        ))
                    })
                    .and_then(|m| {
                        Manifest::from_json(m).map_err(|e| {
                            TetherError::refused(format!("the plan's manifest of {}: {e}", a.key))
                        })
                    })?;
                key::validate_key(&a.key)?;
                if a.verb == verb::ADD {
                    report.added.push(a.key.clone());
                } else {
                    report.updated.push(a.key.clone());
                }
                writes.push((a.key.clone(), Some(m)));
            }
            verb::REMOVE => {
                key::validate_key(&a.key)?;
                report.removed.push(a.key.clone());
                writes.push((a.key.clone(), None));
            }
            verb::UNCHANGED => report.unchanged.push(a.key.clone()),
            _ => {}
        }
    }
    if writes.is_empty() {
        return Ok(report);
    }
    let before: Map<String, Value> = writes
        .iter()
        .map(|(k, _)| {
            (
                k.clone(),
                existing.get(k).map_or(Value::Null, Manifest::to_json),
            )
        })
        .collect();
    let after: Map<String, Value> = writes
        .iter()
        .map(|(k, m)| (k.clone(), m.as_ref().map_or(Value::Null, Manifest::to_json)))
        .collect();
    let op = repo.journal()?.start(
        NewOp::new("import")
            .plan(plan)
            .pre("manifests", Value::Object(before)),
    )?;
    manifest::write_manifests(
        &repo.layout.objects_dir(),
        &repo.layout.spare_dir(),
        &writes,
    )?;
    crate::fault::point("manifest.write");
    op.finish(json!({
        "summary": format!(
            "import: {} added, {} updated, {} removed",
            report.added.len(),
            report.updated.len(),
            report.removed.len()
        ),
        "manifests": after,
        "report": report,
    }))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_text_reads_as_an_export_writes_it() {
        let t = |ty, text| pg_text(ty, text).unwrap();
        assert_eq!(
            t("TIMESTAMPTZ", "2026-01-02 01:04:05+00"),
            "2026-01-02T01:04:05Z"
        );
        assert_eq!(
            t("TIMESTAMPTZ", "2026-01-02 01:04:05.25+05:30"),
            "2026-01-01T19:34:05.250Z"
        );
        assert_eq!(t("TIMESTAMP", "2026-01-02 01:04:05"), "2026-01-02T01:04:05");
        assert_eq!(t("BOOL", "t"), "true");
        assert_eq!(t("JSONB", r#"{"b": 1, "a": "x"}"#), r#"{"a":"x","b":1}"#);
        assert_eq!(t("JSON", r#""plain""#), "plain");
        assert_eq!(t("NUMERIC", "12.50"), "12.50");
    }

    #[test]
    fn csv_reads_quotes_nulls_and_line_breaks() {
        let rows = parse_csv(
            "key,kind,uri\r\na,file,\"/x,y\"\n\"b\",memory,\n\nc,file,\"say \"\"q\"\"\nz\"",
        )
        .unwrap();
        assert_eq!(rows.columns, ["key", "kind", "uri"]);
        assert_eq!(rows.rows.len(), 3);
        assert_eq!(rows.rows[0][2].as_deref(), Some("/x,y"));
        assert_eq!(rows.rows[1][2], None, "an unquoted empty field is NULL");
        assert_eq!(rows.rows[2][2].as_deref(), Some("say \"q\"\nz"));
        assert!(parse_csv("a\n\"open").is_err());
    }

    #[test]
    fn every_bad_row_is_named_with_its_number() {
        let rows = Rows {
            columns: vec!["key".into(), "kind".into(), "uri".into()],
            rows: vec![
                vec![Some("ok".into()), Some("file".into()), Some("/a".into())],
                vec![Some("x".into()), Some("nope".into()), Some("/b".into())],
                vec![Some("ok".into()), Some("file".into()), Some("/c".into())],
                vec![Some("../up".into()), Some("file".into()), Some("/d".into())],
                vec![Some("n".into()), Some("file".into()), None],
            ],
        };
        let kinds = BTreeSet::from(["file".to_string()]);
        let errors = validate(&rows, &kinds, &BTreeMap::new()).err().unwrap();
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].starts_with("row 2: kind \"nope\""), "{errors:?}");
        assert!(
            errors[1].starts_with("row 3: key \"ok\" is also on row 1"),
            "{errors:?}"
        );
        assert!(errors[2].starts_with("row 4: key"), "{errors:?}");
        assert!(errors[3].starts_with("row 5:"), "{errors:?}");
    }
}
