//! # tether-plugin-iceberg: Apache Iceberg tables (experimental)
//!
//! Kind `iceberg` (spec/11, "`iceberg`: Apache Iceberg tables"): a Forkable
//! backend over one table of an Iceberg catalog, on the two catalog kinds
//! most deployments use:
//!
//! - the **SQL catalog** (`type = "sql"`, pyiceberg's `SqlCatalog` layout on
//!   SQLite or PostgreSQL): the `iceberg_tables` row points at the table's
//!   current metadata JSON, read and written through the host's `storage`
//!   capability under the catalog's `warehouse`; a ref change writes the next
//!   metadata file (`NNNNN-<uuid>.metadata.json`, as pyiceberg names it) and
//!   moves the pointer with the compare-and-swap `UPDATE` pyiceberg commits
//!   with, through the host's `sql` capability ([`sql`]);
//! - the **REST catalog** (`type = "rest"`) over `wasi:http`: `loadTable`,
//!   and commits of `requirements` (`assert-ref-snapshot-id`) and `updates`
//!   (`set-snapshot-ref`, `remove-snapshot-ref`) ([`rest`]).
//!
//! ## Locator, configuration, state
//!
//! ```json
//! {"identifier": "ns.table", "branch": "main", "catalog_name": "default",
//!  "catalog": {"type": "sql", "warehouse": "file:///data/wh"}, "at": "<snapshot id, tag or branch>"}
//! ```
//!
//! `table` is accepted for `identifier`. Catalog properties come from
//! `[backends.iceberg] catalog = {...}` with the locator's `catalog` over
//! them; committed (tether.toml or the locator) may be only `type`,
//! `warehouse` and `name`, everything else (`uri`, `token`) only in
//! `.tether/secrets.toml`. The host opens the SQL catalog's `uri` itself
//! (the plugin never sees its password) and sends the REST catalog's `token`
//! itself. The identity is `{identifier, branch, catalog_name}`; a state is
//! `{"snapshot_id": <i64>}`, `-1` for a table with no snapshot yet.
//!
//! ## Refs
//!
//! Pins are tags `tether.<pin_id>` (the empty state needs none); working
//! refs are branches `tether.ws.*` made at the source snapshot; promote
//! moves the base branch to a fork's snapshot when the base's head is an
//! ancestor of it. Every move carries `assert-ref-snapshot-id` with the head
//! the caller reviewed ([`catalog`]).

pub mod catalog;
mod harness;
pub mod metadata;
mod rest;
mod sql;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tether_sdk::kit::{self, PinCheck, PinSlot, SecondsFormat};
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyItem, VerifyReport, cap, descriptor,
};

use catalog::{Catalog, state_json};
pub use harness::IcebergHarness;
use metadata::{MAIN, Metadata, NO_SNAPSHOT, RefKind, Snapshot};

/// Capabilities of every iceberg object.
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::CHEAP_FINGERPRINT,
    cap::RETENTION_BOUND,
    cap::ATOMIC_REF,
    cap::CONDITIONAL_REF,
    cap::DIFF,
    cap::HISTORY,
    cap::PROMOTE,
];

/// The catalog properties a committed file or a locator may set.
pub const COMMITTED_CATALOG_KEYS: &[&str] = &["type", "warehouse", "name"];

/// The configuration key whose value is the SQL catalog's database (the
/// host opens it) or the REST catalog's base URL (the host grants its origin).
pub const CATALOG_URI_KEY: &str = "catalog.uri";
/// Where table metadata lives: the storage grant.
pub const WAREHOUSE_KEY: &str = "catalog.warehouse";
/// The REST catalog's bearer token (sent by the host, never seen here).
pub const TOKEN_KEY: &str = "catalog.token";

/// An iceberg object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    #[serde(default)]
    identifier: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default = "default_catalog_name")]
    catalog_name: String,
    #[serde(default)]
    catalog: Map<String, Value>,
    #[serde(default)]
    at: Option<String>,
}

fn default_branch() -> String {
    MAIN.to_owned()
}

fn default_catalog_name() -> String {
    "default".to_owned()
}

