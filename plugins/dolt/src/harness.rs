//! The conformance harness: each object is a database of its own, made with
//! `CREATE DATABASE` on the server the suite's SQL scratch names
//! (`--scratch mysql://user:password@host:port/db`), with one table `t`
//! whose every write is a new row and a Dolt commit.

use std::cell::RefCell;

use serde_json::{Value, json};
use tether_sdk::kit::{random_hex, scratch_name};
use tether_sdk::{Error, Harness, Result};

use crate::db::Db;
use crate::{Locator, Server};

thread_local! {
    /// The `url` the instance was configured with: the harness's calls get
    /// no configuration of their own, and the objects it makes live on the
    /// same server.
    static CONFIGURED_URL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Remember the configured `url` (see [`CONFIGURED_URL`]).
pub(crate) fn remember_url(url: Option<String>) {
    CONFIGURED_URL.with(|c| *c.borrow_mut() = url);
}

fn configured_server() -> Result<Server> {
    let url = CONFIGURED_URL.with(|c| c.borrow().clone()).ok_or_else(|| {
        Error::Capability(
            "the dolt harness needs a server: run the suite with \
             `--scratch mysql://user:password@host:port/database`"
                .into(),
        )
    })?;
    Server::parse(&url)
}

fn new_row_id() -> Result<i64> {
    let hex = random_hex(7)?;
    i64::from_str_radix(&hex, 16).map_err(|e| Error::Other(e.to_string()))
}

/// Makes dolt databases for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct DoltHarness;

impl Harness for DoltHarness {
    type Locator = Locator;

    fn new_object(&self, _scratch_uri: &str) -> Result<Value> {
        let server = configured_server()?;
        let name: String = scratch_name("tether")?
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let db = Db::open()?;
        let conn = db.conn();
        conn.execute(&format!("CREATE DATABASE `{name}`"), &[])?;
        conn.execute(&format!("USE `{name}`"), &[])?;
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(64))", &[])?;
        conn.execute(
            "INSERT INTO t (id, v) VALUES (?, ?)",
            &[0i64.into(), "first".into()],
        )?;
        db.call("DOLT_COMMIT", &["-Am", "harness: new object"])?;
        let object = Server {
            database: name,
            ..server
        };
        let url = object.revision_url("");
        Ok(json!({ "url": url.trim_end_matches('/') }))
    }

    fn mutate(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        let branch = working_ref.unwrap_or(&loc.branch);
        // The harness's connection is the scratch database's: switch to
        // the object's, on the same server.
        let database = loc.server()?.database;
        let db = Db::open()?;
        db.conn().execute(&format!("USE `{database}`"), &[])?;
        db.checkout(branch)?;
        let id = new_row_id()?;
        db.conn().execute(
            "INSERT INTO t (id, v) VALUES (?, ?)",
            &[id.into(), format!("row {id}").into()],
        )?;
        db.call(
            "DOLT_COMMIT",
            &["-Am", &format!("harness: row {id} on {branch}")],
        )?;
        Ok(())
    }

    fn fresh_locator(&self, _scratch_uri: &str) -> Result<Value> {
        Err(Error::Capability(
            "a Dolt database lives on a server tether does not own, so tether cannot create \
             one (no CREATE)"
                .into(),
        ))
    }
}
