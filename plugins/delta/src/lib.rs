//! # tether-plugin-delta: Delta Lake tables
//!
//! Kind `delta` (spec/11, "`delta`: Delta Lake tables"): an Addressable
//! backend over a Delta table, read from its transaction log (`_delta_log/`)
//! through the host's `storage` capability. There is no Delta library
//! inside: the layout and actions are PROTOCOL.md's (research/formats.md §2),
//! checked against deltalake 1.6.6 by `host/tests/delta.rs`, which has the
//! real Python `deltalake` write, checkpoint, clean up, vacuum and read the
//! versions tether recorded.
//!
//! ## Locator and state
//!
//! ```json
//! {"uri": "/data/events", "region": "eu-west-1", "at": "12"}
//! ```
//!
//! `uri` is a local path or `s3://bucket/prefix` (a storage key, and for
//! local paths a tree key so the identity resolves symlinks); `region` is for
//! S3 and does not name the table; `at` is a version number or a timestamp
//! (RFC 3339, or a UTC date / date-time), which picks the newest version
//! committed at or before it. The identity is `{"uri": <resolved uri>}`. A
//! state is `{"version": N, "table_id": "<metaData.id>"}`: both are content,
//! so a table deleted and recreated at the same path (a new id) is another
//! state, and a recorded one verifies as drifted.
//!
//! ## What it reads
//!
//! A fingerprint is one listing of `_delta_log/` from `_last_checkpoint` on,
//! plus the commits since the checkpoint (newest first, until the protocol
//! and metadata are found), else a `.crc` or the checkpoint: never a data
//! file. Versions the early log no longer holds are read through their
//! checkpoint: classic and multi-part parquet checkpoints (the `parquet`
//! crate's row API, pure Rust, snappy or uncompressed). V2 checkpoints (UUID
//! names, sidecars) and catalog-managed tables are refused with a clear error,
//! and so is any reader feature not in [`READER_FEATURES`], by name.
//!
//! Delta has no tags or branches, so nothing is pinned and nothing is
//! forked: `commit` records the version, which stays readable until log
//! cleanup (`delta.logRetentionDuration`) or `VACUUM`
//! (`delta.deletedFileRetentionDuration`) removes what it needs
//! (`RETENTION_BOUND`); `verify` says how far a version is from both.

mod checkpoint;
mod harness;
mod log;
mod summary;

use std::collections::BTreeSet;

use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit::{self, SecondsFormat};
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Handle, HistoryEntry, ObjectDiff, PinRef,
    Result, Target, VerifyItem, VerifyReport, VerifyStatus, cap, descriptor,
};

pub use harness::DeltaHarness;
use log::{Header, Listing, Log, Protocol, Segment, Unreachable};

/// Capabilities of every delta object (spec/11's table).
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::CHEAP_FINGERPRINT,
    cap::RETENTION_BOUND,
    cap::DIFF,
    cap::HISTORY,
];

/// The reader features a table may require. tether reads only the log
/// (paths, sizes, statistics' row counts, deletion-vector file names), never
/// data values, so column mapping, timestamp and type changes and variants
/// do not change what it reads. `v2Checkpoint` tables are read while their
/// checkpoints are classic ones ([`log::Listing::segment`]).
pub const READER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "typeWidening",
    "typeWidening-preview",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "variantType",
    "variantType-preview",
];

/// The highest `minReaderVersion` understood.
const MAX_READER_VERSION: i64 = 3;

/// Deep verify asks about each needed file alone up to this many; above it,
/// one listing of the table is cheaper.
const HEAD_EACH_UP_TO: usize = 64;

/// How many missing files a report names.
const NAMED_MISSING: usize = 10;

/// A delta object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    uri: String,
    #[serde(default)]
    at: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)] // S3's region: the host resolves access, not the plugin.
    region: Option<String>,
}

impl Locator {
    /// The storage URI: `file://` folded, trailing slashes gone.
    fn storage_uri(&self) -> String {
        kit::storage_uri(&self.uri)
    }

    fn at(&self) -> Result<Option<At>> {
        self.at.as_ref().map(At::parse).transpose()
    }
}

