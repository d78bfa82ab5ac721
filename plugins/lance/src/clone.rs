//! New manifests written the way Lance writes them: a branch's shallow clone
//! manifest (what `create_branch` makes, research/formats.md §1.6) and, for
//! the conformance harness, a schema change on a branch.
//!
//! Both are rewrites of an existing manifest at the protobuf wire level
//! ([`crate::proto::wire`]): every field this plugin does not touch, known
//! to it or not (pylance writes fields no public `.proto` declares), is
//! copied byte for byte.

use std::time::{SystemTime, UNIX_EPOCH};

use tether_sdk::{Error, Result};

use crate::format::{self, FLAG_BASE_PATHS, ManifestFile};
use crate::proto::wire::{self, Value, WireField};

// Manifest field numbers this module writes.
const M_FIELDS: u32 = 1;
const M_FRAGMENTS: u32 = 2;
const M_VERSION: u32 = 3;
const M_TIMESTAMP: u32 = 7;
const M_READER_FLAGS: u32 = 9;
const M_WRITER_FLAGS: u32 = 10;
const M_TRANSACTION_FILE: u32 = 12;
const M_BASE_PATHS: u32 = 18;
const M_BRANCH: u32 = 20;
const M_TXN_SECTION_OLD: u32 = 21;
const M_TXN_SECTION: u32 = 23;
// DataFragment / DataFile / DeletionFile.
const F_FILES: u32 = 2;
const F_DELETION: u32 = 3;
const FILE_BASE_ID: u32 = 7;
// Transaction.
const T_READ_VERSION: u32 = 1;
const T_UUID: u32 = 2;
const T_OVERWRITE: u32 = 102;
const T_CLONE: u32 = 113;

/// A version file ready to be written: its transaction file (name and
/// bytes) and the manifest file embedding the same transaction.
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub transaction_name: String,
    pub transaction: Vec<u8>,
    pub manifest_file: Vec<u8>,
}

fn malformed(what: &str, e: wire::Malformed) -> Error {
    Error::backend(format!("{what}: malformed protobuf ({})", e.0))
}

fn now() -> (u64, u64) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), u64::from(d.subsec_nanos()))
}

fn timestamp_field() -> WireField {
    let (secs, nanos) = now();
    WireField::bytes(
        M_TIMESTAMP,
        wire::encode(&[WireField::varint(1, secs), WireField::varint(2, nanos)]),
    )
}

/// The transaction section offset: the inline transaction is at 0 in every
/// file written here, whichever field the writer used to say so.
fn point_at_inline_transaction(fields: &mut Vec<WireField>) {
    for number in [M_TXN_SECTION_OLD, M_TXN_SECTION] {
        if fields.iter().any(|f| f.number == number) {
            wire::set_varint(fields, number, 0);
        }
    }
}

fn transaction(read_version: u64, uuid: &str, op: u32, body: Vec<u8>) -> Vec<u8> {
    let mut fields = Vec::new();
    if read_version != 0 {
        fields.push(WireField::varint(T_READ_VERSION, read_version));
    }
    fields.push(WireField::bytes(T_UUID, uuid.as_bytes().to_vec()));
    fields.push(WireField::bytes(op, body));
    wire::encode(&fields)
}

/// Where a clone comes from.
#[derive(Debug, Clone)]
pub struct CloneSource<'a> {
    /// The parent branch (`None`: main).
    pub branch: Option<&'a str>,
    /// The parent branch's root as a URI or path, recorded in the new base
    /// path (Lance records the URI it was given).
    pub root_path: String,
    pub version: u64,
}

