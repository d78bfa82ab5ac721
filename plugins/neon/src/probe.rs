//! SQL on a branch's compute, over the host's `sql` capability
//! ([`tether_sdk::sql::Connection::open_uri`], PostgreSQL dialect).
//!
//! A Neon branch is reached through its own compute endpoint, whose
//! connection URI the API hands out at run time (`GET .../connection_uri`).
//! The host takes the role's password out of that response before this
//! plugin sees it, keeps it, and opens the password-free URI this plugin
//! passes back with it: the plugin never holds a Neon password, and can
//! open only an address the host itself got from the granted API origin.

use tether_sdk::sql::Connection;
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
const WRITERS_SQL: &str = "SELECT count(*) AS writers FROM pg_stat_activity \
     WHERE pid <> pg_backend_pid() AND backend_xid IS NOT NULL";

/// What `commit_xid` reads when no transaction committed among the last 65536 ids.
pub const NO_RECENT_COMMIT: &str = "none";

/// One compute, connected through the URI the API gave (without password).
pub struct Compute {
    db: Connection,
}

impl Compute {
    pub fn open(uri: &str) -> Result<Compute> {
        Ok(Compute {
            db: Connection::open_uri(uri)?,
        })
    }

    /// Run one statement that changes something.
    pub fn execute(&self, statement: &str) -> Result<u64> {
        Ok(self.db.execute(statement, &[])?)
    }

    /// `(lsn, commit_xid)`.
    pub fn state(&self) -> Result<(String, String)> {
        let rows = self.db.query(STATE_SQL, &[])?;
        let row = rows
            .first()
            .ok_or_else(|| Error::backend("the state probe returned no row"))?;
        let lsn: Option<String> = row.get("lsn")?;
        let lsn = lsn.ok_or_else(|| Error::backend("the probe returned no LSN"))?;
        let xid: Option<String> = row.get("commit_xid")?;
        Ok((lsn, xid.unwrap_or_else(|| NO_RECENT_COMMIT.to_owned())))
    }

    /// How many sessions hold an open write transaction.
    pub fn writers(&self) -> Result<u64> {
        let rows = self.db.query(WRITERS_SQL, &[])?;
        let n: i64 = rows
            .first()
            .ok_or_else(|| Error::backend("the writer probe returned no row"))?
            .get("writers")?;
        Ok(n.max(0) as u64)
    }
}
