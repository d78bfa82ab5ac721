//! Delta's transaction log, read through the host's `storage` capability
//! (PROTOCOL.md; research/formats.md §2): which commits and checkpoints
//! `_delta_log/` holds, the actions in them, and what a version is made of.
//!
//! - [`Listing`]: one listing of `_delta_log/`: commits (`{v:020}.json`),
//!   checkpoints (classic, multi-part, V2), version checksums (`.crc`).
//! - [`Listing::segment`]: the files that reconstruct a version (the newest
//!   usable checkpoint at or below it and the commits after it), or why
//!   there are none.
//! - [`Log::header`]: a version's protocol and metadata, read from the
//!   newest commits first, then a `.crc`, then the checkpoint.
//! - [`Log::files`]: a version's live data files, by replaying its segment.
//!
//! Commits and checkpoints are immutable once written, so each parsed file is
//! kept for the rest of the instance, keyed by its key and etag: a batch of
//! calls (`verify --all-history`) reads each once.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use serde::Deserialize;
use serde_json::Value;
use tether_sdk::storage::{Bucket, ObjectMeta};
use tether_sdk::{Error, Result};

use crate::checkpoint;

/// The log directory, relative to the table root.
pub const LOG_DIR: &str = "_delta_log/";

/// `_delta_log/{version:020}.json`.
pub fn commit_key(version: u64) -> String {
    format!("{LOG_DIR}{version:020}.json")
}

// ---------------------------------------------------------------------------
// Actions (PROTOCOL.md §Actions): only the fields tether reads.

/// One line of a commit, or one row of a checkpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub commit_info: Option<Value>,
    pub protocol: Option<Protocol>,
    pub meta_data: Option<Metadata>,
    pub add: Option<Add>,
    pub remove: Option<Remove>,
    pub sidecar: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: i64,
    #[serde(default)]
    pub min_writer_version: i64,
    #[serde(default)]
    pub reader_features: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub id: String,
    #[serde(default)]
    pub configuration: Option<BTreeMap<String, Option<String>>>,
}

impl Metadata {
    /// A table property (`delta.logRetentionDuration`), when set.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.configuration.as_ref()?.get(name)?.as_deref()
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    pub path: String,
    #[serde(default)]
    pub size: Option<i64>,
    #[serde(default)]
    pub stats: Option<String>,
    #[serde(default)]
    pub deletion_vector: Option<DeletionVector>,
}

impl Add {
    /// `numRecords` from the file's statistics, when written.
    pub fn num_records(&self) -> Option<i64> {
        let stats: Value = serde_json::from_str(self.stats.as_deref()?).ok()?;
        stats.get("numRecords")?.as_i64()
    }

    /// What identifies the file in a snapshot: its path and deletion vector
    /// (PROTOCOL.md: "the primary key for the entry in the set of files is
    /// the tuple (path, deletionVector.uniqueId)").
    fn file_key(&self) -> (String, Option<String>) {
        (
            self.path.clone(),
            self.deletion_vector.as_ref().map(DeletionVector::unique_id),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    #[serde(default)]
    pub deletion_vector: Option<DeletionVector>,
}

/// A deletion vector descriptor (PROTOCOL.md §Deletion Vectors).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionVector {
    pub storage_type: String,
    pub path_or_inline_dv: String,
    #[serde(default)]
    pub offset: Option<i64>,
}

impl DeletionVector {
    fn unique_id(&self) -> String {
        match self.offset {
            Some(o) => format!("{}{}@{o}", self.storage_type, self.path_or_inline_dv),
            None => format!("{}{}", self.storage_type, self.path_or_inline_dv),
        }
    }

    /// The file holding the vector, relative to the table root or absolute
    /// (`u`: `[prefix/]deletion_vector_<uuid>.bin`, the UUID Z85-encoded in
    /// the last 20 characters; `p`: a path; `i`: inline, no file).
    pub fn file(&self) -> Option<String> {
        match self.storage_type.as_str() {
            "u" => {
                let s = &self.path_or_inline_dv;
                let split = s.len().checked_sub(20)?;
                let (prefix, encoded) = s.split_at(split);
                let uuid = z85_decode(encoded)?;
                let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
                let uuid = format!(
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                );
                let name = format!("deletion_vector_{uuid}.bin");
                Some(if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                })
            }
            "p" => Some(self.path_or_inline_dv.clone()),
            _ => None,
        }
    }
}

