//! Object manifests: `.tether/objects/<key>.toml`, one per object, committed.
//!
//! ```toml
//! kind = "icechunk"
//! recoverable = true
//! captured_at = "2026-09-04T22:10:03.118Z"
//!
//! [locator]
//! branch = "main"
//! uri = "s3://lab/greetings.icechunk"
//!
//! [policy]
//! file = "immutable"
//! pin = "native"
//!
//! [state]
//! snapshot_id = "K3F7Q2ZJ1XN4Y8W0"
//!
//! [pin]
//! id = "0a1b2c3d.e7a279c1973a37ef"
//! ref = "tether.0a1b2c3d.e7a279c1973a37ef"
//! ```
//!
//! The key is the file's path under `objects/`, never a field, so a file
//! cannot claim another object's key; it is validated on every read
//! (`model::key`). `state`, `pin` and `captured_at` are absent until the first
//! commit; `pin` stays absent for recorded (`pin = "record"`, Addressable or
//! Observed) states. `origin` is written only when it is `"created"`
//! (`add --create`); absent means adopted. `[pin] created = false` is written
//! only when a commit found the ref already there. Locators and states are
//! JSON stored through `model::toml_json`.
//!
//! The JSON form of a manifest ([`Manifest::to_json`]) is exactly what the
//! file holds, read through that mapping: it is what `manifest_hash` digests.
//! Writing is deterministic (sections in a fixed order, keys sorted inside
//! each) and atomic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::display::quote;
use super::error::{ModelError, Result};
use super::fsutil;
use super::ids;
use super::key::validate_key;
use super::layout::{nested_repository, special_file};
use super::policy::Policy;
use super::time::parse_timestamp;
use super::toml_json::{self, strip_nulls_map};

/// A locator or a state: a JSON object.
pub type JsonMap = Map<String, Value>;

/// Where an object came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// Registered by `add` (the default; not written).
    #[default]
    Adopted,
    /// Made by `add --create`.
    Created,
}

impl Origin {
    /// The spelling in files and `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Adopted => "adopted",
            Origin::Created => "created",
        }
    }
}

/// A durable native ref made for a committed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// `<dataset_id>.<h16>`.
    pub id: String,
    /// `tether.<pin_id>` or a later generation `tether.<pin_id>.N`.
    pub r#ref: String,
    /// Whether the commit made the ref (false: it found it already there).
    pub created: bool,
}

impl Pin {
    /// The pin of `pin_id` at generation 1, created by this commit.
    pub fn new(pin_id: &str) -> Pin {
        Pin {
            id: pin_id.to_string(),
            r#ref: ids::ref_for_pin(pin_id),
            created: true,
        }
    }
}

/// One object's committed record.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The backend kind.
    pub kind: String,
    /// Where the object is; the backend's own fields.
    pub locator: JsonMap,
    /// `file` and `pin` policy.
    pub policy: Policy,
    /// The committed state (`None` before the first commit).
    pub state: Option<JsonMap>,
    /// The native ref holding the state (`None` when recorded or uncommitted).
    pub pin: Option<Pin>,
    /// False for Observed states that cannot be read back later.
    pub recoverable: bool,
    /// When the state was captured, `2026-09-04T22:10:03.118Z`.
    pub captured_at: Option<String>,
    /// Whether `add --create` made the store.
    pub origin: Origin,
}

impl Manifest {
    /// A freshly added, uncommitted object. `null` locator members are
    /// dropped (see `model::toml_json`).
    pub fn new(kind: &str, locator: JsonMap, policy: Policy) -> Manifest {
        Manifest {
            kind: kind.to_string(),
            locator: strip_nulls_map(&locator),
            policy,
            state: None,
            pin: None,
            recoverable: true,
            captured_at: None,
            origin: Origin::Adopted,
        }
    }

    /// Whether the object has been committed at least once.
    pub fn is_committed(&self) -> bool {
        self.state.is_some()
    }

