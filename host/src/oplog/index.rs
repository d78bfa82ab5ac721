//! The repository's indexes, in the VCS's shared directory beside `tether.lock`
//! (spec 07 and 10, "Layout"): memories of this clone, never committed, and
//! never authority (an owner marker in a store decides a delete, not these).
//!
//! - `tether-pinned.jsonl`: pins this clone created, the only ones `gc`
//!   releases by default. Its mere presence says it has been seeded.
//! - `tether-created.jsonl`: stores this clone made with `add --create`.
//! - `tether-touched.jsonl`: stores this clone forked a branch in or pinned.
//!
//! Each is an append-only set. An entry is added by appending it (unless one
//! with the same identity is already on record) and taken off by appending a
//! removal record `{"removed": true, ...identity fields..., "at"}`; reading
//! folds the file in order, so a crash between appends leaves a consistent set.
//! Writers hold the repository lock. Identities compare in canonical JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{OplogError, jsonl, now};
use crate::model::canonical;

pub const PINNED_FILENAME: &str = "tether-pinned.jsonl";
pub const CREATED_FILENAME: &str = "tether-created.jsonl";
pub const TOUCHED_FILENAME: &str = "tether-touched.jsonl";

pub fn pinned_path(shared_dir: &Path) -> PathBuf {
    shared_dir.join(PINNED_FILENAME)
}

pub fn created_path(shared_dir: &Path) -> PathBuf {
    shared_dir.join(CREATED_FILENAME)
}

pub fn touched_path(shared_dir: &Path) -> PathBuf {
    shared_dir.join(TOUCHED_FILENAME)
}

/// A pin this clone created (a `commit`, `pull` or `repair` that the store told
/// the ref was new).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinnedPin {
    pub dataset_id: String,
    /// `<dataset_id>.<hash>`.
    pub pin_id: String,
    /// The backend kind of the store.
    pub kind: String,
    /// The object key that pinned it.
    pub key: String,
    /// The store's identity (the backend's canonical locator), when known.
    #[serde(default)]
    pub identity: Value,
    /// The native ref it lives under (`tether.<pin_id>`, or a generation).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
    /// When it was recorded (UTC, ISO 8601).
    pub at: String,
}

/// A store this clone made with `add --create`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreatedStore {
    pub dataset_id: String,
    pub kind: String,
    pub identity: Value,
    pub locator: Value,
    /// The object key it was created for.
    pub key: String,
    /// The bookmark it was created on: its branch is one this clone can
    /// account for when `gc --delete-stores` judges the store.
    #[serde(default)]
    pub bookmark: Option<String>,
    pub at: String,
}

/// A store this clone forked a branch in or pinned (the Python reference's
/// `TouchedStore`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TouchedStore {
    pub dataset_id: String,
    pub kind: String,
    pub identity: Value,
    pub locator: Value,
    pub key: String,
    pub at: String,
}

/// What makes two records of an index the same entry.
fn identity_of(file: &str, record: &Value) -> Option<String> {
    let field = |name: &str| record.get(name).map(canonical::to_string);
    let dataset = field("dataset_id")?;
    match file {
        PINNED_FILENAME => Some(format!("{dataset}|{}", field("pin_id")?)),
        _ => Some(format!(
            "{dataset}|{}|{}",
            field("kind")?,
            field("identity").unwrap_or_default()
        )),
    }
}

/// The live entries of an index, oldest first: each added once, minus those
/// removed after.
fn fold(file: &str, records: Vec<Value>) -> Vec<Value> {
    let mut live: Vec<Option<Value>> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for record in records {
        let Some(id) = identity_of(file, &record) else {
            continue;
        };
        let removed = record.get("removed").and_then(Value::as_bool) == Some(true);
        match (removed, at.get(&id)) {
            (true, Some(&i)) => {
                live[i] = None;
                at.remove(&id);
            }
            (true, None) | (false, Some(_)) => {}
            (false, None) => {
                at.insert(id, live.len());
                live.push(Some(record));
            }
        }
    }
    live.into_iter().flatten().collect()
}