/// Z85 (ZeroMQ RFC 32) decoding of a multiple of five characters.
fn z85_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] =
        b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(5) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 5 * 4);
    for chunk in bytes.chunks(5) {
        let mut value: u64 = 0;
        for c in chunk {
            let digit = ALPHABET.iter().position(|a| a == c)? as u64;
            value = value * 85 + digit;
        }
        let value = u32::try_from(value).ok()?;
        out.extend_from_slice(&value.to_be_bytes());
    }
    Some(out)
}

/// One commit file, parsed.
#[derive(Debug, Default)]
pub struct Commit {
    pub info: Option<Value>,
    pub protocol: Option<Protocol>,
    pub metadata: Option<Metadata>,
    pub adds: Vec<Add>,
    pub removes: Vec<Remove>,
}

impl Commit {
    fn parse(key: &str, bytes: &[u8]) -> Result<Commit> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| Error::backend(format!("{key} is not UTF-8 text")))?;
        let mut commit = Commit::default();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let action: Action = serde_json::from_str(line).map_err(|e| {
                Error::backend(format!("{key} line {}: not a Delta action: {e}", n + 1))
            })?;
            commit.absorb(action);
        }
        Ok(commit)
    }

    fn absorb(&mut self, action: Action) {
        if let Some(info) = action.commit_info {
            self.info = Some(info);
        }
        if let Some(p) = action.protocol {
            self.protocol = Some(p);
        }
        if let Some(m) = action.meta_data {
            self.metadata = Some(m);
        }
        if let Some(a) = action.add {
            self.adds.push(a);
        }
        if let Some(r) = action.remove {
            self.removes.push(r);
        }
    }

    /// When the commit was made, in ms since the epoch: the in-commit
    /// timestamp when the table has them, else commitInfo's `timestamp`.
    pub fn timestamp(&self) -> Option<i64> {
        let info = self.info.as_ref()?;
        info.get("inCommitTimestamp")
            .and_then(Value::as_i64)
            .or_else(|| info.get("timestamp").and_then(Value::as_i64))
    }
}

// ---------------------------------------------------------------------------
// The listing

/// The checkpoint files of one version, by kind.
#[derive(Debug, Clone, Default)]
pub struct Checkpoints {
    /// `{v}.checkpoint.parquet`.
    pub classic: Option<ObjectMeta>,
    /// `{v}.checkpoint.{part}.{parts}.parquet`, by number of parts, then part.
    pub multi: BTreeMap<u32, BTreeMap<u32, ObjectMeta>>,
    /// `{v}.checkpoint.{uuid}.{json|parquet}` (V2).
    pub v2: Vec<ObjectMeta>,
}

impl Checkpoints {
    /// The parquet files of a complete classic or multi-part checkpoint.
    pub fn usable(&self) -> Option<Vec<ObjectMeta>> {
        if let Some(c) = &self.classic {
            return Some(vec![c.clone()]);
        }
        // An incomplete set is ignored (PROTOCOL.md).
        self.multi
            .iter()
            .find(|(parts, got)| got.len() == **parts as usize)
            .map(|(_, got)| got.values().cloned().collect())
    }
}

/// What `_delta_log/` holds.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub commits: BTreeMap<u64, ObjectMeta>,
    pub checkpoints: BTreeMap<u64, Checkpoints>,
    pub checksums: BTreeMap<u64, ObjectMeta>,
}

/// Why a version cannot be reconstructed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// No commit and no checkpoint: there is no table.
    NoTable,
    /// The version is newer than the table's latest.
    Beyond { latest: u64 },
    /// Commits it needs are gone and no checkpoint covers them.
    Cleaned { oldest: Option<u64> },
    /// Only a V2 checkpoint covers it, which this plugin does not read yet.
    V2Checkpoint { at: u64 },
}

