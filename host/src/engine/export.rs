//! `tether export` (experimental): the dataset's history as relational
//! tables (spec/12, "The tables") -- a SQLite file, or a directory with one
//! Parquet / CSV / JSONL file per table and a `schema.json`.
//!
//! The tables are a derived view of the manifests, never the other way
//! round. [`build`] reads them once into a [`Bundle`] (the history walk is
//! the shared, memoised one of [`super::history`], so no manifest is parsed
//! twice however many commits hold it); the writers here and `publish`'s
//! PostgreSQL writer put the same bundle into their store.
//!
//! `identity_hash` is the blake2b-512 (hex) of the canonical JSON of
//! `[kind, identity]`, and `state_hash` the blake2b-512 of the canonical JSON
//! that makes the pin id, `[kind, identity, content_state]` (docs/formats.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blake2::{Blake2b512, Digest};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sqlx::AssertSqlSafe;

use super::error::{Result, TetherError};
use super::history::{self, CommitInfo, ManifestSet};
use super::repo::{self, Repo};
use crate::model::{Manifest, canonical, ids, listing};
use crate::plugin::fan_out;
use crate::vcs::VcsKind;

/// The schema's version, recorded in `tether_meta` and `schema.json`.
pub const SCHEMA_VERSION: &str = "1";

/// A column's type: `Json` is TEXT in SQLite and JSONB in PostgreSQL,
/// `Timestamp` ISO-8601 text and TIMESTAMPTZ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColType {
    Text,
    Int,
    Bool,
    Json,
    Timestamp,
}

/// One table of the schema.
#[derive(Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub columns: &'static [(&'static str, ColType)],
    /// The primary key's columns.
    pub key: &'static [&'static str],
    /// Only with `--listings` / `--workspace`.
    pub optional: bool,
}

impl TableDef {
    /// The position of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|(c, _)| *c == name)
    }
}

use ColType::{Bool, Int, Json, Text, Timestamp};

/// Every table, in the order they are written (spec/12, "The tables").
pub const TABLES: &[TableDef] = &[
    TableDef {
        name: "commits",
        columns: &[
            ("commit_id", Text),
            ("change_id", Text),
            ("author_name", Text),
            ("author_email", Text),
            ("authored_at", Timestamp),
            ("committed_at", Timestamp),
            ("message", Text),
            ("manifest_hash", Text),
        ],
        key: &["commit_id"],
        optional: false,
    },
    TableDef {
        name: "commit_parents",
        columns: &[("commit_id", Text), ("parent_id", Text), ("position", Int)],
        key: &["commit_id", "parent_id"],
        optional: false,
    },
    TableDef {
        name: "refs",
        columns: &[("name", Text), ("kind", Text), ("commit_id", Text)],
        key: &["name", "kind"],
        optional: false,
    },
    TableDef {
        name: "objects",
        columns: &[
            ("commit_id", Text),
            ("key", Text),
            ("kind", Text),
            ("uri", Text),
            ("locator_json", Json),
            ("identity_json", Json),
            ("identity_hash", Text),
            ("policy_file", Text),
            ("policy_pin", Text),
            ("state_json", Json),
            ("state_hash", Text),
            ("pin_id", Text),
            ("pin_ref", Text),
            ("recoverable", Bool),
            ("captured_at", Timestamp),
        ],
        key: &["commit_id", "key"],
        optional: false,
    },
    TableDef {
        name: "object_states",
        columns: &[
            ("kind", Text),
            ("identity_hash", Text),
            ("state_hash", Text),
            ("identity_json", Json),
            ("state_json", Json),
            ("pin_id", Text),
            ("first_commit_id", Text),
        ],
        key: &["kind", "identity_hash", "state_hash"],
        optional: false,
    },
    TableDef {
        name: "listings",
        columns: &[
            ("listing_name", Text),
            ("kind", Text),
            ("identity_hash", Text),
            ("state_hash", Text),
            ("entries", Int),
        ],
        key: &["listing_name"],
        optional: true,
    },
    TableDef {
        name: "listing_entries",
        columns: &[
            ("listing_name", Text),
            ("path", Text),
            ("token", Text),
            ("size", Int),
        ],
        key: &["listing_name", "path"],
        optional: true,
    },
    TableDef {
        name: "workspace",
        columns: &[
            ("workspace_id", Text),
            ("key", Text),
            ("bookmark", Text),
            ("working_ref", Text),
            ("fork_point_json", Json),
            ("snapshot_json", Json),
            ("snapshot_at", Timestamp),
        ],
        key: &["workspace_id", "key"],
        optional: true,
    },
    TableDef {
        name: "tether_meta",
        columns: &[("key", Text), ("value", Text)],
        key: &["key"],
        optional: false,
    },
];

