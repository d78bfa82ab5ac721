//! # tether-plugin-ducklake: DuckLake catalogs (experimental)
//!
//! Kind `ducklake` (spec/11, "`ducklake`: DuckLake catalogs"): an
//! Addressable backend over a DuckLake catalog, read from the catalog's own
//! tables through the host's `sql` capability. There is no DuckDB inside:
//! the catalog is a set of `ducklake_*` tables in a SQLite file or a
//! PostgreSQL database, which the host opens ([`catalog`]). A DuckDB-file
//! catalog (`ducklake:duckdb:`, or a bare path) needs DuckDB itself to read,
//! so it is refused with an error naming the catalogs this backend reads.
//!
//! ## Locator, configuration, state
//!
//! ```json
//! {"metadata": "ducklake:sqlite:/data/lake.sqlite", "data_path": "/data/lake/",
//!  "table": "main.events", "metadata_schema": "lake", "at": 12}
//! ```
//!
//! `metadata` is the catalog as DuckDB's `ATTACH` takes it (the positional
//! `uri` is accepted for it; a missing `ducklake:` prefix is implied):
//! `ducklake:sqlite:/abs/path.sqlite` or `ducklake:postgres:dbname=lake
//! host=... user=...`. The host opens it and keeps its password (from
//! `.tether/secrets.toml`'s `[uris."<address>"]` entry, `PGPASSWORD` or
//! `~/.pgpass`): this plugin sees the address without one. `data_path`
//! (where the catalog's files live) is a storage grant for `verify --deep`;
//! `table` only scopes the handle (snapshots are catalog-wide);
//! `metadata_schema` is DuckLake's `METADATA_SCHEMA` (the PostgreSQL schema
//! holding the catalog tables). `init_sql` (DuckDB statements such as
//! `CREATE SECRET`) runs code, so it is accepted only from
//! `.tether/secrets.toml`, never from a locator or `tether.toml`.
//!
//! The identity is `{metadata[, data_path][, metadata_schema]}`. A state is
//! `{"snapshot_id": N, "snapshot_time_us": T}`: both are content, so a
//! catalog deleted and made again (whose snapshot N is another snapshot)
//! verifies as drifted.
//!
//! ## No pins
//!
//! DuckLake has no tags or branches: `commit` records the snapshot, which
//! stays readable (`ATTACH ... (SNAPSHOT_VERSION N)`, `AT (VERSION => N)`)
//! until `ducklake_expire_snapshots` removes it (`RETENTION_BOUND`); `verify`
//! then reports it gone. `diff` reads the snapshots' change records per
//! table, with row counts from the catalog's file and inlined-row records;
//! `history` lists the snapshots.

pub mod catalog;
pub mod changes;
mod harness;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::storage::Bucket;
use tether_sdk::{
    Backend, Capability, Change as DiffChange, Descriptor, Error, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyReport, VerifyStatus, cap, descriptor,
};

use catalog::{Catalog, SchemaRow, Snapshot, TableRow, live};
use changes::{Change, table_path};
pub use harness::DuckLakeHarness;

/// Capabilities of every ducklake object (spec/11's table).
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::CHEAP_FINGERPRINT,
    cap::RETENTION_BOUND,
    cap::DIFF,
    cap::HISTORY,
];

/// The catalogs this backend reads, for errors.
const SUPPORTED: &str = "DuckLake catalogs on SQLite (`ducklake:sqlite:/path/to/catalog.sqlite`) \
                         and PostgreSQL (`ducklake:postgres:dbname=... host=... user=...`)";

/// What `open`'s handle attaches the catalog as.
pub const ALIAS: &str = "lake";

/// The most files `verify --deep` checks one by one.
const DEEP_FILES: u32 = 10_000;

/// A ducklake object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    #[serde(default)]
    metadata: Option<String>,
    /// The positional locator (`tether add KEY ducklake:...`).
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    data_path: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    metadata_schema: Option<String>,
    #[serde(default)]
    at: Option<Value>,
    /// Refused here: `init_sql` belongs in `.tether/secrets.toml`.
    #[serde(default)]
    init_sql: Option<Value>,
}