fn read_index(path: &Path, file: &str) -> Result<Vec<Value>, OplogError> {
    let records = jsonl::read(path).map_err(|e| OplogError::io(path, e))?;
    Ok(fold(file, records))
}

fn decode<T: serde::de::DeserializeOwned>(records: Vec<Value>) -> Vec<T> {
    records
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// Append the records of `new` whose identity is not on record yet; returns
/// how many were new. Always leaves the file existing.
fn add(path: &Path, file: &str, new: Vec<Value>) -> Result<usize, OplogError> {
    // The pin index grows with every commit that pins: when no pin id of
    // `new` occurs in it at all, none is on record, and the file need not
    // be parsed.
    let mut known: std::collections::HashSet<String> =
        if file == PINNED_FILENAME && !any_pin_id_occurs(path, &new)? {
            Default::default()
        } else {
            read_index(path, file)?
                .iter()
                .filter_map(|r| identity_of(file, r))
                .collect()
        };
    let fresh: Vec<Value> = new
        .into_iter()
        .filter(|r| identity_of(file, r).is_some_and(|id| known.insert(id)))
        .collect();
    jsonl::append_all(path, &fresh).map_err(|e| OplogError::io(path, e))?;
    if !fresh.is_empty() {
        crate::fault::point("index.add");
    }
    Ok(fresh.len())
}

/// Whether the index at `path` may hold a record of one of `new`'s pin ids:
/// whether any `"pin_id"` in it (at any depth, in any record) is followed by
/// one of those ids as a plain JSON string. Only a `false` is sure (no such
/// record); an id with an escape in it, or a file that is not there or not
/// readable as bytes, answers `true` for the full read to decide.
///
/// The index grows with every pin a clone makes (a few hundred bytes each):
/// it is read in chunks of whole lines, never whole, so a long history costs
/// this check a read of the file and no memory to hold it.
fn any_pin_id_occurs(path: &Path, new: &[Value]) -> Result<bool, OplogError> {
    let mut ids = std::collections::HashSet::new();
    for record in new {
        match record.get("pin_id").and_then(Value::as_str) {
            Some(id) if !id.contains(['"', '\\']) => ids.insert(id.as_bytes()),
            _ => return Ok(true),
        };
    }
    let file = match crate::model::fsutil::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(_) => return Ok(true),
    };
    scan_lines(file, SCAN_CHUNK, |lines| mentions_any(lines, &ids))
        .map_err(|e| OplogError::io(path, e))
}

/// How much of the pin index [`any_pin_id_occurs`] reads at a time.
const SCAN_CHUNK: usize = 1 << 20;

