//! A DuckLake catalog's tables, read through the host's `sql` capability.
//!
//! The catalog is a set of `ducklake_*` tables in a SQLite file or a
//! PostgreSQL database (in `metadata_schema` when the catalog was attached
//! with `METADATA_SCHEMA`). What this module reads, all catalog-wide:
//! `ducklake_snapshot` (id and time), `ducklake_snapshot_changes`, the
//! `ducklake_schema` / `ducklake_table` rows that name tables, and, for row
//! counts, aggregates of `ducklake_data_file`, `ducklake_delete_file` and
//! the inlined-data tables `ducklake_inlined_data_tables` lists. It never
//! writes.

use std::collections::{BTreeMap, BTreeSet};

use tether_sdk::sql::{Connection, Dialect, FromValue, Row, SqlError};
use tether_sdk::{Error, Result};

use crate::changes::{self, Change};

/// A snapshot row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub id: i64,
    pub time_us: i64,
}

/// A snapshot with what it did, for `history`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub snapshot: Snapshot,
    pub changes: Vec<Change>,
    pub author: Option<String>,
    pub message: Option<String>,
}

/// One `ducklake_table` row (a table's name over a snapshot range).
#[derive(Debug, Clone)]
pub struct TableRow {
    pub id: i64,
    pub begin: i64,
    pub end: Option<i64>,
    pub schema_id: i64,
    pub name: String,
    pub path: String,
    pub path_is_relative: bool,
}

/// One `ducklake_schema` row.
#[derive(Debug, Clone)]
pub struct SchemaRow {
    pub id: i64,
    pub begin: i64,
    pub end: Option<i64>,
    pub name: String,
    pub path: String,
    pub path_is_relative: bool,
}

/// Whether a row with `[begin, end)` is live at snapshot `at`.
pub fn live(begin: i64, end: Option<i64>, at: i64) -> bool {
    begin <= at && end.is_none_or(|e| e > at)
}

/// Rows of a table, per table id: (added between two snapshots, live at the
/// lower, live at the upper), and the first file that keeps them from being
/// exact ([`Split`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub added: i64,
    pub at_lo: i64,
    pub at_hi: i64,
    pub split: Option<Split>,
}

/// A file live at snapshot `at` that holds rows of snapshots `begin` to
/// `max` (its `partial_max`) together, `max > at`. DuckLake writes one when
/// rows of a data file that already has deletes are deleted again (the new
/// delete file replaces the old in the catalog and keeps its
/// `begin_snapshot`), or when it merges files. The catalog records only the
/// file's total (`delete_count`, `record_count`); how many of its rows
/// belong to snapshots up to `at` is in the file itself (the
/// `_ducklake_internal_snapshot_id` of each row), so a count at `at` is not
/// exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// A delete file (else a data file).
    pub deletes: bool,
    pub begin: i64,
    pub max: i64,
    pub at: i64,
}

fn sql_err(e: SqlError) -> Error {
    match e {
        SqlError::Denied(m) => Error::Denied(m),
        SqlError::Connect(m) => {
            Error::backend(format!("cannot reach the DuckLake catalog database: {m}"))
        }
        other => Error::backend(format!("DuckLake catalog: {other}")),
    }
}

/// One open catalog.
pub struct Catalog {
    conn: Connection,
    /// `"schema".` or empty: what every table name is prefixed with.
    prefix: String,
}

impl Catalog {
    /// Open the catalog the host connects to for the `sql` key `key`
    /// (`metadata`, or `uri`).
    pub fn open(key: &str, metadata_schema: Option<&str>) -> Result<Catalog> {
        let conn = Connection::open(key).map_err(sql_err)?;
        let prefix = match metadata_schema {
            None => String::new(),
            Some(s) if conn.dialect() == Dialect::Sqlite && s != "main" => {
                return Err(Error::invalid(format!(
                    "metadata_schema {s:?}: a SQLite catalog keeps its tables in `main`"
                )));
            }
            Some(s) => format!("\"{}\".", s.replace('"', "\"\"")),
        };
        Ok(Catalog { conn, prefix })
    }

    /// The connection (the harness writes through it).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// A catalog table's qualified name.
    pub fn t(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn query(&self, sql: &str) -> Result<tether_sdk::sql::Rows> {
        self.conn.query(sql, &[]).map_err(|e| match e {
            SqlError::Database { ref message, .. }
                if message.contains("ducklake_snapshot")
                    && (message.contains("no such table")
                        || message.contains("does not exist")) =>
            {
                Error::not_found(format!(
                    "the database has no DuckLake catalog{} (no ducklake_snapshot table): {e}",
                    if self.prefix.is_empty() {
                        String::new()
                    } else {
                        format!(" in schema {}", self.prefix.trim_end_matches('.'))
                    }
                ))
            }
            e => sql_err(e),
        })
    }

    /// The snapshot time as text, UTC, in either dialect.
    fn time_expr(&self) -> &'static str {
        match self.conn.dialect() {
            Dialect::Postgres => {
                "to_char(snapshot_time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
            }
            _ => "CAST(snapshot_time AS TEXT)",
        }
    }