/// `[backends.ducklake]` as the host passes it (committed and secrets
/// merged; the catalog address under a SQL key without its password).
#[derive(Debug, Clone, Default, Deserialize)]
struct Config {
    #[serde(default)]
    metadata: Option<String>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    init_sql: Option<Vec<String>>,
}

/// The catalog databases, by what `metadata` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CatalogKind {
    Sqlite,
    Postgres,
}

/// `metadata` without its `ducklake:` prefix.
fn body(metadata: &str) -> &str {
    let m = metadata.trim();
    m.strip_prefix("ducklake:").unwrap_or(m)
}

fn catalog_kind(metadata: &str) -> Result<CatalogKind> {
    let body = body(metadata);
    let scheme = body
        .split_once(':')
        .map(|(s, _)| s.to_ascii_lowercase())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+'));
    match scheme.as_deref() {
        Some("sqlite") => Ok(CatalogKind::Sqlite),
        Some("postgres" | "postgresql") => Ok(CatalogKind::Postgres),
        Some("duckdb") | None => Err(Error::invalid(format!(
            "{metadata}: a DuckDB-file DuckLake catalog can only be read by DuckDB itself, \
             which tether does not embed; tether reads {SUPPORTED}. Move the catalog to one \
             of those (DuckDB: ATTACH it and the new one, then `COPY FROM DATABASE`)"
        ))),
        Some(other) => Err(Error::invalid(format!(
            "{metadata}: a `{other}:` DuckLake catalog is not supported; tether reads {SUPPORTED}"
        ))),
    }
}

/// `'text'` as a SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn state_json(s: &Snapshot) -> Value {
    json!({"snapshot_id": s.id, "snapshot_time_us": s.time_us})
}

fn parse_state(state: &Value) -> Result<Snapshot> {
    let bad = || {
        Error::invalid(format!(
            "{state} is not a ducklake state ({{\"snapshot_id\": N, \"snapshot_time_us\": T}})"
        ))
    };
    Ok(Snapshot {
        id: state
            .get("snapshot_id")
            .and_then(Value::as_i64)
            .ok_or_else(bad)?,
        time_us: state
            .get("snapshot_time_us")
            .and_then(Value::as_i64)
            .ok_or_else(bad)?,
    })
}

/// A snapshot id as `at` or `history --at` gives it.
fn parse_at(at: &Value) -> Result<i64> {
    let id = match at {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    id.filter(|id| *id >= 0).ok_or_else(|| {
        Error::invalid(format!(
            "ducklake `at` {at} is not a snapshot id (a number)"
        ))
    })
}

impl Locator {
    /// The `sql` key the catalog address is under, and the address.
    fn address<'a>(&'a self, config: &'a Config) -> Result<(&'static str, &'a str)> {
        if let Some(m) = self.metadata.as_deref().filter(|m| !m.trim().is_empty()) {
            return Ok(("metadata", m));
        }
        if let Some(m) = self.uri.as_deref().filter(|m| !m.trim().is_empty()) {
            return Ok(("uri", m));
        }
        if let Some(m) = config.metadata.as_deref().filter(|m| !m.trim().is_empty()) {
            return Ok(("metadata", m));
        }
        if let Some(m) = config.uri.as_deref().filter(|m| !m.trim().is_empty()) {
            return Ok(("uri", m));
        }
        Err(Error::invalid(format!(
            "a ducklake locator needs `metadata`: the catalog, one of {SUPPORTED}"
        )))
    }

    /// The locator's `at`, a snapshot id.
    fn at(&self) -> Result<Option<i64>> {
        self.at.as_ref().map(parse_at).transpose()
    }
}

/// The ducklake backend. Holds only the configuration `configure` gave.
#[derive(Debug, Default, Clone)]
pub struct DuckLakeBackend {
    config: Config,
}