    /// The JSON form: what the file holds, field for field. Absent fields
    /// are left out (never `null`), so the form is the file's.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(self.kind.clone()));
        m.insert(
            "locator".into(),
            Value::Object(strip_nulls_map(&self.locator)),
        );
        let mut policy = Map::new();
        policy.insert("file".into(), self.policy.file.as_str().into());
        policy.insert("pin".into(), self.policy.pin.as_str().into());
        m.insert("policy".into(), Value::Object(policy));
        if let Some(state) = &self.state {
            m.insert("state".into(), Value::Object(strip_nulls_map(state)));
        }
        if let Some(pin) = &self.pin {
            let mut p = Map::new();
            p.insert("id".into(), pin.id.clone().into());
            p.insert("ref".into(), pin.r#ref.clone().into());
            if !pin.created {
                p.insert("created".into(), false.into());
            }
            m.insert("pin".into(), Value::Object(p));
        }
        m.insert("recoverable".into(), self.recoverable.into());
        if let Some(at) = &self.captured_at {
            m.insert("captured_at".into(), at.clone().into());
        }
        if self.origin == Origin::Created {
            m.insert("origin".into(), "created".into());
        }
        Value::Object(m)
    }

    /// The file's text. `key` only names the object in errors.
    pub fn to_toml_string(&self, key: &str) -> Result<String> {
        let Value::Object(json) = self.to_json() else {
            unreachable!("to_json builds an object")
        };
        let table =
            toml_json::json_map_to_table(&json).map_err(|m| ModelError::Unrepresentable {
                what: format!("manifest of {key:?}"),
                message: m,
            })?;
        // Scalars first, in a fixed reading order, then each section.
        toml_json::write_document(
            &table,
            &["kind", "recoverable", "captured_at", "origin"],
            &["locator", "policy", "state", "pin"],
        )
        .map_err(|m| ModelError::Unrepresentable {
            what: format!("manifest of {key:?}"),
            message: m,
        })
    }

    /// Parse a manifest's text; `key` is the object's key (from the file's
    /// path) and `file` names it in errors.
    pub fn parse(text: &str, key: &str, file: &Path) -> Result<Manifest> {
        validate_key(key)?;
        let bad = |m: String| ModelError::invalid(file, m);
        let table: toml::Table = toml_json::parse_table(text).map_err(bad)?;
        let json = toml_json::table_to_json_map(&table).map_err(bad)?;
        Manifest::from_json(&json)
            .map_err(|m| ModelError::invalid(file, format!("object {key:?}: {m}")))
    }

    /// Validate and build a manifest from its JSON form.
    pub fn from_json(json: &JsonMap) -> Result<Manifest, String> {
        if let Some(k) = json.keys().find(|k| {
            !matches!(
                k.as_str(),
                "kind"
                    | "locator"
                    | "policy"
                    | "state"
                    | "pin"
                    | "recoverable"
                    | "captured_at"
                    | "origin"
            )
        }) {
            return Err(format!(
                "unknown field `{}`; a manifest holds kind, locator, policy, state, pin, recoverable, captured_at and origin",
                quote(k)
            ));
        }
        let kind = match json.get("kind") {
            Some(Value::String(s)) if is_kind(s) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "`kind` {} is not a backend kind (at most {MAX_KIND_LEN} lowercase letters, digits, '-', '_')",
                    shown(other)
                ));
            }
            None => return Err("`kind` is missing".into()),
        };
        let locator = match json.get("locator") {
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err("`locator` must be a table ([locator])".into()),
            None => return Err("`locator` is missing ([locator])".into()),
        };
        let mut policy = Policy::default();
        match json.get("policy") {
            None => {}
            Some(Value::Object(p)) => {
                for (k, v) in p {
                    match (k.as_str(), v) {
                        ("file", Value::String(s)) => {
                            policy.file = s.parse().map_err(|_| {
                                format!(
                                    "[policy] file {} is not \"immutable\" or \"versioned\"",
                                    shown(v)
                                )
                            })?
                        }
                        ("pin", Value::String(s)) => {
                            policy.pin = s.parse().map_err(|_| {
                                format!("[policy] pin {} is not \"native\" or \"record\"", shown(v))
                            })?
                        }
                        // Manifests from before 0.1.0a9 carry `write`; it is
                        // read and ignored (`upgrade` drops it).
                        ("write", _) => {}
                        _ => {
                            return Err(format!(
                                "[policy] {} = {} is not a policy field (file, pin)",
                                quote(k),
                                shown(v)
                            ));
                        }
                    }
                }
            }
            Some(_) => return Err("`policy` must be a table ([policy])".into()),
        }
        let state = match json.get("state") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => return Err("`state` must be a table ([state])".into()),
        };
        let pin = match json.get("pin") {
            None => None,
            Some(Value::Object(p)) => Some(parse_pin(p)?),
            Some(_) => return Err("`pin` must be a table ([pin])".into()),
        };
        if pin.is_some() && state.is_none() {
            return Err("has a [pin] but no [state]: a pin holds a committed state".into());
        }
        let recoverable = match json.get("recoverable") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(format!(
                    "`recoverable` must be true or false, not {}",
                    shown(other)
                ));
            }
        };
        let captured_at = match json.get("captured_at") {
            None => None,
            Some(Value::String(s)) => {
                parse_timestamp(s).map_err(|_| {
                    format!(
                        "`captured_at` {} is not an RFC 3339 timestamp like \"2026-09-04T22:10:03.118Z\"",
                        shown(&Value::String(s.clone()))
                    )
                })?;
                Some(s.clone())
            }
            Some(other) => {
                return Err(format!(
                    "`captured_at` must be a timestamp string, not {}",
                    shown(other)
                ));
            }
        };
        let origin = match json.get("origin") {
            None => Origin::Adopted,
            Some(Value::String(s)) if s == "created" => Origin::Created,
            Some(Value::String(s)) if s == "adopted" => Origin::Adopted,
            Some(other) => {
                return Err(format!(
                    "`origin` is {}; the only value written is \"created\"",
                    shown(other)
                ));
            }
        };
        Ok(Manifest {
            kind,
            locator,
            policy,
            state,
            pin,
            recoverable,
            captured_at,
            origin,
        })
    }
}