    fn snapshot_of(row: Row<'_>) -> Result<Snapshot> {
        let id: i64 = col(row, "snapshot_id")?;
        let time: Option<String> = col(row, "t")?;
        let time = time.ok_or_else(|| Error::backend(format!("snapshot {id} has no time")))?;
        Ok(Snapshot {
            id,
            time_us: changes::timestamp_us(&time)?,
        })
    }

    fn snapshots_where(&self, cond: &str, order_limit: &str) -> Result<Vec<Snapshot>> {
        let sql = format!(
            "SELECT snapshot_id, {} AS t FROM {} WHERE {cond} {order_limit}",
            self.time_expr(),
            self.t("ducklake_snapshot")
        );
        let rows = self.query(&sql)?;
        rows.iter().map(Self::snapshot_of).collect()
    }

    /// The newest snapshot.
    pub fn head(&self) -> Result<Snapshot> {
        self.snapshots_where("1 = 1", "ORDER BY snapshot_id DESC LIMIT 1")?
            .into_iter()
            .next()
            .ok_or_else(|| Error::not_found("the DuckLake catalog has no snapshot"))
    }

    /// Snapshot `id`, if the catalog still has it.
    pub fn snapshot(&self, id: i64) -> Result<Option<Snapshot>> {
        Ok(self
            .snapshots_where(&format!("snapshot_id = {id}"), "")?
            .into_iter()
            .next())
    }

    /// The oldest snapshot the catalog still has.
    pub fn oldest(&self) -> Result<Option<Snapshot>> {
        Ok(self
            .snapshots_where("1 = 1", "ORDER BY snapshot_id ASC LIMIT 1")?
            .into_iter()
            .next())
    }

    /// The snapshot before `id` (the newest with a smaller id), if any.
    pub fn before(&self, id: i64) -> Result<Option<Snapshot>> {
        Ok(self
            .snapshots_where(
                &format!("snapshot_id < {id}"),
                "ORDER BY snapshot_id DESC LIMIT 1",
            )?
            .into_iter()
            .next())
    }

    /// Snapshots with ids in `(lo, hi]` with their changes, newest first, at
    /// most `limit`.
    pub fn entries(&self, lo: i64, hi: i64, limit: u32) -> Result<Vec<Entry>> {
        let time = self.time_expr().replace("snapshot_time", "s.snapshot_time");
        let sql = format!(
            "SELECT s.snapshot_id, {time} AS t, c.changes_made, c.author, c.commit_message \
             FROM {} s LEFT JOIN {} c ON c.snapshot_id = s.snapshot_id \
             WHERE s.snapshot_id > {lo} AND s.snapshot_id <= {hi} \
             ORDER BY s.snapshot_id DESC LIMIT {limit}",
            self.t("ducklake_snapshot"),
            self.t("ducklake_snapshot_changes"),
        );
        let rows = self.query(&sql)?;
        rows.iter()
            .map(|r| {
                let changes: Option<String> = col(r, "changes_made")?;
                Ok(Entry {
                    snapshot: Self::snapshot_of(r)?,
                    changes: changes::parse(changes.as_deref().unwrap_or(""))?,
                    author: col(r, "author")?,
                    message: col(r, "commit_message")?,
                })
            })
            .collect()
    }

    /// The catalog's own `data_path`.
    pub fn data_path(&self) -> Result<Option<String>> {
        let sql = format!(
            "SELECT value FROM {} WHERE key = 'data_path' AND scope IS NULL",
            self.t("ducklake_metadata")
        );
        let rows = self.query(&sql)?;
        match rows.first() {
            Some(r) => r.get("value").map_err(sql_err),
            None => Ok(None),
        }
    }

    /// Table rows: those of `ids`, and those that began in `(lo, hi]`.
    pub fn tables(&self, ids: &BTreeSet<i64>, lo: i64, hi: i64) -> Result<Vec<TableRow>> {
        let mut cond = format!("(begin_snapshot > {lo} AND begin_snapshot <= {hi})");
        if !ids.is_empty() {
            cond.push_str(&format!(" OR table_id IN ({})", id_list(ids)));
        }
        self.table_rows(&cond)
    }

    /// Table rows live at snapshot `at`.
    pub fn tables_at(&self, at: i64) -> Result<Vec<TableRow>> {
        self.table_rows(&format!(
            "begin_snapshot <= {at} AND (end_snapshot IS NULL OR end_snapshot > {at})"
        ))
    }

