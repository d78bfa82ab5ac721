//! The `repo` object ("repo info", schema `repo.fbs`): every ref, every
//! snapshot's place in the commit graph, repository metadata and the ops log
//! (research/icechunk.md §4), and the update protocol every write to it
//! follows.
//!
//! The object is decoded whole into [`Repo`] (sorted maps, so the sort orders
//! icechunk binary-searches come for free) and re-encoded whole; indices
//! (`Ref.snapshot_index`, `SnapshotInfo.parent_offset`) are recomputed at
//! encoding. Like icechunk, re-encoding drops `extra` and unknown fields.

use std::collections::{BTreeMap, BTreeSet};

use flatbuffers::{FlatBufferBuilder, WIPOffset};
use tether_sdk::storage::{Bucket, PutMode, StorageError};
use tether_sdk::{Error, Result};

use crate::fb::{Corrupt, Table};
use crate::format::{self, FileType, Id12};

/// The key of the repo object.
pub const REPO_KEY: &str = "repo";
/// Where backups of overwritten repo objects go.
const OVERWRITTEN: &str = "overwritten";
/// How many ops-log entries one repo object keeps (icechunk's default).
const MAX_UPDATES: usize = 1000;
/// How often a write retries after another writer changed `repo` under it.
const ATTEMPTS: u32 = 30;

/// Feature flags a writer must respect (icechunk `feature_flags.rs`).
pub const FLAG_CREATE_TAG: u16 = 4;
pub const FLAG_DELETE_TAG: u16 = 5;

/// Union type bytes of `UpdateType`.
pub mod update {
    pub const REPO_INITIALIZED: u8 = 1;
    pub const TAG_CREATED: u8 = 5;
    pub const TAG_DELETED: u8 = 6;
    pub const BRANCH_CREATED: u8 = 7;
    pub const BRANCH_DELETED: u8 = 8;
    pub const BRANCH_RESET: u8 = 9;
    pub const NEW_COMMIT: u8 = 10;
}

/// What kind of value an update table field holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Id,
    U8,
    U16,
    Bool,
    Status,
}

/// The fields of each `UpdateType` member, by slot (schema order).
fn layout(ty: u8) -> Option<&'static [Kind]> {
    use Kind::*;
    Some(match ty {
        1 | 3 | 4 | 13 | 14 => &[],
        2 => &[U8, U8],
        5 | 7 => &[Str],
        6 | 8 | 9 | 10 => &[Str, Id],
        11 => &[Str, Id, Id],
        12 => &[Id],
        15 => &[U16, Bool, Bool],
        16 => &[Status],
        _ => return None,
    })
}

/// One field value of an update.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Absent,
    Str(String),
    Id(Id12),
    U8(u8),
    U16(u16),
    Bool(bool),
    Status(Status),
}

/// One ops-log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub ty: u8,
    pub fields: Vec<Field>,
    pub updated_at: u64,
    pub backup_path: Option<String>,
}

/// `RepoStatus`.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// 0 online, 1 read-only, 2 offline.
    pub availability: u8,
    pub set_at: u64,
    pub reason: Option<String>,
}

/// One snapshot's entry in the commit graph.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotInfo {
    pub parent: Option<Id12>,
    /// µs since the epoch.
    pub flushed_at: u64,
    pub message: String,
    pub metadata: Option<Vec<(String, Vec<u8>)>>,
    pub pruned_ancestor_tx_logs: Option<Vec<Id12>>,
}

/// The decoded repo object.
#[derive(Debug, Clone, PartialEq)]
pub struct Repo {
    pub tags: BTreeMap<String, Id12>,
    pub branches: BTreeMap<String, Id12>,
    pub deleted_tags: BTreeSet<String>,
    pub snapshots: BTreeMap<Id12, SnapshotInfo>,
    pub status: Status,
    pub metadata: BTreeMap<String, Vec<u8>>,
    /// Newest first.
    pub updates: Vec<Update>,
    pub repo_before_updates: Option<String>,
    pub config: Option<Vec<u8>>,
    pub enabled_flags: Vec<u16>,
    pub disabled_flags: Vec<u16>,
}