/// Feed `found` what `reader` holds, in pieces of whole lines of about
/// `chunk` bytes (a longer line whole, the text after the last newline
/// last), until it answers `true`; `false` when none did.
fn scan_lines(
    mut reader: impl std::io::Read,
    chunk: usize,
    mut found: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<bool> {
    let mut buf = vec![0u8; chunk.max(1)];
    let mut len = 0;
    loop {
        if len == buf.len() {
            // A line longer than the buffer: read on until it ends.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match reader.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n;
        let end = if n == 0 {
            len
        } else {
            match memchr::memrchr(b'\n', &buf[..len]) {
                Some(i) => i + 1,
                None => continue,
            }
        };
        if found(&buf[..end]) {
            return Ok(true);
        }
        if n == 0 {
            return Ok(false);
        }
        buf.copy_within(end..len, 0);
        len -= end;
    }
}

/// Whether `bytes` (whole lines of the pin index) may name one of `ids`
/// (see [`any_pin_id_occurs`]).
fn mentions_any(bytes: &[u8], ids: &std::collections::HashSet<&[u8]>) -> bool {
    const FIELD: &[u8] = b"\"pin_id\"";
    for at in memchr::memmem::find_iter(bytes, FIELD) {
        let rest = trim_json_space(&bytes[at + FIELD.len()..]);
        let Some(rest) = rest.strip_prefix(b":") else {
            // The piece ends before the value: not sure.
            if rest.is_empty() {
                return true;
            }
            continue;
        };
        let rest = trim_json_space(rest);
        let Some(value) = rest.strip_prefix(b"\"") else {
            if rest.is_empty() {
                return true;
            }
            continue;
        };
        let Some(end) = memchr::memchr2(b'"', b'\\', value) else {
            return true;
        };
        if value[end] == b'\\' || ids.contains(&value[..end]) {
            return true;
        }
    }
    false
}

fn trim_json_space(bytes: &[u8]) -> &[u8] {
    let n = bytes
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count();
    &bytes[n..]
}

/// Append removal records for the entries `gone` identifies that are on record.
fn remove(path: &Path, file: &str, gone: Vec<Value>) -> Result<usize, OplogError> {
    let live: std::collections::HashSet<String> = read_index(path, file)?
        .iter()
        .filter_map(|r| identity_of(file, r))
        .collect();
    let at = now();
    let marks: Vec<Value> = gone
        .into_iter()
        .filter(|r| identity_of(file, r).is_some_and(|id| live.contains(&id)))
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                o.insert("removed".into(), Value::Bool(true));
                o.insert("at".into(), json!(at));
            }
            r
        })
        .collect();
    if marks.is_empty() {
        return Ok(0);
    }
    jsonl::append_all(path, &marks).map_err(|e| OplogError::io(path, e))?;
    crate::fault::point("index.remove");
    Ok(marks.len())
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Whether the pin index exists: a `gc` seeds it from the op logs first.
pub fn pinned_seeded(shared_dir: &Path) -> bool {
    pinned_path(shared_dir).exists()
}

/// Record pins this clone just created; an id already on record is not
/// written again. Creates the index even for no pins (it is then seeded).
/// Returns how many were new.
pub fn append_pinned(shared_dir: &Path, pins: &[PinnedPin]) -> Result<usize, OplogError> {
    let path = pinned_path(shared_dir);
    add(&path, PINNED_FILENAME, pins.iter().map(to_value).collect())
}

/// The pins on record for `dataset_id`, oldest first.
pub fn read_pinned(shared_dir: &Path, dataset_id: &str) -> Result<Vec<PinnedPin>, OplogError> {
    let all: Vec<PinnedPin> = decode(read_index(&pinned_path(shared_dir), PINNED_FILENAME)?);
    Ok(all
        .into_iter()
        .filter(|p| p.dataset_id == dataset_id)
        .collect())
}

/// Forget pins this clone released, so another clone creating one again
/// under the same content-addressed id owns it.
pub fn remove_pinned(
    shared_dir: &Path,
    dataset_id: &str,
    pin_ids: &[&str],
) -> Result<usize, OplogError> {
    let gone = pin_ids
        .iter()
        .map(|p| json!({"dataset_id": dataset_id, "pin_id": p}))
        .collect();
    remove(&pinned_path(shared_dir), PINNED_FILENAME, gone)
}

/// Record a store `add --create` made; returns whether it was new.
pub fn append_created(shared_dir: &Path, store: &CreatedStore) -> Result<bool, OplogError> {
    let path = created_path(shared_dir);
    Ok(add(&path, CREATED_FILENAME, vec![to_value(store)])? == 1)
}

/// The created stores on record (optionally one dataset's), oldest first.
pub fn read_created(
    shared_dir: &Path,
    dataset_id: Option<&str>,
) -> Result<Vec<CreatedStore>, OplogError> {
    read_stores(
        &created_path(shared_dir),
        CREATED_FILENAME,
        dataset_id,
        |s: &CreatedStore| &s.dataset_id,
    )
}

/// Forget a created store (`forget-store`, or after `delete-store`).
pub fn remove_created(
    shared_dir: &Path,
    dataset_id: &str,
    kind: &str,
    identity: &Value,
) -> Result<bool, OplogError> {
    remove_store(
        &created_path(shared_dir),
        CREATED_FILENAME,
        dataset_id,
        kind,
        identity,
    )
}