/// The table named `name`.
pub fn table(name: &str) -> Option<&'static TableDef> {
    TABLES.iter().find(|t| t.name == name)
}

/// The two views, as SQL over tables named with `prefix` (`""`, or a
/// quoted schema and a dot).
pub fn views(prefix: &str) -> [(&'static str, String); 2] {
    [
        (
            "objects_head",
            format!(
                "SELECT o.* FROM {prefix}objects o WHERE o.commit_id = \
                 (SELECT m.value FROM {prefix}tether_meta m WHERE m.key = 'head')"
            ),
        ),
        (
            "object_pins",
            format!(
                "SELECT kind, pin_id, pin_ref, identity_hash, state_hash, \
                 COUNT(DISTINCT commit_id) AS commits FROM {prefix}objects \
                 WHERE pin_id IS NOT NULL GROUP BY kind, pin_id, pin_ref, identity_hash, state_hash"
            ),
        ),
    ]
}

/// One table's rows, each a row of cells in its table's column order.
pub type Rows = Vec<Vec<Cell>>;

/// One value of a row; its column says whether text is JSON or a time.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Text(String),
    Int(i64),
    Bool(bool),
}

impl Cell {
    fn opt(s: Option<impl Into<String>>) -> Cell {
        s.map_or(Cell::Null, |s| Cell::Text(s.into()))
    }

    /// The value as text (`None` for NULL): how CSV and the SQL binds of
    /// text columns see it.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Cell::Null => None,
            Cell::Text(s) => Some(s.clone()),
            Cell::Int(i) => Some(i.to_string()),
            Cell::Bool(b) => Some(b.to_string()),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Cell::Int(i) => Some(*i),
            Cell::Text(s) => s.parse().ok(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Cell::Bool(b) => Some(*b),
            Cell::Int(i) => Some(*i != 0),
            Cell::Text(s) => s.parse().ok(),
            Cell::Null => None,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Text(s) => Value::String(s.clone()),
            Cell::Int(i) => json!(i),
            Cell::Bool(b) => json!(b),
        }
    }
}

/// The tables of one export, row by row in each table's column order.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The exported head commit (`objects_head` selects it).
    pub head: Option<String>,
    pub tables: BTreeMap<&'static str, Rows>,
}

impl Bundle {
    /// The rows of `table` (none when it was not exported).
    pub fn rows(&self, table: &str) -> &[Vec<Cell>] {
        self.tables.get(table).map_or(&[], Vec::as_slice)
    }

    /// Whether `table` was exported (`--listings`, `--workspace`).
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    /// Rows per exported table.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.tables
            .iter()
            .map(|(t, rows)| (t.to_string(), rows.len()))
            .collect()
    }

    /// The exported tables' definitions, in writing order.
    pub fn defs(&self) -> impl Iterator<Item = &'static TableDef> + '_ {
        TABLES.iter().filter(|t| self.has(t.name))
    }
}

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// `--rev`: only these revisions (none: every reachable commit).
    pub revs: Vec<String>,
    /// `--listings`.
    pub listings: bool,
    /// `--workspace`.
    pub workspace: bool,
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Sqlite,
    Parquet,
    Csv,
    Jsonl,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sqlite" => Ok(Format::Sqlite),
            "parquet" => Ok(Format::Parquet),
            "csv" => Ok(Format::Csv),
            "jsonl" => Ok(Format::Jsonl),
            other => Err(format!(
                "{other:?} is not an export format: sqlite, parquet, csv or jsonl"
            )),
        }
    }
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Sqlite => "sqlite",
            Format::Parquet => "parquet",
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        }
    }
}

/// The `--json` shape of spec/09: `{"path", "format", "head", "rows"}`.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub path: String,
    pub format: Format,
    pub head: Option<String>,
    pub rows: BTreeMap<String, usize>,
}

/// The note every registry command prints once (spec/12).
pub fn experimental_note(command: &str) -> String {
    format!(
        "note: `tether {command}` is experimental: its tables and columns may change before 0.2"
    )
}

