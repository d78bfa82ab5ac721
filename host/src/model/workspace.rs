//! `.tether/workspace.toml`: this checkout's working state (per jj workspace
//! or git worktree; never committed).
//!
//! ```toml
//! workspace_id = "7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d"
//! bookmark = "relabel"                 # absent: read-only
//! last_snapshot_at = "2026-09-04T22:10:03.118Z"
//!
//! [working_refs]                       # branches that exist
//! "zarr/imaging" = "tether.ws.0a1b2c3d.relabel"
//!
//! [pending_forks]                      # decided by `new`, made on first writable open
//! "features" = "tether.ws.0a1b2c3d.relabel"
//!
//! [pending_resets."features"]          # the head `new` agreed to reset
//! version = 9
//!
//! [base_states."zarr/imaging"]         # committed state the working ref stands on
//! snapshot_id = "K3F7Q2ZJ1XN4Y8W0"
//!
//! [fork_points."zarr/imaging"]         # state the branch was forked from
//! snapshot_id = "K3F7Q2ZJ1XN4Y8W0"
//!
//! [last_snapshot."zarr/imaging"]       # what a plain `status` shows
//! snapshot_id = "K3F7Q2ZJ1XN4Y8W0"
//!
//! [last_snapshot_errors."db/metrics"]  # objects the last snapshot could not read
//! ref = ""                             # the branch it tried ("" = upstream)
//! error = "connection refused"
//!
//! [last_upstream."raw/labels"]         # on the trunk, an `--at` object's upstream head
//! snapshot_id = "9QW2Y4KX0M3N7B5T"
//! ```
//!
//! A missing file is a fresh state with a new workspace id; it is written on
//! the first save, so a read-only command leaves nothing behind. Every field
//! is re-read on each `open` (another process's `new` may have written it),
//! and writes are atomic. Empty maps are not written.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::error::{ModelError, Result};
use super::fsutil;
use super::ids;
use super::key::validate_key;
use super::time::parse_timestamp;
use super::toml_json;

/// A state: a JSON object.
pub type State = Map<String, Value>;

/// An object the last snapshot could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError {
    /// The branch it tried (empty for the upstream branch).
    pub r#ref: String,
    /// What went wrong.
    pub error: String,
}

/// The parsed `workspace.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceState {
    /// 32 lowercase hex; its first 8 name legacy branches and `recover-<id8>`.
    pub workspace_id: String,
    /// The bookmark this checkout works on; `None` is read-only.
    pub bookmark: Option<String>,
    /// When `last_snapshot` was taken.
    pub last_snapshot_at: Option<String>,
    /// Key → working ref that exists.
    pub working_refs: BTreeMap<String, String>,
    /// Key → branch `new` decided on but has not created yet.
    pub pending_forks: BTreeMap<String, String>,
    /// Key → the head `new` saw on an existing branch and agreed to reset.
    pub pending_resets: BTreeMap<String, State>,
    /// Key → the committed state the working ref corresponds to (stale check).
    pub base_states: BTreeMap<String, State>,
    /// Key → the state the working branch was forked from (for `promote`).
    pub fork_points: BTreeMap<String, State>,
    /// Key → the state the last snapshot read.
    pub last_snapshot: BTreeMap<String, State>,
    /// Key → why the last snapshot could not read it.
    pub last_snapshot_errors: BTreeMap<String, SnapshotError>,
    /// Key → the upstream head the last snapshot on the trunk read for an
    /// object pinned `--at` an older state: what `behind` compares with.
    pub last_upstream: BTreeMap<String, State>,
}

impl Default for WorkspaceState {
    fn default() -> Self {
        WorkspaceState::new()
    }
}

const SCALARS: &[&str] = &["workspace_id", "bookmark", "last_snapshot_at"];
const SECTIONS: &[&str] = &[
    "working_refs",
    "pending_forks",
    "pending_resets",
    "base_states",
    "fork_points",
    "last_snapshot",
    "last_snapshot_errors",
    "last_upstream",
];

