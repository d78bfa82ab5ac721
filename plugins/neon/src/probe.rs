//! SQL on a branch's compute, through Neon's SQL-over-HTTP interface (the
//! one `@neondatabase/serverless` speaks): `POST <sql origin>/sql` with the
//! connection string in `Neon-Connection-String` and `{"query", "params"}`
//! as the body; `Neon-Array-Mode` and `Neon-Raw-Text-Output` make rows
//! arrays of text.
//!
//! Why HTTP and not the host's `sql` capability: a Neon branch is reached
//! through its own compute endpoint, whose address the API hands out at
//! run time, while the `sql` capability opens only addresses the object's
//! locator or secrets.toml name. The SQL origin is granted like the API's
//! (`sql_url`), and the API key is never sent to it.

use serde_json::{Value, json};
use tether_sdk::http::Request;
use tether_sdk::{Error, Result};

/// The state probe: the compute's WAL position, and the newest transaction
/// id that committed among the last 65536 (none when there is no such id).
/// A hot-standby (read-only) compute reports its replay position.
const STATE_SQL: &str = "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
     ELSE pg_current_wal_lsn() END)::text AS lsn, \
     (SELECT x::text FROM generate_series( \
         pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1, \
         greatest(3::bigint, pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 65536), \
         -1) AS x \
      WHERE pg_xact_status(x::text::xid8) = 'committed' LIMIT 1) AS commit_xid";

/// Sessions other than this one that hold a transaction id: they wrote (or
/// locked rows for writing) and have not committed yet.
const WRITERS_SQL: &str = "SELECT count(*)::text FROM pg_stat_activity \
     WHERE pid <> pg_backend_pid() AND backend_xid IS NOT NULL";

/// What `commit_xid` reads when no transaction committed among the last 65536 ids.
pub const NO_RECENT_COMMIT: &str = "none";

/// One compute, by its connection URI.
pub struct Compute<'a> {
    pub sql_base: &'a str,
    pub uri: &'a str,
}

impl Compute<'_> {
    /// Run one statement; its rows as text cells.
    pub fn query(&self, query: &str, params: &[&str]) -> Result<Vec<Vec<Option<String>>>> {
        let url = format!("{}/sql", self.sql_base.trim_end_matches('/'));
        let body = json!({"query": query, "params": params});
        let r = Request::new("POST", &url)
            .header("neon-connection-string", self.uri)
            .header("neon-array-mode", "true")
            .header("neon-raw-text-output", "true")
            .json(&body)
            .send()?;
        let v: Value = r.json().unwrap_or(Value::Null);
        if !r.is_success() {
            let msg = v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(Error::backend(format!(
                "SQL over HTTP: HTTP {}: {msg}",
                r.status
            )));
        }
        let rows = v
            .get("rows")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::backend("SQL over HTTP returned no rows array"))?;
        Ok(rows
            .iter()
            .map(|row| {
                row.as_array()
                    .map(|cells| {
                        cells
                            .iter()
                            .map(|c| c.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect())
    }

    fn one(&self, query: &str) -> Result<Vec<Option<String>>> {
        self.query(query, &[])?
            .into_iter()
            .next()
            .ok_or_else(|| Error::backend("the probe returned no row"))
    }

    /// `(lsn, commit_xid)`.
    pub fn state(&self) -> Result<(String, String)> {
        let row = self.one(STATE_SQL)?;
        let lsn = row
            .first()
            .cloned()
            .flatten()
            .ok_or_else(|| Error::backend("the probe returned no LSN"))?;
        let xid = row
            .get(1)
            .cloned()
            .flatten()
            .unwrap_or_else(|| NO_RECENT_COMMIT.to_owned());
        Ok((lsn, xid))
    }

    /// How many sessions hold an open write transaction.
    pub fn writers(&self) -> Result<u64> {
        let row = self.one(WRITERS_SQL)?;
        row.first()
            .cloned()
            .flatten()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Error::backend("the writer probe returned no count"))
    }
}