impl Unreachable {
    /// The sentence a user reads.
    pub fn describe(&self, version: u64) -> String {
        match self {
            Unreachable::NoTable => {
                "there is no Delta table here (no commits in _delta_log/)".into()
            }
            Unreachable::Beyond { latest } => {
                format!("version {version} is newer than the table's latest version {latest}")
            }
            Unreachable::Cleaned {
                oldest: Some(oldest),
            } => format!(
                "version {version} can no longer be reconstructed: log cleanup removed the \
                 commits it needs (delta.logRetentionDuration), and no checkpoint covers it; \
                 the oldest version the log can still rebuild is {oldest}"
            ),
            Unreachable::Cleaned { oldest: None } => format!(
                "version {version} can no longer be reconstructed: the log holds no checkpoint \
                 or unbroken run of commits that rebuilds it"
            ),
            Unreachable::V2Checkpoint { at } => format!(
                "version {version} is only reachable through the V2 checkpoint at version {at}, \
                 which tether cannot read yet (V2 checkpoints with sidecars are not supported)"
            ),
        }
    }
}

/// The files that reconstruct a version.
#[derive(Debug, Clone)]
pub struct Segment {
    pub version: u64,
    /// The checkpoint the replay starts from, and its parquet files.
    pub checkpoint: Option<(u64, Vec<ObjectMeta>)>,
    /// The commits after it, oldest first.
    pub commits: Vec<(u64, ObjectMeta)>,
}

impl Listing {
    fn add(&mut self, meta: ObjectMeta) {
        let Some(name) = meta.key.strip_prefix(LOG_DIR) else {
            return;
        };
        if name.contains('/') || name.len() < 21 || !name.is_char_boundary(20) {
            return;
        }
        let (digits, rest) = name.split_at(20);
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return;
        }
        let Ok(version) = digits.parse::<u64>() else {
            return;
        };
        match rest {
            ".json" => {
                self.commits.insert(version, meta);
            }
            ".crc" => {
                self.checksums.insert(version, meta);
            }
            ".checkpoint.parquet" => {
                self.checkpoints.entry(version).or_default().classic = Some(meta);
            }
            _ => {
                let Some(tail) = rest.strip_prefix(".checkpoint.") else {
                    return;
                };
                let parts: Vec<&str> = tail.split('.').collect();
                match parts.as_slice() {
                    [part, total, "parquet"]
                        if part.len() == 10
                            && total.len() == 10
                            && part
                                .bytes()
                                .chain(total.bytes())
                                .all(|b| b.is_ascii_digit()) =>
                    {
                        let (Ok(part), Ok(total)) = (part.parse::<u32>(), total.parse::<u32>())
                        else {
                            return;
                        };
                        if part == 0 || part > total {
                            return;
                        }
                        self.checkpoints
                            .entry(version)
                            .or_default()
                            .multi
                            .entry(total)
                            .or_default()
                            .insert(part, meta);
                    }
                    [_uuid, "json" | "parquet"] => {
                        self.checkpoints.entry(version).or_default().v2.push(meta);
                    }
                    _ => {}
                }
            }
        }
    }

    /// The newest version the log holds (a commit, or a checkpoint whose
    /// commit was cleaned up), `None` for no table.
    pub fn latest(&self) -> Option<u64> {
        let c = self.commits.keys().next_back().copied();
        let k = self.checkpoints.keys().next_back().copied();
        c.max(k)
    }

    /// Whether every commit in `from..=to` is in the log.
    fn commits_present(&self, from: u64, to: u64) -> bool {
        from > to || self.commits.range(from..=to).count() as u64 == to - from + 1
    }

    /// The files that rebuild `version`: the newest complete checkpoint at or
    /// below it followed by an unbroken run of commits, or commits from 0.
    pub fn segment(&self, version: u64) -> std::result::Result<Segment, Unreachable> {
        let Some(latest) = self.latest() else {
            return Err(Unreachable::NoTable);
        };
        if version > latest {
            return Err(Unreachable::Beyond { latest });
        }
        let mut v2_only = None;
        for (&at, cps) in self.checkpoints.range(..=version).rev() {
            if !self.commits_present(at + 1, version) {
                // An older checkpoint needs these commits as well.
                break;
            }
            match cps.usable() {
                Some(files) => {
                    return Ok(Segment {
                        version,
                        checkpoint: Some((at, files)),
                        commits: self.commit_run(at + 1, version),
                    });
                }
                None if !cps.v2.is_empty() => {
                    v2_only.get_or_insert(at);
                }
                None => {}
            }
        }
        if self.commits_present(0, version) {
            return Ok(Segment {
                version,
                checkpoint: None,
                commits: self.commit_run(0, version),
            });
        }
        if let Some(at) = v2_only {
            return Err(Unreachable::V2Checkpoint { at });
        }
        Err(Unreachable::Cleaned {
            oldest: self.oldest_reconstructable(),
        })
    }

    fn commit_run(&self, from: u64, to: u64) -> Vec<(u64, ObjectMeta)> {
        if from > to {
            return Vec::new();
        }
        self.commits
            .range(from..=to)
            .map(|(v, m)| (*v, m.clone()))
            .collect()
    }

    /// The oldest version the log can still rebuild.
    pub fn oldest_reconstructable(&self) -> Option<u64> {
        let mut candidates: Vec<u64> = self
            .checkpoints
            .iter()
            .filter(|(_, c)| c.usable().is_some())
            .map(|(v, _)| *v)
            .collect();
        if self.commits.contains_key(&0) {
            candidates.push(0);
        }
        candidates.sort_unstable();
        candidates.into_iter().find(|v| self.segment(*v).is_ok())
    }
}

