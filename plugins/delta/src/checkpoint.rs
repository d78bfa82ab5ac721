//! Parquet checkpoints (PROTOCOL.md §Checkpoints), read in pure Rust: the
//! `parquet` crate's row API fed with the bytes `storage` returned (a WASI
//! `File` cannot be cloned, which its file reader needs; research/formats.md
//! §2.6). Each row holds one action in one of its top-level columns; a row
//! becomes the JSON object a commit line would be, so checkpoints and
//! commits share one set of action types.

use std::sync::Arc;

use bytes::Bytes;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::schema::types::Type;
use tether_sdk::{Error, Result};

use crate::log::Action;

/// The checkpoint columns a snapshot needs. `remove` tombstones, `txn`
/// and `domainMetadata` are never decoded; `sidecar` is read only to refuse
/// a V2 checkpoint that has them.
const COLUMNS: &[&str] = &["add", "metaData", "protocol", "sidecar"];

/// Every action of one checkpoint file.
pub fn actions(key: &str, bytes: Vec<u8>) -> Result<Vec<Action>> {
    let bad = |e: parquet::errors::ParquetError| {
        Error::backend(format!("checkpoint {key} is not readable parquet: {e}"))
    };
    let reader = SerializedFileReader::new(Bytes::from(bytes)).map_err(bad)?;
    let root = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema();
    let fields: Vec<Arc<Type>> = root
        .get_fields()
        .iter()
        .filter(|f| COLUMNS.contains(&f.name()))
        .cloned()
        .collect();
    if fields.is_empty() {
        return Ok(Vec::new());
    }
    let projection = Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .map_err(bad)?;
    let mut out = Vec::new();
    for row in reader.get_row_iter(Some(projection)).map_err(bad)? {
        let row = row.map_err(bad)?;
        let action: Action = serde_json::from_value(row.to_json_value()).map_err(|e| {
            Error::backend(format!(
                "checkpoint {key} holds a row that is no Delta action: {e}"
            ))
        })?;
        out.push(action);
    }
    Ok(out)
}