fn bad(e: Corrupt) -> Error {
    Error::backend(format!(
        "{REPO_KEY} is not a valid Icechunk repo object: {e}"
    ))
}

impl Repo {
    /// A new repository: `main` at the initial snapshot, `metadata` set.
    pub fn initial(now: u64, branches: &[&str], metadata: BTreeMap<String, Vec<u8>>) -> Self {
        let mut snapshots = BTreeMap::new();
        snapshots.insert(
            Id12::INITIAL,
            SnapshotInfo {
                parent: None,
                flushed_at: now,
                message: crate::snapshot::INITIAL_MESSAGE.to_owned(),
                metadata: Some(vec![(
                    "__icechunk".to_owned(),
                    format::flex_initial_marker(),
                )]),
                pruned_ancestor_tx_logs: None,
            },
        );
        Self {
            tags: BTreeMap::new(),
            branches: branches
                .iter()
                .map(|b| ((*b).to_owned(), Id12::INITIAL))
                .collect(),
            deleted_tags: BTreeSet::new(),
            snapshots,
            status: Status {
                availability: 0,
                set_at: now,
                reason: None,
            },
            metadata,
            updates: vec![Update {
                ty: update::REPO_INITIALIZED,
                fields: Vec::new(),
                updated_at: now,
                backup_path: None,
            }],
            repo_before_updates: None,
            config: None,
            enabled_flags: Vec::new(),
            disabled_flags: Vec::new(),
        }
    }