/// blake2b-512 of `text`, lowercase hex.
pub fn blake2_hex(text: &str) -> String {
    hex::encode(Blake2b512::digest(text.as_bytes()))
}

/// `identity_hash`: blake2b of the canonical JSON of `[kind, identity]`.
pub fn identity_hash(kind: &str, identity: &Value) -> String {
    blake2_hex(&canonical::to_string(&json!([kind, identity])))
}

/// `state_hash`: blake2b of the pin id's canonical input,
/// `[kind, identity, content_state]`.
pub fn state_hash(kind: &str, identity: &Value, content_state: &Value) -> String {
    blake2_hex(&ids::pin_input(kind, identity, content_state))
}

/// Export to `path` in `format`: a SQLite file (replaced, or upserted
/// into with `append`), or a directory of one file per table.
pub async fn export(
    repo: &Repo,
    opts: &ExportOptions,
    path: &Path,
    format: Format,
    append: bool,
) -> Result<ExportReport> {
    if append && format != Format::Sqlite {
        return Err(
            TetherError::refused("--append is for the sqlite format only")
                .hint("a directory export is rewritten whole; drop --append"),
        );
    }
    let bundle = build(repo, opts).await?;
    match format {
        Format::Sqlite => write_sqlite(&bundle, path, append).await?,
        other => write_dir(&bundle, path, other)?,
    }
    Ok(ExportReport {
        path: path.display().to_string(),
        format,
        head: bundle.head.clone(),
        rows: bundle.counts(),
    })
}

/// What one distinct manifest contributes to its `objects` rows (all but
/// `commit_id` and `key`), and to `object_states`.
struct Derived {
    cells: Vec<Cell>,
    /// `(kind, identity_hash, state_hash)`, identity and state JSON, pin id,
    /// content state: when the backend's identity is known and it has a state.
    state: Option<StateRow>,
}

struct StateRow {
    kind: String,
    identity_hash: String,
    state_hash: String,
    identity_json: String,
    state_json: String,
    pin_id: Option<String>,
    identity: Value,
    content: Value,
}