impl Locator {
    /// The table identifier as given (`ns.table`, or `a.b.table`).
    fn identifier(&self) -> Result<&str> {
        self.identifier
            .as_deref()
            .or(self.table.as_deref())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Error::invalid("an iceberg locator needs `identifier` (ns.table) or `table`")
            })
    }

    /// (namespace parts, table name).
    fn name_parts(&self) -> Result<(Vec<String>, String)> {
        let ident = self.identifier()?;
        let mut parts: Vec<String> = ident.split('.').map(str::to_owned).collect();
        let table = parts.pop().unwrap_or_default();
        if parts.is_empty() || table.is_empty() || parts.iter().any(String::is_empty) {
            return Err(Error::invalid(format!(
                "iceberg identifier {ident:?} is not `namespace.table`"
            )));
        }
        Ok((parts, table))
    }
}

/// `[backends.iceberg]`, as the host passes it (committed and secrets merged).
#[derive(Debug, Clone, Default, Deserialize)]
struct Config {
    #[serde(default)]
    catalog: Map<String, Value>,
}

/// The catalog kinds this backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CatalogType {
    Sql,
    Rest,
}

/// The iceberg backend. Holds only the configuration `configure` gave.
#[derive(Default, Clone)]
pub struct IcebergBackend {
    config: Config,
    /// Unit tests: the catalog every object opens.
    #[cfg(test)]
    fake: Option<std::rc::Rc<catalog::fake::FakeCatalog>>,
}

/// One table, opened in its catalog.
struct Table {
    catalog: Box<dyn Catalog>,
}

impl Table {
    fn load(&self) -> Result<Metadata> {
        Ok(self.catalog.load()?.metadata)
    }
}

impl IcebergBackend {
    /// `verify`'s answer for snapshot `id` given the pin's live tag.
    fn report(
        meta: &Metadata,
        id: i64,
        pin: Option<&PinRef>,
        live: Option<(String, i64)>,
        deep: bool,
    ) -> Result<VerifyReport> {
        if id == NO_SNAPSHOT {
            return Ok(VerifyReport {
                status: tether_sdk::VerifyStatus::Ok,
                message: "the empty state (no snapshot) needs no tag".into(),
            });
        }
        let check = PinCheck {
            pin,
            state: id,
            noun: "snapshot",
            deep,
        };
        check.report(live, |id| Ok(meta.has_snapshot(*id)))
    }

    /// The catalog properties for `loc`: the configuration's, the locator's over them.
    fn properties(&self, loc: &Locator) -> Map<String, Value> {
        let mut props = self.config.catalog.clone();
        for (k, v) in &loc.catalog {
            props.insert(k.clone(), v.clone());
        }
        props
    }

    fn catalog_type(&self, loc: &Locator) -> Result<CatalogType> {
        let props = self.properties(loc);
        let uri = props.get("uri").and_then(Value::as_str).unwrap_or("");
        match props.get("type").and_then(Value::as_str) {
            Some("sql") => Ok(CatalogType::Sql),
            Some("rest") => Ok(CatalogType::Rest),
            Some(other) => Err(Error::invalid(format!(
                "iceberg catalog type {other:?} is not supported; this backend speaks the \
                 `sql` and `rest` catalogs"
            ))),
            // pyiceberg's inference: an http(s) URI is a REST catalog.
            None if uri.starts_with("http://") || uri.starts_with("https://") => {
                Ok(CatalogType::Rest)
            }
            None => Ok(CatalogType::Sql),
        }
    }

    fn table(&self, loc: &Locator) -> Result<Table> {
        #[cfg(test)]
        if let Some(fake) = &self.fake {
            return Ok(Table {
                catalog: Box::new(fake.clone()),
            });
        }
        let (namespace, name) = loc.name_parts()?;
        let props = self.properties(loc);
        let catalog: Box<dyn Catalog> = match self.catalog_type(loc)? {
            CatalogType::Sql => {
                Box::new(sql::SqlCatalog::open(&loc.catalog_name, namespace, name)?)
            }
            CatalogType::Rest => Box::new(rest::RestCatalog::open(&props, namespace, name)?),
        };
        Ok(Table { catalog })
    }