/// Record a store this clone just wrote a ref into; returns whether it was new.
pub fn append_touched(shared_dir: &Path, store: &TouchedStore) -> Result<bool, OplogError> {
    let path = touched_path(shared_dir);
    Ok(add(&path, TOUCHED_FILENAME, vec![to_value(store)])? == 1)
}

/// The touched stores on record (optionally one dataset's), oldest first.
pub fn read_touched(
    shared_dir: &Path,
    dataset_id: Option<&str>,
) -> Result<Vec<TouchedStore>, OplogError> {
    read_stores(
        &touched_path(shared_dir),
        TOUCHED_FILENAME,
        dataset_id,
        |s: &TouchedStore| &s.dataset_id,
    )
}

/// Forget a touched store (`forget-touched`: nothing of the dataset's is left).
pub fn remove_touched(
    shared_dir: &Path,
    dataset_id: &str,
    kind: &str,
    identity: &Value,
) -> Result<bool, OplogError> {
    remove_store(
        &touched_path(shared_dir),
        TOUCHED_FILENAME,
        dataset_id,
        kind,
        identity,
    )
}

/// The live records of a store index, optionally only one dataset's.
fn read_stores<T: serde::de::DeserializeOwned>(
    path: &Path,
    file: &str,
    dataset_id: Option<&str>,
    dataset_of: impl Fn(&T) -> &String,
) -> Result<Vec<T>, OplogError> {
    let all: Vec<T> = decode(read_index(path, file)?);
    Ok(all
        .into_iter()
        .filter(|s| dataset_id.is_none_or(|d| dataset_of(s) == d))
        .collect())
}

/// Forget one store of a store index; whether it was there.
fn remove_store(
    path: &Path,
    file: &str,
    dataset_id: &str,
    kind: &str,
    identity: &Value,
) -> Result<bool, OplogError> {
    let gone = vec![store_id(dataset_id, kind, identity)];
    Ok(remove(path, file, gone)? == 1)
}

fn store_id(dataset_id: &str, kind: &str, identity: &Value) -> Value {
    let mut m = Map::new();
    m.insert("dataset_id".into(), json!(dataset_id));
    m.insert("kind".into(), json!(kind));
    m.insert("identity".into(), identity.clone());
    Value::Object(m)
}