/// Read the tables: every visible commit (or `opts.revs`), their manifests,
/// refs, and what the options add.
pub async fn build(repo: &Repo, opts: &ExportOptions) -> Result<Bundle> {
    let commits: Vec<(CommitInfo, Vec<ManifestSet>)> = if opts.revs.is_empty() {
        history::history_commits(repo)?
    } else {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for rev in &opts.revs {
            let id = repo.vcs.resolve(rev)?;
            if seen.insert(id.as_str().to_owned()) {
                out.push(history::commit_at(repo, &id)?);
            }
        }
        out
    };
    let head: Option<String> = match opts.revs.first() {
        Some(_) => commits.first().map(|(c, _)| c.id.as_str().to_owned()),
        None => repo.vcs.head()?.map(|c| c.as_str().to_owned()),
    };

    // Identities, once per distinct (kind, locator), from the backends.
    let descriptors = repo.descriptors().await?;
    let mut distinct: BTreeMap<String, (String, Value)> = BTreeMap::new();
    for (_, sets) in &commits {
        if let Some(set) = sets.first() {
            for m in set.values() {
                let loc = Value::Object(m.locator.clone());
                distinct
                    .entry(locator_id(&m.kind, &loc))
                    .or_insert((m.kind.clone(), loc));
            }
        }
    }
    let mut calls = Vec::new();
    for (id, (kind, loc)) in &distinct {
        if !descriptors.contains_key(kind) {
            continue;
        }
        let plugin = repo.plugin(kind).await?;
        let client = repo.client_for(&plugin, loc);
        calls.push((id.clone(), async move { client.identity().await }));
    }
    let mut identities: HashMap<String, Value> = HashMap::new();
    for (id, r) in fan_out(calls).await.results {
        match r {
            Ok(identity) => {
                identities.insert(id, identity);
            }
            // The row keeps its locator; only the hashes are unknown.
            Err(e) => tracing::warn!("export: no identity for {id}: {e}"),
        }
    }

    // jj's change ids, from the view jj already gave (nothing on git).
    let change_ids = repo.vcs.change_ids()?;
    let mut tables: BTreeMap<&'static str, Rows> = BTreeMap::new();
    let mut commit_rows = Vec::with_capacity(commits.len());
    let mut parent_rows = Vec::new();
    let mut object_rows = Vec::new();
    // Per distinct manifest (the history walk shares one Arc per distinct
    // manifest, and one per distinct set): derived once.
    let mut derived: HashMap<*const Manifest, Arc<Derived>> = HashMap::new();
    let mut set_hashes: HashMap<*const BTreeMap<String, Arc<Manifest>>, String> = HashMap::new();
    // (kind, identity_hash, state_hash) -> (row, first commit); newest first,
    // so the last commit seen is the first one to hold it.
    let mut states: BTreeMap<(String, String, String), (Arc<Derived>, String)> = BTreeMap::new();
    for (info, sets) in &commits {
        let commit_id = info.id.as_str();
        let manifest_hash = sets.first().map(|set| {
            set_hashes
                .entry(Arc::as_ptr(set))
                .or_insert_with(|| {
                    ids::manifest_hash_of(set.iter().map(|(k, m)| (k.as_str(), m.to_json())))
                })
                .clone()
        });
        commit_rows.push(vec![
            Cell::Text(commit_id.to_owned()),
            Cell::opt(change_ids.get(commit_id).cloned()),
            Cell::Text(info.author_name.clone()),
            Cell::Text(info.author_email.clone()),
            Cell::Text(info.authored_at.to_rfc3339()),
            Cell::Text(info.committed_at.to_rfc3339()),
            Cell::Text(info.message.clone()),
            Cell::opt(manifest_hash),
        ]);
        for (i, p) in info.parents.iter().enumerate() {
            parent_rows.push(vec![
                Cell::Text(commit_id.to_owned()),
                Cell::Text(p.as_str().to_owned()),
                Cell::Int(i as i64),
            ]);
        }
        // A conflicted jj commit: its own files (what git shows) make its rows.
        let Some(set) = sets.first() else { continue };
        for (key, m) in set.iter() {
            let d = derived
                .entry(Arc::as_ptr(m))
                .or_insert_with(|| Arc::new(derive(m, &identities, &descriptors)))
                .clone();
            let mut row = Vec::with_capacity(15);
            row.push(Cell::Text(commit_id.to_owned()));
            row.push(Cell::Text(key.clone()));
            row.extend(d.cells.iter().cloned());
            object_rows.push(row);
            if let Some(s) = &d.state {
                let k = (
                    s.kind.clone(),
                    s.identity_hash.clone(),
                    s.state_hash.clone(),
                );
                states.insert(k, (d.clone(), commit_id.to_owned()));
            }
        }
    }
    tables.insert("commits", commit_rows);
    tables.insert("commit_parents", parent_rows);
    tables.insert("objects", object_rows);
    let state_rows: Rows = states
        .values()
        .filter_map(|(d, first)| {
            let s = d.state.as_ref()?;
            Some(vec![
                Cell::Text(s.kind.clone()),
                Cell::Text(s.identity_hash.clone()),
                Cell::Text(s.state_hash.clone()),
                Cell::Text(s.identity_json.clone()),
                Cell::Text(s.state_json.clone()),
                Cell::opt(s.pin_id.clone()),
                Cell::Text(first.clone()),
            ])
        })
        .collect();
    tables.insert("object_states", state_rows);
    tables.insert("refs", ref_rows(repo, head.as_deref())?);
    if opts.listings {
        let (listings, entries) = listing_rows(repo, states.values().map(|(d, _)| d))?;
        tables.insert("listings", listings);
        tables.insert("listing_entries", entries);
    }
    if opts.workspace {
        tables.insert("workspace", workspace_rows(repo)?);
    }
    let vcs = match repo.vcs.kind() {
        VcsKind::Git => "git",
        VcsKind::Jj => "jj",
    };
    let meta = [
        ("schema_version", Some(SCHEMA_VERSION.to_owned())),
        (
            "exported_at",
            Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        ),
        ("head", head.clone()),
        ("vcs", Some(vcs.to_owned())),
        ("tether_version", Some(env!("CARGO_PKG_VERSION").to_owned())),
    ];
    tables.insert(
        "tether_meta",
        meta.into_iter()
            .map(|(k, v)| vec![Cell::Text(k.to_owned()), Cell::opt(v)])
            .collect(),
    );
    Ok(Bundle { head, tables })
}

/// How identities are looked up: kind and canonical locator.
fn locator_id(kind: &str, locator: &Value) -> String {
    format!("{kind}|{}", canonical::to_string(locator))
}

