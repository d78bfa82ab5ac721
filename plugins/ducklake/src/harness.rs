//! The conformance harness: DuckLake catalogs in a PostgreSQL database (the
//! suite's `--scratch postgres://...`), one catalog per object in its own
//! schema (DuckLake's `METADATA_SCHEMA`), so concurrent checks never share
//! a snapshot sequence. A SQLite database has no schemas, so one file
//! could hold only one catalog: the harness needs PostgreSQL.
//!
//! The catalogs hold the tables this backend reads, laid out as DuckLake
//! 1.0 makes them on PostgreSQL; each write is a snapshot inserting one row
//! into `main.t` as one (empty) data file under the object's `data_path`.
//! Reading such a catalog with DuckDB would fail on the files, which is why
//! the real-library tests (`host/tests/ducklake.rs`) use DuckDB itself.

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::sql::{Connection, Dialect};
use tether_sdk::storage::{Bucket, PutMode};
use tether_sdk::{Error, Harness, Result};

use crate::Locator;

/// The key the harness's catalog database is granted under.
const KEY: &str = "metadata";

/// DuckLake 1.0's tables, the subset this backend reads (`{s}` the schema).
const SCHEMA: &[&str] = &[
    "CREATE SCHEMA {s}",
    "CREATE TABLE {s}.ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, \
     scope VARCHAR, scope_id BIGINT)",
    "CREATE TABLE {s}.ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, \
     snapshot_time TIMESTAMPTZ, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT)",
    "CREATE TABLE {s}.ducklake_snapshot_changes(snapshot_id BIGINT PRIMARY KEY, \
     changes_made VARCHAR, author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR)",
    "CREATE TABLE {s}.ducklake_schema(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, \
     begin_snapshot BIGINT, end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, \
     path_is_relative BOOLEAN)",
    "CREATE TABLE {s}.ducklake_table(table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, \
     end_snapshot BIGINT, schema_id BIGINT, table_name VARCHAR, path VARCHAR, \
     path_is_relative BOOLEAN)",
    "CREATE TABLE {s}.ducklake_data_file(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, \
     begin_snapshot BIGINT, end_snapshot BIGINT, file_order BIGINT, path VARCHAR, \
     path_is_relative BOOLEAN, file_format VARCHAR, record_count BIGINT, file_size_bytes BIGINT, \
     footer_size BIGINT, row_id_start BIGINT, partition_id BIGINT, encryption_key VARCHAR, \
     mapping_id BIGINT, partial_max BIGINT)",
    "CREATE TABLE {s}.ducklake_delete_file(delete_file_id BIGINT PRIMARY KEY, table_id BIGINT, \
     begin_snapshot BIGINT, end_snapshot BIGINT, data_file_id BIGINT, path VARCHAR, \
     path_is_relative BOOLEAN, format VARCHAR, delete_count BIGINT, file_size_bytes BIGINT, \
     footer_size BIGINT, encryption_key VARCHAR, partial_max BIGINT)",
    "CREATE TABLE {s}.ducklake_inlined_data_tables(table_id BIGINT, table_name VARCHAR, \
     schema_version BIGINT)",
    "INSERT INTO {s}.ducklake_metadata VALUES ('version', '1.0', NULL, NULL), \
     ('created_by', 'tether conformance harness', NULL, NULL), ('encrypted', 'false', NULL, NULL)",
    "INSERT INTO {s}.ducklake_snapshot VALUES (0, clock_timestamp(), 0, 1, 0)",
    "INSERT INTO {s}.ducklake_snapshot_changes VALUES (0, 'created_schema:\"main\"', NULL, NULL, NULL)",
    "INSERT INTO {s}.ducklake_schema VALUES (0, NULL, 0, NULL, 'main', 'main/', true)",
    "INSERT INTO {s}.ducklake_snapshot VALUES (1, clock_timestamp(), 1, 2, 0)",
    "INSERT INTO {s}.ducklake_snapshot_changes VALUES (1, 'created_table:\"main\".\"t\"', NULL, NULL, NULL)",
    "INSERT INTO {s}.ducklake_table VALUES (1, NULL, 1, NULL, 0, 't', 't/', true)",
];