// ---------------------------------------------------------------------------
// Reading the log

/// A file as the caches know it: its URI and etag.
type FileId = (String, String);

thread_local! {
    static COMMITS: RefCell<HashMap<FileId, Rc<Commit>>> = RefCell::default();
    static CHECKPOINTS: RefCell<HashMap<Vec<FileId>, Rc<Commit>>> = RefCell::default();
}

/// A table's log: the bucket at its root.
#[derive(Debug, Clone)]
pub struct Log {
    pub bucket: Bucket,
    /// The table's storage URI (no trailing `/`).
    pub uri: String,
}

/// A version's protocol and metadata.
#[derive(Debug, Clone)]
pub struct Header {
    pub protocol: Protocol,
    pub metadata: Metadata,
}

#[derive(Debug, Deserialize)]
struct LastCheckpoint {
    version: u64,
}

/// The protocol's `.crc` file: only what the header needs.
#[derive(Debug, Deserialize)]
struct Checksum {
    metadata: Option<Metadata>,
    protocol: Option<Protocol>,
}

impl Log {
    pub fn open(uri: &str) -> Result<Log> {
        Ok(Log {
            bucket: Bucket::open(uri)?,
            uri: uri.to_owned(),
        })
    }

    /// Every entry of `_delta_log/`.
    pub fn list(&self) -> Result<Listing> {
        self.list_after(None)
    }

    /// `_delta_log/` from version `from` on (its checkpoint included).
    fn list_after(&self, from: Option<u64>) -> Result<Listing> {
        let mut listing = Listing::default();
        let mut cursor = from.map(|v| format!("{LOG_DIR}{v:020}"));
        loop {
            let page = self
                .bucket
                .raw()
                .list(LOG_DIR, cursor.as_deref(), 1000)
                .map_err(tether_sdk::storage::StorageError::from)?;
            for meta in page.objects {
                listing.add(meta);
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(listing),
            }
        }
    }

    /// The log from the last checkpoint on, when `_last_checkpoint` names
    /// one that is there; otherwise all of it. Enough for the latest version
    /// and its header, in one short listing on a long-lived table.
    pub fn list_recent(&self) -> Result<Listing> {
        let hint = self
            .bucket
            .get_json::<LastCheckpoint>(&format!("{LOG_DIR}_last_checkpoint"))
            .ok()
            .flatten()
            .map(|v| v.value.version);
        if let Some(cp) = hint {
            let recent = self.list_after(Some(cp))?;
            if recent
                .checkpoints
                .get(&cp)
                .is_some_and(|c| c.usable().is_some())
            {
                return Ok(recent);
            }
        }
        self.list()
    }