/// One manifest's `objects` cells after `commit_id` and `key`.
fn derive(
    m: &Manifest,
    identities: &HashMap<String, Value>,
    descriptors: &BTreeMap<String, crate::plugin::Descriptor>,
) -> Derived {
    let loc = Value::Object(m.locator.clone());
    let identity = identities.get(&locator_id(&m.kind, &loc));
    let uri = m
        .locator
        .get("uri")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let state_json = m.state.as_ref().map(canonical::map_to_string);
    let mut state = None;
    if let (Some(identity), Some(s), Some(d)) = (identity, &m.state, descriptors.get(&m.kind)) {
        let content = Value::Object(repo::content(s, d));
        state = Some(StateRow {
            kind: m.kind.clone(),
            identity_hash: identity_hash(&m.kind, identity),
            state_hash: state_hash(&m.kind, identity, &content),
            identity_json: canonical::to_string(identity),
            state_json: state_json.clone().unwrap_or_default(),
            pin_id: m.pin.as_ref().map(|p| p.id.clone()),
            identity: identity.clone(),
            content,
        });
    }
    let cells = vec![
        Cell::Text(m.kind.clone()),
        Cell::opt(uri),
        Cell::Text(canonical::to_string(&loc)),
        Cell::opt(identity.map(canonical::to_string)),
        Cell::opt(identity.map(|i| identity_hash(&m.kind, i))),
        Cell::Text(m.policy.file.as_str().to_owned()),
        Cell::Text(m.policy.pin.as_str().to_owned()),
        Cell::opt(state_json),
        Cell::opt(state.as_ref().map(|s| s.state_hash.clone())),
        Cell::opt(m.pin.as_ref().map(|p| p.id.clone())),
        Cell::opt(m.pin.as_ref().map(|p| p.r#ref.clone())),
        Cell::Bool(m.recoverable),
        Cell::opt(m.captured_at.clone()),
    ];
    Derived { cells, state }
}

/// The VCS's branches (jj: bookmarks), tags and `HEAD`.
fn ref_rows(repo: &Repo, head: Option<&str>) -> Result<Rows> {
    let kind = match repo.vcs.kind() {
        VcsKind::Git => "branch",
        VcsKind::Jj => "bookmark",
    };
    let mut rows = Vec::new();
    for b in repo.vcs.branches()? {
        if b.parking {
            continue;
        }
        rows.push(vec![
            Cell::Text(b.name),
            Cell::Text(kind.to_owned()),
            Cell::Text(b.commit.as_str().to_owned()),
        ]);
    }
    for t in repo.vcs.tags()? {
        rows.push(vec![
            Cell::Text(t.name),
            Cell::Text("tag".to_owned()),
            Cell::Text(t.commit.as_str().to_owned()),
        ]);
    }
    if let Some(h) = head {
        rows.push(vec![
            Cell::Text("HEAD".to_owned()),
            Cell::Text("head".to_owned()),
            Cell::Text(h.to_owned()),
        ]);
    }
    Ok(rows)
}

/// `listings` and `listing_entries` for the states that have a listing.
fn listing_rows<'a>(
    repo: &Repo,
    states: impl Iterator<Item = &'a Arc<Derived>>,
) -> Result<(Rows, Rows)> {
    let dir = repo.layout.listings_dir();
    let mut listings = Vec::new();
    let mut entries = Vec::new();
    let mut seen = BTreeSet::new();
    for d in states {
        let Some(s) = &d.state else { continue };
        let name = ids::listing_name(&s.kind, &s.identity, &s.content);
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(text) = listing::read_listing(&dir, &name)? else {
            continue;
        };
        let mut n = 0i64;
        let mut paths = BTreeSet::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(Value::Object(e)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(path) = e.get("p").and_then(Value::as_str) else {
                continue;
            };
            n += 1;
            if !paths.insert(path.to_owned()) {
                continue;
            }
            entries.push(vec![
                Cell::Text(name.clone()),
                Cell::Text(path.to_owned()),
                Cell::opt(e.get("k").and_then(Value::as_str)),
                e.get("s")
                    .and_then(Value::as_i64)
                    .map_or(Cell::Null, Cell::Int),
            ]);
        }
        listings.push(vec![
            Cell::Text(name),
            Cell::Text(s.kind.clone()),
            Cell::Text(s.identity_hash.clone()),
            Cell::Text(s.state_hash.clone()),
            Cell::Int(n),
        ]);
    }
    Ok((listings, entries))
}

/// This checkout's working refs, fork points and last snapshot, per key.
fn workspace_rows(repo: &Repo) -> Result<Rows> {
    let ws = repo.workspace()?;
    let keys: BTreeSet<&String> = ws
        .working_refs
        .keys()
        .chain(ws.fork_points.keys())
        .chain(ws.last_snapshot.keys())
        .collect();
    let json = |m: Option<&Map<String, Value>>| Cell::opt(m.map(canonical::map_to_string));
    Ok(keys
        .into_iter()
        .map(|k| {
            vec![
                Cell::Text(ws.workspace_id.clone()),
                Cell::Text(k.clone()),
                Cell::opt(ws.bookmark.clone()),
                Cell::opt(ws.working_refs.get(k).cloned()),
                json(ws.fork_points.get(k)),
                json(ws.last_snapshot.get(k)),
                Cell::opt(ws.last_snapshot_at.clone()),
            ]
        })
        .collect())
}

// ------------------------------------------------------------ SQL

/// The SQL dialects the tables are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A column type's SQL.
fn sql_type(t: ColType, d: Dialect) -> &'static str {
    match (t, d) {
        (Text, _) => "TEXT",
        (Int, Dialect::Sqlite) | (Bool, Dialect::Sqlite) => "INTEGER",
        (Int, Dialect::Postgres) => "BIGINT",
        (Bool, Dialect::Postgres) => "BOOLEAN",
        (Json, Dialect::Sqlite) | (Timestamp, Dialect::Sqlite) => "TEXT",
        (Json, Dialect::Postgres) => "JSONB",
        (Timestamp, Dialect::Postgres) => "TIMESTAMPTZ",
    }
}