/// A value from the file as an error shows it: JSON, escaped, at most an
/// excerpt (a clone's manifest may hold anything, of any length).
fn shown(v: &Value) -> String {
    quote(&v.to_string())
}

/// The longest backend kind: a name, not data (plugins' descriptors are
/// held to the same bound).
pub const MAX_KIND_LEN: usize = 64;

fn is_kind(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_KIND_LEN
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn parse_pin(p: &JsonMap) -> Result<Pin, String> {
    let mut id = None;
    let mut r#ref = None;
    let mut created = true;
    for (k, v) in p {
        match (k.as_str(), v) {
            ("id", Value::String(s)) => id = Some(s.clone()),
            ("ref", Value::String(s)) => r#ref = Some(s.clone()),
            ("created", Value::Bool(b)) => created = *b,
            _ => {
                return Err(format!(
                    "[pin] {} = {} is not a pin field (id, ref, created)",
                    quote(k),
                    shown(v)
                ));
            }
        }
    }
    let id = id.ok_or("[pin] id is missing")?;
    let r#ref = r#ref.ok_or("[pin] ref is missing")?;
    if ids::parse_pin_id(&id).is_none() {
        return Err(format!(
            "[pin] id {} is not a pin id (<8 hex dataset id>.<16 hex>)",
            shown(&Value::String(id))
        ));
    }
    // The ref must be this pin's own name, so a manifest cannot make `gc`
    // or `verify` treat some other ref as this object's pin.
    match ids::parse_pin_ref(&r#ref) {
        Some(parsed) if parsed.pin_id() == id => {}
        _ => {
            return Err(format!(
                "[pin] ref {} is not tether.{id} or one of its generations (.2 … .1000)",
                shown(&Value::String(r#ref))
            ));
        }
    }
    Ok(Pin { id, r#ref, created })
}

/// `.tether/objects/<key>.toml` under `objects_dir`.
pub fn manifest_path(objects_dir: &Path, key: &str) -> PathBuf {
    let mut p = objects_dir.to_path_buf();
    let mut segs = key.split('/').peekable();
    while let Some(seg) = segs.next() {
        if segs.peek().is_none() {
            p.push(format!("{seg}.toml"));
        } else {
            p.push(seg);
        }
    }
    p
}

/// Refuse when a directory between `base` and `path` is a symlink: the
/// checkout's files came with the clone, and a linked directory would send a
/// write outside `.tether/`.
fn check_no_linked_dirs(base: &Path, path: &Path) -> Result<()> {
    let Ok(rel) = path.strip_prefix(base) else {
        return Ok(());
    };
    let mut at = base.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(md) if md.file_type().is_symlink() => {
                return Err(ModelError::invalid(
                    &at,
                    "is a symbolic link; tether writes manifests only into real directories under .tether/objects/ (remove the link)",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether object `key` has a manifest: anything at its path counts (a
/// link or a directory there is refused, as [`read_all`] refuses it). Reads
/// no other manifest, so `add` costs the same in a dataset of any size.
pub fn manifest_exists(objects_dir: &Path, key: &str) -> Result<bool> {
    validate_key(key)?;
    let path = manifest_path(objects_dir, key);
    check_no_linked_dirs(objects_dir, &path)?;
    match std::fs::symlink_metadata(&path) {
        Ok(md) if md.file_type().is_file() => Ok(true),
        Ok(md) if md.file_type().is_symlink() => Err(fsutil::linked(&path)),
        Ok(_) => Err(ModelError::invalid(
            fsutil::shown(&path),
            "is not a regular file; a manifest is one (remove it)",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        // A file where one of the key's directories should be: no manifest
        // of this key (writing one fails, naming that file).
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(false),
        Err(e) => Err(ModelError::io(&path, e)),
    }
}

/// Read one object's manifest.
pub fn read_manifest(objects_dir: &Path, key: &str) -> Result<Manifest> {
    validate_key(key)?;
    let path = manifest_path(objects_dir, key);
    check_no_linked_dirs(objects_dir, &path)?;
    read_manifest_file(&path, key)
}

/// The largest manifest file read. A manifest is a few hundred bytes of
/// TOML; the bound keeps a clone's giant file from being read whole.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Parse the manifest of `key` at `path`: opened without following a link,
/// only a regular file, at most [`MAX_MANIFEST_BYTES`]. `check_dot_dir` does
/// not walk `objects/`, so this is where its files are checked.
fn read_manifest_file(path: &Path, key: &str) -> Result<Manifest> {
    let bytes = fsutil::read_nofollow_bounded(path, MAX_MANIFEST_BYTES).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            ModelError::invalid(
                fsutil::shown(path),
                format!(
                    "is larger than {MAX_MANIFEST_BYTES} bytes, far more than a manifest holds: \
                     restore it from the VCS or remove it"
                ),
            )
        } else {
            fsutil::io_error(path, e)
        }
    })?;
    PARSED.parse(path, fsutil::utf8(path, bytes)?, |text| {
        Manifest::parse(text, key, path)
    })
}

/// Manifests as last read: a commit reads every one in its plan and again
/// under its lock, and parsing is most of a read.
static PARSED: fsutil::ParseMemo<Manifest> = fsutil::ParseMemo::new(1 << 17);

/// Write one object's manifest atomically.
pub fn write_manifest(objects_dir: &Path, key: &str, manifest: &Manifest) -> Result<()> {
    validate_key(key)?;
    let path = manifest_path(objects_dir, key);
    let text = manifest.to_toml_string(key)?;
    check_no_linked_dirs(objects_dir, &path)?;
    fsutil::write_atomic(&path, text.as_bytes())
}

/// Stage one object's manifest in `batch` (see `fsutil::AtomicBatch`): the
/// checks and the text of [`write_manifest`], put in place with the batch.
pub fn stage_manifest(
    batch: &mut fsutil::AtomicBatch,
    objects_dir: &Path,
    key: &str,
    manifest: &Manifest,
) -> Result<()> {
    validate_key(key)?;
    let path = manifest_path(objects_dir, key);
    let text = manifest.to_toml_string(key)?;
    check_no_linked_dirs(objects_dir, &path)?;
    batch.stage(&path, text.as_bytes())
}

/// Write (`Some`) or delete (`None`) many manifests in one
/// [`fsutil::AtomicBatch`]: a number of syncs that does not grow with the
/// count (`import` writes thousands in one operation). The files it
/// replaces are kept in `spare_dir` for the next batch
/// ([`fsutil::AtomicBatch::recycling`]).
pub fn write_manifests(
    objects_dir: &Path,
    spare_dir: &Path,
    writes: &[(String, Option<Manifest>)],
) -> Result<()> {
    let mut batch = fsutil::AtomicBatch::recycling(spare_dir.to_path_buf());
    for (key, m) in writes {
        match m {
            Some(m) => stage_manifest(&mut batch, objects_dir, key, m)?,
            None => remove_manifest(objects_dir, key)?,
        }
    }
    batch.commit(|_| {})
}

/// Delete one object's manifest, and the directories it leaves empty below
/// `objects_dir`. A missing file is not an error.
pub fn remove_manifest(objects_dir: &Path, key: &str) -> Result<()> {
    validate_key(key)?;
    let path = manifest_path(objects_dir, key);
    check_no_linked_dirs(objects_dir, &path)?;
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ModelError::io(&path, e)),
    }
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == objects_dir || !d.starts_with(objects_dir) {
            break;
        }
        // Fails (and stops) at the first non-empty directory.
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// Every manifest under `objects_dir`, by key. A missing directory is an
/// empty dataset. Files not ending in `.toml` (and leftover temporary files)
/// are skipped; symbolic links are refused.
pub fn read_all(objects_dir: &Path) -> Result<BTreeMap<String, Manifest>> {
    let mut out = BTreeMap::new();
    if !objects_dir.exists() {
        return Ok(out);
    }
    // Found first (links and bad names refused before anything is read),
    // then read and parsed, on every core when there are many: parsing is
    // most of what a command over 10,000 objects spends before its first
    // plugin call.
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    walk(objects_dir, objects_dir, &mut |key, path| {
        found.push((key, path.to_path_buf()));
        Ok(())
    })?;
    // Counted by tests: a command reads every manifest a fixed number of
    // times, whatever their number.
    tracing::debug!(
        target: "tether::manifests",
        manifests = found.len(),
        "read every manifest"
    );
    let read = |(key, path): &(String, PathBuf)| read_manifest_file(path, key);
    let parsed: Vec<Result<Manifest>> = if found.len() < PARALLEL_READ_FROM {
        found.iter().map(read).collect()
    } else {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        let chunk = found.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = found
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().map(read).collect::<Vec<_>>()))
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a manifest reader panicked"))
                .collect()
        })
    };
    // The first failure in the order the directory listed them, as a read
    // one at a time would report it.
    for ((key, _), m) in found.into_iter().zip(parsed) {
        out.insert(key, m?);
    }
    Ok(out)
}

/// From how many manifests [`read_all`] parses on several threads: below
/// it, starting them costs more than it saves.
const PARALLEL_READ_FROM: usize = 512;

/// The keys [`read_all`] would return, from the file names alone (no
/// manifest is read or parsed), sorted.
pub fn keys(objects_dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if !objects_dir.exists() {
        return Ok(out);
    }
    walk(objects_dir, objects_dir, &mut |key, _| {
        validate_key(&key)?;
        out.push(key);
        Ok(())
    })?;
    out.sort();
    Ok(out)
}

/// Call `found(key, path)` for every manifest file under `dir` (`base` is
/// the objects directory the keys are relative to). `Layout::check_dot_dir`
/// does not walk `objects/`, so this walk refuses what it would have: a
/// link, a special file or a nested `.git`, anywhere below.
fn walk(base: &Path, dir: &Path, found: &mut dyn FnMut(String, &Path) -> Result<()>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ModelError::io(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| ModelError::io(&path, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(ModelError::invalid(
                &path,
                "file name is not UTF-8, so it cannot be an object key; rename or remove it",
            ));
        };
        if name == ".git" {
            return Err(nested_repository(&path));
        }
        if ft.is_symlink() {
            return Err(ModelError::invalid(
                fsutil::shown(&path),
                "is a symbolic link; manifests must be regular files under .tether/objects/ (remove the link)",
            ));
        }
        if !ft.is_dir() && !ft.is_file() {
            return Err(special_file(&path));
        }
        if name.starts_with(fsutil::TEMP_PREFIX) {
            continue;
        }
        if ft.is_dir() {
            walk(base, &path, found)?;
        } else if let Some(stem) = name.strip_suffix(".toml") {
            let rel_dir = dir.strip_prefix(base).unwrap_or(Path::new(""));
            let mut key = String::new();
            for c in rel_dir.components() {
                key.push_str(&c.as_os_str().to_string_lossy());
                key.push('/');
            }
            key.push_str(stem);
            found(key, &path)?;
        }
    }
    Ok(())
}

/// The dataset's `manifest_hash` (12 hex): sha256 of the canonical JSON of
/// the key-sorted `[[key, manifest.to_json()], ...]` (`ids::manifest_hash_of`).
pub fn manifest_hash(manifests: &BTreeMap<String, Manifest>) -> String {
    ids::manifest_hash_of(manifests.iter().map(|(k, m)| (k.as_str(), m.to_json())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::policy::{FileMode, PinMode};
    use serde_json::json;

    fn obj(v: Value) -> JsonMap {
        let Value::Object(m) = v else { panic!() };
        m
    }

    fn committed() -> Manifest {
        let mut m = Manifest::new(
            "icechunk",
            obj(json!({"uri": "s3://lab/greetings.icechunk", "branch": "main", "region": null})),
            Policy::default(),
        );
        m.state = Some(obj(json!({"snapshot_id": "K3F7Q2ZJ1XN4Y8W0"})));
        m.pin = Some(Pin::new("0a1b2c3d.e7a279c1973a37ef"));
        m.captured_at = Some("2026-09-04T22:10:03.118Z".into());
        m
    }

    const COMMITTED: &str = r#"kind = "icechunk"
recoverable = true
captured_at = "2026-09-04T22:10:03.118Z"

[locator]
branch = "main"
uri = "s3://lab/greetings.icechunk"

[policy]
file = "immutable"
pin = "native"

[state]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[pin]
id = "0a1b2c3d.e7a279c1973a37ef"
ref = "tether.0a1b2c3d.e7a279c1973a37ef"
"#;

    #[test]
    fn fixed_text_and_round_trip() {
        let m = committed();
        let text = m.to_toml_string("greetings").unwrap();
        assert_eq!(text, COMMITTED);
        let back = Manifest::parse(&text, "greetings", Path::new("x")).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.to_toml_string("greetings").unwrap(), text);
    }

    #[test]
    fn uncommitted_created_and_nested() {
        let mut m = Manifest::new(
            "file",
            obj(json!({"uri": "/d/raw/", "opts": {"b": [1, 2.5, "x"], "a": {}}})),
            Policy {
                file: FileMode::Versioned,
                pin: PinMode::Record,
            },
        );
        m.origin = Origin::Created;
        m.recoverable = false;
        let text = m.to_toml_string("raw").unwrap();
        assert!(text.contains("origin = \"created\""), "{text}");
        assert!(
            !text.contains("[state]") && !text.contains("[pin]"),
            "{text}"
        );
        let back = Manifest::parse(&text, "raw", Path::new("x")).unwrap();
        assert_eq!(back, m);
        // An empty state is kept distinct from no state.
        m.state = Some(Map::new());
        let text = m.to_toml_string("raw").unwrap();
        assert_eq!(Manifest::parse(&text, "raw", Path::new("x")).unwrap(), m);
        // Unrepresentable values are refused, naming the object.
        m.state = Some(obj(json!({"xs": [null]})));
        let e = m.to_toml_string("raw").unwrap_err().to_string();
        assert!(
            e.contains("\"raw\"") && e.contains("`state.xs[0]` is null"),
            "{e}"
        );
    }

    #[test]
    fn reading_validates() {
        let f = Path::new("/d/.tether/objects/x.toml");
        for (text, needle) in [
            ("kind = \"file\"", "`locator` is missing"),
            ("[locator]\nuri = \"/x\"", "`kind` is missing"),
            ("kind = \"File Kind\"\n[locator]", "not a backend kind"),
            (
                "kind = \"file\"\nmystery = 1\n[locator]",
                "unknown field `mystery`",
            ),
            (
                "kind = \"file\"\n[locator]\n[policy]\nfile = \"mutable\"",
                "\"mutable\"",
            ),
            (
                "kind = \"file\"\n[locator]\n[state]\n[pin]\nid = \"x\"\nref = \"y\"",
                "not a pin id",
            ),
            (
                "kind = \"file\"\n[locator]\n[state]\n[pin]\nid = \"0a1b2c3d.e7a279c1973a37ef\"\nref = \"refs/heads/main\"",
                "is not tether.0a1b2c3d.e7a279c1973a37ef",
            ),
            (
                "kind = \"file\"\n[locator]\n[pin]\nid = \"0a1b2c3d.e7a279c1973a37ef\"\nref = \"tether.0a1b2c3d.e7a279c1973a37ef\"",
                "no [state]",
            ),
            (
                "kind = \"file\"\ncaptured_at = \"noon\"\n[locator]",
                "RFC 3339",
            ),
            (
                "kind = \"file\"\norigin = \"stolen\"\n[locator]",
                "\"created\"",
            ),
            ("kind = ", "not valid TOML"),
        ] {
            let e = Manifest::parse(text, "x", f).unwrap_err().to_string();
            assert!(e.starts_with("/d/.tether/objects/x.toml: "), "{e}");
            assert!(e.contains(needle), "{text}: {e}");
        }
        // A generation is this pin's own ref; `write` is ignored.
        let ok = "kind = \"lance\"\n[locator]\n[policy]\nwrite = \"fork\"\n[state]\nversion = 3\n[pin]\nid = \"0a1b2c3d.e7a279c1973a37ef\"\nref = \"tether.0a1b2c3d.e7a279c1973a37ef.2\"\ncreated = false\n";
        let m = Manifest::parse(ok, "x", f).unwrap();
        assert!(!m.pin.as_ref().unwrap().created);
        assert!(
            Manifest::parse(ok, "../x", f)
                .unwrap_err()
                .to_string()
                .contains("'..'")
        );
    }

    #[test]
    fn files_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        assert!(read_all(&objects).unwrap().is_empty());
        let m = committed();
        write_manifest(&objects, "zarr/imaging", &m).unwrap();
        write_manifest(&objects, "greetings", &m).unwrap();
        assert_eq!(
            std::fs::read_to_string(objects.join("zarr/imaging.toml")).unwrap(),
            COMMITTED
        );
        assert_eq!(read_manifest(&objects, "zarr/imaging").unwrap(), m);
        std::fs::write(objects.join("README"), "not a manifest").unwrap();
        let all = read_all(&objects).unwrap();
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            ["greetings", "zarr/imaging"]
        );
        remove_manifest(&objects, "zarr/imaging").unwrap();
        assert!(!objects.join("zarr").exists());
        remove_manifest(&objects, "zarr/imaging").unwrap();
        assert!(write_manifest(&objects, "../evil", &m).is_err());

        // A bad key on disk is caught when read.
        std::fs::create_dir_all(objects.join("C:")).unwrap();
        std::fs::write(objects.join("C:/x.toml"), COMMITTED).unwrap();
        let e = read_all(&objects).unwrap_err().to_string();
        assert!(e.contains("drive letter"), "{e}");
        std::fs::remove_dir_all(objects.join("C:")).unwrap();

        #[cfg(unix)]
        {
            let outside = dir.path().join("outside");
            std::fs::create_dir(&outside).unwrap();
            std::os::unix::fs::symlink(&outside, objects.join("link")).unwrap();
            let e = write_manifest(&objects, "link/x", &m)
                .unwrap_err()
                .to_string();
            assert!(e.contains("symbolic link"), "{e}");
            assert!(!outside.join("x.toml").exists());
            assert!(
                read_all(&objects)
                    .unwrap_err()
                    .to_string()
                    .contains("symbolic link")
            );
        }
    }

    /// `check_dot_dir` does not walk `objects/`, so its readers refuse on
    /// their own what a clone could plant there: a link (to a file or a
    /// directory, at any depth, for `read_all`, `keys` and one read), a
    /// FIFO (whose read would wait forever), a nested `.git`, and a file
    /// too big to be a manifest. Nothing outside is read.
    #[cfg(unix)]
    #[test]
    fn readers_refuse_links_special_files_and_giants_in_objects() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("x.toml"), COMMITTED).unwrap();
        std::fs::write(outside.join("sub/y.toml"), COMMITTED).unwrap();
        write_manifest(&objects, "a/b/ok", &committed()).unwrap();
        let refused_by_all = |what: &str| {
            for e in [
                read_all(&objects).map(|_| ()).unwrap_err(),
                keys(&objects).map(|_| ()).unwrap_err(),
            ] {
                assert_eq!(e.class(), "ConfigError", "{e}");
                assert!(e.to_string().contains(what), "{what}: {e}");
            }
        };

        symlink(outside.join("x.toml"), objects.join("a/b/x.toml")).unwrap();
        refused_by_all("symbolic link");
        let e = read_manifest(&objects, "a/b/x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(objects.join("a/b/x.toml")).unwrap();

        symlink(outside.join("sub"), objects.join("a/sub")).unwrap();
        refused_by_all("symbolic link");
        let e = read_manifest(&objects, "a/sub/y").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(objects.join("a/sub")).unwrap();

        rustix::fs::mknodat(
            rustix::fs::CWD,
            objects.join("a/fifo.toml"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        refused_by_all("special file");
        let e = read_manifest(&objects, "a/fifo").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(objects.join("a/fifo.toml")).unwrap();

        std::fs::create_dir_all(objects.join("a/.git")).unwrap();
        refused_by_all("submodule");
        std::fs::remove_dir(objects.join("a/.git")).unwrap();

        let giant = format!("{COMMITTED}#{}\n", "x".repeat(MAX_MANIFEST_BYTES as usize));
        std::fs::write(objects.join("big.toml"), giant).unwrap();
        let e = read_all(&objects).unwrap_err().to_string();
        assert!(e.contains("big.toml: is larger than 1048576 bytes"), "{e}");
        std::fs::remove_file(objects.join("big.toml")).unwrap();

        assert_eq!(read_all(&objects).unwrap().len(), 1);
        assert_eq!(keys(&objects).unwrap(), ["a/b/ok"]);
    }

    #[test]
    fn many_manifests_are_read_on_several_threads_with_the_same_answers() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let m = committed();
        let n = super::PARALLEL_READ_FROM * 2 + 7;
        for i in 0..n {
            write_manifest(&objects, &format!("o{i:05}"), &m).unwrap();
        }
        let all = read_all(&objects).unwrap();
        assert_eq!(all.len(), n);
        assert!(all.values().all(|x| x == &m));
        let keys: Vec<&String> = all.keys().collect();
        assert_eq!(keys[0], "o00000");
        assert_eq!(keys[n - 1], &format!("o{:05}", n - 1));
        // One broken manifest among them fails the read, naming it.
        std::fs::write(objects.join("o00700.toml"), "kind = [").unwrap();
        let e = read_all(&objects).unwrap_err().to_string();
        assert!(e.contains("o00700"), "{e}");
    }

    #[test]
    fn manifest_hash_vector() {
        let mut all = BTreeMap::new();
        assert_eq!(manifest_hash(&all), "4f53cda18c2b");
        all.insert("greetings".to_string(), committed());
        let mut raw = Manifest::new("file", obj(json!({"uri": "/d/raw"})), Policy::default());
        raw.recoverable = false;
        all.insert("raw".to_string(), raw);
        assert_eq!(
            ids::manifest_hash_input(all.iter().map(|(k, m)| (k.as_str(), m.to_json()))),
            concat!(
                r#"[["greetings",{"captured_at":"2026-09-04T22:10:03.118Z","kind":"icechunk","#,
                r#""locator":{"branch":"main","uri":"s3://lab/greetings.icechunk"},"#,
                r#""pin":{"id":"0a1b2c3d.e7a279c1973a37ef","ref":"tether.0a1b2c3d.e7a279c1973a37ef"},"#,
                r#""policy":{"file":"immutable","pin":"native"},"recoverable":true,"#,
                r#""state":{"snapshot_id":"K3F7Q2ZJ1XN4Y8W0"}}],"#,
                r#"["raw",{"kind":"file","locator":{"uri":"/d/raw"},"policy":{"file":"immutable","pin":"native"},"recoverable":false}]]"#
            )
        );
        assert_eq!(manifest_hash(&all), "ea87262f3c7e");
    }
}