/// Rewrite an index to its live entries (removal records and their targets
/// dropped). Optional housekeeping, under the repository lock.
pub fn compact(path: &Path) -> Result<(), OplogError> {
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default()
        .to_string();
    let live = read_index(path, &file)?;
    jsonl::rewrite(path, &live).map_err(|e| OplogError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(id: &str) -> PinnedPin {
        PinnedPin {
            dataset_id: "0a1b2c3d".into(),
            pin_id: format!("0a1b2c3d.{id}"),
            kind: "icechunk".into(),
            key: "zarr/imaging".into(),
            identity: json!({"uri": "s3://lab/imaging.icechunk"}),
            ref_name: Some(format!("tether.0a1b2c3d.{id}")),
            at: "2025-01-02T03:04:05Z".into(),
        }
    }

    fn touched(uri: &str) -> TouchedStore {
        TouchedStore {
            dataset_id: "0a1b2c3d".into(),
            kind: "git".into(),
            identity: json!({"path": uri}),
            locator: json!({"path": uri}),
            key: "code".into(),
            at: "2025-01-02T03:04:05Z".into(),
        }
    }

    #[test]
    fn pinned_is_a_set_seeded_by_its_presence() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!pinned_seeded(dir.path()));
        assert_eq!(append_pinned(dir.path(), &[]).unwrap(), 0);
        assert!(pinned_seeded(dir.path()));
        assert_eq!(
            append_pinned(dir.path(), &[pin("aa"), pin("bb")]).unwrap(),
            2
        );
        assert_eq!(
            append_pinned(dir.path(), &[pin("aa"), pin("cc")]).unwrap(),
            1
        );
        let ids: Vec<String> = read_pinned(dir.path(), "0a1b2c3d")
            .unwrap()
            .into_iter()
            .map(|p| p.pin_id)
            .collect();
        assert_eq!(ids, ["0a1b2c3d.aa", "0a1b2c3d.bb", "0a1b2c3d.cc"]);
        assert!(read_pinned(dir.path(), "ffffffff").unwrap().is_empty());

        assert_eq!(
            remove_pinned(dir.path(), "0a1b2c3d", &["0a1b2c3d.aa", "0a1b2c3d.zz"]).unwrap(),
            1
        );
        let ids: Vec<String> = read_pinned(dir.path(), "0a1b2c3d")
            .unwrap()
            .into_iter()
            .map(|p| p.pin_id)
            .collect();
        assert_eq!(ids, ["0a1b2c3d.bb", "0a1b2c3d.cc"]);
        // Created again after release: on record again.
        assert_eq!(append_pinned(dir.path(), &[pin("aa")]).unwrap(), 1);
        assert_eq!(read_pinned(dir.path(), "0a1b2c3d").unwrap().len(), 3);

        let path = pinned_path(dir.path());
        compact(&path).unwrap();
        assert_eq!(jsonl::read(&path).unwrap().len(), 3);
        assert_eq!(read_pinned(dir.path(), "0a1b2c3d").unwrap().len(), 3);
    }

    /// The index is scanned in pieces of whole lines: an id is found
    /// wherever the pieces fall (here every size from one byte to past the
    /// file), and a line longer than a piece is read whole.
    #[test]
    fn the_pin_index_scan_finds_an_id_across_piece_boundaries() {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!(
                "{{\"dataset_id\":\"0a1b2c3d\",\"pin_id\":\"0a1b2c3d.{i:02}\",\"kind\":\"memory\"}}\n"
            ));
        }
        // A last line with no newline (a torn append) still counts.
        text.push_str("{\"pin_id\":\"0a1b2c3d.zz\"");
        let ids = |id: &str| -> std::collections::HashSet<Vec<u8>> {
            [format!("0a1b2c3d.{id}").into_bytes()].into()
        };
        for chunk in 1..text.len() + 8 {
            for (id, there) in [
                ("00", true),
                ("17", true),
                ("39", true),
                ("zz", true),
                ("40", false),
            ] {
                let want = ids(id);
                let want: std::collections::HashSet<&[u8]> =
                    want.iter().map(Vec::as_slice).collect();
                let mut pieces = 0;
                let found = scan_lines(text.as_bytes(), chunk, |lines| {
                    pieces += 1;
                    mentions_any(lines, &want)
                })
                .unwrap();
                assert_eq!(found, there, "{id} with pieces of {chunk}");
                if !there && chunk >= text.len() {
                    assert!(pieces <= 2, "{pieces} pieces of {chunk}");
                }
            }
        }
        // A field whose value a piece cuts off is not a sure "no".
        let want: std::collections::HashSet<&[u8]> = [b"x".as_slice()].into();
        assert!(mentions_any(b"{\"pin_id\"", &want));
        assert!(mentions_any(b"{\"pin_id\": ", &want));
        assert!(!mentions_any(b"{\"pin_id\": 3}", &want));
    }

    #[test]
    fn the_pin_index_is_parsed_only_when_a_new_pin_id_occurs_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = pinned_path(dir.path());
        let values = |pins: &[PinnedPin]| pins.iter().map(to_value).collect::<Vec<_>>();
        // No index yet: nothing is on record.
        assert!(!any_pin_id_occurs(&path, &values(&[pin("aa")])).unwrap());
        // Records as another writer might have spaced them, another
        // dataset's, a removal, and a torn line.
        std::fs::write(
            &path,
            concat!(
                "{\"dataset_id\": \"0a1b2c3d\", \"pin_id\" :\t\"0a1b2c3d.aa\", \"kind\": \"icechunk\"}\n",
                "{\"dataset_id\":\"ffffffff\",\"pin_id\":\"0a1b2c3d.bb\"}\n",
                "{\"dataset_id\":\"0a1b2c3d\",\"pin_id\":\"0a1b2c3d.cc\",\"removed\":false}\n",
                "{\"dataset_id\":\"0a1b2c3d\",\"pin_id\":\"0a1b2c3d.dd\",\"removed\":true}\n",
                "{\"dataset_id\":\"0a1b2c3d\",\"pin_i",
            ),
        )
        .unwrap();
        let occurs = |ids: &[&str]| {
            let pins: Vec<PinnedPin> = ids.iter().map(|i| pin(i)).collect();
            any_pin_id_occurs(&path, &values(&pins)).unwrap()
        };
        assert!(!occurs(&["ee", "ff"]));
        for id in ["aa", "bb", "cc", "dd"] {
            assert!(occurs(&["ee", id]), "{id}");
        }
        // An id that would need an escape is left to the full read.
        let mut odd = pin("ee");
        odd.pin_id = "0a1b2c3d.\"e".into();
        assert!(any_pin_id_occurs(&path, &values(&[odd])).unwrap());

        // The answers are those of the full read, whichever way they came.
        std::fs::write(
            &path,
            std::fs::read(&path)
                .unwrap()
                .strip_suffix(b"{\"dataset_id\":\"0a1b2c3d\",\"pin_i")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            append_pinned(dir.path(), &[pin("ee"), pin("ee"), pin("ff")]).unwrap(),
            2
        );
        assert_eq!(
            append_pinned(dir.path(), &[pin("aa"), pin("gg")]).unwrap(),
            1
        );
        assert_eq!(append_pinned(dir.path(), &[pin("bb")]).unwrap(), 1);
        assert_eq!(append_pinned(dir.path(), &[pin("dd")]).unwrap(), 1);
        assert_eq!(append_pinned(dir.path(), &[pin("cc")]).unwrap(), 0);
        // (The hand-written records lack fields a pin needs: only the
        // appended ones read back.)
        let ids: Vec<String> = read_pinned(dir.path(), "0a1b2c3d")
            .unwrap()
            .into_iter()
            .map(|p| p.pin_id)
            .collect();
        assert_eq!(
            ids,
            ["ee", "ff", "gg", "bb", "dd"].map(|i| format!("0a1b2c3d.{i}"))
        );
    }

    #[test]
    fn touched_and_created_dedupe_by_identity() {
        let dir = tempfile::tempdir().unwrap();
        assert!(append_touched(dir.path(), &touched("/a")).unwrap());
        let mut again = touched("/a");
        again.key = "other".into();
        assert!(!append_touched(dir.path(), &again).unwrap());
        assert!(append_touched(dir.path(), &touched("/b")).unwrap());
        assert_eq!(read_touched(dir.path(), None).unwrap().len(), 2);
        assert!(remove_touched(dir.path(), "0a1b2c3d", "git", &json!({"path": "/a"})).unwrap());
        let left = read_touched(dir.path(), Some("0a1b2c3d")).unwrap();
        assert_eq!(left, vec![touched("/b")]);

        let created = CreatedStore {
            dataset_id: "0a1b2c3d".into(),
            kind: "file".into(),
            identity: json!({"uri": "/data/x"}),
            locator: json!({"uri": "/data/x"}),
            key: "x".into(),
            bookmark: Some("probe".into()),
            at: "2025-01-02T03:04:05Z".into(),
        };
        assert!(append_created(dir.path(), &created).unwrap());
        assert!(!append_created(dir.path(), &created).unwrap());
        assert_eq!(
            read_created(dir.path(), None).unwrap(),
            vec![created.clone()]
        );
        assert!(
            remove_created(dir.path(), "0a1b2c3d", "file", &json!({"uri": "/data/x"})).unwrap()
        );
        assert!(read_created(dir.path(), None).unwrap().is_empty());
    }
}
