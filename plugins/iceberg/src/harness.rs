//! The conformance harness: tables in a SQL catalog (SQLite, an existing
//! file, possibly empty, that the run's configuration names as
//! `catalog.uri`), their metadata under the scratch URI.
//!
//! The harness's tables are metadata only: each write is an `append`
//! snapshot whose summary says one row and one file were added, with no
//! manifest list behind it. This backend reads nothing below the metadata
//! file, so the protocol is exercised exactly; reading such a table with an
//! engine would fail, which is why the real-library tests use pyiceberg.

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::kit::random_hex;
use tether_sdk::sql::Connection;
use tether_sdk::{Error, Harness, Result};

use crate::catalog::{Catalog, Outcome};
use crate::metadata::{MAIN, Metadata, RefKind, Requirement, Update};
use crate::sql::{SqlCatalog, now_ms, write_metadata};
use crate::{CATALOG_URI_KEY, Locator};

/// The namespace harness tables go in.
const NAMESPACE: &str = "tether_conformance";

/// pyiceberg's `SqlCatalog` schema (`pyiceberg/catalog/sql.py`), made the
/// way it makes it on first use.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS iceberg_tables (
        catalog_name VARCHAR(255) NOT NULL,
        table_namespace VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        metadata_location VARCHAR(1000),
        previous_metadata_location VARCHAR(1000),
        iceberg_type VARCHAR(5),
        PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
        catalog_name VARCHAR(255) NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        property_key VARCHAR(255) NOT NULL,
        property_value VARCHAR(1000) NOT NULL,
        PRIMARY KEY (catalog_name, namespace, property_key))",
];

/// A new snapshot id: positive and 63 bits, as Iceberg's are.
fn new_snapshot_id() -> Result<i64> {
    let hex = random_hex(8)?;
    let n = u64::from_str_radix(&hex, 16).map_err(|e| Error::Other(e.to_string()))?;
    Ok((n >> 1) as i64)
}

/// An `append` snapshot of one row and one file on top of `parent`.
fn append_snapshot(location: &str, parent: Option<(i64, i64)>, sequence: i64, id: i64) -> Value {
    let total = parent.map_or(0, |(_, total)| total) + 1;
    let mut s = json!({
        "snapshot-id": id,
        "sequence-number": sequence,
        "timestamp-ms": now_ms(),
        "manifest-list": format!("{location}/metadata/snap-{id}-tether-harness.avro"),
        "summary": {
            "operation": "append",
            "added-records": "1",
            "added-data-files": "1",
            "total-records": total.to_string(),
            "total-data-files": total.to_string(),
        },
        "schema-id": 0,
    });
    if let Some((parent, _)) = parent {
        s["parent-snapshot-id"] = json!(parent);
    }
    s
}

/// Makes iceberg tables for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct IcebergHarness;

impl Harness for IcebergHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let conn = Connection::open(CATALOG_URI_KEY).map_err(|e| {
            Error::Capability(format!(
                "the iceberg harness needs a SQL catalog: run the suite with \
                 `catalog.uri` in the configuration naming an existing (even empty) \
                 SQLite file ({e})"
            ))
        })?;
        for statement in SCHEMA {
            conn.execute(statement, &[])?;
        }
        let location = scratch_child(scratch_uri, "table")?;
        let name = tether_sdk::kit::scratch_name("t")?.replace('-', "_");
        let now = now_ms();
        let id = new_snapshot_id()?;
        let snapshot = append_snapshot(&location, None, 1, id);
        let meta = Metadata::from_value(json!({
            "format-version": 2,
            "table-uuid": uuid::Uuid::new_v4().to_string(),
            "location": location,
            "last-sequence-number": 1,
            "last-updated-ms": now,
            "last-column-id": 1,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "id", "required": false, "type": "long"}
            ]}],
            "current-schema-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "default-spec-id": 0,
            "last-partition-id": 999,
            "properties": {},
            "current-snapshot-id": id,
            "snapshots": [snapshot],
            "snapshot-log": [{"snapshot-id": id, "timestamp-ms": now}],
            "metadata-log": [],
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "refs": {MAIN: {"snapshot-id": id, "type": "branch"}},
        }))?;
        let metadata_location = format!(
            "{location}/metadata/00000-{}.metadata.json",
            uuid::Uuid::new_v4()
        );
        write_metadata(&metadata_location, &meta)?;
        let insert = "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                      metadata_location, previous_metadata_location, iceberg_type) \
                      VALUES (?, ?, ?, ?, NULL, 'TABLE')";
        conn.execute(
            &conn.placeholders(insert),
            &[
                "default".into(),
                NAMESPACE.into(),
                name.as_str().into(),
                metadata_location.as_str().into(),
            ],
        )?;
        Ok(json!({
            "identifier": format!("{NAMESPACE}.{name}"),
            "catalog": { "type": "sql", "warehouse": scratch_uri },
        }))
    }

    fn mutate(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        let branch = working_ref.unwrap_or(&loc.branch);
        let (namespace, name) = loc.name_parts()?;
        let catalog = SqlCatalog::open(&loc.catalog_name, namespace, name)?;
        let meta = catalog.load()?.metadata;
        let head = meta
            .branch_head(branch)
            .filter(|h| *h != crate::metadata::NO_SNAPSHOT)
            .ok_or_else(|| Error::not_found(format!("branch {branch} does not exist")))?;
        let total = meta
            .snapshot(head)
            .map_or(0, |s| s.counter("total-records"));
        let sequence = meta.to_value()["last-sequence-number"]
            .as_i64()
            .unwrap_or(0)
            + 1;
        let id = new_snapshot_id()?;
        let snapshot = append_snapshot(meta.location()?, Some((head, total)), sequence, id);
        let outcome = catalog.commit(
            &[Requirement::RefSnapshotId {
                ref_name: branch.to_owned(),
                snapshot_id: Some(head),
            }],
            &[
                Update::AddSnapshot { snapshot },
                Update::SetRef {
                    ref_name: branch.to_owned(),
                    kind: RefKind::Branch,
                    snapshot_id: id,
                },
            ],
        )?;
        match outcome {
            Outcome::Committed(_) => Ok(()),
            Outcome::Rejected(why) => Err(Error::ref_moved(format!(
                "branch {branch} moved during the harness write: {why}"
            ))),
        }
    }

    fn fresh_locator(&self, _scratch_uri: &str) -> Result<Value> {
        Err(Error::Capability(
            "iceberg tables need a schema, so tether cannot create one (no CREATE)".into(),
        ))
    }
}
