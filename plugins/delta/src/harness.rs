//! The conformance harness: fresh Delta tables under the scratch URI, and
//! appends to them written as a Delta writer writes them: a one-row parquet
//! data file, then the next commit (`{v:020}.json` with commitInfo and add),
//! put create-only, so a concurrent writer's commit is never overwritten.

use std::sync::Arc;

use parquet::data_type::Int64Type;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::storage::{PutMode, StorageError};
use tether_sdk::{Error, Harness, Result, kit};

use crate::Locator;
use crate::log::{Log, commit_key};

/// How often `mutate` retries a commit another writer took first.
const ATTEMPTS: usize = 8;

/// Makes delta objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeltaHarness;

fn now_ms() -> i64 {
    crate::now_ms().unwrap_or_default()
}

/// Newline-delimited actions, as a commit file holds them.
fn lines(actions: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for a in actions {
        out.push_str(&a.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

/// A random UUID (version 4), as writers make table ids.
fn uuid() -> Result<String> {
    let mut hex = kit::random_hex(16)?.into_bytes();
    hex[12] = b'4';
    hex[16] = b"89ab"[(hex[16] as usize) % 4];
    let hex = String::from_utf8(hex).expect("hex is ASCII");
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// A parquet file of one `n: long` row.
fn parquet_row(n: i64) -> Result<Vec<u8>> {
    let bad = |e: parquet::errors::ParquetError| Error::Other(format!("writing parquet: {e}"));
    let schema = Arc::new(parse_message_type("message schema { OPTIONAL INT64 n; }").map_err(bad)?);
    let props = Arc::new(WriterProperties::builder().build());
    let mut buf = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut buf, schema, props).map_err(bad)?;
    let mut group = writer.next_row_group().map_err(bad)?;
    while let Some(mut column) = group.next_column().map_err(bad)? {
        column
            .typed::<Int64Type>()
            .write_batch(&[n], Some(&[1]), None)
            .map_err(bad)?;
        column.close().map_err(bad)?;
    }
    group.close().map_err(bad)?;
    writer.close().map_err(bad)?;
    Ok(buf)
}

impl Harness for DeltaHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let uri = scratch_child(scratch_uri, "table")?;
        let log = Log::open(&uri)?;
        let now = now_ms();
        let schema = json!({"type": "struct", "fields": [
            {"name": "n", "type": "long", "nullable": true, "metadata": {}}
        ]});
        let commit = lines(&[
            json!({"commitInfo": {"timestamp": now, "operation": "CREATE TABLE",
                "operationParameters": {}, "engineInfo": "tether-conformance"}}),
            json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
            json!({"metaData": {"id": uuid()?, "format": {"provider": "parquet", "options": {}},
                "schemaString": schema.to_string(), "partitionColumns": [],
                "configuration": {}, "createdTime": now}}),
        ]);
        log.bucket.put(&commit_key(0), &commit, PutMode::Create)?;
        Ok(json!({ "uri": uri }))
    }

    fn mutate(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "Delta tables have no branches (asked to write {name})"
            )));
        }
        let log = Log::open(&locator.storage_uri())?;
        for _ in 0..ATTEMPTS {
            let next = log.list()?.latest().map_or(0, |v| v + 1);
            let data = parquet_row(next as i64)?;
            let path = format!("part-00000-{}-c000.parquet", uuid()?);
            log.bucket.put(&path, &data, PutMode::Create)?;
            let now = now_ms();
            let commit = lines(&[
                json!({"commitInfo": {"timestamp": now, "operation": "WRITE",
                    "operationParameters": {"mode": "Append"},
                    "operationMetrics": {"num_added_files": 1, "num_removed_files": 0,
                        "num_added_rows": 1},
                    "engineInfo": "tether-conformance"}}),
                json!({"add": {"path": path, "partitionValues": {}, "size": data.len(),
                    "modificationTime": now, "dataChange": true,
                    "stats": json!({"numRecords": 1}).to_string()}}),
            ]);
            match log.bucket.put(&commit_key(next), &commit, PutMode::Create) {
                Ok(_) => return Ok(()),
                // Another writer took this version: write the next one.
                Err(StorageError::AlreadyExists(_)) => {
                    log.bucket.delete(&path)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::backend(format!(
            "could not commit to {}: other writers took {ATTEMPTS} versions in a row",
            locator.storage_uri()
        )))
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        Ok(json!({ "uri": scratch_child(scratch_uri, "fresh")? }))
    }
}
