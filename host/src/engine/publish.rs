//! `tether publish` (experimental): the export's tables upserted into a
//! PostgreSQL schema, meant to run after every commit (spec/12, "Publish").
//!
//! One transaction. The schema, tables and views are created when missing
//! (so only the first run needs `CREATE`). Commits are immutable, so rows of
//! `commits`, `commit_parents` and `objects` whose commit the schema already
//! has are skipped; `object_states` and listings are content-addressed and
//! only inserted; `refs`, `workspace` and `tether_meta` describe now and are
//! rewritten, a row counted only when a value changed -- so publishing the
//! same history again writes nothing. `--dry-run` runs the same transaction
//! and rolls it back, so its counts are exactly what would be written.
//!
//! The DSN comes from `--to`, `$TETHER_PUBLISH_DSN` or `[publish] dsn` in
//! `.tether/secrets.toml`, never from `tether.toml`, and is never printed:
//! messages name it without its password ([`redact_dsn`], [`scrub`]).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::json;
use sqlx::AssertSqlSafe;

use super::error::{Result, TetherError};
use super::export::{
    self, Bundle, Cell, Dialect, ExportOptions, OnConflict, TABLES, insert_rows, sql_error,
};
use super::repo::Repo;
use crate::plan::{Action, Plan, verb};

/// The environment variable naming the DSN.
pub const DSN_ENV: &str = "TETHER_PUBLISH_DSN";

/// What `tether publish` was given.
#[derive(Debug, Clone, Default)]
pub struct PublishRequest {
    /// `--to`.
    pub to: Option<String>,
    pub schema: String,
    pub export: ExportOptions,
    pub dry_run: bool,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize)]
pub struct PublishReport {
    pub schema: String,
    pub head: Option<String>,
    /// Rows written per table.
    pub upserted: BTreeMap<String, u64>,
    /// Commits the schema already had.
    pub skipped_commits: usize,
    #[serde(skip)]
    pub dry_run: bool,
}

impl PublishReport {
    /// Rows written in all.
    pub fn total(&self) -> u64 {
        self.upserted.values().sum()
    }

    /// The dry run as a plan: one `upsert` action per table.
    pub fn plan(&self) -> Plan {
        let mut p = Plan::new("publish");
        p.context.insert("schema".into(), json!(self.schema));
        p.context.insert("head".into(), json!(self.head));
        p.context
            .insert("skipped_commits".into(), json!(self.skipped_commits));
        for (table, n) in &self.upserted {
            p.push(
                Action::new(verb::UPSERT, "")
                    .with_target(table)
                    .with_detail(format!("{n} row(s)"))
                    .with_param("rows", json!(n)),
            );
        }
        p.note(format!(
            "{} commit(s) already present; nothing was written (dry run)",
            self.skipped_commits
        ));
        p
    }
}

/// `dsn` with its password replaced by `***`.
pub fn redact_dsn(dsn: &str) -> String {
    match password_span(dsn) {
        Some((start, end)) => format!("{}***{}", &dsn[..start], &dsn[end..]),
        None => dsn.to_owned(),
    }
}

/// `text` with the DSN's password (raw and percent-decoded) replaced.
pub fn scrub(text: &str, dsn: &str) -> String {
    let Some((start, end)) = password_span(dsn) else {
        return text.to_owned();
    };
    let raw = &dsn[start..end];
    let mut out = text.replace(raw, "***");
    let decoded = percent_decode(raw);
    if !decoded.is_empty() {
        out = out.replace(&decoded, "***");
    }
    out
}