/// `workspace.toml` as last read: a command reads it several times, and
/// with 10,000 objects it is 600 KB of TOML. (What a write wrote is parsed
/// again when read: a state does not always read back as itself, e.g. a
/// null member is left out.)
static PARSED: fsutil::ParseMemo<WorkspaceState> = fsutil::ParseMemo::new(16);

impl WorkspaceState {
    /// A fresh state with a new random workspace id, on no bookmark.
    pub fn new() -> WorkspaceState {
        WorkspaceState {
            workspace_id: ids::new_workspace_id(),
            bookmark: None,
            last_snapshot_at: None,
            working_refs: BTreeMap::new(),
            pending_forks: BTreeMap::new(),
            pending_resets: BTreeMap::new(),
            base_states: BTreeMap::new(),
            fork_points: BTreeMap::new(),
            last_snapshot: BTreeMap::new(),
            last_snapshot_errors: BTreeMap::new(),
            last_upstream: BTreeMap::new(),
        }
    }

    /// The short workspace id (first 8 hex).
    pub fn short_id(&self) -> &str {
        ids::workspace_short(&self.workspace_id)
    }

    /// Whether writes are refused (no bookmark).
    pub fn is_read_only(&self) -> bool {
        self.bookmark.is_none()
    }

    /// Read `path`; `None` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<WorkspaceState>> {
        match fsutil::read_optional(path)? {
            Some(text) => Ok(Some(
                PARSED.parse(path, text, |t| WorkspaceState::parse(t, path))?,
            )),
            None => Ok(None),
        }
    }

    /// Read `path`, or a fresh state (new id) when it does not exist yet.
    pub fn read_or_new(path: &Path) -> Result<WorkspaceState> {
        Ok(WorkspaceState::read(path)?.unwrap_or_default())
    }

    /// Write `path` atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        fsutil::write_atomic(path, self.to_toml_string()?.as_bytes())?;
        crate::fault::point("workspace.write");
        Ok(())
    }

    /// The JSON form (what the file holds).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("workspace_id".into(), self.workspace_id.clone().into());
        if let Some(b) = &self.bookmark {
            m.insert("bookmark".into(), b.clone().into());
        }
        if let Some(t) = &self.last_snapshot_at {
            m.insert("last_snapshot_at".into(), t.clone().into());
        }
        fn put<V: Clone + Into<Value>>(
            m: &mut Map<String, Value>,
            name: &str,
            map: &BTreeMap<String, V>,
        ) {
            if !map.is_empty() {
                let obj = map
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect();
                m.insert(name.into(), Value::Object(obj));
            }
        }
        put(&mut m, "working_refs", &self.working_refs);
        put(&mut m, "pending_forks", &self.pending_forks);
        let states = |map: &BTreeMap<String, State>| -> BTreeMap<String, Value> {
            map.iter()
                .map(|(k, v)| (k.clone(), Value::Object(v.clone())))
                .collect()
        };
        put(&mut m, "pending_resets", &states(&self.pending_resets));
        put(&mut m, "base_states", &states(&self.base_states));
        put(&mut m, "fork_points", &states(&self.fork_points));
        put(&mut m, "last_snapshot", &states(&self.last_snapshot));
        let errors: BTreeMap<String, Value> = self
            .last_snapshot_errors
            .iter()
            .map(|(k, e)| {
                let mut o = Map::new();
                o.insert("ref".into(), e.r#ref.clone().into());
                o.insert("error".into(), e.error.clone().into());
                (k.clone(), Value::Object(o))
            })
            .collect();
        put(&mut m, "last_snapshot_errors", &errors);
        put(&mut m, "last_upstream", &states(&self.last_upstream));
        Value::Object(m)
    }

    /// The file's text (deterministic).
    pub fn to_toml_string(&self) -> Result<String> {
        let Value::Object(json) = self.to_json() else {
            unreachable!("to_json builds an object")
        };
        let unrep = |m: String| ModelError::Unrepresentable {
            what: "workspace.toml".into(),
            message: m,
        };
        let table = toml_json::json_map_to_table(&json).map_err(unrep)?;
        toml_json::write_document(&table, SCALARS, SECTIONS).map_err(unrep)
    }

    /// Parse the file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<WorkspaceState> {
        let bad = |m: String| ModelError::invalid(file, m);
        let table: toml::Table = toml_json::parse_table(text).map_err(bad)?;
        let json = toml_json::table_to_json_map(&table).map_err(bad)?;
        from_json(&json).map_err(|m| {
            ModelError::invalid(
                file,
                format!("{m} (this file is tether's own; `tether new` rewrites it)"),
            )
        })
    }
}