/// A position in the log as `at` and `history --at` give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Version(u64),
    /// Milliseconds since the epoch.
    Time(i64),
}

impl At {
    fn parse(value: &Value) -> Result<At> {
        let text = match value {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.trim().to_owned(),
            other => {
                return Err(Error::invalid(format!(
                    "`at` must be a version number or a timestamp, not {other}"
                )));
            }
        };
        Self::parse_str(&text)
    }

    fn parse_str(text: &str) -> Result<At> {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return text
                .parse()
                .map(At::Version)
                .map_err(|_| Error::invalid(format!("version {text} is out of range")));
        }
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
            return Ok(At::Time(t.timestamp_millis()));
        }
        for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
            if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, format) {
                return Ok(At::Time(t.and_utc().timestamp_millis()));
            }
        }
        if let Ok(d) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            && let Some(t) = d.and_hms_opt(0, 0, 0)
        {
            return Ok(At::Time(t.and_utc().timestamp_millis()));
        }
        Err(Error::invalid(format!(
            "{text:?} is neither a Delta version number nor a timestamp \
             (RFC 3339, like 2026-01-31T12:00:00Z, or a UTC date 2026-01-31)"
        )))
    }
}

#[derive(Deserialize)]
struct State {
    version: u64,
    table_id: String,
}

fn state_json(version: u64, table_id: &str) -> Value {
    json!({ "version": version, "table_id": table_id })
}

fn parse_state(state: &Value) -> Result<State> {
    tether_sdk::state::<State>(state)
}

fn when(ms: i64) -> String {
    kit::rfc3339(
        ms.div_euclid(1000),
        (ms.rem_euclid(1000) * 1_000_000) as u32,
        SecondsFormat::Millis,
    )
}

fn now_ms() -> Option<i64> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// Refuse a table whose protocol asks for more than tether understands.
fn check_protocol(uri: &str, p: &Protocol) -> Result<()> {
    if p.min_reader_version > MAX_READER_VERSION {
        return Err(Error::Capability(format!(
            "{uri}: the table needs Delta reader version {}; tether reads versions up to \
             {MAX_READER_VERSION}",
            p.min_reader_version
        )));
    }
    let features = p.reader_features.as_deref().unwrap_or_default();
    if let Some(f) = features
        .iter()
        .find(|f| f.as_str() == "catalogManaged" || f.starts_with("catalogOwned"))
    {
        return Err(Error::Capability(format!(
            "{uri}: the table is catalog-managed (reader feature {f}): its catalog, not \
             _delta_log/, says which commits exist, and tether cannot ask it yet"
        )));
    }
    let unknown: Vec<&str> = features
        .iter()
        .map(String::as_str)
        .filter(|f| !READER_FEATURES.contains(f))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Capability(format!(
            "{uri}: the table needs reader feature{} tether does not understand: {}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", ")
        )));
    }
    Ok(())
}

/// A table's log with the locator's view of it.
struct Table {
    log: Log,
    loc: Locator,
}

impl Table {
    fn open(loc: &Locator) -> Result<Table> {
        Ok(Table {
            log: Log::open(&loc.storage_uri())?,
            loc: loc.clone(),
        })
    }

    fn uri(&self) -> &str {
        &self.log.uri
    }

    fn latest(&self, listing: &Listing) -> Result<u64> {
        listing.latest().ok_or_else(|| {
            Error::not_found(format!(
                "no Delta table at {}: _delta_log/ holds no commit",
                self.uri()
            ))
        })
    }

