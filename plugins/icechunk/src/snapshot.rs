//! Snapshot files (`snapshots/{id}`, schema `snapshot.fbs`) and transaction
//! logs (`transactions/{id}`, `transaction_log.fbs`): read for diffs, and
//! written for new repositories and the conformance harness's commits
//! (research/icechunk.md §5-§6).

use std::collections::{BTreeMap, BTreeSet};

use flatbuffers::FlatBufferBuilder;
use tether_sdk::storage::{Bucket, PutMode};
use tether_sdk::{Error, Result};

use crate::fb::{Corrupt, Table};
use crate::format::{self, FileType, Id8, Id12};

/// The message of every repository's first snapshot.
pub const INITIAL_MESSAGE: &str = "Repository initialized";

pub fn snapshot_key(id: Id12) -> String {
    format!("snapshots/{id}")
}

pub fn transaction_key(id: Id12) -> String {
    format!("transactions/{id}")
}

/// What a node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    Group,
    Array {
        /// `(manifest id, [(from, to)])` per manifest ref: where the chunk
        /// refs live (a change here means chunks may have changed).
        manifests: Vec<(Id12, Vec<(u32, u32)>)>,
        /// `(array_length, num_chunks)` per dimension.
        shape: Vec<(u64, u32)>,
    },
}

/// One node (group or array) of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: Id8,
    pub path: String,
    /// The node's `zarr.json`.
    pub user_data: Vec<u8>,
    pub kind: NodeKind,
}

/// The parts of a snapshot file a diff needs.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub nodes: Vec<Node>,
}

/// Read `snapshots/{id}`; not found when it is gone (expired).
pub fn read_snapshot(bucket: &Bucket, id: Id12) -> Result<Snapshot> {
    let key = snapshot_key(id);
    let object = bucket
        .get(&key)?
        .ok_or_else(|| Error::not_found(format!("snapshot file {key} is gone")))?;
    let buf = format::decode(&key, &object.value, FileType::Snapshot)?;
    decode_snapshot(&buf).map_err(|e| Error::backend(format!("{key}: {e}")))
}

fn decode_snapshot(buf: &[u8]) -> Result<Snapshot, Corrupt> {
    let root = Table::root(buf)?;
    let mut nodes = Vec::new();
    for n in Table::required(root.vector(2)?, "nodes")?.tables()? {
        let kind = match n.u8(3, 0)? {
            1 => {
                let data = Table::required(n.table(4)?, "node_data")?;
                let mut manifests = Vec::new();
                for m in Table::required(data.vector(2)?, "manifests")?.tables()? {
                    let id = Id12(Table::required(m.array::<12>(0)?, "object_id")?);
                    let extents = Table::required(m.vector(1)?, "extents")?;
                    let ranges = (0..extents.len())
                        .map(|i| {
                            let b = extents.array::<8>(i)?;
                            Ok((
                                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                            ))
                        })
                        .collect::<Result<Vec<_>, Corrupt>>()?;
                    manifests.push((id, ranges));
                }
                let shape = match data.vector(3)? {
                    Some(v) => v
                        .tables()?
                        .iter()
                        .map(|d| Ok((d.u64(0, 0)?, d.u32(1, 0)?)))
                        .collect::<Result<Vec<_>, Corrupt>>()?,
                    None => Vec::new(),
                };
                NodeKind::Array { manifests, shape }
            }
            2 => NodeKind::Group,
            other => return Err(Corrupt(format!("unknown node type {other}"))),
        };
        nodes.push(Node {
            id: Id8(Table::required(n.array::<8>(0)?, "NodeSnapshot.id")?),
            path: Table::required(n.string(1)?, "NodeSnapshot.path")?.to_owned(),
            user_data: Table::required(n.bytes(2)?, "NodeSnapshot.user_data")?.to_vec(),
            kind,
        });
    }
    Ok(Snapshot { nodes })
}

/// What a transaction log says changed, by node id.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub new_groups: BTreeSet<Id8>,
    pub new_arrays: BTreeSet<Id8>,
    pub deleted_groups: BTreeSet<Id8>,
    pub deleted_arrays: BTreeSet<Id8>,
    pub updated_groups: BTreeSet<Id8>,
    pub updated_arrays: BTreeSet<Id8>,
    pub updated_chunks: BTreeMap<Id8, BTreeSet<Vec<u32>>>,
}

/// Add `transactions/{id}` to `changes`; false when the log is gone.
pub fn read_transactions(bucket: &Bucket, id: Id12, changes: &mut Changes) -> Result<bool> {
    let key = transaction_key(id);
    let Some(object) = bucket.get(&key)? else {
        return Ok(false);
    };
    let buf = format::decode(&key, &object.value, FileType::TransactionLog)?;
    add_transactions(&buf, changes).map_err(|e| Error::backend(format!("{key}: {e}")))?;
    Ok(true)
}

fn add_transactions(buf: &[u8], c: &mut Changes) -> Result<(), Corrupt> {
    let root = Table::root(buf)?;
    let ids = |slot: usize, set: &mut BTreeSet<Id8>| -> Result<(), Corrupt> {
        if let Some(v) = root.vector(slot)? {
            for i in 0..v.len() {
                set.insert(Id8(v.array::<8>(i)?));
            }
        }
        Ok(())
    };
    ids(1, &mut c.new_groups)?;
    ids(2, &mut c.new_arrays)?;
    ids(3, &mut c.deleted_groups)?;
    ids(4, &mut c.deleted_arrays)?;
    ids(5, &mut c.updated_arrays)?;
    ids(6, &mut c.updated_groups)?;
    if let Some(v) = root.vector(7)? {
        for a in v.tables()? {
            let node = Id8(Table::required(a.array::<8>(0)?, "node_id")?);
            let set = c.updated_chunks.entry(node).or_default();
            for ci in Table::required(a.vector(1)?, "chunks")?.tables()? {
                let coords = Table::required(ci.vector(0)?, "coords")?;
                set.insert(
                    (0..coords.len())
                        .map(|i| coords.u32(i))
                        .collect::<Result<_, _>>()?,
                );
            }
        }
    }
    Ok(())
}

