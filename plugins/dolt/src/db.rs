//! Dolt's SQL surface, as this backend uses it, over the host's `sql`
//! capability (MySQL protocol): the database the locator's `url` names,
//! opened by the host with the server's credentials.
//!
//! Only what `dolt sql-server` documents: the `dolt_branches`, `dolt_tags`,
//! `dolt_conflicts` and `dolt_constraint_violations` system tables, the
//! `dolt_log`, `dolt_diff_summary` and `dolt_diff_stat` table functions, the
//! `dolt_hashof` and `dolt_merge_base` functions, and the `DOLT_*` stored
//! procedures. Refs are always named in the statement, never taken from the
//! session's checked-out branch, except where a procedure works on it
//! (`DOLT_MERGE`, `DOLT_COMMIT`), which checks the branch out first.

use std::collections::BTreeMap;

use tether_sdk::sql::{Connection, Rows, SqlError, Value};
use tether_sdk::{Error, Result};

/// The locator key whose value is the database's address; the host opens it.
pub const URL_KEY: &str = "url";

/// One connection to the object's database.
pub struct Db {
    conn: Connection,
}

/// A branch head: its commit and whether its working set has uncommitted
/// changes (`dolt_branches.dirty`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchHead {
    pub commit: String,
    pub dirty: bool,
}

fn column<T: tether_sdk::sql::FromValue>(row: &tether_sdk::sql::Row<'_>, name: &str) -> Result<T> {
    row.get(name).map_err(|e| Error::backend(e.to_string()))
}

/// Whether a database error says a merge conflicted (Dolt outside a
/// transaction, and doltlite, raise rather than return the count).
pub fn is_conflict_error(e: &SqlError) -> bool {
    matches!(e, SqlError::Database { message, .. }
        if message.to_ascii_lowercase().contains("conflict"))
}

impl Db {
    /// The database the host opens for `url`.
    pub fn open() -> Result<Db> {
        let conn = Connection::open(URL_KEY).map_err(|e| match e {
            SqlError::Denied(m) => Error::Denied(m),
            other => Error::backend(format!("cannot reach the Dolt server: {other}")),
        })?;
        Ok(Db { conn })
    }

    /// The raw connection (transactions, the harness's writes).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Rows> {
        Ok(self.conn.query(sql, params)?)
    }

    /// `CALL <proc>(?, ?, ...)`: Dolt's stored procedures, which return one
    /// row (`status`, `hash`, or DOLT_MERGE's four columns).
    pub fn call(&self, proc: &str, args: &[&str]) -> std::result::Result<Rows, SqlError> {
        let marks = vec!["?"; args.len()].join(", ");
        let params: Vec<Value> = args.iter().map(|a| Value::from(*a)).collect();
        self.conn.query(&format!("CALL {proc}({marks})"), &params)
    }

    /// Every branch and its head.
    pub fn branches(&self) -> Result<BTreeMap<String, BranchHead>> {
        let rows = self.query("SELECT name, hash, dirty FROM dolt_branches", &[])?;
        let mut out = BTreeMap::new();
        for row in rows.iter() {
            let dirty: Option<bool> = column(&row, "dirty")?;
            out.insert(
                column::<String>(&row, "name")?,
                BranchHead {
                    commit: column(&row, "hash")?,
                    dirty: dirty.unwrap_or(false),
                },
            );
        }
        Ok(out)
    }

    /// One branch's head; `None` when it does not exist.
    pub fn branch(&self, name: &str) -> Result<Option<BranchHead>> {
        let rows = self.query(
            "SELECT hash, dirty FROM dolt_branches WHERE name = ?",
            &[name.into()],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let dirty: Option<bool> = column(&row, "dirty")?;
        Ok(Some(BranchHead {
            commit: column(&row, "hash")?,
            dirty: dirty.unwrap_or(false),
        }))
    }

    /// Every tag and the commit it names.
    pub fn tags(&self) -> Result<BTreeMap<String, String>> {
        let rows = self.query("SELECT tag_name, tag_hash FROM dolt_tags", &[])?;
        rows.iter()
            .map(|row| Ok((column(&row, "tag_name")?, column(&row, "tag_hash")?)))
            .collect()
    }

    /// The commit a branch, tag or hash names.
    pub fn hash_of(&self, rev: &str) -> Result<String> {
        let rows = self
            .query("SELECT dolt_hashof(?) AS h", &[rev.into()])
            .map_err(|e| {
                Error::not_found(format!(
                    "{rev:?} is no branch, tag or commit of this database ({e})"
                ))
            })?;
        match rows.first() {
            Some(row) => column(&row, "h"),
            None => Err(Error::not_found(format!("{rev:?} names no commit"))),
        }
    }

    /// Whether `commit` is a commit of this database (`dolt_log` refuses a
    /// revision it cannot resolve).
    pub fn has_commit(&self, commit: &str) -> Result<bool> {
        match self.conn.query(
            "SELECT commit_hash FROM dolt_log(?) LIMIT 1",
            &[commit.into()],
        ) {
            Ok(rows) => Ok(!rows.is_empty()),
            Err(SqlError::Database { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The merge base of two commits.
    pub fn merge_base(&self, a: &str, b: &str) -> Result<Option<String>> {
        let rows = self.query("SELECT dolt_merge_base(?, ?) AS b", &[a.into(), b.into()])?;
        match rows.first() {
            Some(row) => column(&row, "b"),
            None => Ok(None),
        }
    }

    /// Check `branch` out in this session (what DOLT_MERGE merges into).
    pub fn checkout(&self, branch: &str) -> Result<()> {
        self.call("DOLT_CHECKOUT", &[branch])
            .map_err(|e| Error::backend(format!("cannot check out branch {branch}: {e}")))?;
        Ok(())
    }

    /// The tables a merge in progress (inside this transaction) left in
    /// conflict or with constraint violations.
    pub fn conflicted_tables(&self) -> Result<Vec<String>> {
        let mut tables = Vec::new();
        for sql in [
            "SELECT * FROM dolt_conflicts",
            "SELECT * FROM dolt_constraint_violations",
        ] {
            let rows = self.query(sql, &[])?;
            for row in rows.iter() {
                if let Some(Value::Text(t)) = row.cells().first()
                    && !tables.contains(t)
                {
                    tables.push(t.clone());
                }
            }
        }
        Ok(tables)
    }
}
