//! Iceberg table metadata (the `*.metadata.json` a catalog points at): what
//! this backend reads (refs, snapshots, their parents and summaries) and the
//! two updates it makes (`set-snapshot-ref`, `remove-snapshot-ref`), applied
//! the way pyiceberg 0.12 applies them (`pyiceberg/table/update/__init__.py`)
//! so a SQL catalog's next metadata file is the one pyiceberg would write.
//!
//! The document is kept as JSON and only the fields an update touches are
//! changed: a writer never drops a field it does not know (schemas, specs,
//! statistics, a newer format's additions).

use std::collections::BTreeMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use serde_json::{Map, Value, json};
use tether_sdk::{Error, Result};

/// Iceberg's "no current snapshot" id (the state of a table never written).
pub const NO_SNAPSHOT: i64 = -1;

/// The branch every Iceberg table has once written.
pub const MAIN: &str = "main";

/// `write.metadata.previous-versions-max`'s default (Iceberg and pyiceberg).
const PREVIOUS_VERSIONS_MAX: usize = 100;

/// A branch or a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    Branch,
    Tag,
}

impl RefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        }
    }
}

/// One entry of `refs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRef {
    pub snapshot_id: i64,
    pub kind: RefKind,
}

/// One entry of `snapshots`, as far as this backend reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub id: i64,
    pub parent: Option<i64>,
    pub timestamp_ms: i64,
    /// `summary`: `operation` and Iceberg's counters, all strings.
    pub summary: BTreeMap<String, String>,
}

impl Snapshot {
    /// The summary's operation (`append`, `overwrite`, `delete`, `replace`).
    pub fn operation(&self) -> &str {
        self.summary
            .get("operation")
            .map(String::as_str)
            .unwrap_or("unknown")
    }

    /// A summary counter (`added-records`); 0 when absent or not a number.
    pub fn counter(&self, key: &str) -> i64 {
        self.summary
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// `append: +5 rows, +1 files`: the operation and what it added and
    /// removed, from the summary.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (key, sign, unit) in [
            ("added-records", '+', "rows"),
            ("deleted-records", '-', "rows"),
            ("added-data-files", '+', "files"),
            ("deleted-data-files", '-', "files"),
        ] {
            let n = self.counter(key);
            if n != 0 {
                parts.push(format!("{sign}{n} {unit}"));
            }
        }
        if parts.is_empty() {
            self.operation().to_owned()
        } else {
            format!("{}: {}", self.operation(), parts.join(", "))
        }
    }
}

/// A commit precondition, checked against the table's current metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `assert-ref-snapshot-id`: the ref is at `snapshot_id`, or (with
    /// `None`) does not exist.
    RefSnapshotId {
        ref_name: String,
        snapshot_id: Option<i64>,
    },
}

impl Requirement {
    /// The REST catalog's JSON (`snapshot-id` always present, `null` for
    /// "must not exist", as pyiceberg sends it).
    pub fn to_json(&self) -> Value {
        match self {
            Requirement::RefSnapshotId {
                ref_name,
                snapshot_id,
            } => json!({
                "type": "assert-ref-snapshot-id",
                "ref": ref_name,
                "snapshot-id": snapshot_id,
            }),
        }
    }
}

/// A metadata update this backend makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// `set-snapshot-ref`: create or move a branch or tag.
    SetRef {
        ref_name: String,
        kind: RefKind,
        snapshot_id: i64,
    },
    /// `remove-snapshot-ref`.
    RemoveRef { ref_name: String },
    /// `add-snapshot`: a snapshot document (the conformance harness's
    /// writes; a ref update then points a branch at it).
    AddSnapshot { snapshot: Value },
}

impl Update {
    /// The REST catalog's JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Update::SetRef {
                ref_name,
                kind,
                snapshot_id,
            } => json!({
                "action": "set-snapshot-ref",
                "ref-name": ref_name,
                "type": kind.as_str(),
                "snapshot-id": snapshot_id,
            }),
            Update::RemoveRef { ref_name } => json!({
                "action": "remove-snapshot-ref",
                "ref-name": ref_name,
            }),
            Update::AddSnapshot { snapshot } => json!({
                "action": "add-snapshot",
                "snapshot": snapshot,
            }),
        }
    }
}

/// A table's metadata document.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    doc: Map<String, Value>,
}

fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::backend(format!(
        "table metadata is not valid Iceberg metadata: {what}"
    ))
}

fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64()
}

impl Metadata {
    /// Parse a metadata file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(bytes).map_err(corrupt)?;
        Self::from_value(value)
    }

    /// Take a metadata document (a REST catalog's `metadata`).
    pub fn from_value(value: Value) -> Result<Self> {
        let Value::Object(doc) = value else {
            return Err(corrupt("not a JSON object"));
        };
        let meta = Metadata { doc };
        match meta.format_version() {
            Some(1..=3) => {}
            Some(v) => {
                return Err(Error::backend(format!(
                    "table metadata has format-version {v}; this backend reads versions 1 to 3"
                )));
            }
            None => return Err(corrupt("no format-version")),
        }
        // Everything the readers below rely on, checked once.
        meta.snapshots()?;
        meta.refs()?;
        Ok(meta)
    }

    /// The document, for writing.
    pub fn to_value(&self) -> Value {
        Value::Object(self.doc.clone())
    }

    pub fn format_version(&self) -> Option<u64> {
        self.doc.get("format-version").and_then(Value::as_u64)
    }

    /// The table's base location (`location`).
    pub fn location(&self) -> Result<&str> {
        self.doc
            .get("location")
            .and_then(Value::as_str)
            .ok_or_else(|| corrupt("no location"))
    }

    /// A table property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.doc.get("properties")?.get(key)?.as_str()
    }

    pub fn last_updated_ms(&self) -> i64 {
        self.doc
            .get("last-updated-ms")
            .and_then(as_i64)
            .unwrap_or(0)
    }

    /// `current-snapshot-id`, [`NO_SNAPSHOT`] when unset or null.
    pub fn current_snapshot_id(&self) -> i64 {
        self.doc
            .get("current-snapshot-id")
            .and_then(as_i64)
            .unwrap_or(NO_SNAPSHOT)
    }

    /// Every snapshot, in the document's order.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        let Some(list) = self.doc.get("snapshots") else {
            return Ok(Vec::new());
        };
        let list = list.as_array().ok_or_else(|| corrupt("snapshots"))?;
        list.iter()
            .map(|s| {
                let id = s
                    .get("snapshot-id")
                    .and_then(as_i64)
                    .ok_or_else(|| corrupt("a snapshot without snapshot-id"))?;
                let summary = match s.get("summary") {
                    Some(Value::Object(m)) => m
                        .iter()
                        .map(|(k, v)| {
                            let v = v.as_str().map(str::to_owned).unwrap_or(v.to_string());
                            (k.clone(), v)
                        })
                        .collect(),
                    _ => BTreeMap::new(),
                };
                Ok(Snapshot {
                    id,
                    parent: s.get("parent-snapshot-id").and_then(as_i64),
                    timestamp_ms: s.get("timestamp-ms").and_then(as_i64).unwrap_or(0),
                    summary,
                })
            })
            .collect()
    }

    /// The snapshot with `id`.
    pub fn snapshot(&self, id: i64) -> Option<Snapshot> {
        self.snapshots().ok()?.into_iter().find(|s| s.id == id)
    }

    pub fn has_snapshot(&self, id: i64) -> bool {
        self.snapshot(id).is_some()
    }

    /// Every ref. A format-1 table written before refs existed has none in
    /// the document; its `main` is `current-snapshot-id`, as Iceberg reads it.
    pub fn refs(&self) -> Result<BTreeMap<String, SnapshotRef>> {
        let mut refs = BTreeMap::new();
        if let Some(map) = self.doc.get("refs") {
            let map = map.as_object().ok_or_else(|| corrupt("refs"))?;
            for (name, r) in map {
                let snapshot_id = r
                    .get("snapshot-id")
                    .and_then(as_i64)
                    .ok_or_else(|| corrupt(format!("ref {name} without snapshot-id")))?;
                let kind = match r.get("type").and_then(Value::as_str) {
                    Some("branch") => RefKind::Branch,
                    Some("tag") => RefKind::Tag,
                    other => return Err(corrupt(format!("ref {name} has type {other:?}"))),
                };
                refs.insert(name.clone(), SnapshotRef { snapshot_id, kind });
            }
        }
        let current = self.current_snapshot_id();
        if !refs.contains_key(MAIN) && current != NO_SNAPSHOT {
            refs.insert(
                MAIN.to_owned(),
                SnapshotRef {
                    snapshot_id: current,
                    kind: RefKind::Branch,
                },
            );
        }
        Ok(refs)
    }

    /// A ref by name.
    pub fn ref_(&self, name: &str) -> Option<SnapshotRef> {
        self.refs().ok()?.remove(name)
    }

    /// The head of branch `name`: `main` of a table with no snapshot is
    /// [`NO_SNAPSHOT`]; any other missing branch (or a tag) is `None`.
    pub fn branch_head(&self, name: &str) -> Option<i64> {
        match self.ref_(name) {
            Some(r) if r.kind == RefKind::Branch => Some(r.snapshot_id),
            Some(_) => None,
            None if name == MAIN && self.current_snapshot_id() == NO_SNAPSHOT => Some(NO_SNAPSHOT),
            None => None,
        }
    }

    /// `id` and its ancestors, newest first, as far as the snapshots are
    /// still in the metadata (expiry removes old ones).
    pub fn ancestry(&self, id: i64) -> Vec<Snapshot> {
        let by_id: BTreeMap<i64, Snapshot> = self
            .snapshots()
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let mut out = Vec::new();
        let mut next = Some(id);
        while let Some(id) = next {
            let Some(s) = by_id.get(&id) else { break };
            // A cycle would be corrupt metadata: stop rather than loop.
            if out.iter().any(|o: &Snapshot| o.id == id) {
                break;
            }
            next = s.parent;
            out.push(s.clone());
        }
        out
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors. The empty
    /// state ([`NO_SNAPSHOT`]) is an ancestor of everything.
    pub fn is_ancestor(&self, ancestor: i64, descendant: i64) -> bool {
        ancestor == NO_SNAPSHOT || self.ancestry(descendant).iter().any(|s| s.id == ancestor)
    }

    /// Why `req` does not hold here, or `None` when it does (the checks and
    /// messages of pyiceberg's `AssertRefSnapshotId.validate`).
    pub fn violation(&self, req: &Requirement) -> Option<String> {
        let Requirement::RefSnapshotId {
            ref_name,
            snapshot_id,
        } = req;
        let has_snapshots = !self.snapshots().unwrap_or_default().is_empty();
        match (self.ref_(ref_name), snapshot_id) {
            _ if !has_snapshots && ref_name != MAIN => Some(format!(
                "Table has no snapshots and can only be written to the {MAIN} BRANCH."
            )),
            (Some(r), None) => Some(format!(
                "{} {ref_name} was created concurrently",
                r.kind.as_str()
            )),
            (Some(r), Some(want)) if r.snapshot_id != *want => Some(format!(
                "{} {ref_name} has changed: expected id {want}, found {}",
                r.kind.as_str(),
                r.snapshot_id
            )),
            (None, Some(want)) => Some(format!("{ref_name} is missing, expected {want}")),
            _ => None,
        }
    }

    /// Apply `update` (pyiceberg's `_apply_table_update`); whether anything
    /// changed. `now_ms` stamps a move of `main` in the snapshot log.
    pub fn apply(&mut self, update: &Update, now_ms: i64) -> Result<bool> {
        match update {
            Update::SetRef {
                ref_name,
                kind,
                snapshot_id,
            } => {
                let entry = json!({ "snapshot-id": snapshot_id, "type": kind.as_str() });
                let refs = self.doc.get("refs").and_then(Value::as_object);
                if refs.and_then(|r| r.get(ref_name)) == Some(&entry) {
                    return Ok(false);
                }
                if !self.has_snapshot(*snapshot_id) {
                    return Err(Error::backend(format!(
                        "Cannot set {ref_name} to unknown snapshot {snapshot_id}"
                    )));
                }
                if ref_name == MAIN {
                    self.doc
                        .insert("current-snapshot-id".into(), json!(snapshot_id));
                    self.doc.insert("last-updated-ms".into(), json!(now_ms));
                    let log = self
                        .doc
                        .entry("snapshot-log")
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(log) = log {
                        log.push(json!({ "snapshot-id": snapshot_id, "timestamp-ms": now_ms }));
                    }
                }
                self.refs_mut().insert(ref_name.clone(), entry);
                Ok(true)
            }
            Update::RemoveRef { ref_name } => {
                if self.refs_mut().remove(ref_name).is_none() {
                    return Ok(false);
                }
                if ref_name == MAIN {
                    self.doc.insert("current-snapshot-id".into(), Value::Null);
                }
                Ok(true)
            }
            Update::AddSnapshot { snapshot } => {
                let seq = snapshot
                    .get("sequence-number")
                    .and_then(as_i64)
                    .unwrap_or(0);
                let new = snapshot.get("snapshot-id").and_then(as_i64);
                if new.is_none_or(|id| self.has_snapshot(id)) {
                    return Err(Error::backend("add-snapshot: no new snapshot-id"));
                }
                let list = self
                    .doc
                    .entry("snapshots")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = list {
                    list.push(snapshot.clone());
                }
                let last = self
                    .doc
                    .get("last-sequence-number")
                    .and_then(as_i64)
                    .unwrap_or(0);
                self.doc
                    .insert("last-sequence-number".into(), json!(last.max(seq)));
                self.doc.insert(
                    "last-updated-ms".into(),
                    json!(
                        snapshot
                            .get("timestamp-ms")
                            .and_then(as_i64)
                            .unwrap_or(now_ms)
                    ),
                );
                Ok(true)
            }
        }
    }

    fn refs_mut(&mut self) -> &mut Map<String, Value> {
        // A format-1 table without `refs` gets them, its `main` included.
        if !matches!(self.doc.get("refs"), Some(Value::Object(_))) {
            let mut refs = Map::new();
            let current = self.current_snapshot_id();
            if current != NO_SNAPSHOT {
                refs.insert(
                    MAIN.to_owned(),
                    json!({ "snapshot-id": current, "type": "branch" }),
                );
            }
            self.doc.insert("refs".into(), Value::Object(refs));
        }
        match self.doc.get_mut("refs") {
            Some(Value::Object(refs)) => refs,
            _ => unreachable!("refs was just made an object"),
        }
    }

    /// The document that follows `self` (read from `location`) after
    /// `updates`, as pyiceberg's `update_table_metadata` writes it: the
    /// previous file appended to `metadata-log` (capped by
    /// `write.metadata.previous-versions-max`) and `last-updated-ms` moved
    /// on. `None` when the updates change nothing.
    pub fn updated(&self, location: &str, updates: &[Update], now_ms: i64) -> Result<Option<Self>> {
        let mut next = self.clone();
        let mut changed = false;
        for update in updates {
            changed |= next.apply(update, now_ms)?;
        }
        if !changed {
            return Ok(None);
        }
        let max = self
            .property("write.metadata.previous-versions-max")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(PREVIOUS_VERSIONS_MAX)
            .max(1);
        let log = next
            .doc
            .entry("metadata-log")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(log) = log {
            if log.len() >= max {
                log.drain(..log.len() + 1 - max);
            }
            log.push(json!({
                "metadata-file": location,
                "timestamp-ms": self.last_updated_ms(),
            }));
        }
        if next.last_updated_ms() == self.last_updated_ms() {
            next.doc.insert("last-updated-ms".into(), json!(now_ms));
        }
        Ok(Some(next))
    }

    /// Where the metadata file after the one at `current` goes, as pyiceberg
    /// names it: `<metadata dir>/<version+1, 5 digits>-<uuid>.metadata.json`,
    /// the directory being `write.metadata.path` or `<location>/metadata`.
    pub fn next_location(&self, current: &str, uuid: &str) -> Result<String> {
        let version = metadata_version(current).map_or(0, |v| v + 1);
        let dir = match self.property("write.metadata.path") {
            Some(dir) => dir.trim_end_matches('/').to_owned(),
            None => format!("{}/metadata", self.location()?.trim_end_matches('/')),
        };
        // pyiceberg's name for a gzip file; Java's `.metadata.json.gz` is read too.
        let codec = if self.gzip_metadata() { ".gz" } else { "" };
        Ok(format!("{dir}/{version:05}-{uuid}{codec}.metadata.json"))
    }

    /// Whether the table asks for gzip-compressed metadata files
    /// (`write.metadata.compression-codec = gzip`).
    pub fn gzip_metadata(&self) -> bool {
        self.property("write.metadata.compression-codec")
            .is_some_and(|c| c.eq_ignore_ascii_case("gzip"))
    }

    /// The bytes of a metadata file named `name`: gzip-compressed when the
    /// name says so (`*.gz.metadata.json`, `*.metadata.json.gz`).
    pub fn encode(&self, name: &str) -> Result<Vec<u8>> {
        let json = serde_json::to_vec(&self.to_value())
            .map_err(|e| Error::backend(format!("cannot serialise metadata: {e}")))?;
        if !gzip_name(name) {
            return Ok(json);
        }
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&json)
            .and_then(|()| gz.finish())
            .map_err(|e| Error::backend(format!("cannot compress metadata: {e}")))
    }

    /// Parse the file `name` holding `bytes`, decompressing a gzip file
    /// (by its name or its magic bytes) up to `max` bytes.
    pub fn decode(name: &str, bytes: &[u8], max: usize) -> Result<Self> {
        if !gzip_name(name) && !bytes.starts_with(&GZIP_MAGIC) {
            return Self::parse(bytes);
        }
        let mut json = Vec::new();
        GzDecoder::new(bytes)
            .take(max as u64 + 1)
            .read_to_end(&mut json)
            .map_err(|e| corrupt(format!("{name} is not valid gzip: {e}")))?;
        if json.len() > max {
            return Err(Error::backend(format!(
                "{name} decompresses to more than {max} bytes"
            )));
        }
        Self::parse(&json)
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether a metadata file's name says it is gzip-compressed.
pub fn gzip_name(name: &str) -> bool {
    name.ends_with(".gz.metadata.json") || name.ends_with(".metadata.json.gz")
}

/// The version a metadata file name carries (`00003-<uuid>.metadata.json`
/// is 3); `None` for a name of another shape (pyiceberg then starts at 0).
pub fn metadata_version(location: &str) -> Option<u64> {
    let name = location.rsplit('/').next()?;
    let name = name.strip_suffix(".gz").unwrap_or(name);
    let (version, rest) = name.split_once('-')?;
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.strip_suffix(".metadata.json")?;
    // `<uuid>` or `<uuid>.<codec>`.
    let uuid = rest.split('.').next()?;
    (uuid.len() == 36 && rest.split('.').count() <= 2).then_some(())?;
    version.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub const S1: i64 = 8305623457380121116;
    pub const S2: i64 = 3515394688202186570;

    /// Metadata as pyiceberg 0.12 writes it after two appends (ids shortened
    /// by nothing: real 64-bit ids, which must survive exactly).
    pub fn sample() -> Metadata {
        Metadata::from_value(json!({
            "format-version": 2,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "file:///wh/ns/t",
            "last-sequence-number": 2,
            "last-updated-ms": 1000,
            "last-column-id": 1,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
            "current-schema-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "default-spec-id": 0,
            "last-partition-id": 999,
            "properties": {},
            "current-snapshot-id": 3515394688202186570i64,
            "snapshots": [
                {"snapshot-id": 8305623457380121116i64, "sequence-number": 1, "timestamp-ms": 900,
                 "manifest-list": "file:///wh/ns/t/metadata/snap-1.avro",
                 "summary": {"operation": "append", "added-records": "2", "added-data-files": "1",
                             "total-records": "2", "total-data-files": "1"}, "schema-id": 0},
                {"snapshot-id": 3515394688202186570i64, "parent-snapshot-id": 8305623457380121116i64,
                 "sequence-number": 2, "timestamp-ms": 1000,
                 "manifest-list": "file:///wh/ns/t/metadata/snap-2.avro",
                 "summary": {"operation": "append", "added-records": "5", "added-data-files": "1",
                             "total-records": "7", "total-data-files": "2"}, "schema-id": 0}
            ],
            "snapshot-log": [
                {"snapshot-id": 8305623457380121116i64, "timestamp-ms": 900},
                {"snapshot-id": 3515394688202186570i64, "timestamp-ms": 1000}
            ],
            "metadata-log": [],
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "refs": {"main": {"snapshot-id": 3515394688202186570i64, "type": "branch"}},
            "statistics": [],
            "a-field-from-the-future": {"kept": true}
        }))
        .unwrap()
    }

    /// [`sample`] with its two snapshot ids.
    pub fn two_appends() -> (Metadata, i64, i64) {
        (sample(), S1, S2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::tests_support::{S1, S2, sample};

    #[test]
    fn reads_refs_snapshots_and_ancestry() {
        let m = sample();
        assert_eq!(m.branch_head(MAIN), Some(S2));
        assert_eq!(m.branch_head("nope"), None);
        let chain: Vec<i64> = m.ancestry(S2).iter().map(|s| s.id).collect();
        assert_eq!(chain, vec![S2, S1]);
        assert!(m.is_ancestor(S1, S2));
        assert!(!m.is_ancestor(S2, S1));
        assert!(m.is_ancestor(NO_SNAPSHOT, S1));
        assert_eq!(
            m.snapshot(S2).unwrap().describe(),
            "append: +5 rows, +1 files"
        );
    }

    #[test]
    fn a_table_never_written_is_at_no_snapshot() {
        let mut doc = sample().to_value();
        doc["current-snapshot-id"] = json!(-1);
        doc["snapshots"] = json!([]);
        doc["refs"] = json!({});
        let m = Metadata::from_value(doc.clone()).unwrap();
        assert_eq!(m.branch_head(MAIN), Some(NO_SNAPSHOT));
        // pyiceberg 0.12 writes `null` rather than -1 in some versions.
        doc["current-snapshot-id"] = Value::Null;
        let m = Metadata::from_value(doc).unwrap();
        assert_eq!(m.current_snapshot_id(), NO_SNAPSHOT);
        let req = Requirement::RefSnapshotId {
            ref_name: "tether.x".into(),
            snapshot_id: None,
        };
        assert!(m.violation(&req).unwrap().contains("no snapshots"));
    }

    #[test]
    fn requirements_as_pyiceberg_checks_them() {
        let m = sample();
        let req = |name: &str, id: Option<i64>| Requirement::RefSnapshotId {
            ref_name: name.into(),
            snapshot_id: id,
        };
        assert_eq!(m.violation(&req("main", Some(S2))), None);
        assert_eq!(m.violation(&req("tag", None)), None);
        assert!(
            m.violation(&req("main", None))
                .unwrap()
                .contains("created concurrently")
        );
        assert!(
            m.violation(&req("main", Some(S1)))
                .unwrap()
                .contains("has changed")
        );
        assert!(
            m.violation(&req("x", Some(S1)))
                .unwrap()
                .contains("missing")
        );
        assert_eq!(
            req("t", None).to_json(),
            json!({"type": "assert-ref-snapshot-id", "ref": "t", "snapshot-id": null})
        );
    }

    #[test]
    fn set_and_remove_refs_as_pyiceberg_writes_them() {
        let m = sample();
        let tag = Update::SetRef {
            ref_name: "tether.d.h".into(),
            kind: RefKind::Tag,
            snapshot_id: S1,
        };
        let next = m
            .updated(
                "file:///wh/ns/t/metadata/00002-a.metadata.json",
                std::slice::from_ref(&tag),
                5000,
            )
            .unwrap()
            .unwrap();
        let doc = next.to_value();
        assert_eq!(
            doc["refs"]["tether.d.h"],
            json!({"snapshot-id": S1, "type": "tag"})
        );
        // A tag is no snapshot-log entry and leaves the current snapshot.
        assert_eq!(doc["snapshot-log"].as_array().unwrap().len(), 2);
        assert_eq!(doc["current-snapshot-id"], json!(S2));
        assert_eq!(doc["last-updated-ms"], json!(5000));
        assert_eq!(
            doc["metadata-log"],
            json!([{"metadata-file": "file:///wh/ns/t/metadata/00002-a.metadata.json", "timestamp-ms": 1000}])
        );
        assert_eq!(doc["a-field-from-the-future"], json!({"kept": true}));
        // Setting it again changes nothing.
        assert_eq!(next.updated("x", &[tag], 6000).unwrap(), None);

        // Moving main logs the snapshot and makes it current.
        let main = Update::SetRef {
            ref_name: MAIN.into(),
            kind: RefKind::Branch,
            snapshot_id: S1,
        };
        let moved = next.updated("l2", &[main], 7000).unwrap().unwrap();
        assert_eq!(moved.current_snapshot_id(), S1);
        let log = moved.to_value()["snapshot-log"].clone();
        assert_eq!(log[2], json!({"snapshot-id": S1, "timestamp-ms": 7000}));

        let removed = moved
            .updated(
                "l3",
                &[Update::RemoveRef {
                    ref_name: "tether.d.h".into(),
                }],
                8000,
            )
            .unwrap()
            .unwrap();
        assert!(removed.ref_("tether.d.h").is_none());
        assert_eq!(removed.current_snapshot_id(), S1);

        let unknown = Update::SetRef {
            ref_name: "b".into(),
            kind: RefKind::Branch,
            snapshot_id: 42,
        };
        let err = m.updated("l", &[unknown], 1).unwrap_err();
        assert!(err.to_string().contains("unknown snapshot 42"), "{err}");
    }

    #[test]
    fn metadata_log_is_capped() {
        let mut doc = sample().to_value();
        doc["properties"] = json!({"write.metadata.previous-versions-max": "2"});
        doc["metadata-log"] = json!([
            {"metadata-file": "a", "timestamp-ms": 1},
            {"metadata-file": "b", "timestamp-ms": 2}
        ]);
        let m = Metadata::from_value(doc).unwrap();
        let tag = Update::SetRef {
            ref_name: "t".into(),
            kind: RefKind::Tag,
            snapshot_id: S1,
        };
        let next = m.updated("c", &[tag], 3).unwrap().unwrap().to_value();
        let files: Vec<&str> = next["metadata-log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["metadata-file"].as_str().unwrap())
            .collect();
        assert_eq!(files, ["b", "c"]);
    }

    #[test]
    fn metadata_file_names() {
        let uuid = "6c97e413-d51b-4538-ac70-12fe2a85cb83";
        let cur = format!("s3://b/db/t/metadata/00001-{uuid}.metadata.json");
        assert_eq!(metadata_version(&cur), Some(1));
        assert_eq!(
            metadata_version(&format!("/x/00012-{uuid}.gz.metadata.json")),
            Some(12)
        );
        assert_eq!(metadata_version("/x/v3.metadata.json"), None);
        let m = sample();
        assert_eq!(
            m.next_location(&cur, uuid).unwrap(),
            format!("file:///wh/ns/t/metadata/00002-{uuid}.metadata.json")
        );
        assert_eq!(
            m.next_location("/x/v3.metadata.json", uuid).unwrap(),
            format!("file:///wh/ns/t/metadata/00000-{uuid}.metadata.json")
        );
    }

    #[test]
    fn gzip_metadata_is_read_and_written_as_the_table_says() {
        let uuid = "6c97e413-d51b-4538-ac70-12fe2a85cb83";
        assert_eq!(
            metadata_version(&format!("/x/00004-{uuid}.metadata.json.gz")),
            Some(4)
        );
        let mut doc = sample().to_value();
        doc["properties"] = json!({"write.metadata.compression-codec": "gzip"});
        let m = Metadata::from_value(doc).unwrap();
        let cur = format!("/x/00001-{uuid}.gz.metadata.json");
        let next = m.next_location(&cur, uuid).unwrap();
        assert_eq!(
            next,
            format!("file:///wh/ns/t/metadata/00002-{uuid}.gz.metadata.json")
        );
        let bytes = m.encode(&next).unwrap();
        assert_eq!(bytes[..2], GZIP_MAGIC, "written compressed");
        let back = Metadata::decode(&next, &bytes, 1 << 20).unwrap();
        assert_eq!(back.to_value(), m.to_value());
        // By the magic bytes too, and never past the cap.
        assert!(Metadata::decode("odd.metadata.json", &bytes, 1 << 20).is_ok());
        let err = Metadata::decode(&next, &bytes, 16).unwrap_err();
        assert!(err.to_string().contains("more than 16 bytes"), "{err}");
        assert!(Metadata::decode(&next, b"{}", 1 << 20).is_err());
        let plain = sample();
        let name = plain.next_location(&cur, uuid).unwrap();
        assert!(name.ends_with(&format!("00002-{uuid}.metadata.json")));
        assert_eq!(plain.encode(&name).unwrap()[0], b'{');
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(Metadata::parse(b"[]").is_err());
        assert!(Metadata::from_value(json!({"format-version": 9})).is_err());
        let mut doc = sample().to_value();
        doc["refs"]["x"] = json!({"snapshot-id": 1, "type": "bookmark"});
        assert!(Metadata::from_value(doc).is_err());
    }
}