fn from_json(json: &Map<String, Value>) -> Result<WorkspaceState, String> {
    if let Some(k) = json
        .keys()
        .find(|k| !SCALARS.contains(&k.as_str()) && !SECTIONS.contains(&k.as_str()))
    {
        return Err(format!("unknown field `{k}`"));
    }
    let string = |name: &str| -> Result<Option<String>, String> {
        match json.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{name}` must be a string")),
        }
    };
    let workspace_id = string("workspace_id")?.ok_or("`workspace_id` is missing")?;
    if !ids::is_workspace_id(&workspace_id) {
        return Err(format!(
            "`workspace_id` {workspace_id:?} is not 32 lowercase hex"
        ));
    }
    let bookmark = string("bookmark")?;
    if bookmark.as_deref().is_some_and(|b| b.trim().is_empty()) {
        return Err("`bookmark` is empty; leave it out for a read-only working copy".into());
    }
    let last_snapshot_at = string("last_snapshot_at")?;
    if let Some(t) = &last_snapshot_at {
        parse_timestamp(t).map_err(|m| format!("`last_snapshot_at`: {m}"))?;
    }
    let section = |name: &str| -> Result<Map<String, Value>, String> {
        match json.get(name) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => {
                for k in m.keys() {
                    validate_key(k).map_err(|e| format!("[{name}]: {e}"))?;
                }
                Ok(m.clone())
            }
            Some(_) => Err(format!("`{name}` must be a table ([{name}])")),
        }
    };
    let strings = |name: &str| -> Result<BTreeMap<String, String>, String> {
        section(name)?
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                _ => Err(format!("[{name}] {k:?} must be a ref name (a string)")),
            })
            .collect()
    };
    let states = |name: &str| -> Result<BTreeMap<String, State>, String> {
        section(name)?
            .into_iter()
            .map(|(k, v)| match v {
                Value::Object(s) => Ok((k, s)),
                _ => Err(format!("[{name}.{k:?}] must be a table (a state)")),
            })
            .collect()
    };
    let mut last_snapshot_errors = BTreeMap::new();
    for (k, v) in section("last_snapshot_errors")? {
        let Value::Object(o) = v else {
            return Err(format!("[last_snapshot_errors.{k:?}] must be a table"));
        };
        let get = |f: &str| match o.get(f) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("[last_snapshot_errors.{k:?}] {f} must be a string")),
        };
        let e = SnapshotError {
            r#ref: get("ref")?,
            error: get("error")?,
        };
        if let Some(f) = o.keys().find(|f| *f != "ref" && *f != "error") {
            return Err(format!(
                "[last_snapshot_errors.{k:?}] has unknown field `{f}`"
            ));
        }
        last_snapshot_errors.insert(k, e);
    }
    Ok(WorkspaceState {
        workspace_id,
        bookmark,
        last_snapshot_at,
        working_refs: strings("working_refs")?,
        pending_forks: strings("pending_forks")?,
        pending_resets: states("pending_resets")?,
        base_states: states("base_states")?,
        fork_points: states("fork_points")?,
        last_snapshot: states("last_snapshot")?,
        last_snapshot_errors,
        last_upstream: states("last_upstream")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(v: Value) -> State {
        let Value::Object(m) = v else { panic!() };
        m
    }

    const FULL: &str = r#"workspace_id = "7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d"
bookmark = "relabel"
last_snapshot_at = "2026-09-04T22:10:03.118Z"

[working_refs]
"db/metrics" = "tether.ws.0a1b2c3d.relabel"
"zarr/imaging" = "tether.ws.0a1b2c3d.relabel"

[pending_forks]
features = "tether.ws.0a1b2c3d.relabel"

[pending_resets.features]
version = 9

[base_states."zarr/imaging"]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[fork_points."zarr/imaging"]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[last_snapshot."zarr/imaging"]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[last_snapshot_errors."db/metrics"]
error = "connection refused"
ref = ""
"#;

    fn full() -> WorkspaceState {
        let mut w = WorkspaceState::new();
        w.workspace_id = "7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d".into();
        w.bookmark = Some("relabel".into());
        w.last_snapshot_at = Some("2026-09-04T22:10:03.118Z".into());
        let r = "tether.ws.0a1b2c3d.relabel".to_string();
        w.working_refs.insert("zarr/imaging".into(), r.clone());
        w.working_refs.insert("db/metrics".into(), r.clone());
        w.pending_forks.insert("features".into(), r);
        w.pending_resets
            .insert("features".into(), state(json!({"version": 9})));
        let s = state(json!({"snapshot_id": "K3F7Q2ZJ1XN4Y8W0"}));
        w.base_states.insert("zarr/imaging".into(), s.clone());
        w.fork_points.insert("zarr/imaging".into(), s.clone());
        w.last_snapshot.insert("zarr/imaging".into(), s);
        w.last_snapshot_errors.insert(
            "db/metrics".into(),
            SnapshotError {
                r#ref: String::new(),
                error: "connection refused".into(),
            },
        );
        w
    }

    #[test]
    fn fixed_text_and_round_trip() {
        let w = full();
        let text = w.to_toml_string().unwrap();
        assert_eq!(text, FULL);
        assert_eq!(WorkspaceState::parse(&text, Path::new("w")).unwrap(), w);
        assert_eq!(w.short_id(), "7c1e0a4d");
    }

    #[test]
    fn fresh_state_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".tether/workspace.toml");
        assert_eq!(WorkspaceState::read(&p).unwrap(), None);
        let fresh = WorkspaceState::read_or_new(&p).unwrap();
        assert!(ids::is_workspace_id(&fresh.workspace_id));
        assert!(fresh.is_read_only());
        assert!(!p.exists(), "reading does not write");
        assert_eq!(
            fresh.to_toml_string().unwrap(),
            format!("workspace_id = \"{}\"\n", fresh.workspace_id)
        );
        fresh.write(&p).unwrap();
        assert_eq!(WorkspaceState::read_or_new(&p).unwrap(), fresh);
        full().write(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), FULL);
    }

    #[test]
    fn refuses_invalid() {
        let f = Path::new("/d/.tether/workspace.toml");
        for (text, needle) in [
            ("bookmark = \"x\"", "`workspace_id` is missing"),
            ("workspace_id = \"short\"", "32 lowercase hex"),
            (
                "workspace_id = \"7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d\"\nmystery = 1",
                "unknown field `mystery`",
            ),
            (
                "workspace_id = \"7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d\"\n[working_refs]\n\"../x\" = \"r\"",
                "'..'",
            ),
            (
                "workspace_id = \"7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d\"\n[working_refs]\nx = 1",
                "must be a ref name",
            ),
            (
                "workspace_id = \"7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d\"\n[base_states]\nx = 1",
                "must be a table",
            ),
            (
                "workspace_id = \"7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d\"\nlast_snapshot_at = \"x\"",
                "RFC 3339",
            ),
        ] {
            let e = WorkspaceState::parse(text, f).unwrap_err().to_string();
            assert!(
                e.starts_with("/d/.tether/workspace.toml: ") && e.contains(needle),
                "{e}"
            );
        }
    }
}