/// `CREATE TABLE IF NOT EXISTS` for `t`, named with `prefix`.
pub fn create_table_sql(t: &TableDef, prefix: &str, d: Dialect) -> String {
    let cols: Vec<String> = t
        .columns
        .iter()
        .map(|(c, ty)| {
            let not_null = if t.key.contains(c) { " NOT NULL" } else { "" };
            format!("{c} {}{not_null}", sql_type(*ty, d))
        })
        .collect();
    format!(
        "CREATE TABLE IF NOT EXISTS {prefix}{} ({}, PRIMARY KEY ({}))",
        t.name,
        cols.join(", "),
        t.key.join(", ")
    )
}

/// How an insert meets a row already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Keep the row there.
    Nothing,
    /// Overwrite it (PostgreSQL: only when a value differs, so an unchanged
    /// row is not counted as written).
    Update,
}

/// Insert `rows` into `t` through `conn`, `CHUNK` rows per statement;
/// the rows written (as the database counts them).
pub async fn insert_rows<DB>(
    conn: &mut <DB as sqlx::Database>::Connection,
    t: &TableDef,
    rows: &[Vec<Cell>],
    prefix: &str,
    d: Dialect,
    on_conflict: OnConflict,
) -> std::result::Result<u64, sqlx::Error>
where
    DB: sqlx::Database,
    for<'q> Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'c> &'c mut <DB as sqlx::Database>::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
{
    // Well under both SQLite's (32766) and PostgreSQL's (65535) bind limits.
    let chunk = (30000 / t.columns.len()).max(1);
    let names: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    let mut written = 0;
    for part in rows.chunks(chunk) {
        let mut q = sqlx::QueryBuilder::<DB>::new(format!(
            "INSERT INTO {prefix}{} ({}) ",
            t.name,
            names.join(", ")
        ));
        q.push_values(part, |mut b, row| {
            for ((_, ty), cell) in t.columns.iter().zip(row) {
                match ty {
                    Int => {
                        b.push_bind(cell.as_int());
                    }
                    Bool => {
                        b.push_bind(cell.as_bool());
                    }
                    Text | Json | Timestamp => {
                        b.push_bind(cell.as_text());
                        match (ty, d) {
                            (Json, Dialect::Postgres) => {
                                b.push_unseparated("::jsonb");
                            }
                            (Timestamp, Dialect::Postgres) => {
                                b.push_unseparated("::timestamptz");
                            }
                            _ => {}
                        }
                    }
                }
            }
        });
        q.push(format!(" ON CONFLICT ({}) ", t.key.join(", ")));
        let rest: Vec<&str> = names
            .iter()
            .copied()
            .filter(|c| !t.key.contains(c))
            .collect();
        if on_conflict == OnConflict::Nothing || rest.is_empty() {
            q.push("DO NOTHING");
        } else {
            let sets: Vec<String> = rest.iter().map(|c| format!("{c} = excluded.{c}")).collect();
            q.push(format!("DO UPDATE SET {}", sets.join(", ")));
            if d == Dialect::Postgres {
                let now: Vec<String> = rest.iter().map(|c| format!("{}.{c}", t.name)).collect();
                let new: Vec<String> = rest.iter().map(|c| format!("excluded.{c}")).collect();
                q.push(format!(
                    " WHERE ({}) IS DISTINCT FROM ({})",
                    now.join(", "),
                    new.join(", ")
                ));
            }
        }
        let done = q.build().execute(&mut *conn).await?;
        written += sqlx_rows_affected::<DB>(&done);
    }
    Ok(written)
}