    /// Decode the flatbuffer of a repo object.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let spec = Table::root(buf).and_then(|t| t.u8(0, 0)).map_err(bad)?;
        format::check_spec_version(REPO_KEY, spec)?;
        Self::decode_inner(buf).map_err(bad)
    }

    fn decode_inner(buf: &[u8]) -> Result<Self, Corrupt> {
        let root = Table::root(buf)?;
        let infos = Table::required(root.vector(4)?, "snapshots")?.tables()?;
        let ids = infos
            .iter()
            .map(|t| Table::required(t.array::<12>(0)?, "SnapshotInfo.id").map(Id12))
            .collect::<Result<Vec<_>, _>>()?;
        let by_index = |i: u32| -> Result<Id12, Corrupt> {
            ids.get(i as usize)
                .copied()
                .ok_or_else(|| Corrupt(format!("snapshot index {i} out of range")))
        };
        let mut snapshots = BTreeMap::new();
        for (t, id) in infos.iter().zip(&ids) {
            let parent = match t.i32(1, 0)? {
                -1 => None,
                i => Some(by_index(
                    u32::try_from(i).map_err(|_| Corrupt(format!("parent offset {i}")))?,
                )?),
            };
            let pruned = match t.vector(5)? {
                Some(v) => Some(
                    (0..v.len())
                        .map(|i| v.array::<12>(i).map(Id12))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                None => None,
            };
            snapshots.insert(
                *id,
                SnapshotInfo {
                    parent,
                    flushed_at: t.u64(2, 0)?,
                    message: Table::required(t.string(3)?, "SnapshotInfo.message")?.to_owned(),
                    metadata: t.vector(4)?.map(|v| metadata_items(&v)).transpose()?,
                    pruned_ancestor_tx_logs: pruned,
                },
            );
        }
        let refs = |slot: usize, what: &str| -> Result<BTreeMap<String, Id12>, Corrupt> {
            Table::required(root.vector(slot)?, what)?
                .tables()?
                .iter()
                .map(|r| {
                    Ok((
                        Table::required(r.string(0)?, "Ref.name")?.to_owned(),
                        by_index(r.u32(1, 0)?)?,
                    ))
                })
                .collect()
        };
        let status = decode_status(&Table::required(root.table(5)?, "status")?)?;
        let mut updates = Vec::new();
        for u in Table::required(root.vector(7)?, "latest_updates")?.tables()? {
            let ty = u.u8(0, 0)?;
            // An entry of a type this plugin does not know (a newer icechunk)
            // reads fine; only rewriting the repo object would lose it, so
            // `Store::update` refuses that.
            let kinds = layout(ty).unwrap_or(&[]);
            let body = Table::required(u.table(1)?, "Update.update_type")?;
            let mut fields = Vec::with_capacity(kinds.len());
            for (slot, kind) in kinds.iter().enumerate() {
                fields.push(match kind {
                    Kind::Str => body
                        .string(slot)?
                        .map_or(Field::Absent, |s| Field::Str(s.to_owned())),
                    Kind::Id => body
                        .array::<12>(slot)?
                        .map_or(Field::Absent, |b| Field::Id(Id12(b))),
                    Kind::U8 => Field::U8(body.u8(slot, 0)?),
                    Kind::U16 => Field::U16(body.u16(slot, 0)?),
                    Kind::Bool => Field::Bool(body.bool(slot)?),
                    Kind::Status => match body.table(slot)? {
                        Some(t) => Field::Status(decode_status(&t)?),
                        None => Field::Absent,
                    },
                });
            }
            updates.push(Update {
                ty,
                fields,
                updated_at: u.u64(2, 0)?,
                backup_path: u.string(3)?.map(str::to_owned),
            });
        }
        let flags = |slot: usize| -> Result<Vec<u16>, Corrupt> {
            match root.vector(slot)? {
                Some(v) => (0..v.len()).map(|i| v.u16(i)).collect(),
                None => Ok(Vec::new()),
            }
        };
        Ok(Self {
            tags: refs(1, "tags")?,
            branches: refs(2, "branches")?,
            deleted_tags: Table::required(root.vector(3)?, "deleted_tags")?
                .strings()?
                .into_iter()
                .map(str::to_owned)
                .collect(),
            snapshots,
            status,
            metadata: match root.vector(6)? {
                Some(v) => metadata_items(&v)?.into_iter().collect(),
                None => BTreeMap::new(),
            },
            updates,
            repo_before_updates: root.string(8)?.map(str::to_owned),
            config: root.bytes(9)?.map(<[u8]>::to_vec),
            enabled_flags: flags(10)?,
            disabled_flags: flags(11)?,
        })
    }

    /// The flatbuffer of this repo object.
    pub fn encode(&self) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::with_capacity(1024 + 128 * self.snapshots.len());
        let index: BTreeMap<Id12, u32> = self
            .snapshots
            .keys()
            .enumerate()
            .map(|(i, id)| (*id, i as u32))
            .collect();
        let refs = |fbb: &mut FlatBufferBuilder<'static>, refs: &BTreeMap<String, Id12>| {
            let items: Vec<_> = refs
                .iter()
                .map(|(name, id)| {
                    let name = fbb.create_string(name);
                    let t = fbb.start_table();
                    fbb.push_slot_always(vt(0), name);
                    fbb.push_slot_always::<u32>(vt(1), index.get(id).copied().unwrap_or(0));
                    fbb.end_table(t)
                })
                .collect();
            fbb.create_vector(&items)
        };
        let tags = refs(&mut fbb, &self.tags);
        let branches = refs(&mut fbb, &self.branches);
        let deleted: Vec<_> = self
            .deleted_tags
            .iter()
            .map(|t| fbb.create_string(t))
            .collect();
        let deleted = fbb.create_vector(&deleted);
        let infos: Vec<_> = self
            .snapshots
            .iter()
            .map(|(id, info)| {
                let message = fbb.create_string(&info.message);
                let metadata = info
                    .metadata
                    .as_ref()
                    .map(|m| metadata_vector(&mut fbb, m.iter().map(|(k, v)| (k, v))));
                let pruned = info
                    .pruned_ancestor_tx_logs
                    .as_ref()
                    .filter(|p| !p.is_empty())
                    .map(|p| fbb.create_vector(p));
                let parent = info
                    .parent
                    .and_then(|p| index.get(&p).map(|i| *i as i32))
                    .unwrap_or(-1);
                let t = fbb.start_table();
                fbb.push_slot_always(vt(2), info.flushed_at);
                fbb.push_slot_always(vt(0), *id);
                fbb.push_slot_always(vt(1), parent);
                fbb.push_slot_always(vt(3), message);
                if let Some(m) = metadata {
                    fbb.push_slot_always(vt(4), m);
                }
                if let Some(p) = pruned {
                    fbb.push_slot_always(vt(5), p);
                }
                fbb.end_table(t)
            })
            .collect();
        let snapshots = fbb.create_vector(&infos);
        let status = encode_status(&mut fbb, &self.status);
        let metadata = metadata_vector(&mut fbb, self.metadata.iter());
        let updates: Vec<_> = self
            .updates
            .iter()
            .map(|u| encode_update(&mut fbb, u))
            .collect();
        let updates = fbb.create_vector(&updates);
        let before = self
            .repo_before_updates
            .as_ref()
            .map(|s| fbb.create_string(s));
        let config = self.config.as_ref().map(|c| fbb.create_vector(c));
        let enabled =
            (!self.enabled_flags.is_empty()).then(|| fbb.create_vector(&self.enabled_flags));
        let disabled =
            (!self.disabled_flags.is_empty()).then(|| fbb.create_vector(&self.disabled_flags));
        let t = fbb.start_table();
        fbb.push_slot_always::<u8>(vt(0), format::SPEC_VERSION);
        fbb.push_slot_always(vt(1), tags);
        fbb.push_slot_always(vt(2), branches);
        fbb.push_slot_always(vt(3), deleted);
        fbb.push_slot_always(vt(4), snapshots);
        fbb.push_slot_always(vt(5), status);
        fbb.push_slot_always(vt(6), metadata);
        fbb.push_slot_always(vt(7), updates);
        if let Some(b) = before {
            fbb.push_slot_always(vt(8), b);
        }
        if let Some(c) = config {
            fbb.push_slot_always(vt(9), c);
        }
        if let Some(e) = enabled {
            fbb.push_slot_always(vt(10), e);
        }
        if let Some(d) = disabled {
            fbb.push_slot_always(vt(11), d);
        }
        let root = fbb.end_table(t);
        fbb.finish(root, Some(format::FILE_IDENTIFIER));
        fbb.finished_data().to_vec()
    }

    /// Push `update` as the newest ops-log entry. `backup` names the
    /// `overwritten/` copy of the repo object as it was before this update,
    /// i.e. right after the previous top entry (icechunk `mk_latest_updates`).
    fn push_update(&mut self, mut update: Update, backup: String) {
        if let Some(top) = self.updates.first_mut() {
            top.backup_path = Some(backup);
        }
        update.backup_path = None;
        self.updates.insert(0, update);
        if self.updates.len() > MAX_UPDATES {
            let dropped = self.updates.split_off(MAX_UPDATES);
            if let Some(path) = dropped.into_iter().find_map(|u| u.backup_path) {
                self.repo_before_updates = Some(path);
            }
        }
    }

    /// The type of an ops-log entry this plugin cannot re-encode, if any.
    fn unknown_update(&self) -> Option<u8> {
        self.updates
            .iter()
            .map(|u| u.ty)
            .find(|ty| layout(*ty).is_none())
    }

    /// Whether `flag` is disabled in this repository.
    pub fn flag_disabled(&self, flag: u16) -> bool {
        self.disabled_flags.contains(&flag)
    }

    /// The chain from `id` back to the root, `id` first.
    pub fn ancestry(&self, id: Id12) -> Vec<(Id12, &SnapshotInfo)> {
        let mut out = Vec::new();
        let mut next = Some(id);
        while let Some(id) = next {
            let Some(info) = self.snapshots.get(&id) else {
                break;
            };
            out.push((id, info));
            // A cycle would be a corrupt file; never loop on one.
            if out.len() > self.snapshots.len() {
                break;
            }
            next = info.parent;
        }
        out
    }

    /// Whether `ancestor` is on `descendant`'s chain (itself included).
    pub fn is_ancestor(&self, ancestor: Id12, descendant: Id12) -> bool {
        self.ancestry(descendant)
            .iter()
            .any(|(id, _)| *id == ancestor)
    }
}