    fn table_rows(&self, cond: &str) -> Result<Vec<TableRow>> {
        let sql = format!(
            "SELECT table_id, begin_snapshot, end_snapshot, schema_id, table_name, path, \
             path_is_relative FROM {} WHERE {cond} ORDER BY table_id, begin_snapshot",
            self.t("ducklake_table")
        );
        let rows = self.query(&sql)?;
        rows.iter()
            .map(|r| {
                let (begin, end, path, path_is_relative) = versioned_path(r)?;
                Ok(TableRow {
                    id: col(r, "table_id")?,
                    schema_id: col(r, "schema_id")?,
                    name: opt_str(r, "table_name")?,
                    begin,
                    end,
                    path,
                    path_is_relative,
                })
            })
            .collect()
    }

    /// Every schema row (a catalog has few).
    pub fn schemas(&self) -> Result<Vec<SchemaRow>> {
        let sql = format!(
            "SELECT schema_id, begin_snapshot, end_snapshot, schema_name, path, path_is_relative \
             FROM {} ORDER BY schema_id, begin_snapshot",
            self.t("ducklake_schema")
        );
        let rows = self.query(&sql)?;
        rows.iter()
            .map(|r| {
                let (begin, end, path, path_is_relative) = versioned_path(r)?;
                Ok(SchemaRow {
                    id: col(r, "schema_id")?,
                    name: opt_str(r, "schema_name")?,
                    begin,
                    end,
                    path,
                    path_is_relative,
                })
            })
            .collect()
    }

    /// Row counts of the tables `ids` between snapshots `lo < hi`: rows
    /// added in `(lo, hi]` (not counting files that `compacted` snapshots
    /// rewrote) and rows live at each end, from data files less their
    /// delete files, plus inlined rows; exact unless a file live at an end
    /// spans it ([`Split`]).
    pub fn counts(
        &self,
        ids: &BTreeSet<i64>,
        lo: i64,
        hi: i64,
        compacted: &BTreeSet<i64>,
    ) -> Result<BTreeMap<i64, Counts>> {
        let mut out: BTreeMap<i64, Counts> = BTreeMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let list = id_list(ids);
        let alive = |s: i64| {
            format!("begin_snapshot <= {s} AND (end_snapshot IS NULL OR end_snapshot > {s})")
        };
        let not_compacted = if compacted.is_empty() {
            String::new()
        } else {
            format!(" AND begin_snapshot NOT IN ({})", id_list(compacted))
        };
        let files = format!(
            "SELECT table_id, \
             CAST(SUM(CASE WHEN begin_snapshot > {lo} AND begin_snapshot <= {hi}{not_compacted} \
               THEN record_count ELSE 0 END) AS BIGINT) AS added, \
             CAST(SUM(CASE WHEN {} THEN record_count ELSE 0 END) AS BIGINT) AS at_lo, \
             CAST(SUM(CASE WHEN {} THEN record_count ELSE 0 END) AS BIGINT) AS at_hi \
             FROM {} WHERE table_id IN ({list}) GROUP BY table_id",
            alive(lo),
            alive(hi),
            self.t("ducklake_data_file")
        );
        for r in self.query(&files)?.iter() {
            let c = out.entry(col(r, "table_id")?).or_default();
            c.added += opt(col(r, "added")?);
            c.at_lo += opt(col(r, "at_lo")?);
            c.at_hi += opt(col(r, "at_hi")?);
        }
        let deletes = format!(
            "SELECT table_id, \
             CAST(SUM(CASE WHEN {} THEN delete_count ELSE 0 END) AS BIGINT) AS at_lo, \
             CAST(SUM(CASE WHEN {} THEN delete_count ELSE 0 END) AS BIGINT) AS at_hi \
             FROM {} WHERE table_id IN ({list}) GROUP BY table_id",
            alive(lo),
            alive(hi),
            self.t("ducklake_delete_file")
        );
        for r in self.query(&deletes)?.iter() {
            let c = out.entry(col(r, "table_id")?).or_default();
            c.at_lo -= opt(col(r, "at_lo")?);
            c.at_hi -= opt(col(r, "at_hi")?);
        }
        // Files live at an end whose rows reach past it (`partial_max`).
        for (deletes, table) in [
            (false, "ducklake_data_file"),
            (true, "ducklake_delete_file"),
        ] {
            let sql = format!(
                "SELECT table_id, begin_snapshot, partial_max FROM {} \
                 WHERE table_id IN ({list}) AND (({} AND partial_max > {lo}) \
                 OR ({} AND partial_max > {hi})) ORDER BY table_id, begin_snapshot",
                self.t(table),
                alive(lo),
                alive(hi)
            );
            for r in self.query(&sql)?.iter() {
                let (begin, max): (i64, i64) = (col(r, "begin_snapshot")?, col(r, "partial_max")?);
                let c = out.entry(col(r, "table_id")?).or_default();
                if c.split.is_none_or(|s| s.deletes && !deletes) {
                    // The end it spans: `lo` when it is live there.
                    let at = if begin <= lo { lo } else { hi };
                    c.split = Some(Split {
                        deletes,
                        begin,
                        max,
                        at,
                    });
                }
            }
        }
        let inlined = format!(
            "SELECT table_id, table_name FROM {} WHERE table_id IN ({list})",
            self.t("ducklake_inlined_data_tables")
        );
        let tables: Vec<(i64, String)> = self
            .query(&inlined)?
            .iter()
            .map(|r| Ok((col(r, "table_id")?, col(r, "table_name")?)))
            .collect::<Result<_>>()?;
        for (id, name) in tables {
            // The name comes from the catalog: only DuckLake's own pattern
            // is put into a statement.
            if !is_inlined_table_name(&name) {
                return Err(Error::backend(format!(
                    "ducklake_inlined_data_tables names {name:?}, which is not an inlined-data \
                     table (ducklake_inlined_data_<table>_<version>)"
                )));
            }
            let sql = format!(
                "SELECT COUNT(CASE WHEN begin_snapshot > {lo} AND begin_snapshot <= {hi} THEN 1 END) AS added, \
                 COUNT(CASE WHEN {} THEN 1 END) AS at_lo, COUNT(CASE WHEN {} THEN 1 END) AS at_hi \
                 FROM {}",
                alive(lo),
                alive(hi),
                self.t(&name)
            );
            for r in self.query(&sql)?.iter() {
                let c = out.entry(id).or_default();
                c.added += opt(col(r, "added")?);
                c.at_lo += opt(col(r, "at_lo")?);
                c.at_hi += opt(col(r, "at_hi")?);
            }
        }
        Ok(out)
    }