/// Where the password of `scheme://user:password@host...` is.
fn password_span(dsn: &str) -> Option<(usize, usize)> {
    let after_scheme = dsn.find("://")? + 3;
    let rest = &dsn[after_scheme..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let colon = rest[..at].find(':')?;
    (colon + 1 < at).then_some((after_scheme + colon + 1, after_scheme + at))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The DSN to publish to: `--to`, the environment, or secrets.toml.
pub fn dsn(repo: &Repo, to: Option<&str>) -> Result<String> {
    if let Some(to) = to.filter(|t| !t.is_empty()) {
        return Ok(to.to_owned());
    }
    if let Ok(env) = std::env::var(DSN_ENV)
        && !env.is_empty()
    {
        return Ok(env);
    }
    if let Some(d) = &repo.secrets().publish_dsn {
        return Ok(d.clone());
    }
    Err(TetherError::refused("publish where? no DSN").hint(format!(
        "give `--to postgresql://...`, set ${DSN_ENV}, or `[publish] dsn` in .tether/secrets.toml \
         (never tether.toml)"
    )))
}

/// `name` as a quoted schema identifier.
fn schema_ident(name: &str) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(format!("\"{name}\""))
    } else {
        Err(TetherError::refused(format!(
            "--schema {name:?} is not a schema name tether writes"
        ))
        .hint("letters, digits and `_`, starting with a letter or `_`, at most 63"))
    }
}

/// Publish (or, with `dry_run`, count what publishing would write).
pub async fn publish(repo: &Repo, req: &PublishRequest) -> Result<PublishReport> {
    let dsn = dsn(repo, req.to.as_deref())?;
    if !(dsn.starts_with("postgres://") || dsn.starts_with("postgresql://")) {
        return Err(
            TetherError::refused(format!("{} is not a PostgreSQL DSN", redact_dsn(&dsn)))
                .hint("postgresql://USER@HOST/DATABASE"),
        );
    }
    let schema = schema_ident(&req.schema)?;
    let bundle = export::build(repo, &req.export).await?;
    let what = format!("publishing to {}", redact_dsn(&dsn));
    let fail = |e: sqlx::Error| sql_error(&what, scrub(&e.to_string(), &dsn));
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&dsn).await.map_err(fail)?;
    let result = write(&mut conn, &bundle, &req.schema, &schema, req.dry_run).await;
    let _ = conn.close().await;
    let (upserted, skipped_commits) = result.map_err(fail)?;
    Ok(PublishReport {
        schema: req.schema.clone(),
        head: bundle.head.clone(),
        upserted,
        skipped_commits,
        dry_run: req.dry_run,
    })
}