    /// The version `at` names.
    fn resolve(&self, listing: &Listing, at: At) -> Result<u64> {
        match at {
            At::Version(v) => Ok(v),
            At::Time(t) => {
                // The newest commit made at or before `t`; commit times grow
                // with versions, so a binary search reads few commits.
                let commits: Vec<_> = listing.commits.iter().collect();
                let time = |i: usize| -> Result<i64> {
                    let (v, meta) = commits[i];
                    let commit = self.log.commit(*v, meta)?;
                    commit
                        .timestamp()
                        .or_else(|| {
                            meta.last_modified
                                .as_deref()
                                .and_then(|m| chrono::DateTime::parse_from_rfc3339(m).ok())
                                .map(|d| d.timestamp_millis())
                        })
                        .ok_or_else(|| {
                            Error::backend(format!("{}: commit {v} has no timestamp", self.uri()))
                        })
                };
                let (mut lo, mut hi) = (0, commits.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if time(mid)? <= t {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                match lo.checked_sub(1) {
                    Some(i) => Ok(*commits[i].0),
                    None => Err(Error::not_found(format!(
                        "{}: no version of the table was committed at or before {} (the log's \
                         oldest commit is newer)",
                        self.uri(),
                        when(t)
                    ))),
                }
            }
        }
    }

    /// The base version: the locator's `at`, else the latest.
    fn base(&self, listing: &Listing) -> Result<u64> {
        match self.loc.at()? {
            Some(at) => self.resolve(listing, at),
            None => self.latest(listing),
        }
    }

    /// A version's segment and header, its protocol checked.
    fn header(&self, listing: &Listing, version: u64) -> Result<(Segment, Header)> {
        let segment = self.log.segment(listing, version)?;
        let header = self.log.header(listing, &segment)?;
        check_protocol(self.uri(), &header.protocol)?;
        Ok((segment, header))
    }

    fn state_at(&self, listing: &Listing, version: u64) -> Result<Value> {
        let (_, header) = self.header(listing, version)?;
        Ok(state_json(version, &header.metadata.id))
    }

    /// The storage key of a file the log names (URI-encoded, relative to the
    /// root or absolute), or `None` for a file outside the table.
    fn data_key(&self, path: &str) -> Option<String> {
        let decoded = percent_decode_str(path).decode_utf8_lossy().into_owned();
        if !decoded.contains("://") && !decoded.starts_with('/') {
            return Some(decoded);
        }
        let absolute = decoded
            .strip_prefix("file://")
            .map(|p| p.strip_prefix("localhost").unwrap_or(p).to_owned())
            .unwrap_or(decoded);
        absolute
            .strip_prefix(&format!("{}/", self.uri()))
            .map(str::to_owned)
    }

    /// What a recorded version says about retention (`RETENTION_BOUND`): the
    /// table's two durations, and how far the version is from them.
    fn retention(&self, listing: &Listing, version: u64) -> String {
        let latest = listing
            .latest()
            .and_then(|v| self.log.segment(listing, v).ok())
            .and_then(|s| self.log.header(listing, &s).ok());
        let prop = |name: &str, default: &str| match latest
            .as_ref()
            .and_then(|h| h.metadata.property(name))
        {
            Some(v) => (v.to_owned(), false),
            None => (default.to_owned(), true),
        };
        let (log_ret, log_default) =
            prop("delta.logRetentionDuration", summary::DEFAULT_LOG_RETENTION);
        let (file_ret, file_default) = prop(
            "delta.deletedFileRetentionDuration",
            summary::DEFAULT_DELETED_FILE_RETENTION,
        );
        let mark = |d: bool| if d { " (default)" } else { "" };
        let mut out = format!(
            "delta.logRetentionDuration = {log_ret}{}, delta.deletedFileRetentionDuration = \
             {file_ret}{}",
            mark(log_default),
            mark(file_default)
        );
        let committed = listing
            .commits
            .get(&version)
            .and_then(|m| self.log.commit(version, m).ok())
            .and_then(|c| c.timestamp());
        if let (Some(t), Some(now)) = (committed, now_ms()) {
            let age = now - t;
            out.push_str(&format!(
                "; version {version} is {} old",
                summary::human(age)
            ));
            if let Some(keep) = summary::interval_ms(&log_ret) {
                if age < keep {
                    out.push_str(&format!(
                        ": log cleanup may remove it in {}",
                        summary::human(keep - age)
                    ));
                } else {
                    out.push_str(&format!(
                        ": {} past the log retention, so the next log cleanup may remove it",
                        summary::human(age - keep)
                    ));
                }
            }
            if let Some(keep) = summary::interval_ms(&file_ret) {
                out.push_str(&format!(
                    ", and VACUUM may delete the files it needs {} after a later commit \
                     replaces them",
                    summary::human(keep)
                ));
            }
        }
        out
    }

    /// Which files `version` needs that storage no longer has, and how many
    /// it needs; files outside the table are not checked (counted apart).
    fn missing_files(&self, segment: &Segment) -> Result<(Vec<String>, usize, usize)> {
        let files = self.log.files(segment)?;
        let mut needed = BTreeSet::new();
        let mut outside = 0;
        for add in &files {
            let dv = add.deletion_vector.as_ref().and_then(|d| d.file());
            for path in std::iter::once(add.path.clone()).chain(dv) {
                match self.data_key(&path) {
                    Some(key) => {
                        needed.insert(key);
                    }
                    None => outside += 1,
                }
            }
        }
        let missing = if needed.len() <= HEAD_EACH_UP_TO {
            let mut gone = Vec::new();
            for key in &needed {
                if !self.log.bucket.exists(key)? {
                    gone.push(key.clone());
                }
            }
            gone
        } else {
            let present: BTreeSet<String> = self
                .log
                .bucket
                .list_all("")?
                .into_iter()
                .map(|m| m.key)
                .collect();
            needed.difference(&present).cloned().collect()
        };
        Ok((missing, needed.len(), outside))
    }

    /// The current table's id, when the log can tell.
    fn current_id(&self, listing: &Listing) -> Option<String> {
        let latest = listing.latest()?;
        let segment = listing.segment(latest).ok()?;
        Some(self.log.header(listing, &segment).ok()?.metadata.id)
    }

    fn recreated(&self, version: u64, recorded: &str, now: &str) -> VerifyReport {
        VerifyReport {
            status: VerifyStatus::Drifted,
            message: format!(
                "the table at {} was recreated: it is now table {now}, and version {version} of \
                 table {recorded} is gone with the old log. `tether commit` records the new \
                 table; the recorded data comes back only from a backup",
                self.uri()
            ),
        }
    }
}

/// The delta backend. Stateless: everything is in the table's log.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeltaBackend;

impl DeltaBackend {
    /// `verify` of `state` against the table's log, listed by the caller.
    fn verify_in(
        table: &Table,
        listing: &Listing,
        state: &Value,
        deep: bool,
    ) -> Result<VerifyReport> {
        let State {
            version,
            table_id: recorded,
        } = parse_state(state)?;
        let report = |status, message: String| Ok(VerifyReport { status, message });
        let segment = match listing.segment(version) {
            Ok(segment) => segment,
            Err(Unreachable::NoTable) => {
                return report(
                    VerifyStatus::Missing,
                    format!(
                        "there is no Delta table at {} any more (_delta_log/ holds no commit): \
                         version {version} is gone. Restore the table from a backup, or `tether \
                         remove` the object",
                        table.uri()
                    ),
                );
            }
            Err(why @ Unreachable::V2Checkpoint { .. }) => {
                return report(VerifyStatus::Unknown, why.describe(version));
            }
            Err(why) => {
                if let Some(now) = table.current_id(listing)
                    && now != recorded
                {
                    return Ok(table.recreated(version, &recorded, &now));
                }
                return report(
                    VerifyStatus::Missing,
                    format!(
                        "{}. Nothing brings it back but a backup: `tether commit` records a \
                         version the log holds, and a longer delta.logRetentionDuration keeps \
                         versions longer ({})",
                        why.describe(version),
                        table.retention(listing, version)
                    ),
                );
            }
        };
        let header = match table.log.header(listing, &segment) {
            Ok(h) => h,
            Err(e) => return report(VerifyStatus::Unknown, e.to_string()),
        };
        if header.metadata.id != recorded {
            return Ok(table.recreated(version, &recorded, &header.metadata.id));
        }
        if let Err(e) = check_protocol(table.uri(), &header.protocol) {
            return report(VerifyStatus::Unknown, e.to_string());
        }
        let retention = table.retention(listing, version);
        let from = match &segment.checkpoint {
            Some((at, _)) => format!(
                "its checkpoint at version {at} and {} later commits",
                segment.commits.len()
            ),
            None => format!("commits 0 to {version}"),
        };
        if !deep {
            return report(
                VerifyStatus::Unknown,
                format!(
                    "version {version} can be rebuilt from the log ({from}); only `verify \
                     --deep` checks that its data files are still there. {retention}"
                ),
            );
        }
        let (missing, needed, outside) = table.missing_files(&segment)?;
        let unchecked = if outside > 0 {
            format!(" ({outside} files outside the table were not checked)")
        } else {
            String::new()
        };
        if missing.is_empty() {
            return report(
                VerifyStatus::Ok,
                format!(
                    "version {version}: the log rebuilds it and all {needed} data files it \
                     needs are present{unchecked}. {retention}"
                ),
            );
        }
        let mut named = missing
            .iter()
            .take(NAMED_MISSING)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if missing.len() > NAMED_MISSING {
            named.push_str(&format!(", and {} more", missing.len() - NAMED_MISSING));
        }
        report(
            VerifyStatus::Missing,
            format!(
                "version {version} needs {} of its {needed} data files that are gone (VACUUM \
                 deletes files a later commit replaced, after \
                 delta.deletedFileRetentionDuration): {named}. DeltaTable({}, version={version}) \
                 can no longer read it; only a backup brings them back. `tether commit` records \
                 a version that is whole{unchecked}. {retention}",
                missing.len(),
                table.uri()
            ),
        )
    }
}

impl Backend for DeltaBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against(
            "deltalake 1.6.6 (delta-rs) with pyarrow 26, local and S3 (moto) tables",
        )
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["uri".into()],
            tree_keys: vec!["uri".into()],
            local_path_keys: vec!["uri".into()],
            ..descriptor("delta", CAPABILITIES)
        }
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        kit::check_bucket_uri("delta", &loc.uri)?;
        loc.at()?;
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        kit::uri_identity(&loc.uri)
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "Delta tables have no branches (asked for {name})"
            )));
        }
        let table = Table::open(loc)?;
        // The latest version needs only the log from the last checkpoint on.
        let listing = match loc.at()? {
            None => table.log.list_recent()?,
            Some(_) => table.log.list()?,
        };
        let version = table.base(&listing)?;
        table.state_at(&listing, version)
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        _pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        parse_state(state)?;
        let table = Table::open(loc)?;
        let listing = table.log.list()?;
        Self::verify_in(&table, &listing, state, deep)
    }

    /// `verify` of each item with the table opened and its log listed once
    /// (`verify` lists the whole log per version).
    fn verify_many(
        &self,
        loc: &Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let table = Table::open(loc)?;
        let listing = table.log.list();
        let answer = |item: &VerifyItem| {
            parse_state(&item.state)?;
            let listing = listing.as_ref().map_err(Clone::clone)?;
            Self::verify_in(&table, listing, &item.state, deep)
        };
        Ok(items.iter().map(answer).collect())
    }
    fn open(&self, loc: &Locator, target: &Target, _read_only: bool) -> Result<Handle> {
        let table = Table::open(loc)?;
        let listing = table.log.list()?;
        let (version, table_id) = match target {
            Target::Base => {
                let version = table.base(&listing)?;
                let (_, header) = table.header(&listing, version)?;
                (version, header.metadata.id)
            }
            Target::Recorded(state) => {
                let State { version, table_id } = parse_state(state)?;
                let (_, header) = table.header(&listing, version)?;
                if header.metadata.id != table_id {
                    return Err(Error::PinDrift(
                        table
                            .recreated(version, &table_id, &header.metadata.id)
                            .message,
                    ));
                }
                (version, table_id)
            }
            Target::Pinned(_) | Target::WorkingRef(_) => {
                return Err(Error::Capability(
                    "Delta tables have no tags or branches: open a recorded version".into(),
                ));
            }
        };
        Ok(Handle {
            type_name: "DeltaHandle".into(),
            address: format!("{}#version={version}", table.uri()),
            // Writing a Delta table changes it in place: there is no branch
            // to land or throw away, so every handle reads.
            read_only: true,
            fields: json!({
                "uri": table.uri(),
                "version": version,
                "table_id": table_id,
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let table = Table::open(loc)?;
        let listing = table.log.list()?;
        let start = match from_ref {
            Some(rev) => table.resolve(&listing, At::parse_str(rev.trim())?)?,
            None => table.base(&listing)?,
        };
        let mut out = Vec::new();
        for (version, meta) in listing.commits.range(..=start).rev().take(limit as usize) {
            let commit = table.log.commit(*version, meta)?;
            out.push(HistoryEntry {
                id: version.to_string(),
                when: commit.timestamp().map(when),
                message: summary::message(&commit),
                refs: Vec::new(),
            });
        }
        Ok(out)
    }

    fn diff(
        &self,
        loc: &Locator,
        a: &Value,
        b: &Value,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<ObjectDiff> {
        let (a, b) = (parse_state(a)?, parse_state(b)?);
        let mut diff = ObjectDiff::new("commits");
        if a.table_id != b.table_id {
            diff.add(
                "table",
                Change::Modified,
                format!("recreated: table {} -> {}", a.table_id, b.table_id),
            );
            diff.note(
                "the two states are different tables at one path (deleted and recreated), so \
                 their commits do not line up",
            );
            return Ok(diff);
        }
        if a.version == b.version {
            return Ok(diff);
        }
        let table = Table::open(loc)?;
        let listing = table.log.list()?;
        // Commits in (a, b]: added going forward, removed going back.
        let (lo, hi, change) = if a.version < b.version {
            (a.version, b.version, Change::Added)
        } else {
            (b.version, a.version, Change::Removed)
        };
        let mut cleaned = 0u64;
        for version in lo + 1..=hi {
            let detail = match listing.commits.get(&version) {
                Some(meta) => summary::line(&*table.log.commit(version, meta)?),
                None => {
                    cleaned += 1;
                    "(no longer in the log)".to_owned()
                }
            };
            diff.add(format!("v{version}"), change, detail);
        }
        if cleaned > 0 {
            diff.note(format!(
                "{cleaned} of the commits between versions {lo} and {hi} were removed by log \
                 cleanup (delta.logRetentionDuration), so what they did is not known"
            ));
        }
        Ok(diff)
    }

    fn state_addressable(&self, loc: &Locator, state: &Value) -> Result<bool> {
        let State { version, table_id } = parse_state(state)?;
        let table = Table::open(loc)?;
        let listing = table.log.list()?;
        Ok(match listing.segment(version) {
            Ok(segment) => table
                .log
                .header(&listing, &segment)
                .is_ok_and(|h| h.metadata.id == table_id),
            Err(_) => false,
        })
    }
}

/// `[backends.delta]` may commit the same four storage options as `file`;
/// endpoints and credentials belong in `.tether/secrets.toml`.
impl tether_sdk::DescribeExt for DeltaBackend {
    fn config_keys(&self) -> Vec<String> {
        kit::storage_option_keys()
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(DeltaBackend, harness: DeltaHarness, [describe_ext]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_is_a_version_or_a_time() {
        assert_eq!(At::parse(&json!(3)).unwrap(), At::Version(3));
        assert_eq!(At::parse(&json!("12")).unwrap(), At::Version(12));
        assert_eq!(
            At::parse(&json!("1970-01-01T00:00:01Z")).unwrap(),
            At::Time(1000)
        );
        assert_eq!(
            At::parse(&json!("1970-01-02")).unwrap(),
            At::Time(86_400_000)
        );
        assert!(At::parse(&json!("yesterday")).is_err());
        assert!(At::parse(&json!(true)).is_err());
    }

    #[test]
    fn unknown_reader_features_are_refused_by_name() {
        let p = |features: &[&str]| Protocol {
            min_reader_version: 3,
            min_writer_version: 7,
            reader_features: Some(features.iter().map(|s| s.to_string()).collect()),
        };
        assert!(check_protocol("t", &p(&["deletionVectors", "columnMapping"])).is_ok());
        let err = check_protocol("t", &p(&["columnMapping", "futureThing"])).unwrap_err();
        assert!(err.to_string().contains("futureThing"), "{err}");
        let err = check_protocol("t", &p(&["catalogManaged"])).unwrap_err();
        assert!(err.to_string().contains("catalog-managed"), "{err}");
        let old = Protocol {
            min_reader_version: 4,
            ..Protocol::default()
        };
        assert!(check_protocol("t", &old).is_err());
    }
}