    fn refuse_base(loc: &Locator, name: &str, what: &str) -> Result<()> {
        kit::refuse_base(&loc.branch, name, what)?;
        kit::refuse_base(MAIN, name, what)
    }
}

fn snapshot_id(state: &Value) -> Result<i64> {
    state
        .get("snapshot_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{state} is not an iceberg state ({{\"snapshot_id\": <int>}})"
            ))
        })
}

/// A revision as `at` and `history --at` accept it: a snapshot id, a tag
/// or a branch.
fn resolve_rev(meta: &Metadata, rev: &str) -> Result<i64> {
    if let Ok(id) = rev.parse::<i64>()
        && (id == NO_SNAPSHOT || meta.has_snapshot(id))
    {
        return Ok(id);
    }
    if let Some(r) = meta.ref_(rev) {
        return Ok(r.snapshot_id);
    }
    if let Some(id) = meta.branch_head(rev) {
        return Ok(id);
    }
    Err(Error::not_found(format!(
        "{rev:?} is no snapshot id, tag or branch of this table"
    )))
}

fn branch_head(meta: &Metadata, name: &str) -> Result<i64> {
    meta.branch_head(name)
        .ok_or_else(|| Error::not_found(format!("branch {name} does not exist")))
}

fn base_head(meta: &Metadata, loc: &Locator) -> Result<i64> {
    kit::base_head(meta, loc.at.as_deref(), &loc.branch)
}

/// The tags by name, for [`kit::live_generation`].
fn tags(meta: &Metadata) -> BTreeMap<String, i64> {
    meta.refs()
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, r)| r.kind == RefKind::Tag)
        .map(|(n, r)| (n, r.snapshot_id))
        .collect()
}

fn live_pin_tag(meta: &Metadata, pin: &PinRef) -> Option<(String, i64)> {
    kit::live_tag(&tags(meta), pin)
}

/// A table's snapshots as [`kit::resolve_target`] finds them.
impl kit::Heads for Metadata {
    type Head = i64;

    fn rev(&self, rev: &str) -> Result<i64> {
        resolve_rev(self, rev)
    }

    fn branch(&self, name: &str) -> Result<i64> {
        branch_head(self, name)
    }

    fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, i64)>> {
        Ok(live_pin_tag(self, pin))
    }

    fn recorded(&self, state: &Value) -> Result<i64> {
        snapshot_id(state)
    }
}

/// The snapshot a target names.
fn resolve(meta: &Metadata, loc: &Locator, target: &Target) -> Result<i64> {
    let id = kit::resolve_target(meta, loc.at.as_deref(), &loc.branch, target)?;
    if id != NO_SNAPSHOT && !meta.has_snapshot(id) {
        return Err(Error::not_found(format!(
            "snapshot {id} is not in the table's metadata (expired?)"
        )));
    }
    Ok(id)
}

fn history_entry(s: &Snapshot, refs: &mut BTreeMap<i64, Vec<String>>) -> HistoryEntry {
    HistoryEntry {
        id: s.id.to_string(),
        when: Some(kit::rfc3339(
            s.timestamp_ms.div_euclid(1000),
            (s.timestamp_ms.rem_euclid(1000) * 1_000_000) as u32,
            SecondsFormat::Millis,
        )),
        message: s.describe(),
        refs: refs.remove(&s.id).unwrap_or_default(),
    }
}