/// One object, its catalog open.
struct Lake<'a> {
    loc: &'a Locator,
    metadata: String,
    cat: Catalog,
}

impl DuckLakeBackend {
    fn lake<'a>(&self, loc: &'a Locator) -> Result<Lake<'a>> {
        let (key, address) = loc.address(&self.config)?;
        catalog_kind(address)?;
        let cat = Catalog::open(key, loc.metadata_schema.as_deref())?;
        Ok(Lake {
            loc,
            metadata: format!("ducklake:{}", body(address)),
            cat,
        })
    }
}

impl Lake<'_> {
    /// The snapshot the object's base stands for: `at`, else the newest.
    fn base(&self) -> Result<Snapshot> {
        match self.loc.at()? {
            Some(id) => self.cat.snapshot(id)?.ok_or_else(|| {
                Error::not_found(format!(
                    "snapshot {id} (`at`) is not in the catalog {} (expired, or never made)",
                    self.metadata
                ))
            }),
            None => self.cat.head(),
        }
    }

    /// Why `recorded` is not readable any more: expired (missing) or the
    /// catalog made again (drifted). `None` when the catalog has it.
    fn gone(&self, recorded: &Snapshot) -> Result<Option<VerifyReport>> {
        let id = recorded.id;
        let recreated = |why: String| {
            Ok(Some(VerifyReport {
                status: VerifyStatus::Drifted,
                message: format!(
                    "the catalog {} was made again: {why}, so snapshot {id} as recorded is \
                     gone with the old catalog. `tether commit` records the new catalog; the \
                     recorded data comes back only from a backup",
                    self.metadata
                ),
            }))
        };
        match self.cat.snapshot(id)? {
            Some(now) if now.time_us == recorded.time_us => return Ok(None),
            Some(now) => {
                return recreated(format!(
                    "its snapshot {id} was taken at {}, not {} as recorded",
                    changes::rfc3339_us(now.time_us),
                    changes::rfc3339_us(recorded.time_us)
                ));
            }
            None => {}
        }
        let head = self.cat.head()?;
        if head.id < id {
            return recreated(format!("its newest snapshot is {}", head.id));
        }
        if let Some(before) = self.cat.before(id)?
            && before.time_us > recorded.time_us
        {
            return recreated(format!(
                "its snapshot {} is newer than the recorded snapshot {id}",
                before.id
            ));
        }
        let oldest = self
            .cat
            .oldest()?
            .map(|s| format!("; its oldest snapshot is now {}", s.id))
            .unwrap_or_default();
        Ok(Some(VerifyReport {
            status: VerifyStatus::Missing,
            message: format!(
                "snapshot {id} is gone from the catalog {}: ducklake_expire_snapshots removed \
                 it{oldest}. DuckDB can no longer read it (AT (VERSION => {id})); only a backup \
                 of the catalog and its files brings it back. `tether commit` records a \
                 snapshot the catalog has",
                self.metadata
            ),
        }))
    }

    /// The recorded snapshot if the catalog still has it, else the typed error.
    fn recorded(&self, state: &Value) -> Result<Snapshot> {
        let s = parse_state(state)?;
        match self.gone(&s)? {
            None => Ok(s),
            Some(r) if r.status == VerifyStatus::Drifted => Err(Error::PinDrift(r.message)),
            Some(r) => Err(Error::not_found(r.message)),
        }
    }

    /// `verify --deep`: the data and delete files snapshot `id` reads,
    /// checked through the `data_path` storage grant.
    fn check_files(&self, id: i64) -> Result<VerifyReport> {
        let unknown = |message: String| {
            Ok(VerifyReport {
                status: VerifyStatus::Unknown,
                message,
            })
        };
        let Some(root) = self.loc.data_path.as_deref() else {
            return unknown(format!(
                "snapshot {id} is in the catalog; the locator names no `data_path`, so tether \
                 cannot check its files"
            ));
        };
        let root = format!("{}/", root.trim_end_matches('/'));
        let catalog_root = match self.cat.data_path()? {
            Some(p) => format!("{}/", p.trim_end_matches('/')),
            None => root.clone(),
        };
        let files = self.cat.files_at(id, DEEP_FILES + 1)?;
        if files.len() > DEEP_FILES as usize {
            return unknown(format!(
                "snapshot {id} is in the catalog and reads more than {DEEP_FILES} files, more \
                 than `verify --deep` checks"
            ));
        }
        let tables: BTreeMap<i64, TableRow> = self
            .cat
            .tables_at(id)?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();
        let schemas: BTreeMap<i64, SchemaRow> = self
            .cat
            .schemas()?
            .into_iter()
            .filter(|s| live(s.begin, s.end, id))
            .map(|s| (s.id, s))
            .collect();
        let bucket = Bucket::open(&tether_sdk::kit::storage_uri(&root))
            .map_err(|e| Error::backend(format!("data_path {root}: {e}")))?;
        let (mut missing, mut outside) = (Vec::new(), 0usize);
        for (table_id, path, relative) in &files {
            let full = if *relative {
                let Some(t) = tables.get(table_id) else {
                    outside += 1;
                    continue;
                };
                let table_dir = if t.path_is_relative {
                    let schema_dir = match schemas.get(&t.schema_id) {
                        Some(s) if s.path_is_relative => format!("{catalog_root}{}", s.path),
                        Some(s) => s.path.clone(),
                        None => catalog_root.clone(),
                    };
                    format!("{schema_dir}{}", t.path)
                } else {
                    t.path.clone()
                };
                format!("{table_dir}{path}")
            } else {
                path.clone()
            };
            let Some(key) = full.strip_prefix(&root) else {
                outside += 1;
                continue;
            };
            match bucket.head(key) {
                Ok(Some(_)) => {}
                Ok(None) => missing.push(key.to_owned()),
                Err(e) => return unknown(format!("cannot check {key}: {e}")),
            }
        }
        let unchecked = if outside > 0 {
            format!(" ({outside} files outside data_path were not checked)")
        } else {
            String::new()
        };
        if missing.is_empty() {
            return Ok(VerifyReport {
                status: VerifyStatus::Ok,
                message: format!(
                    "snapshot {id} is in the catalog and all {} files it reads are present{unchecked}",
                    files.len() - outside
                ),
            });
        }
        let n = missing.len();
        missing.truncate(10);
        Ok(VerifyReport {
            status: VerifyStatus::Missing,
            message: format!(
                "snapshot {id} is in the catalog but {n} of the files it reads are gone: {}{}",
                missing.join(", "),
                if n > 10 { ", ..." } else { "" }
            ),
        })
    }

    /// The DuckDB statement that attaches this catalog (at `snapshot`).
    fn attach_sql(&self, snapshot: Option<i64>) -> String {
        let mut options = vec!["READ_ONLY".to_owned()];
        if let Some(dp) = &self.loc.data_path {
            options.push(format!("DATA_PATH {}", quote(dp)));
        }
        if let Some(s) = &self.loc.metadata_schema {
            options.push(format!("METADATA_SCHEMA {}", quote(s)));
        }
        if let Some(n) = snapshot {
            options.push(format!("SNAPSHOT_VERSION {n}"));
        }
        format!(
            "ATTACH {} AS {ALIAS} ({})",
            quote(&self.metadata),
            options.join(", ")
        )
    }
}