fn vt(slot: usize) -> flatbuffers::VOffsetT {
    (4 + 2 * slot) as flatbuffers::VOffsetT
}

fn metadata_items(v: &crate::fb::Vector<'_>) -> Result<Vec<(String, Vec<u8>)>, Corrupt> {
    v.tables()?
        .iter()
        .map(|t| {
            Ok((
                Table::required(t.string(0)?, "MetadataItem.name")?.to_owned(),
                Table::required(t.bytes(1)?, "MetadataItem.value")?.to_vec(),
            ))
        })
        .collect()
}

/// A `[MetadataItem]` vector, in the order given (callers pass sorted items).
pub fn metadata_vector<'a>(
    fbb: &mut FlatBufferBuilder<'static>,
    items: impl Iterator<Item = (&'a String, &'a Vec<u8>)>,
) -> WIPOffset<
    flatbuffers::Vector<'static, flatbuffers::ForwardsUOffset<flatbuffers::TableFinishedWIPOffset>>,
> {
    let items: Vec<_> = items
        .map(|(name, value)| {
            let name = fbb.create_string(name);
            let value = fbb.create_vector(value);
            let t = fbb.start_table();
            fbb.push_slot_always(vt(0), name);
            fbb.push_slot_always(vt(1), value);
            fbb.end_table(t)
        })
        .collect();
    fbb.create_vector(&items)
}