impl Backend for IcebergBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("pyiceberg 0.12.0: SQL catalogs on SQLite and PostgreSQL, a REST catalog, local and S3 (moto) warehouses")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            maturity: "experimental".into(),
            storage_keys: vec![WAREHOUSE_KEY.into()],
            promote_hint: "The base branch has moved since the fork, and Iceberg cannot merge \
                           branches: fork again from the new base and redo the writes there \
                           (or cherry-pick with your engine)."
                .into(),
            ..descriptor("iceberg", CAPABILITIES)
        }
    }

    fn configure(&mut self, config: Value) -> Result<()> {
        self.config = serde_json::from_value(config)
            .map_err(|e| Error::invalid(format!("[backends.iceberg]: {e}")))?;
        Ok(())
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        loc.name_parts()?;
        if loc.branch.is_empty() {
            return Err(Error::invalid("locator `branch` must not be empty"));
        }
        if let Some(key) = loc
            .catalog
            .keys()
            .find(|k| !COMMITTED_CATALOG_KEYS.contains(&k.as_str()))
        {
            return Err(Error::invalid(format!(
                "the locator's `catalog` may hold only {}; `{key}` belongs in \
                 .tether/secrets.toml ([backends.iceberg] catalog)",
                COMMITTED_CATALOG_KEYS.join(", ")
            )));
        }
        let kind = self.catalog_type(loc)?;
        let props = self.properties(loc);
        if !props.contains_key("uri") {
            return Err(Error::invalid(
                "the iceberg catalog has no `uri`: set it in .tether/secrets.toml \
                 ([backends.iceberg] catalog = { uri = \"...\" })",
            ));
        }
        if kind == CatalogType::Sql && !props.contains_key("warehouse") {
            return Err(Error::invalid(
                "a SQL catalog needs `warehouse` (where table metadata lives): \
                 [backends.iceberg] catalog = { warehouse = \"file:///...\" }",
            ));
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        Ok(json!({
            "identifier": loc.identifier()?,
            "branch": loc.branch,
            "catalog_name": loc.catalog_name,
        }))
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        let meta = self.table(loc)?.load()?;
        let id = match working_ref {
            Some(name) => branch_head(&meta, name)?,
            None => base_head(&meta, loc)?,
        };
        Ok(state_json(id))
    }

    fn pin(&self, loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let table = self.table(loc)?;
        let id = snapshot_id(state)?;
        if id == NO_SNAPSHOT {
            // Nothing to hold: the empty state verifies and opens without a tag.
            return Ok(PinSlot::Reuse(kit::pin_ref_name(pin_id, 1)).pin_ref(pin_id));
        }
        for _ in 0..catalog::ATTEMPTS {
            let meta = table.load()?;
            if !meta.has_snapshot(id) {
                return Err(Error::not_found(format!(
                    "snapshot {id} is not in the table's metadata; cannot pin it"
                )));
            }
            let refs = meta.refs()?;
            let slot = kit::pin_slot(
                pin_id,
                &id,
                |_| Ok(false),
                |name| {
                    Ok(match refs.get(name) {
                        Some(r) if r.kind == RefKind::Tag => Some(r.snapshot_id),
                        Some(_) => {
                            return Err(Error::backend(format!(
                                "{name} is a branch; a pin is a tag"
                            )));
                        }
                        None => None,
                    })
                },
            )?;
            match &slot {
                PinSlot::Reuse(_) => return Ok(slot.pin_ref(pin_id)),
                PinSlot::Create(tag) => {
                    if catalog::create_tag(table.catalog.as_ref(), tag, id)? {
                        return Ok(slot.pin_ref(pin_id));
                    }
                    // Someone made it first: read it again.
                }
            }
        }
        Err(Error::backend(format!(
            "tag for pin {pin_id} kept changing; gave up"
        )))
    }

    fn unpin(&self, loc: &Locator, pin: &PinRef) -> Result<()> {
        let table = self.table(loc)?;
        loop {
            let meta = table.load()?;
            let Some((tag, _)) = live_pin_tag(&meta, pin) else {
                return Ok(());
            };
            catalog::remove_ref(table.catalog.as_ref(), &tag, RefKind::Tag)?;
        }
    }

    fn list_pins(&self, loc: &Locator) -> Result<Vec<String>> {
        let meta = self.table(loc)?.load()?;
        let mut ids: Vec<String> = tags(&meta)
            .keys()
            .filter_map(|t| kit::pin_id_of_ref(t))
            .map(str::to_owned)
            .collect();
        ids.dedup();
        Ok(ids)
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let meta = self.table(loc)?.load()?;
        let id = snapshot_id(state)?;
        let live = match id {
            NO_SNAPSHOT => None,
            _ => pin.and_then(|pin| live_pin_tag(&meta, pin)),
        };
        Self::report(&meta, id, pin, live, deep)
    }

    /// `verify` of each item with the table's metadata loaded once and its
    /// tags indexed once (`verify` loads it and collects every tag per pin).
    fn verify_many(
        &self,
        loc: &Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let meta = self.table(loc)?.load()?;
        let all = tags(&meta);
        let index = kit::PinTags::new(all.keys().map(String::as_str));
        let answer = |item: &VerifyItem| {
            let id = snapshot_id(&item.state)?;
            let pin = item.pin.as_ref();
            let live = pin
                .and_then(|pin| index.live(pin))
                .map(|tag| (tag.to_owned(), all[tag]));
            Self::report(&meta, id, pin, live, deep)
        };
        Ok(items.iter().map(answer).collect())
    }

    fn fork(
        &self,
        loc: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        Self::refuse_base(loc, name, "fork")?;
        let table = self.table(loc)?;
        catalog::move_ref(
            table.catalog.as_ref(),
            name,
            RefKind::Branch,
            expected,
            |_| {
                let meta = table.load()?;
                let id = resolve(&meta, loc, source)?;
                if id == NO_SNAPSHOT {
                    return Err(Error::backend(
                        "the table has no snapshot yet, and an Iceberg branch needs one: \
                         write the table on its trunk first, then fork",
                    ));
                }
                Ok(Some(id))
            },
        )?;
        Ok(name.to_owned())
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        Self::refuse_base(loc, working_ref, "delete_working_ref")?;
        let table = self.table(loc)?;
        catalog::remove_ref(table.catalog.as_ref(), working_ref, RefKind::Branch)
    }

    fn list_working_refs(&self, loc: &Locator) -> Result<Vec<String>> {
        let meta = self.table(loc)?.load()?;
        Ok(meta
            .refs()?
            .into_iter()
            .filter(|(n, r)| {
                r.kind == RefKind::Branch && n.starts_with(tether_sdk::WORKING_REF_PREFIX)
            })
            .map(|(n, _)| n)
            .collect())
    }

    fn promote(&self, loc: &Locator, source: &Target, expected: &Expected) -> Result<Value> {
        let table = self.table(loc)?;
        let hint = self.describe().promote_hint;
        let head = catalog::move_ref(
            table.catalog.as_ref(),
            &loc.branch,
            RefKind::Branch,
            expected,
            |head| {
                let meta = table.load()?;
                let source = resolve(&meta, loc, source)?;
                let head = *head.ok_or_else(|| {
                    Error::not_found(format!("branch {} does not exist", loc.branch))
                })?;
                if head == source {
                    Ok(None)
                } else if meta.is_ancestor(head, source) {
                    Ok(Some(source))
                } else {
                    Err(Error::backend(format!(
                        "{} (at snapshot {head}) is not an ancestor of snapshot {source}. {hint}",
                        loc.branch
                    )))
                }
            },
        )?;
        Ok(state_json(head))
    }

    fn ancestor_of(
        &self,
        loc: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let meta = self.table(loc)?.load()?;
        let (a, d) = (snapshot_id(ancestor)?, snapshot_id(descendant)?);
        let known = |id: i64| id == NO_SNAPSHOT || meta.has_snapshot(id);
        if !known(a) || !known(d) {
            return Ok(None);
        }
        Ok(Some(meta.is_ancestor(a, d)))
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let meta = self.table(loc)?.load()?;
        let id = resolve(&meta, loc, target)?;
        // The ref a reader opens: a branch (writable) or a tag; none for a
        // bare snapshot id.
        let (ref_, writable) = match target {
            Target::Base => match &loc.at {
                None => (Some(loc.branch.clone()), true),
                Some(at) if meta.ref_(at).is_some() => (Some(at.clone()), false),
                Some(_) => (None, false),
            },
            Target::WorkingRef(name) => (Some(name.clone()), true),
            Target::Pinned(pin) => (live_pin_tag(&meta, pin).map(|(t, _)| t), false),
            Target::Recorded(_) => (None, false),
        };
        let ident = loc.identifier()?;
        let fragment = ref_.clone().unwrap_or_else(|| id.to_string());
        let props = self.properties(loc);
        let committed: Map<String, Value> = props
            .into_iter()
            .filter(|(k, _)| COMMITTED_CATALOG_KEYS.contains(&k.as_str()))
            .collect();
        Ok(Handle {
            type_name: "IcebergHandle".into(),
            address: format!("{ident}#{fragment}"),
            read_only: read_only || !writable,
            fields: json!({
                "table": ident,
                "ref": ref_,
                "snapshot_id": id,
                "catalog_name": loc.catalog_name,
                "catalog": committed,
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let meta = self.table(loc)?.load()?;
        let start = match from_ref {
            Some(rev) => resolve_rev(&meta, rev)?,
            None => base_head(&meta, loc)?,
        };
        let mut refs: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for (name, r) in meta.refs()? {
            refs.entry(r.snapshot_id).or_default().push(name);
        }
        Ok(meta
            .ancestry(start)
            .iter()
            .take(limit as usize)
            .map(|s| history_entry(s, &mut refs))
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
        let meta = self.table(loc)?.load()?;
        Ok(diff(&meta, snapshot_id(a)?, snapshot_id(b)?))
    }

    fn branch_scope(&self, loc: &Locator) -> Result<String> {
        self.ref_namespace(loc)
    }

    fn ref_namespace(&self, loc: &Locator) -> Result<String> {
        // Refs belong to the table, whichever branch an object follows.
        Ok(tether_sdk::canonical_json(&json!({
            "identifier": loc.identifier()?,
            "catalog_name": loc.catalog_name,
        })))
    }

    fn state_addressable(&self, loc: &Locator, state: &Value) -> Result<bool> {
        let id = snapshot_id(state)?;
        Ok(id == NO_SNAPSHOT || self.table(loc)?.load()?.has_snapshot(id))
    }
}

/// `diff`: one entry per snapshot on `b`'s ancestry back to `a`; when `a`
/// is not an ancestor, the `total-*` counters compared instead.
fn diff(meta: &Metadata, a: i64, b: i64) -> ObjectDiff {
    let mut out = ObjectDiff::new("snapshots");
    if a == b {
        return out;
    }
    if meta.is_ancestor(a, b) {
        for s in meta.ancestry(b).iter().take_while(|s| s.id != a) {
            out.add(s.id.to_string(), Change::Added, s.describe());
        }
        return out;
    }
    let totals = |id: i64| {
        meta.snapshot(id)
            .map(|s| (s.counter("total-records"), s.counter("total-data-files")))
            .unwrap_or((0, 0))
    };
    let ((ra, fa), (rb, fb)) = (totals(a), totals(b));
    out.add(
        b.to_string(),
        Change::Modified,
        format!("total: rows {ra} -> {rb}, files {fa} -> {fb}"),
    );
    out.note(format!(
        "snapshot {a} is not an ancestor of {b}: the tables' total counters are compared"
    ));
    out
}

/// The committed `[backends.iceberg]` may set only the catalog's `type`,
/// `warehouse` and `name`.
impl tether_sdk::DescribeExt for IcebergBackend {
    fn config_keys(&self) -> Vec<String> {
        COMMITTED_CATALOG_KEYS
            .iter()
            .map(|k| format!("catalog.{k}"))
            .collect()
    }
}

/// The catalog's network: its `uri` is the SQL catalog's database (the host
/// connects) or the REST catalog's base URL (the host grants its origin and
/// sends `catalog.token`). Only one of the two applies to a given `uri`.
impl tether_sdk::DescribeNet for IcebergBackend {
    fn http_grants(&self) -> Vec<tether_sdk::HttpGrant> {
        vec![tether_sdk::HttpGrant {
            token_key: Some(TOKEN_KEY.into()),
            ..tether_sdk::HttpGrant::url(CATALOG_URI_KEY)
        }]
    }

    fn sql_keys(&self) -> Vec<String> {
        vec![CATALOG_URI_KEY.into()]
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(IcebergBackend, harness: IcebergHarness, [describe_ext, describe_net]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::tests_support::{S1, S2, sample};

    use std::rc::Rc;

    use crate::catalog::fake::FakeCatalog;
    use tether_sdk::VerifyStatus;

    const PIN: &str = "0a1b2c3d.0123456789abcdef";
    const WS: &str = "tether.ws.0a1b2c3d.feat";

    fn backend() -> (IcebergBackend, Rc<FakeCatalog>, Locator) {
        let fake = Rc::new(FakeCatalog::new(sample()));
        let b = IcebergBackend {
            fake: Some(fake.clone()),
            ..IcebergBackend::default()
        };
        let loc = serde_json::from_value(json!({"identifier": "ns.t"})).unwrap();
        (b, fake, loc)
    }

    /// A new snapshot on `branch` (what an engine's append does).
    fn append(fake: &FakeCatalog, branch: &str, id: i64) {
        let meta = fake.meta.borrow().clone();
        let parent = meta.branch_head(branch).unwrap();
        let snapshot = json!({"snapshot-id": id, "parent-snapshot-id": parent, "sequence-number": 9,
            "timestamp-ms": 2000, "summary": {"operation": "append", "added-records": "2", "added-data-files": "1"}});
        let next = meta
            .updated(
                "x",
                &[
                    crate::metadata::Update::AddSnapshot { snapshot },
                    crate::metadata::Update::SetRef {
                        ref_name: branch.into(),
                        kind: RefKind::Branch,
                        snapshot_id: id,
                    },
                ],
                2000,
            )
            .unwrap()
            .unwrap();
        *fake.meta.borrow_mut() = next;
    }

    #[test]
    fn pin_verify_unpin() {
        let (b, fake, loc) = backend();
        let state = b.fingerprint(&loc, None).unwrap();
        assert_eq!(state, json!({"snapshot_id": S2}));
        let pin = b.pin(&loc, &state, PIN).unwrap();
        assert!(pin.created);
        assert_eq!(pin.ref_, format!("tether.{PIN}"));
        let again = b.pin(&loc, &state, PIN).unwrap();
        assert!(!again.created, "pin is idempotent and says so");
        assert_eq!(b.list_pins(&loc).unwrap(), vec![PIN.to_string()]);
        let report = b.verify(&loc, &state, Some(&pin), true).unwrap();
        assert_eq!(report.status, VerifyStatus::Ok, "{report:?}");
        // Someone moves our tag: drifted; and a pin never moves it back.
        let moved = crate::metadata::Update::SetRef {
            ref_name: pin.ref_.clone(),
            kind: RefKind::Tag,
            snapshot_id: S1,
        };
        let next = fake
            .meta
            .borrow()
            .updated("x", &[moved], 1)
            .unwrap()
            .unwrap();
        *fake.meta.borrow_mut() = next;
        let report = b.verify(&loc, &state, Some(&pin), false).unwrap();
        assert_eq!(report.status, VerifyStatus::Drifted, "{report:?}");
        assert!(b.pin(&loc, &state, PIN).is_err());
        b.unpin(&loc, &pin).unwrap();
        b.unpin(&loc, &pin).unwrap();
        let report = b.verify(&loc, &state, Some(&pin), false).unwrap();
        assert_eq!(report.status, VerifyStatus::Missing, "{report:?}");
        // The empty state needs no tag.
        let empty = state_json(NO_SNAPSHOT);
        assert!(!b.pin(&loc, &empty, PIN).unwrap().created);
        let report = b.verify(&loc, &empty, Some(&pin), true).unwrap();
        assert_eq!(report.status, VerifyStatus::Ok);
    }

    #[test]
    fn fork_write_promote() {
        let (b, fake, loc) = backend();
        let state = b.fingerprint(&loc, None).unwrap();
        let pin = b.pin(&loc, &state, PIN).unwrap();
        assert!(
            b.fork(&loc, &Target::Base, "main", &Expected::Absent)
                .is_err()
        );
        b.fork(&loc, &Target::Pinned(pin.clone()), WS, &Expected::Absent)
            .unwrap();
        assert_eq!(b.list_working_refs(&loc).unwrap(), vec![WS.to_string()]);
        let handle = b.open(&loc, &Target::WorkingRef(WS.into()), false).unwrap();
        assert!(!handle.read_only);
        assert_eq!(handle.address, format!("ns.t#{WS}"));
        assert_eq!(handle.fields["snapshot_id"], json!(S2));
        let pinned = b.open(&loc, &Target::Pinned(pin.clone()), false).unwrap();
        assert!(pinned.read_only, "a tag opens read-only");
        assert_eq!(pinned.fields["ref"], json!(pin.ref_));
        append(&fake, WS, 77);
        let head = b.fingerprint(&loc, Some(WS)).unwrap();
        assert_eq!(head, json!({"snapshot_id": 77}));
        assert_eq!(b.ancestor_of(&loc, &state, &head).unwrap(), Some(true));
        // Promote only from the head reviewed.
        let stale = Expected::At(state_json(S1));
        let err = b.promote(&loc, &Target::WorkingRef(WS.into()), &stale);
        assert!(matches!(err, Err(Error::RefMoved(_))), "{err:?}");
        let promoted = b
            .promote(
                &loc,
                &Target::WorkingRef(WS.into()),
                &Expected::At(state.clone()),
            )
            .unwrap();
        assert_eq!(promoted, json!({"snapshot_id": 77}));
        assert_eq!(fake.meta.borrow().current_snapshot_id(), 77);
        // The history walks main's ancestry, newest first, with the refs.
        let history = b.history(&loc, None, 10).unwrap();
        let ids: Vec<&str> = history.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["77", &S2.to_string(), &S1.to_string()]);
        assert_eq!(history[0].message, "append: +2 rows, +1 files");
        assert!(history[0].refs.contains(&"main".to_string()));
        assert_eq!(history[0].when.as_deref(), Some("1970-01-01T00:00:02.000Z"));
        // A diverged fork is refused with the hint.
        b.fork(
            &loc,
            &Target::Recorded(state.clone()),
            WS,
            &Expected::Unconditional,
        )
        .unwrap();
        append(&fake, WS, 88);
        let err = b
            .promote(
                &loc,
                &Target::WorkingRef(WS.into()),
                &Expected::Unconditional,
            )
            .unwrap_err();
        assert!(err.to_string().contains("not an ancestor"), "{err}");
        b.delete_working_ref(&loc, WS).unwrap();
        b.delete_working_ref(&loc, WS).unwrap();
        assert!(b.list_working_refs(&loc).unwrap().is_empty());
        assert!(b.delete_working_ref(&loc, "main").is_err());
    }

    #[test]
    fn at_a_snapshot_tag_or_branch() {
        let (b, _, _) = backend();
        let at = |at: &str| -> Locator {
            serde_json::from_value(json!({"identifier": "ns.t", "at": at})).unwrap()
        };
        assert_eq!(
            b.fingerprint(&at(&S1.to_string()), None).unwrap(),
            state_json(S1)
        );
        assert_eq!(b.fingerprint(&at("main"), None).unwrap(), state_json(S2));
        assert!(b.fingerprint(&at("nope"), None).is_err());
        let h = b.open(&at(&S1.to_string()), &Target::Base, false).unwrap();
        assert!(h.read_only);
        assert_eq!(h.address, format!("ns.t#{S1}"));
    }

    #[test]
    fn diff_along_the_ancestry_and_across_lines() {
        let m = sample();
        let d = diff(&m, S1, S2);
        assert_eq!(d.added(), 1);
        let d = diff(&m, NO_SNAPSHOT, S2);
        assert_eq!(d.added(), 2);
        let d = diff(&m, S2, S1);
        assert_eq!(d.modified(), 1);
        assert_eq!(diff(&m, S1, S1).added(), 0);
    }

    #[test]
    fn locators() {
        let loc: Locator = serde_json::from_value(json!({"table": "a.b.t"})).unwrap();
        assert_eq!(
            loc.name_parts().unwrap(),
            (vec!["a".into(), "b".into()], "t".into())
        );
        let loc: Locator = serde_json::from_value(json!({"identifier": "t"})).unwrap();
        assert!(loc.name_parts().is_err());
        let b = IcebergBackend::default();
        let loc: Locator = serde_json::from_value(json!({
            "identifier": "ns.t", "catalog": {"type": "sql", "uri": "sqlite:///x"}
        }))
        .unwrap();
        let err = b.validate_locator(&loc).unwrap_err();
        assert!(err.to_string().contains("secrets.toml"), "{err}");
        assert_eq!(
            resolve_rev(&sample(), &S1.to_string()).unwrap(),
            S1,
            "a snapshot id"
        );
        assert_eq!(resolve_rev(&sample(), "main").unwrap(), S2);
    }
}