/// The shallow clone manifest of `parent` for branch `name`, as
/// `create_branch` writes it: the parent's manifest with `branch` set, a new
/// base path for the parent's root that every inherited data and deletion
/// file without a base now points to, the base-paths feature flag, a new
/// timestamp and the Clone transaction.
pub fn clone_version(parent: &ManifestFile, from: &CloneSource, name: &str) -> Result<NewVersion> {
    let m = &parent.manifest;
    if m.index_section.is_some() {
        return Err(Error::Capability(format!(
            "{} has indices, which tether's lance backend does not carry onto a branch; \
             create the branch with Lance (`ds.create_branch({name:?}, {})`) and take it \
             with `tether new --adopt`, or fork from a version without indices",
            parent.key, from.version
        )));
    }
    format::check_reader_flags(&parent.key, m.writer_feature_flags)?;
    let uuid = format::hyphenated(&format::uuid4()?);
    let transaction_name = format!("{}-{uuid}.txn", from.version);
    let mut body = vec![WireField::varint(1, 1)];
    if let Some(b) = from.branch {
        body.push(WireField::bytes(2, b.as_bytes().to_vec()));
    }
    body.push(WireField::varint(3, from.version));
    body.push(WireField::bytes(4, from.root_path.as_bytes().to_vec()));
    body.push(WireField::bytes(5, name.as_bytes().to_vec()));
    let txn = transaction(from.version, &uuid, T_CLONE, wire::encode(&body));

    let what = parent.key.as_str();
    let mut fields = wire::parse(&parent.message).map_err(|e| malformed(what, e))?;
    let new_base = m.base_paths.iter().map(|b| b.id + 1).max().unwrap_or(0);
    for f in fields.iter_mut().filter(|f| f.number == M_FRAGMENTS) {
        let Value::Bytes(fragment) = &f.value else {
            continue;
        };
        let mut parts = wire::parse(fragment).map_err(|e| malformed(what, e))?;
        for p in parts
            .iter_mut()
            .filter(|p| p.number == F_FILES || p.number == F_DELETION)
        {
            let Value::Bytes(file) = &p.value else {
                continue;
            };
            let mut inner = wire::parse(file).map_err(|e| malformed(what, e))?;
            if !inner.iter().any(|x| x.number == FILE_BASE_ID) {
                inner.push(WireField::varint(FILE_BASE_ID, u64::from(new_base)));
                wire::canonical_order(&mut inner);
            }
            p.value = Value::Bytes(wire::encode(&inner));
        }
        f.value = Value::Bytes(wire::encode(&parts));
    }
    let mut base = Vec::new();
    if new_base != 0 {
        base.push(WireField::varint(1, u64::from(new_base)));
    }
    if let Some(b) = from.branch {
        base.push(WireField::bytes(2, b.as_bytes().to_vec()));
    }
    base.push(WireField::varint(3, 1));
    base.push(WireField::bytes(4, from.root_path.as_bytes().to_vec()));
    fields.push(WireField::bytes(M_BASE_PATHS, wire::encode(&base)));
    wire::set_varint(
        &mut fields,
        M_READER_FLAGS,
        m.reader_feature_flags | FLAG_BASE_PATHS,
    );
    wire::set_varint(
        &mut fields,
        M_WRITER_FLAGS,
        m.writer_feature_flags | FLAG_BASE_PATHS,
    );
    wire::set(&mut fields, timestamp_field());
    wire::set(
        &mut fields,
        WireField::bytes(M_TRANSACTION_FILE, transaction_name.as_bytes().to_vec()),
    );
    wire::set(
        &mut fields,
        WireField::bytes(M_BRANCH, name.as_bytes().to_vec()),
    );
    point_at_inline_transaction(&mut fields);
    wire::canonical_order(&mut fields);
    let manifest_file = format::frame_manifest(&txn, &wire::encode(&fields));
    Ok(NewVersion {
        transaction_name,
        transaction: txn,
        manifest_file,
    })
}

/// One schema field, as pylance writes a nullable top-level int64 column.
fn int64_field(name: &str, id: i32) -> Vec<u8> {
    let mut f = vec![WireField::bytes(2, name.as_bytes().to_vec())];
    if id != 0 {
        f.push(WireField::varint(3, id as u64));
    }
    // parent_id −1 (int32 varints sign-extend to 64 bits).
    f.push(WireField::varint(4, u64::MAX));
    f.push(WireField::bytes(5, b"int64".to_vec()));
    f.push(WireField::varint(6, 1));
    // Encoding PLAIN (a deprecated field pylance still writes).
    f.push(WireField::varint(7, 1));
    wire::encode(&f)
}

/// Version 1 of a new, empty dataset with one int64 column `id`: what
/// `lance.write_dataset` of an empty table writes (an Overwrite of nothing).
pub fn empty_dataset() -> Result<NewVersion> {
    let uuid = format::hyphenated(&format::uuid4()?);
    let field = int64_field("id", 0);
    let txn = transaction(
        0,
        &uuid,
        T_OVERWRITE,
        wire::encode(&[WireField::bytes(2, field.clone())]),
    );
    let transaction_name = format!("0-{uuid}.txn");
    let fields = vec![
        WireField::bytes(M_FIELDS, field),
        WireField::varint(M_VERSION, 1),
        timestamp_field(),
        WireField::bytes(M_TRANSACTION_FILE, transaction_name.as_bytes().to_vec()),
        WireField::bytes(
            13,
            wire::encode(&[
                WireField::bytes(1, b"tether".to_vec()),
                WireField::bytes(2, env!("CARGO_PKG_VERSION").as_bytes().to_vec()),
            ]),
        ),
        WireField::bytes(
            15,
            wire::encode(&[
                WireField::bytes(1, b"lance".to_vec()),
                WireField::bytes(2, b"2.2".to_vec()),
            ]),
        ),
        WireField::varint(M_TXN_SECTION, 0),
    ];
    Ok(NewVersion {
        transaction_name,
        manifest_file: format::frame_manifest(&txn, &wire::encode(&fields)),
        transaction: txn,
    })
}