/// Names of tables by id, as of a snapshot (else their last name).
struct Names {
    tables: Vec<TableRow>,
    schemas: Vec<SchemaRow>,
}

impl Names {
    fn row_at(&self, id: i64, at: i64) -> Option<&TableRow> {
        let rows = self.tables.iter().filter(|t| t.id == id);
        rows.clone()
            .find(|t| live(t.begin, t.end, at))
            .or_else(|| rows.max_by_key(|t| t.begin))
    }

    fn schema_name(&self, id: i64, at: i64) -> String {
        let rows = self.schemas.iter().filter(|s| s.id == id);
        rows.clone()
            .find(|s| live(s.begin, s.end, at))
            .or_else(|| rows.max_by_key(|s| s.begin))
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("schema#{id}"))
    }

    fn name(&self, id: i64, at: i64) -> String {
        match self.row_at(id, at) {
            Some(t) => table_path(&self.schema_name(t.schema_id, at), &t.name),
            None => format!("table#{id}"),
        }
    }

    /// The table a `created_table` entry of snapshot `at` made.
    fn created(&self, schema: &str, table: &str, at: i64) -> Option<i64> {
        self.tables
            .iter()
            .find(|t| {
                t.begin == at && t.name == table && self.schema_name(t.schema_id, at) == schema
            })
            .map(|t| t.id)
    }

    fn exists_at(&self, id: i64, at: i64) -> bool {
        self.tables
            .iter()
            .any(|t| t.id == id && live(t.begin, t.end, at))
    }
}