    /// One commit, parsed (cached by key and etag).
    pub fn commit(&self, version: u64, meta: &ObjectMeta) -> Result<Rc<Commit>> {
        let id = (format!("{}/{}", self.uri, meta.key), meta.etag.clone());
        if let Some(c) = COMMITS.with(|c| c.borrow().get(&id).cloned()) {
            return Ok(c);
        }
        let bytes = self
            .bucket
            .get(&meta.key)?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "commit {version} ({}) disappeared while it was read",
                    meta.key
                ))
            })?
            .value;
        let commit = Rc::new(Commit::parse(&meta.key, &bytes)?);
        COMMITS.with(|c| c.borrow_mut().insert(id, Rc::clone(&commit)));
        Ok(commit)
    }

    /// A checkpoint's actions, as one commit (cached by keys and etags).
    fn checkpoint(&self, version: u64, files: &[ObjectMeta]) -> Result<Rc<Commit>> {
        let id: Vec<FileId> = files
            .iter()
            .map(|m| (format!("{}/{}", self.uri, m.key), m.etag.clone()))
            .collect();
        if let Some(c) = CHECKPOINTS.with(|c| c.borrow().get(&id).cloned()) {
            return Ok(c);
        }
        let mut commit = Commit::default();
        for meta in files {
            let bytes = self
                .bucket
                .get(&meta.key)?
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "checkpoint {version} ({}) disappeared while it was read",
                        meta.key
                    ))
                })?
                .value;
            for action in checkpoint::actions(&meta.key, bytes)? {
                if action.sidecar.is_some() {
                    return Err(Error::Capability(format!(
                        "checkpoint {version} ({}) refers to sidecar files (a V2 checkpoint); \
                         tether cannot read those yet",
                        meta.key
                    )));
                }
                commit.absorb(action);
            }
        }
        let commit = Rc::new(commit);
        CHECKPOINTS.with(|c| c.borrow_mut().insert(id, Rc::clone(&commit)));
        Ok(commit)
    }

    /// The segment of `version`, as an error a caller can return.
    pub fn segment(&self, listing: &Listing, version: u64) -> Result<Segment> {
        listing.segment(version).map_err(|why| match why {
            Unreachable::V2Checkpoint { .. } => Error::Capability(why.describe(version)),
            _ => Error::not_found(format!("{}: {}", self.uri, why.describe(version))),
        })
    }

    /// The protocol and metadata in force at the segment's version: the
    /// newest of each in its commits, else a `.crc` of a version in it,
    /// else its checkpoint's.
    pub fn header(&self, listing: &Listing, segment: &Segment) -> Result<Header> {
        let (mut protocol, mut metadata) = (None, None);
        for (version, meta) in segment.commits.iter().rev() {
            let commit = self.commit(*version, meta)?;
            if protocol.is_none() {
                protocol.clone_from(&commit.protocol);
            }
            if metadata.is_none() {
                metadata.clone_from(&commit.metadata);
            }
            if protocol.is_some() && metadata.is_some() {
                break;
            }
            // A checksum of the version just below this commit says both.
            if let Some(crc) = version
                .checked_sub(1)
                .and_then(|v| listing.checksums.get(&v))
                && let Ok(Some(sum)) = self.bucket.get_json::<Checksum>(&crc.key)
            {
                if protocol.is_none() {
                    protocol = sum.value.protocol;
                }
                if metadata.is_none() {
                    metadata = sum.value.metadata;
                }
                if protocol.is_some() && metadata.is_some() {
                    break;
                }
            }
        }
        if (protocol.is_none() || metadata.is_none())
            && let Some((at, files)) = &segment.checkpoint
        {
            let cp = self.checkpoint(*at, files)?;
            if protocol.is_none() {
                protocol.clone_from(&cp.protocol);
            }
            if metadata.is_none() {
                metadata.clone_from(&cp.metadata);
            }
        }
        let what = |missing: &str| {
            Error::backend(format!(
                "{}: version {} has no {missing} action in its log segment; this is not a valid \
                 Delta table",
                self.uri, segment.version
            ))
        };
        Ok(Header {
            protocol: protocol.ok_or_else(|| what("protocol"))?,
            metadata: metadata.ok_or_else(|| what("metaData"))?,
        })
    }

    /// The version's live data files: its checkpoint's adds, then each
    /// commit's adds and removes in order.
    pub fn files(&self, segment: &Segment) -> Result<Vec<Add>> {
        let mut files: BTreeMap<(String, Option<String>), Add> = BTreeMap::new();
        let mut apply = |commit: &Commit| {
            for r in &commit.removes {
                let key = (
                    r.path.clone(),
                    r.deletion_vector.as_ref().map(DeletionVector::unique_id),
                );
                files.remove(&key);
            }
            for a in &commit.adds {
                files.insert(a.file_key(), a.clone());
            }
        };
        if let Some((at, parts)) = &segment.checkpoint {
            apply(&*self.checkpoint(*at, parts)?);
        }
        for (version, meta) in &segment.commits {
            apply(&*self.commit(*version, meta)?);
        }
        Ok(files.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(key: &str) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            size: 1,
            etag: "e".to_owned(),
            last_modified: None,
        }
    }

    fn listing(names: &[&str]) -> Listing {
        let mut l = Listing::default();
        for n in names {
            l.add(meta(&format!("{LOG_DIR}{n}")));
        }
        l
    }

    const C0: &str = "00000000000000000000.json";
    const C1: &str = "00000000000000000001.json";
    const C2: &str = "00000000000000000002.json";
    const C3: &str = "00000000000000000003.json";
    const CP2: &str = "00000000000000000002.checkpoint.parquet";

    #[test]
    fn names_are_sorted_into_commits_checkpoints_and_checksums() {
        let l = listing(&[
            C0,
            C1,
            "00000000000000000001.crc",
            CP2,
            "00000000000000000004.checkpoint.0000000001.0000000002.parquet",
            "00000000000000000005.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            "00000000000000000000.00000000000000000001.compacted.json",
            "_last_checkpoint",
            "_sidecars/x.parquet",
            "0000000000000000000x.json",
        ]);
        assert_eq!(l.commits.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(l.checksums.keys().copied().collect::<Vec<_>>(), [1]);
        assert!(l.checkpoints[&2].usable().is_some());
        assert!(l.checkpoints[&4].usable().is_none(), "one part of two");
        assert_eq!(l.checkpoints[&5].v2.len(), 1);
        assert_eq!(l.latest(), Some(5));
    }

    #[test]
    fn segments_start_at_the_newest_checkpoint_with_an_unbroken_run_after_it() {
        let l = listing(&[C0, C1, C2, C3, CP2]);
        let s = l.segment(3).unwrap();
        assert_eq!(s.checkpoint.as_ref().map(|c| c.0), Some(2));
        assert_eq!(s.commits.iter().map(|c| c.0).collect::<Vec<_>>(), [3]);
        let s = l.segment(1).unwrap();
        assert!(s.checkpoint.is_none());
        assert_eq!(s.commits.len(), 2);
        assert_eq!(l.segment(4).unwrap_err(), Unreachable::Beyond { latest: 3 });
    }

    #[test]
    fn cleaned_up_versions_are_unreachable_and_the_oldest_is_named() {
        let l = listing(&[C2, C3, CP2]);
        assert_eq!(
            l.segment(1).unwrap_err(),
            Unreachable::Cleaned { oldest: Some(2) }
        );
        assert!(l.segment(2).is_ok());
        assert_eq!(l.oldest_reconstructable(), Some(2));
        assert_eq!(listing(&[]).segment(0).unwrap_err(), Unreachable::NoTable);
    }

    #[test]
    fn a_v2_checkpoint_alone_is_refused_as_such() {
        let l = listing(&[
            "00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet",
            C2,
            C3,
        ]);
        assert_eq!(
            l.segment(3).unwrap_err(),
            Unreachable::V2Checkpoint { at: 2 }
        );
    }

    #[test]
    fn commits_parse_actions_and_timestamps() {
        let text = br#"{"commitInfo":{"timestamp":1796000244633,"operation":"WRITE"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"abc","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":[],"configuration":{"delta.logRetentionDuration":"interval 1 days"},"createdTime":1}}
{"add":{"path":"a%20b.parquet","partitionValues":{},"size":5,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":3}"}}
{"remove":{"path":"old.parquet","deletionTimestamp":1,"dataChange":true}}
"#;
        let c = Commit::parse("k", text).unwrap();
        assert_eq!(c.timestamp(), Some(1796000244633));
        assert_eq!(c.metadata.as_ref().unwrap().id, "abc");
        assert_eq!(
            c.metadata
                .as_ref()
                .unwrap()
                .property("delta.logRetentionDuration"),
            Some("interval 1 days")
        );
        assert_eq!(c.adds[0].num_records(), Some(3));
        assert_eq!(c.removes[0].path, "old.parquet");
        assert!(Commit::parse("k", b"{not json").is_err());
    }

    #[test]
    fn deletion_vector_files_follow_the_protocol_example() {
        // PROTOCOL.md §Deletion Vectors' example.
        let dv = DeletionVector {
            storage_type: "u".into(),
            path_or_inline_dv: "ab^-aqEH.-t@S}K{vb[*k^".into(),
            offset: Some(4),
        };
        assert_eq!(
            dv.file().as_deref(),
            Some("ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin")
        );
    }
}