/// `rows_affected` of either database's query result.
fn sqlx_rows_affected<DB: sqlx::Database>(r: &DB::QueryResult) -> u64 {
    use std::any::Any;
    let any = r as &dyn Any;
    if let Some(r) = any.downcast_ref::<sqlx::sqlite::SqliteQueryResult>() {
        return r.rows_affected();
    }
    if let Some(r) = any.downcast_ref::<sqlx::postgres::PgQueryResult>() {
        return r.rows_affected();
    }
    0
}

/// A SQL failure as the engine's error, naming what was being done.
pub fn sql_error(what: impl Into<String>, e: impl std::fmt::Display) -> TetherError {
    TetherError::Registry {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Write the bundle into a SQLite file: a fresh file put in place at the
/// end (the old one replaced only once the new one is whole), or, with
/// `append`, upserted into the file there.
pub async fn write_sqlite(bundle: &Bundle, path: &Path, append: bool) -> Result<()> {
    use sqlx::ConnectOptions as _;
    use sqlx::Connection as _;
    let target = if append {
        path.to_path_buf()
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export".into());
        let tmp = path.with_file_name(format!(".{name}.tether-{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        tmp
    };
    let what = format!("exporting to {}", path.display());
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&target)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Delete);
    let mut conn = opts.connect().await.map_err(|e| sql_error(&what, e))?;
    let result = async {
        let mut tx = conn.begin().await?;
        for t in bundle.defs() {
            sqlx::query(AssertSqlSafe(create_table_sql(t, "", Dialect::Sqlite)))
                .execute(&mut *tx)
                .await?;
        }
        for (name, sql) in views("") {
            sqlx::query(AssertSqlSafe(format!(
                "CREATE VIEW IF NOT EXISTS {name} AS {sql}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        for t in bundle.defs() {
            insert_rows::<sqlx::Sqlite>(
                &mut tx,
                t,
                bundle.rows(t.name),
                "",
                Dialect::Sqlite,
                OnConflict::Update,
            )
            .await?;
        }
        tx.commit().await?;
        Ok::<(), sqlx::Error>(())
    }
    .await;
    let closed = conn.close().await;
    if let Err(e) = result.and(closed) {
        if !append {
            let _ = std::fs::remove_file(&target);
        }
        return Err(sql_error(&what, e));
    }
    if !append {
        std::fs::rename(&target, path)
            .map_err(|e| TetherError::io(format!("replacing {}", path.display()), e))?;
    }
    Ok(())
}

// ------------------------------------------------------------ files

/// `schema.json`: the tables' columns and keys, and the views' SQL.
fn schema_json(bundle: &Bundle, format: Format) -> Value {
    let tables: Vec<Value> = bundle
        .defs()
        .map(|t| {
            json!({
                "name": t.name,
                "file": format!("{}.{}", t.name, format.as_str()),
                "key": t.key,
                "columns": t.columns.iter().map(|(c, ty)| json!({"name": c, "type": ty})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let views: Map<String, Value> = views("")
        .into_iter()
        .map(|(n, sql)| (n.to_owned(), Value::String(sql)))
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "format": format.as_str(),
        "head": bundle.head,
        "tables": tables,
        "views": views,
    })
}

/// Write one file per table and `schema.json` into `dir` (made if missing).
pub fn write_dir(bundle: &Bundle, dir: &Path, format: Format) -> Result<()> {
    let io =
        |what: &Path, e: std::io::Error| TetherError::io(format!("writing {}", what.display()), e);
    if dir.is_file() {
        return Err(TetherError::refused(format!(
            "{} is a file; a {} export is a directory",
            dir.display(),
            format.as_str()
        ))
        .hint("give a directory path, or `--format sqlite` for one file"));
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for t in bundle.defs() {
        let path = dir.join(format!("{}.{}", t.name, format.as_str()));
        let rows = bundle.rows(t.name);
        let bytes = match format {
            Format::Csv => csv_bytes(t, rows),
            Format::Jsonl => jsonl_bytes(t, rows),
            Format::Parquet => parquet_bytes(t, rows)
                .map_err(|e| sql_error(format!("writing {}", path.display()), e))?,
            Format::Sqlite => unreachable!("sqlite is a file"),
        };
        crate::model::fsutil::write_atomic(&path, &bytes)?;
    }
    let schema = serde_json::to_vec_pretty(&schema_json(bundle, format))
        .map_err(|e| sql_error("schema.json", e))?;
    crate::model::fsutil::write_atomic(&dir.join("schema.json"), &schema)?;
    Ok(())
}

/// A CSV field: quoted when it holds a separator, a quote, a line break or
/// edge whitespace; NULL is the empty field.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.trim() != s || s.is_empty() {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv_bytes(t: &TableDef, rows: &[Vec<Cell>]) -> Vec<u8> {
    let mut out = String::new();
    let names: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    out.push_str(&names.join(","));
    out.push_str("\r\n");
    for row in rows {
        let fields: Vec<String> = row
            .iter()
            .map(|c| c.as_text().map(|s| csv_field(&s)).unwrap_or_default())
            .collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out.into_bytes()
}

fn jsonl_bytes(t: &TableDef, rows: &[Vec<Cell>]) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        let obj: Map<String, Value> = t
            .columns
            .iter()
            .zip(row)
            .map(|((c, _), cell)| ((*c).to_owned(), cell.to_json()))
            .collect();
        // A map of plain values always serialises.
        out.extend(serde_json::to_vec(&Value::Object(obj)).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

fn parquet_bytes(
    t: &TableDef,
    rows: &[Vec<Cell>],
) -> std::result::Result<Vec<u8>, parquet::errors::ParquetError> {
    use arrow_array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let fields: Vec<Field> = t
        .columns
        .iter()
        .map(|(c, ty)| {
            let dt = match ty {
                Int => DataType::Int64,
                Bool => DataType::Boolean,
                Text | Json | Timestamp => DataType::Utf8,
            };
            Field::new(*c, dt, !t.key.contains(c))
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let columns: Vec<ArrayRef> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| -> ArrayRef {
            match ty {
                Int => Arc::new(Int64Array::from_iter(rows.iter().map(|r| r[i].as_int()))),
                Bool => Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r[i].as_bool()))),
                Text | Json | Timestamp => {
                    Arc::new(StringArray::from_iter(rows.iter().map(|r| r[i].as_text())))
                }
            }
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(out)
}

/// Where a directory export keeps table `name` in `format`.
pub fn table_file(dir: &Path, name: &str, format: Format) -> PathBuf {
    dir.join(format!("{name}.{}", format.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_blake2b_of_the_pin_input() {
        let identity = json!({"system": "/s"});
        let content = json!({"snapshot_id": "a"});
        let h = state_hash("memory", &identity, &content);
        assert_eq!(h.len(), 128);
        assert_eq!(
            h,
            blake2_hex(r#"["memory",{"system":"/s"},{"snapshot_id":"a"}]"#)
        );
        assert_eq!(
            identity_hash("memory", &identity),
            blake2_hex(r#"["memory",{"system":"/s"}]"#)
        );
        // A fixed vector: blake2b-512 of "abc" (RFC 7693, appendix A).
        assert!(blake2_hex("abc").starts_with("ba80a53f981c4d0d6a2797b69f12f6e9"));
    }

    #[test]
    fn every_key_column_exists_and_tables_are_unique() {
        let mut names = BTreeSet::new();
        for t in TABLES {
            assert!(names.insert(t.name));
            for k in t.key {
                assert!(t.column(k).is_some(), "{}.{k}", t.name);
            }
        }
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("a"), "a");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field(""), "\"\"");
        assert_eq!(csv_field(" x"), "\" x\"");
    }
}