/// The next version of `latest` with one more int64 column, as an
/// Overwrite keeping the fragments: a schema change with no data files,
/// which is what the conformance harness writes.
pub fn add_column(latest: &ManifestFile, column: &str) -> Result<NewVersion> {
    let m = &latest.manifest;
    let what = latest.key.as_str();
    let next_id = m.fields.iter().map(|f| f.id + 1).max().unwrap_or(0);
    let field = int64_field(column, next_id);
    let mut fields = wire::parse(&latest.message).map_err(|e| malformed(what, e))?;
    let uuid = format::hyphenated(&format::uuid4()?);
    let transaction_name = format!("{}-{uuid}.txn", m.version);
    fields.push(WireField::bytes(M_FIELDS, field));
    let mut body: Vec<WireField> = fields
        .iter()
        .filter(|f| f.number == M_FRAGMENTS)
        .map(|f| WireField {
            number: 1,
            value: f.value.clone(),
        })
        .collect();
    body.extend(
        fields
            .iter()
            .filter(|f| f.number == M_FIELDS)
            .map(|f| WireField {
                number: 2,
                value: f.value.clone(),
            }),
    );
    let txn = transaction(m.version, &uuid, T_OVERWRITE, wire::encode(&body));
    wire::set_varint(&mut fields, M_VERSION, m.version + 1);
    wire::set(&mut fields, timestamp_field());
    wire::set(
        &mut fields,
        WireField::bytes(M_TRANSACTION_FILE, transaction_name.as_bytes().to_vec()),
    );
    point_at_inline_transaction(&mut fields);
    wire::canonical_order(&mut fields);
    Ok(NewVersion {
        transaction_name,
        manifest_file: format::frame_manifest(&txn, &wire::encode(&fields)),
        transaction: txn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{BasePath, DataFile, DataFragment, DeletionFile, Manifest};
    use prost::Message;

    fn file_of(bytes: &[u8]) -> ManifestFile {
        let size = bytes.len() as u64;
        format::read_manifest("m", size, |o, l| {
            Ok(bytes[o as usize..(o + l) as usize].to_vec())
        })
        .unwrap()
    }

    #[test]
    fn clone_points_inherited_files_at_the_parent_root_and_keeps_unknown_fields() {
        let mut m = Manifest {
            version: 2,
            ..Default::default()
        };
        m.fragments.push(DataFragment {
            id: 0,
            files: vec![DataFile {
                path: "a.lance".into(),
                fields: vec![0],
                base_id: None,
            }],
            deletion_file: Some(DeletionFile {
                num_deleted_rows: 1,
                ..Default::default()
            }),
            physical_rows: 3,
        });
        let mut message = m.encode_to_vec();
        message.extend(wire::encode(&[
            WireField::varint(23, 0),
            WireField::varint(77, 9),
        ]));
        let parent = file_of(&format::frame_manifest(b"", &message));
        let from = CloneSource {
            branch: None,
            root_path: "/data/t.lance".into(),
            version: 2,
        };
        let v = clone_version(&parent, &from, "exp").unwrap();
        let read = file_of(&v.manifest_file);
        let c = &read.manifest;
        assert_eq!(c.version, 2);
        assert_eq!(c.branch.as_deref(), Some("exp"));
        assert_eq!(c.reader_feature_flags & 16, 16);
        assert_eq!(c.fragments[0].files[0].base_id, Some(0));
        assert_eq!(
            c.fragments[0].deletion_file.as_ref().unwrap().base_id,
            Some(0)
        );
        assert_eq!(
            c.base_paths,
            vec![BasePath {
                id: 0,
                name: None,
                is_dataset_root: true,
                path: "/data/t.lance".into()
            }]
        );
        assert_eq!(c.transaction_file, v.transaction_name);
        assert_eq!(c.transaction_offset(), Some(0));
        let raw = wire::parse(&read.message).unwrap();
        assert!(raw.iter().any(|f| f.number == 77), "unknown field kept");
        assert_eq!(crate::proto::operation_name(&v.transaction), "clone");

        // A clone of the clone adds base path 1, named after its branch.
        let from = CloneSource {
            branch: Some("exp"),
            root_path: "/data/t.lance/tree/exp".into(),
            version: 2,
        };
        let v2 = clone_version(&read, &from, "exp2").unwrap();
        let c2 = file_of(&v2.manifest_file).manifest;
        assert_eq!(c2.base_paths.len(), 2);
        assert_eq!(c2.base_paths[1].id, 1);
        assert_eq!(c2.base_paths[1].name.as_deref(), Some("exp"));
        assert_eq!(c2.fragments[0].files[0].base_id, Some(0), "kept");
    }

    #[test]
    fn harness_versions() {
        let v1 = empty_dataset().unwrap();
        let f1 = file_of(&v1.manifest_file);
        assert_eq!(f1.manifest.version, 1);
        assert_eq!(f1.manifest.fields[0].name, "id");
        assert_eq!(f1.manifest.fields[0].parent_id, -1);
        let v2 = add_column(&f1, "c2").unwrap();
        let f2 = file_of(&v2.manifest_file);
        assert_eq!(f2.manifest.version, 2);
        assert_eq!(f2.manifest.fields[1].id, 1);
        assert_eq!(f2.manifest.fields[1].name, "c2");
    }
}