fn decode_status(t: &Table<'_>) -> Result<Status, Corrupt> {
    Ok(Status {
        availability: t.u8(0, 0)?,
        set_at: t.u64(1, 0)?,
        reason: t.string(2)?.map(str::to_owned),
    })
}

fn encode_status(
    fbb: &mut FlatBufferBuilder<'static>,
    s: &Status,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    let reason = s.reason.as_ref().map(|r| fbb.create_string(r));
    let t = fbb.start_table();
    fbb.push_slot_always(vt(1), s.set_at);
    if let Some(r) = reason {
        fbb.push_slot_always(vt(2), r);
    }
    fbb.push_slot::<u8>(vt(0), s.availability, 0);
    fbb.end_table(t)
}

fn encode_update(
    fbb: &mut FlatBufferBuilder<'static>,
    u: &Update,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    // Children first (strings, nested tables), then the member table.
    enum Ready {
        None,
        Off(WIPOffset<flatbuffers::UnionWIPOffset>),
        Id(Id12),
        U8(u8),
        U16(u16),
        Bool(bool),
    }
    let ready: Vec<Ready> = u
        .fields
        .iter()
        .map(|f| match f {
            Field::Absent => Ready::None,
            Field::Str(s) => Ready::Off(fbb.create_string(s).as_union_value()),
            Field::Status(s) => Ready::Off(encode_status(fbb, s).as_union_value()),
            Field::Id(id) => Ready::Id(*id),
            Field::U8(v) => Ready::U8(*v),
            Field::U16(v) => Ready::U16(*v),
            Field::Bool(v) => Ready::Bool(*v),
        })
        .collect();
    let t = fbb.start_table();
    for (slot, r) in ready.into_iter().enumerate() {
        match r {
            Ready::None => {}
            Ready::Off(o) => fbb.push_slot_always(vt(slot), o),
            Ready::Id(id) => fbb.push_slot_always(vt(slot), id),
            Ready::U8(v) => fbb.push_slot::<u8>(vt(slot), v, 0),
            Ready::U16(v) => fbb.push_slot::<u16>(vt(slot), v, 0),
            Ready::Bool(v) => fbb.push_slot::<bool>(vt(slot), v, false),
        }
    }
    let body = fbb.end_table(t);
    let backup = u.backup_path.as_ref().map(|b| fbb.create_string(b));
    let t = fbb.start_table();
    fbb.push_slot_always(vt(2), u.updated_at);
    fbb.push_slot_always(vt(1), body);
    if let Some(b) = backup {
        fbb.push_slot_always(vt(3), b);
    }
    fbb.push_slot_always::<u8>(vt(0), u.ty);
    fbb.end_table(t)
}

/// What an edit of the repo object decided.
pub enum Edit<T> {
    /// Nothing to write; the result.
    Keep(T),
    /// Write the edited repo, logging an update of type `ty` with `fields`.
    Write(T, u8, Vec<Field>),
}

/// The repo object as read, with what a conditional put needs.
pub struct Loaded {
    pub repo: Repo,
    pub bytes: Vec<u8>,
    pub etag: String,
}

/// An Icechunk repository in a bucket.
pub struct Store {
    pub bucket: Bucket,
    pub uri: String,
}

impl Store {
    pub fn open(uri: &str) -> Result<Self> {
        Ok(Self {
            bucket: Bucket::open(uri)?,
            uri: uri.to_owned(),
        })
    }

