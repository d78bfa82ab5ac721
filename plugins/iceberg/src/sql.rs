//! The SQL catalog: pyiceberg's `SqlCatalog` layout, on SQLite or
//! PostgreSQL, through the host's `sql` capability.
//!
//! The catalog is one row per table in `iceberg_tables` (`catalog_name`,
//! `table_namespace` (`a.b`), `table_name`, `metadata_location`,
//! `previous_metadata_location`, `iceberg_type`). A commit is what
//! pyiceberg's `SqlCatalog.commit_table` does: read the row and the
//! metadata file it names, check the requirements, write the next metadata
//! file (create-only, through `storage`), then
//!
//! ```sql
//! UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?
//!  WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?
//! ```
//!
//! One changed row is the commit; none means another writer committed
//! first: this catalog removes its orphaned file, reads again and, if the
//! requirements still hold, tries again.

use tether_sdk::sql::{Connection, Value as SqlValue};
use tether_sdk::storage::{Bucket, PutMode, StorageError};
use tether_sdk::{Error, Result};

use crate::CATALOG_URI_KEY;
use crate::catalog::{ATTEMPTS, Catalog, Loaded, Outcome};
use crate::metadata::{Metadata, Requirement, Update};

/// Largest metadata file read (a table with a long history is a few MB).
const MAX_METADATA_BYTES: usize = 64 << 20;

/// One table of a SQL catalog.
pub struct SqlCatalog {
    conn: Connection,
    catalog_name: String,
    namespace: String,
    table: String,
}

/// A metadata location split into (directory URI, file name), the
/// directory being what storage opens.
fn split_location(location: &str) -> Result<(&str, &str)> {
    location
        .rsplit_once('/')
        .filter(|(dir, name)| !dir.is_empty() && !name.is_empty())
        .ok_or_else(|| Error::backend(format!("metadata location {location:?} has no directory")))
}

fn storage_err(location: &str, e: StorageError) -> Error {
    match e {
        StorageError::Denied(_) => Error::Denied(format!(
            "table metadata at {location} is outside the catalog's warehouse, the only \
             storage this backend is granted ({e})"
        )),
        e => Error::backend(format!("{location}: {e}")),
    }
}

/// Read the metadata file at `location`.
pub fn read_metadata(location: &str) -> Result<Metadata> {
    let (dir, name) = split_location(location)?;
    let bucket = Bucket::open(dir).map_err(|e| storage_err(location, e))?;
    let object = bucket
        .get(name)
        .map_err(|e| storage_err(location, e))?
        .ok_or_else(|| {
            Error::not_found(format!(
                "the catalog points at {location}, which does not exist"
            ))
        })?;
    if object.value.len() > MAX_METADATA_BYTES {
        return Err(Error::backend(format!(
            "{location} is larger than {MAX_METADATA_BYTES} bytes"
        )));
    }
    Metadata::decode(name, &object.value, MAX_METADATA_BYTES)
}

/// Write a new metadata file; create-only, as a metadata file never changes.
pub fn write_metadata(location: &str, meta: &Metadata) -> Result<()> {
    let (dir, name) = split_location(location)?;
    let bucket = Bucket::open(dir).map_err(|e| storage_err(location, e))?;
    // Compressed when its name says so, as the table's codec chose it.
    let bytes = meta.encode(name)?;
    bucket
        .put(name, &bytes, PutMode::Create)
        .map_err(|e| storage_err(location, e))?;
    Ok(())
}

fn delete_metadata(location: &str) {
    if let Ok((dir, name)) = split_location(location)
        && let Ok(bucket) = Bucket::open(dir)
    {
        // Best effort: an orphan left behind is what pyiceberg leaves too.
        let _ = bucket.delete(name);
    }
}

/// Now in milliseconds (wasi:clocks).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl SqlCatalog {
    /// The table `namespace.table` of catalog `catalog_name`, in the
    /// database the host opens for `catalog.uri`.
    pub fn open(catalog_name: &str, namespace: Vec<String>, table: String) -> Result<Self> {
        let conn = Connection::open(CATALOG_URI_KEY)?;
        Ok(SqlCatalog {
            conn,
            catalog_name: catalog_name.to_owned(),
            namespace: namespace.join("."),
            table,
        })
    }

    fn key(&self) -> Vec<SqlValue> {
        vec![
            self.catalog_name.as_str().into(),
            self.namespace.as_str().into(),
            self.table.as_str().into(),
        ]
    }

    fn name(&self) -> String {
        format!("{}.{}", self.namespace, self.table)
    }

    /// The row's `metadata_location`.
    fn pointer(&self) -> Result<String> {
        let sql = "SELECT metadata_location FROM iceberg_tables \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)";
        let rows = self.conn.query(&self.conn.placeholders(sql), &self.key())?;
        let cell: Option<SqlValue> = rows
            .first()
            .map(|row| row.get("metadata_location"))
            .transpose()?;
        match cell {
            Some(SqlValue::Text(location)) => Ok(location),
            Some(SqlValue::Null) => Err(Error::not_found(format!(
                "table {} of catalog {} has no metadata yet (a staged create?)",
                self.name(),
                self.catalog_name
            ))),
            Some(other) => Err(Error::backend(format!(
                "iceberg_tables.metadata_location is {other:?}, not text"
            ))),
            None => Err(Error::not_found(format!(
                "table {} is not in catalog {} (no row in iceberg_tables)",
                self.name(),
                self.catalog_name
            ))),
        }
    }
}

impl Catalog for SqlCatalog {
    fn load(&self) -> Result<Loaded> {
        let location = self.pointer()?;
        let metadata = read_metadata(&location)?;
        Ok(Loaded { location, metadata })
    }

    fn commit(&self, requirements: &[Requirement], updates: &[Update]) -> Result<Outcome> {
        for _ in 0..ATTEMPTS {
            let Loaded { location, metadata } = self.load()?;
            if let Some(why) = requirements.iter().find_map(|r| metadata.violation(r)) {
                return Ok(Outcome::Rejected(why));
            }
            let Some(next) = metadata.updated(&location, updates, now_ms())? else {
                return Ok(Outcome::Committed(metadata));
            };
            let uuid = uuid::Uuid::new_v4().to_string();
            let next_location = metadata.next_location(&location, &uuid)?;
            write_metadata(&next_location, &next)?;
            let sql = "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? \
                 WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
                 AND metadata_location = ?";
            let mut params: Vec<SqlValue> =
                vec![next_location.as_str().into(), location.as_str().into()];
            params.extend(self.key());
            params.push(location.as_str().into());
            match self.conn.execute(&self.conn.placeholders(sql), &params) {
                Ok(1) => return Ok(Outcome::Committed(next)),
                Ok(0) => {
                    // Another writer's commit landed first: ours points nowhere.
                    delete_metadata(&next_location);
                }
                Ok(n) => {
                    return Err(Error::backend(format!(
                        "the catalog update changed {n} rows of iceberg_tables for {}",
                        self.name()
                    )));
                }
                // Whether the row moved is unknown (a timeout, a lost
                // connection): the new file stays, as it may be the table's.
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::backend(format!(
            "table {} kept changing; gave up committing after {ATTEMPTS} attempts",
            self.name()
        )))
    }
}