fn open() -> Result<Connection> {
    let need = "the ducklake harness needs a PostgreSQL database to make catalogs in: run the \
                suite with `--scratch postgres://...`";
    let conn = Connection::open(KEY).map_err(|e| Error::Capability(format!("{need} ({e})")))?;
    if conn.dialect() != Dialect::Postgres {
        return Err(Error::Capability(format!(
            "{need} (a SQLite file has no schemas, so it holds one catalog only)"
        )));
    }
    Ok(conn)
}

/// `"schema"` of a harness locator (its names are the harness's own).
fn schema_of(loc: &Locator) -> Result<String> {
    let s = loc
        .metadata_schema
        .as_deref()
        .filter(|s| s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
        .ok_or_else(|| Error::invalid("not a harness catalog (no metadata_schema)"))?;
    Ok(format!("\"{s}\""))
}

/// Makes ducklake catalogs for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct DuckLakeHarness;

impl Harness for DuckLakeHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let conn = open()?;
        let name = tether_sdk::kit::scratch_name("tether_dl")?
            .to_ascii_lowercase()
            .replace('-', "_");
        let schema = format!("\"{name}\"");
        let data_path = format!("{}/", scratch_child(scratch_uri, "lake")?);
        for statement in SCHEMA {
            conn.execute(&statement.replace("{s}", &schema), &[])?;
        }
        conn.execute(
            &format!("INSERT INTO {schema}.ducklake_metadata VALUES ('data_path', $1, NULL, NULL)"),
            &[data_path.as_str().into()],
        )?;
        Ok(json!({"metadata_schema": name, "data_path": data_path, "table": "main.t"}))
    }

    fn mutate(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "DuckLake catalogs have no branches (asked for {name})"
            )));
        }
        let s = schema_of(loc)?;
        let data_path = loc
            .data_path
            .clone()
            .ok_or_else(|| Error::invalid("not a harness catalog (no data_path)"))?;
        let conn = open()?;
        let file = conn.transaction(false, |tx| -> Result<i64> {
            let rows = tx.query(
                &format!(
                    "SELECT (SELECT MAX(snapshot_id) FROM {s}.ducklake_snapshot) AS snap, \
                     (SELECT COALESCE(MAX(data_file_id), -1) FROM {s}.ducklake_data_file) AS file"
                ),
                &[],
            )?;
            let row = rows
                .first()
                .ok_or_else(|| Error::backend("the harness catalog has no snapshot"))?;
            let snapshot: i64 = row.get::<i64>("snap")? + 1;
            let file: i64 = row.get::<i64>("file")? + 1;
            tx.execute(
                &format!(
                    "INSERT INTO {s}.ducklake_snapshot VALUES ({snapshot}, clock_timestamp(), 1, 2, {})",
                    file + 1
                ),
                &[],
            )?;
            tx.execute(
                &format!(
                    "INSERT INTO {s}.ducklake_snapshot_changes VALUES ({snapshot}, \
                     'inserted_into_table:1', NULL, NULL, NULL)"
                ),
                &[],
            )?;
            tx.execute(
                &format!(
                    "INSERT INTO {s}.ducklake_data_file (data_file_id, table_id, begin_snapshot, \
                     path, path_is_relative, file_format, record_count, file_size_bytes, \
                     row_id_start) VALUES ({file}, 1, {snapshot}, 'f-{file}.parquet', true, \
                     'parquet', 1, 0, {file})"
                ),
                &[],
            )?;
            Ok(file)
        })?;
        // The file the snapshot reads, so `verify --deep` finds it.
        let dir = format!("{}/main/t", data_path.trim_end_matches('/'));
        let bucket = Bucket::open(&dir).map_err(|e| Error::backend(format!("{dir}: {e}")))?;
        bucket
            .put(&format!("f-{file}.parquet"), b"", PutMode::Create)
            .map_err(|e| Error::backend(format!("{dir}: {e}")))?;
        Ok(())
    }

    fn fresh_locator(&self, _scratch_uri: &str) -> Result<Value> {
        Err(Error::Capability(
            "DuckLake catalogs are made with DuckDB, not by tether (no CREATE)".into(),
        ))
    }
}