    /// The data and delete files live at snapshot `at`, as
    /// `(table_id, path, path_is_relative)`.
    pub fn files_at(&self, at: i64, limit: u32) -> Result<Vec<(i64, String, bool)>> {
        let alive =
            format!("begin_snapshot <= {at} AND (end_snapshot IS NULL OR end_snapshot > {at})");
        let sql = format!(
            "SELECT table_id, path, path_is_relative FROM {} WHERE {alive} \
             UNION ALL SELECT table_id, path, path_is_relative FROM {} WHERE {alive} LIMIT {limit}",
            self.t("ducklake_data_file"),
            self.t("ducklake_delete_file")
        );
        let rows = self.query(&sql)?;
        rows.iter()
            .map(|r| {
                Ok((
                    col(r, "table_id")?,
                    opt_str(r, "path")?,
                    truthy(col(r, "path_is_relative")?),
                ))
            })
            .collect()
    }
}

/// A column of a catalog row.
fn col<T: FromValue>(r: Row<'_>, column: &str) -> Result<T> {
    r.get(column).map_err(sql_err)
}

/// A text column that may be NULL, NULL read as empty.
fn opt_str(r: Row<'_>, column: &str) -> Result<String> {
    Ok(col::<Option<String>>(r, column)?.unwrap_or_default())
}

/// What `ducklake_table` and `ducklake_schema` rows share: the snapshot
/// range `[begin, end)` they are live in, and their path.
fn versioned_path(r: Row<'_>) -> Result<(i64, Option<i64>, String, bool)> {
    Ok((
        col(r, "begin_snapshot")?,
        col(r, "end_snapshot")?,
        opt_str(r, "path")?,
        truthy(col(r, "path_is_relative")?),
    ))
}

fn opt(v: Option<i64>) -> i64 {
    v.unwrap_or(0)
}

/// `path_is_relative`: a boolean on PostgreSQL, 0/1 on SQLite; absent means relative.
fn truthy(v: tether_sdk::sql::Value) -> bool {
    use tether_sdk::sql::Value;
    match v {
        Value::Boolean(b) => b,
        Value::Integer(n) => n != 0,
        Value::Text(t) => matches!(t.as_str(), "t" | "true" | "1"),
        _ => true,
    }
}

/// Integers for an `IN (...)` list (formatted from i64, so never SQL).
pub fn id_list(ids: &BTreeSet<i64>) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_inlined_table_name(name: &str) -> bool {
    name.strip_prefix("ducklake_inlined_data_")
        .and_then(|rest| rest.split_once('_'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_names() {
        assert!(is_inlined_table_name("ducklake_inlined_data_1_1"));
        assert!(!is_inlined_table_name(
            "ducklake_inlined_data_1_1; DROP TABLE x"
        ));
        assert!(!is_inlined_table_name("ducklake_inlined_data_1"));
        assert!(live(1, None, 1) && !live(2, None, 1) && !live(1, Some(3), 3));
    }
}