    /// The repo object, or `None` when there is no repository here.
    pub fn try_load(&self) -> Result<Option<Loaded>> {
        let Some(object) = self.bucket.get(REPO_KEY)? else {
            if self.bucket.exists("refs/branch.main/ref.json")? {
                format::check_spec_version(&self.uri, 1)?;
            }
            return Ok(None);
        };
        let flatbuffer = format::decode(
            &format!("{}/{REPO_KEY}", self.uri),
            &object.value,
            FileType::RepoInfo,
        )?;
        Ok(Some(Loaded {
            repo: Repo::decode(&flatbuffer)?,
            bytes: object.value,
            etag: object.etag,
        }))
    }

    /// The repo object; a not-found error when there is no repository.
    pub fn load(&self) -> Result<Loaded> {
        self.try_load()?.ok_or_else(|| {
            Error::not_found(format!(
                "no Icechunk repository at {} (no `{REPO_KEY}` object)",
                self.uri
            ))
        })
    }

    /// Edit the repo object by the update protocol: read it with its etag,
    /// apply `edit`, back the old bytes up under `overwritten/`, log the
    /// update with a strictly increasing timestamp, and put it conditionally
    /// on the etag. When another writer got there first, start over from a
    /// fresh read (so `edit` re-checks everything against the new state).
    pub fn update<T>(&self, mut edit: impl FnMut(&mut Repo) -> Result<Edit<T>>) -> Result<T> {
        for attempt in 0..ATTEMPTS {
            let Loaded {
                mut repo,
                bytes,
                etag,
            } = self.load()?;
            let (result, ty, fields) = match edit(&mut repo)? {
                Edit::Keep(result) => return Ok(result),
                Edit::Write(result, ty, fields) => (result, ty, fields),
            };
            if repo.status.availability != 0 {
                return Err(Error::backend(format!(
                    "the Icechunk repository at {} is {} ({}); it accepts no updates",
                    self.uri,
                    if repo.status.availability == 1 {
                        "read-only"
                    } else {
                        "offline"
                    },
                    repo.status.reason.as_deref().unwrap_or("no reason given")
                )));
            }
            if let Some(ty) = repo.unknown_update() {
                return Err(Error::Capability(format!(
                    "the Icechunk repository at {} has an ops-log entry of type {ty}, which \
                     this tether does not know (written by a newer icechunk); tether reads \
                     it but does not write to it: upgrade tether",
                    self.uri
                )));
            }
            let top = repo.updates.first().map_or(0, |u| u.updated_at);
            let now = format::now_micros().max(top + 1);
            let backup = backup_name(now)?;
            self.bucket
                .put(&format!("{OVERWRITTEN}/{backup}"), &bytes, PutMode::Create)?;
            repo.push_update(
                Update {
                    ty,
                    fields,
                    updated_at: now,
                    backup_path: None,
                },
                backup,
            );
            let data = format::encode(FileType::RepoInfo, &repo.encode());
            match self
                .bucket
                .put(REPO_KEY, &data, PutMode::IfMatch(etag.clone()))
            {
                Ok(_) => return Ok(result),
                Err(StorageError::PreconditionFailed(_)) => {
                    tether_sdk::debug!("{}: repo changed under us (attempt {attempt})", self.uri);
                    // Back off a little, more each time, so racing writers spread out.
                    let wait = u64::from(attempt.min(10))
                        * (1 + u64::from(format::random_bytes::<1>()?[0] % 8));
                    std::thread::sleep(std::time::Duration::from_millis(wait));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::backend(format!(
            "the Icechunk repository at {} kept changing; gave up after {ATTEMPTS} attempts",
            self.uri
        )))
    }
}

/// `repo.{ms until 3000-01-01, 14 digits}.{12 random bytes in base32}`, so
/// a listing of `overwritten/` shows the newest backup first.
fn backup_name(now_micros: u64) -> Result<String> {
    const Y3000_MS: u64 = 32_503_680_000_000;
    let ms = Y3000_MS.saturating_sub(now_micros / 1000);
    Ok(format!("repo.{ms:014}.{}", format::random_name()?))
}