/// What one table went through between two snapshots.
#[derive(Debug, Default)]
struct TableChange {
    created: bool,
    dropped: bool,
    altered: bool,
    written: bool,
    /// A name when the table is known only by its `created_table` entry.
    name: Option<String>,
}

impl Backend for DuckLakeBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("DuckDB 1.5.5 with the DuckLake 1.0 extension, SQLite and PostgreSQL catalogs, local data paths")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            maturity: "experimental".into(),
            storage_keys: vec!["data_path".into()],
            local_path_keys: vec!["metadata".into(), "uri".into(), "data_path".into()],
            local_path_prefixes: vec![
                "ducklake:sqlite:".into(),
                "ducklake:duckdb:".into(),
                "sqlite:".into(),
                "duckdb:".into(),
            ],
            ..descriptor("ducklake", CAPABILITIES)
        }
    }

    fn configure(&mut self, config: Value) -> Result<()> {
        self.config = serde_json::from_value(config)
            .map_err(|e| Error::invalid(format!("[backends.ducklake]: {e}")))?;
        Ok(())
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        if loc.init_sql.is_some() {
            return Err(Error::invalid(
                "`init_sql` runs code, so a committed locator may not hold it: put it in \
                 .tether/secrets.toml ([backends.ducklake] init_sql = [...])",
            ));
        }
        let (_, address) = loc.address(&self.config)?;
        let kind = catalog_kind(address)?;
        if kind == CatalogKind::Sqlite
            && loc.metadata_schema.as_deref().is_some_and(|s| s != "main")
        {
            return Err(Error::invalid(
                "`metadata_schema` is for PostgreSQL catalogs; a SQLite catalog keeps its \
                 tables in `main`",
            ));
        }
        if let Some(dp) = &loc.data_path
            && !dp.starts_with('/')
            && !dp.contains("://")
        {
            return Err(Error::invalid(format!(
                "data_path {dp:?} must be an absolute path or a URL"
            )));
        }
        if loc.table.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::invalid("`table` must not be empty"));
        }
        loc.at()?;
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        let (_, address) = loc.address(&self.config)?;
        let mut id = json!({"metadata": format!("ducklake:{}", body(address))});
        if let Some(dp) = &loc.data_path {
            id["data_path"] = json!(dp.trim_end_matches('/'));
        }
        if let Some(s) = &loc.metadata_schema {
            id["metadata_schema"] = json!(s);
        }
        Ok(id)
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "DuckLake catalogs have no branches (asked for {name})"
            )));
        }
        Ok(state_json(&self.lake(loc)?.base()?))
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        _pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let recorded = parse_state(state)?;
        let lake = self.lake(loc)?;
        if let Some(report) = lake.gone(&recorded)? {
            return Ok(report);
        }
        let id = recorded.id;
        if deep {
            return lake.check_files(id);
        }
        Ok(VerifyReport {
            status: VerifyStatus::Unknown,
            message: format!(
                "snapshot {id} is in the catalog, so DuckDB reads it (AT (VERSION => {id})) \
                 until ducklake_expire_snapshots removes it; only `verify --deep` checks that \
                 its files are still there"
            ),
        })
    }

    fn open(&self, loc: &Locator, target: &Target, _read_only: bool) -> Result<Handle> {
        let lake = self.lake(loc)?;
        let (snapshot, version) = match target {
            Target::Base => {
                let s = lake.base()?;
                let version = loc.at()?.map(|_| s.id);
                (s, version)
            }
            Target::Recorded(state) => {
                let s = lake.recorded(state)?;
                (s.clone(), Some(s.id))
            }
            Target::Pinned(_) | Target::WorkingRef(_) => {
                return Err(Error::Capability(
                    "DuckLake catalogs have no tags or branches: open a recorded snapshot".into(),
                ));
            }
        };
        let table_ref = loc.table.as_ref().map(|t| format!("{ALIAS}.{t}"));
        Ok(Handle {
            type_name: "DuckLakeHandle".into(),
            address: format!("{}#snapshot={}", lake.metadata, snapshot.id),
            // Writes to a catalog land in place, on every reader: there is
            // no branch to write on, so every handle reads.
            read_only: true,
            fields: json!({
                "metadata": lake.metadata,
                "alias": ALIAS,
                "snapshot_id": snapshot.id,
                "snapshot_time": changes::rfc3339_us(snapshot.time_us),
                "attach_sql": lake.attach_sql(version),
                "data_path": loc.data_path,
                "metadata_schema": loc.metadata_schema,
                "table": loc.table,
                "table_ref": table_ref,
                "init_sql": if self.config.init_sql.as_ref().is_some_and(|s| !s.is_empty()) {
                    "run [backends.ducklake] init_sql from .tether/secrets.toml before attaching"
                } else {
                    ""
                },
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let lake = self.lake(loc)?;
        let start = match from_ref {
            Some(rev) => {
                let id = parse_at(&Value::String(rev.to_owned()))?;
                lake.cat.snapshot(id)?.ok_or_else(|| {
                    Error::not_found(format!("snapshot {id} is not in the catalog"))
                })?
            }
            None => lake.base()?,
        };
        let entries = lake.cat.entries(-1, start.id, limit)?;
        let ids: BTreeSet<i64> = entries
            .iter()
            .flat_map(|e| e.changes.iter().filter_map(Change::table_id))
            .collect();
        let names = Names {
            tables: lake.cat.tables(&ids, 0, -1)?,
            schemas: lake.cat.schemas()?,
        };
        Ok(entries
            .iter()
            .map(|e| {
                let at = e.snapshot.id;
                let mut message = changes::describe(&e.changes, |id| names.name(id, at));
                if let Some(m) = e.message.as_deref().filter(|m| !m.is_empty()) {
                    message = format!("{m} ({message})");
                }
                if let Some(a) = e.author.as_deref().filter(|a| !a.is_empty()) {
                    message.push_str(&format!(" by {a}"));
                }
                HistoryEntry {
                    id: at.to_string(),
                    when: Some(changes::rfc3339_us(e.snapshot.time_us)),
                    message,
                    refs: Vec::new(),
                }
            })
            .collect())
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
        let mut out = ObjectDiff::new("tables");
        if a == b {
            return Ok(out);
        }
        let lake = self.lake(loc)?;
        for s in [&a, &b] {
            if let Some(r) = lake.gone(s)?
                && r.status == VerifyStatus::Drifted
            {
                out.add(
                    "catalog",
                    DiffChange::Modified,
                    format!("recreated: snapshot {} is another catalog's", s.id),
                );
                out.note(r.message);
                return Ok(out);
            }
        }
        let forward = a.id <= b.id;
        let (lo, hi) = if forward { (a.id, b.id) } else { (b.id, a.id) };
        diff_tables(&lake.cat, lo, hi, forward, &mut out)?;
        Ok(out)
    }

    fn state_addressable(&self, loc: &Locator, state: &Value) -> Result<bool> {
        let s = parse_state(state)?;
        Ok(self.lake(loc)?.gone(&s)?.is_none())
    }
}

/// The per-table diff of the snapshots in `(lo, hi]`, written as going
/// from `lo` to `hi` (`forward`) or back.
fn diff_tables(cat: &Catalog, lo: i64, hi: i64, forward: bool, out: &mut ObjectDiff) -> Result<()> {
    let entries = cat.entries(lo, hi, u32::MAX)?;
    let mut ids: BTreeSet<i64> = BTreeSet::new();
    let mut compacted: BTreeSet<i64> = BTreeSet::new();
    for e in &entries {
        for c in &e.changes {
            if let Some(id) = c.table_id() {
                ids.insert(id);
            }
            if matches!(c, Change::Compacted(_)) {
                compacted.insert(e.snapshot.id);
            }
        }
    }
    let names = Names {
        tables: cat.tables(&ids, lo, hi)?,
        schemas: cat.schemas()?,
    };
    let mut tables: BTreeMap<i64, TableChange> = BTreeMap::new();
    let mut notes: Vec<String> = Vec::new();
    let mut unknown_created = 0i64;
    for e in entries.iter().rev() {
        let at = e.snapshot.id;
        for c in &e.changes {
            let (id, created_name) = match c {
                Change::CreatedTable(s, t) => match names.created(s, t, at) {
                    Some(id) => (id, None),
                    None => {
                        // Made and gone again before `hi`, under no row we read.
                        unknown_created -= 1;
                        (unknown_created, Some(table_path(s, t)))
                    }
                },
                other => match other.table_id() {
                    Some(id) => (id, None),
                    None => continue,
                },
            };
            let t = tables.entry(id).or_default();
            if created_name.is_some() {
                t.name = created_name;
            }
            match c {
                Change::CreatedTable(..) => t.created = true,
                Change::DroppedTable(_) => t.dropped = true,
                Change::Altered(_) => t.altered = true,
                Change::Inserted(_) | Change::Deleted(_) => t.written = true,
                _ => {}
            }
        }
    }
    let live_ids: BTreeSet<i64> = tables
        .keys()
        .copied()
        .filter(|id| *id >= 0 && names.exists_at(*id, hi))
        .collect();
    let ends_known = cat.snapshot(lo)?.is_some() && cat.snapshot(hi)?.is_some();
    let counts = if ends_known {
        cat.counts(&live_ids, lo, hi, &compacted)?
    } else {
        BTreeMap::new()
    };
    for (id, t) in &tables {
        if t.created && t.dropped {
            continue;
        }
        let name = t.name.clone().unwrap_or_else(|| names.name(*id, hi));
        let (mut change, mut parts) = if t.created {
            (DiffChange::Added, vec!["created".to_owned()])
        } else if t.dropped {
            (DiffChange::Removed, vec!["dropped".to_owned()])
        } else {
            (DiffChange::Modified, Vec::new())
        };
        if t.altered {
            parts.push("altered".into());
        }
        if let Some(c) = counts.get(id) {
            let inserted = c.added.to_string();
            let deleted = match c.split {
                // Rows deleted = rows live at lo + rows added - rows live at
                // hi, each exact while no file spans an end.
                None => (c.added - (c.at_hi - c.at_lo)).max(0).to_string(),
                Some(split) => {
                    notes.push(split_note(&name, &split));
                    "?".to_owned()
                }
            };
            let inserted = match c.split {
                Some(split) if !split.deletes => "?".to_owned(),
                _ => inserted,
            };
            let (plus, minus) = if forward {
                (inserted, deleted)
            } else {
                (deleted, inserted)
            };
            parts.push(format!("+{plus} rows, -{minus} rows"));
        } else if t.written && !t.dropped {
            parts.push("rows written (counts unknown)".into());
        }
        if !forward {
            change = match change {
                DiffChange::Added => DiffChange::Removed,
                DiffChange::Removed => DiffChange::Added,
                m => m,
            };
            for p in &mut parts {
                if p == "created" {
                    *p = "dropped".into();
                } else if p == "dropped" {
                    *p = "created".into();
                }
            }
        }
        out.add(name, change, parts.join(", "));
    }
    let expected = usize::try_from(hi - lo).unwrap_or(usize::MAX);
    if entries.len() < expected {
        notes.push(format!(
            "{} of the snapshots between {lo} and {hi} were expired \
             (ducklake_expire_snapshots): what they changed is not known{}",
            expected - entries.len(),
            if ends_known {
                ""
            } else {
                ", and row counts need both ends"
            }
        ));
    }
    if !notes.is_empty() {
        out.note(notes.join("; "));
    }
    Ok(())
}

/// Why a table's row counts are not given: what the catalog cannot tell
/// (see [`catalog::Split`]).
fn split_note(table: &str, split: &catalog::Split) -> String {
    let catalog::Split {
        deletes,
        begin,
        max,
        at,
    } = *split;
    let (file, total) = if deletes {
        ("delete file", "delete_count")
    } else {
        ("data file", "record_count")
    };
    format!(
        "{table}: a {file} live at snapshot {at} holds the rows of snapshots {begin} to {max} \
         together; the catalog records only their total ({total}), and how many belong to \
         snapshot {at} or before is in the file's own rows (_ducklake_internal_snapshot_id), \
         so the row counts marked ? are not known from the catalog"
    )
}

/// The committed `[backends.ducklake]` may set nothing: the catalog is each
/// object's own, and `init_sql` runs code, so it belongs in secrets.toml.
impl tether_sdk::DescribeExt for DuckLakeBackend {
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The catalog database: the locator's `metadata` (or its positional
/// `uri`), which the host opens with the password it holds.
impl tether_sdk::DescribeNet for DuckLakeBackend {
    fn sql_keys(&self) -> Vec<String> {
        vec!["metadata".into(), "uri".into()]
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(DuckLakeBackend, harness: DuckLakeHarness, [describe_ext, describe_net]);

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(v: Value) -> Locator {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn catalogs_are_named_and_duckdb_files_refused() {
        assert_eq!(
            catalog_kind("ducklake:sqlite:/x/c.sqlite").unwrap(),
            CatalogKind::Sqlite
        );
        assert_eq!(
            catalog_kind("postgres:dbname=lake host=h").unwrap(),
            CatalogKind::Postgres
        );
        for m in [
            "ducklake:duckdb:/x/c.ducklake",
            "/x/c.ducklake",
            "ducklake:c.ducklake",
        ] {
            let err = catalog_kind(m).unwrap_err().to_string();
            assert!(err.contains("DuckDB-file"), "{err}");
            assert!(
                err.contains("SQLite") && err.contains("PostgreSQL"),
                "{err}"
            );
        }
        assert!(catalog_kind("ducklake:mysql:db=x").is_err());
    }

    #[test]
    fn locators() {
        let b = DuckLakeBackend::default();
        let l = loc(json!({"uri": "sqlite:/x/c.sqlite", "data_path": "/d/"}));
        b.validate_locator(&l).unwrap();
        assert_eq!(
            b.identity(&l).unwrap(),
            json!({"metadata": "ducklake:sqlite:/x/c.sqlite", "data_path": "/d"})
        );
        let err = b
            .validate_locator(&loc(
                json!({"metadata": "ducklake:sqlite:/x", "init_sql": ["x"]}),
            ))
            .unwrap_err();
        assert!(err.to_string().contains("secrets.toml"), "{err}");
        assert!(b.validate_locator(&loc(json!({}))).is_err());
        assert!(
            b.validate_locator(&loc(json!({"metadata": "ducklake:sqlite:/x", "at": "x"})))
                .is_err()
        );
        assert!(
            b.validate_locator(&loc(
                json!({"metadata": "ducklake:sqlite:/x", "metadata_schema": "s"})
            ))
            .is_err()
        );
        assert_eq!(parse_at(&json!("12")).unwrap(), 12);
    }
}