fn vt(slot: usize) -> flatbuffers::VOffsetT {
    (4 + 2 * slot) as flatbuffers::VOffsetT
}

/// A snapshot of groups only, as its file's bytes. Arrays are never written
/// by tether (only Icechunk's own writers make them), so a node list with an
/// array is refused.
pub fn encode_snapshot(
    id: Id12,
    nodes: &[Node],
    flushed_at: u64,
    message: &str,
    metadata: &[(String, Vec<u8>)],
) -> Result<Vec<u8>> {
    let mut fbb = FlatBufferBuilder::with_capacity(512);
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut encoded = Vec::with_capacity(sorted.len());
    for node in sorted {
        if node.kind != NodeKind::Group {
            return Err(Error::Other(format!(
                "tether writes group nodes only; {} is an array",
                node.path
            )));
        }
        let path = fbb.create_string(&node.path);
        let user_data = fbb.create_vector(&node.user_data);
        let group = {
            let t = fbb.start_table();
            fbb.end_table(t)
        };
        let t = fbb.start_table();
        fbb.push_slot_always(vt(0), node.id);
        fbb.push_slot_always(vt(1), path);
        fbb.push_slot_always(vt(2), user_data);
        fbb.push_slot_always(vt(4), group);
        fbb.push_slot::<u8>(vt(3), 2, 0);
        encoded.push(fbb.end_table(t));
    }
    let nodes = fbb.create_vector(&encoded);
    let message = fbb.create_string(message);
    let metadata = crate::repo::metadata_vector(&mut fbb, metadata.iter().map(|(k, v)| (k, v)));
    let manifest_files = fbb.create_vector::<Id12>(&[]);
    let manifest_files_v2 =
        fbb.create_vector::<flatbuffers::WIPOffset<flatbuffers::TableFinishedWIPOffset>>(&[]);
    let t = fbb.start_table();
    fbb.push_slot_always(vt(3), flushed_at);
    fbb.push_slot_always(vt(0), id);
    fbb.push_slot_always(vt(2), nodes);
    fbb.push_slot_always(vt(4), message);
    fbb.push_slot_always(vt(5), metadata);
    fbb.push_slot_always(vt(6), manifest_files);
    fbb.push_slot_always(vt(7), manifest_files_v2);
    let root = fbb.end_table(t);
    fbb.finish(root, Some(format::FILE_IDENTIFIER));
    Ok(format::encode(FileType::Snapshot, fbb.finished_data()))
}

/// A transaction log with new and updated groups, as its file's bytes.
pub fn encode_transactions(id: Id12, new_groups: &[Id8], updated_groups: &[Id8]) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::with_capacity(256);
    let mut sorted = |ids: &[Id8]| {
        let mut ids = ids.to_vec();
        ids.sort();
        fbb.create_vector(&ids)
    };
    let new_groups = sorted(new_groups);
    let updated_groups = sorted(updated_groups);
    let empty = || -> &[Id8] { &[] };
    let new_arrays = fbb.create_vector(empty());
    let deleted_groups = fbb.create_vector(empty());
    let deleted_arrays = fbb.create_vector(empty());
    let updated_arrays = fbb.create_vector(empty());
    let no_tables: &[flatbuffers::WIPOffset<flatbuffers::TableFinishedWIPOffset>] = &[];
    let updated_chunks = fbb.create_vector(no_tables);
    let moved_nodes = fbb.create_vector(no_tables);
    let t = fbb.start_table();
    fbb.push_slot_always(vt(0), id);
    fbb.push_slot_always(vt(1), new_groups);
    fbb.push_slot_always(vt(2), new_arrays);
    fbb.push_slot_always(vt(3), deleted_groups);
    fbb.push_slot_always(vt(4), deleted_arrays);
    fbb.push_slot_always(vt(5), updated_arrays);
    fbb.push_slot_always(vt(6), updated_groups);
    fbb.push_slot_always(vt(7), updated_chunks);
    fbb.push_slot_always(vt(8), moved_nodes);
    let root = fbb.end_table(t);
    fbb.finish(root, Some(format::FILE_IDENTIFIER));
    format::encode(FileType::TransactionLog, fbb.finished_data())
}

/// Write the initial snapshot and its (empty) transaction log, create-only:
/// a repository already there makes this fail with `already-exists`.
pub fn write_initial(bucket: &Bucket, now: u64) -> Result<(), tether_sdk::storage::StorageError> {
    let snapshot = encode_snapshot(
        Id12::INITIAL,
        &[],
        now,
        INITIAL_MESSAGE,
        &[("__icechunk".to_owned(), format::flex_initial_marker())],
    )
    .unwrap_or_default();
    bucket.put(&snapshot_key(Id12::INITIAL), &snapshot, PutMode::Create)?;
    bucket.put(
        &transaction_key(Id12::INITIAL),
        &encode_transactions(Id12::INITIAL, &[], &[]),
        PutMode::Create,
    )?;
    Ok(())
}

/// The nodes of snapshot `id` (the initial snapshot has none, whether or not
/// its file is read).
pub fn nodes(bucket: &Bucket, id: Id12) -> Result<Vec<Node>> {
    Ok(read_snapshot(bucket, id)?.nodes)
}