/// The transaction: create what is missing, upsert, commit or roll back.
async fn write(
    conn: &mut sqlx::PgConnection,
    bundle: &Bundle,
    name: &str,
    schema: &str,
    dry_run: bool,
) -> std::result::Result<(BTreeMap<String, u64>, usize), sqlx::Error> {
    use sqlx::{Connection as _, Row as _};
    let prefix = format!("{schema}.");
    let mut tx = conn.begin().await?;
    let has_schema: bool =
        sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(name)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
    if !has_schema {
        sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut *tx)
            .await?;
    }
    let present: HashSet<String> = sqlx::query(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(name)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| r.try_get::<String, _>(0))
    .collect::<std::result::Result<_, _>>()?;
    // Every table, exported or not, so the views always have theirs.
    for t in TABLES {
        if !present.contains(t.name) {
            sqlx::query(AssertSqlSafe(export::create_table_sql(
                t,
                &prefix,
                Dialect::Postgres,
            )))
            .execute(&mut *tx)
            .await?;
        }
    }
    for (view, sql) in export::views(&prefix) {
        if !present.contains(view) {
            sqlx::query(AssertSqlSafe(format!(
                "CREATE VIEW {prefix}{view} AS {sql}"
            )))
            .execute(&mut *tx)
            .await?;
        }
    }
    let known: HashSet<String> = sqlx::query(AssertSqlSafe(format!(
        "SELECT commit_id FROM {prefix}commits"
    )))
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| r.try_get::<String, _>(0))
    .collect::<std::result::Result<_, _>>()?;
    let skipped = bundle
        .rows("commits")
        .iter()
        .filter(|r| matches!(&r[0], Cell::Text(c) if known.contains(c)))
        .count();
    let mut written: BTreeMap<String, u64> = BTreeMap::new();
    for table in ["commits", "commit_parents", "objects"] {
        // Rows of commits the schema has are skipped: commits are immutable.
        let rows: Vec<Vec<Cell>> = bundle
            .rows(table)
            .iter()
            .filter(|r| !matches!(&r[0], Cell::Text(c) if known.contains(c)))
            .cloned()
            .collect();
        let n = upsert(&mut tx, &prefix, table, &rows, OnConflict::Nothing).await?;
        written.insert(table.to_owned(), n);
    }
    for table in ["object_states", "listings", "listing_entries"] {
        if bundle.has(table) {
            let n = upsert(
                &mut tx,
                &prefix,
                table,
                bundle.rows(table),
                OnConflict::Nothing,
            )
            .await?;
            written.insert(table.to_owned(), n);
        }
    }
    // refs describe now: changed ones rewritten, gone ones deleted.
    let mut n = upsert(
        &mut tx,
        &prefix,
        "refs",
        bundle.rows("refs"),
        OnConflict::Update,
    )
    .await?;
    let (names, kinds): (Vec<String>, Vec<String>) = bundle
        .rows("refs")
        .iter()
        .map(|r| {
            (
                r[0].as_text().unwrap_or_default(),
                r[1].as_text().unwrap_or_default(),
            )
        })
        .unzip();
    n += sqlx::query(AssertSqlSafe(format!(
        "DELETE FROM {prefix}refs WHERE (name, kind) NOT IN \
         (SELECT * FROM UNNEST($1::text[], $2::text[]))"
    )))
    .bind(&names)
    .bind(&kinds)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    written.insert("refs".into(), n);
    if bundle.has("workspace") {
        let rows = bundle.rows("workspace");
        let mut n = upsert(&mut tx, &prefix, "workspace", rows, OnConflict::Update).await?;
        if let Some(id) = rows.first().and_then(|r| r[0].as_text()) {
            let keys: Vec<String> = rows.iter().filter_map(|r| r[1].as_text()).collect();
            n += sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {prefix}workspace WHERE workspace_id = $1 AND NOT (key = ANY($2))"
            )))
            .bind(id)
            .bind(&keys)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        written.insert("workspace".into(), n);
    }
    // tether_meta: `exported_at` moves only when something else was written
    // (or was never recorded), so a publish of the same history writes 0.
    let (stamp, rest): (Vec<Vec<Cell>>, Vec<Vec<Cell>>) = bundle
        .rows("tether_meta")
        .iter()
        .cloned()
        .partition(|r| r[0] == Cell::Text("exported_at".into()));
    let mut n = upsert(&mut tx, &prefix, "tether_meta", &rest, OnConflict::Update).await?;
    let stamped: bool = sqlx::query(AssertSqlSafe(format!(
        "SELECT EXISTS (SELECT 1 FROM {prefix}tether_meta WHERE key = 'exported_at')"
    )))
    .fetch_one(&mut *tx)
    .await?
    .try_get(0)?;
    if n + written.values().sum::<u64>() > 0 || !stamped {
        n += upsert(&mut tx, &prefix, "tether_meta", &stamp, OnConflict::Update).await?;
    }
    written.insert("tether_meta".into(), n);
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok((written, skipped))
}

/// Insert `rows` into the schema's `table`; the rows written.
async fn upsert(
    tx: &mut sqlx::PgConnection,
    prefix: &str,
    table: &str,
    rows: &[Vec<Cell>],
    on_conflict: OnConflict,
) -> std::result::Result<u64, sqlx::Error> {
    let t = export::table(table).expect("a table of the schema");
    insert_rows::<sqlx::Postgres>(tx, t, rows, prefix, Dialect::Postgres, on_conflict).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsn_is_shown_without_its_password() {
        assert_eq!(
            redact_dsn("postgresql://tether:s3cr%40t@db:5432/cat?sslmode=require"),
            "postgresql://tether:***@db:5432/cat?sslmode=require"
        );
        assert_eq!(
            redact_dsn("postgresql://tether@db/cat"),
            "postgresql://tether@db/cat"
        );
        assert_eq!(
            scrub(
                "auth failed for s3cr@t and s3cr%40t",
                "postgres://u:s3cr%40t@h/d"
            ),
            "auth failed for *** and ***"
        );
    }

    #[test]
    fn schema_names_are_checked_before_they_are_quoted() {
        assert_eq!(schema_ident("tether").unwrap(), "\"tether\"");
        for bad in ["", "a b", "x\"; DROP", "1abc", "a-b"] {
            assert!(schema_ident(bad).is_err(), "{bad}");
        }
    }
}
