//! # tether-plugin-dolt: Dolt databases (experimental)
//!
//! Kind `dolt` (spec/11, "`dolt`: Dolt databases"): a Forkable backend over
//! one branch of a database on a `dolt sql-server` (or Hosted Dolt), spoken
//! to over the MySQL protocol through the host's `sql` capability. The host
//! opens the connection to the locator's `url`; the password comes from the
//! server's `[uris."mysql://host:port"]` entry in `.tether/secrets.toml` and
//! never reaches this plugin.
//!
//! ## Locator and state
//!
//! ```json
//! {"url": "mysql://user@host:3306/database", "branch": "main", "at": "<commit, tag or branch>"}
//! ```
//!
//! The identity is `{host, port, database}`. A state is `{"commit": <hash>}`,
//! with `"dirty": true` when `dolt_branches.dirty` reports uncommitted
//! changes in the branch's working set: such a state is refused at pin time
//! (commit it with `CALL DOLT_COMMIT` first).
//!
//! ## Refs
//!
//! Pins are tags `tether.<pin_id>` (`CALL DOLT_TAG(name, commit)`); working
//! refs are branches `tether.ws.*` (`CALL DOLT_BRANCH(name, commit)`, moved
//! with `-f`). Promote and merge check the base branch out and run
//! `DOLT_MERGE` (`--ff-only` to promote) inside an explicit transaction, the
//! only way Dolt reports which tables conflict: those come back as
//! `MergeConflict` and the transaction is rolled back, so nothing is written.
//! Handles are revision-database URLs (`mysql://user@host:port/db/ref`).

mod db;
mod harness;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit::{self, CasRef, PinCheck, PinSlot, Swap};
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyReport, cap, descriptor,
};

use db::{Db, URL_KEY};
pub use harness::DoltHarness;

/// Capabilities of every dolt object.
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::CHEAP_FINGERPRINT,
    cap::DIFF,
    cap::HISTORY,
    cap::PROMOTE,
    cap::MERGE,
];

/// The branch a locator follows when it names none.
pub const MAIN: &str = "main";

/// A dolt object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    #[serde(default)]
    url: Option<String>,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    at: Option<String>,
    /// `add --host/--port/--database` give these; the host connects only
    /// to `url`, so they are refused with the `url` to write instead.
    #[serde(default)]
    host: Option<Value>,
    #[serde(default)]
    port: Option<Value>,
    #[serde(default)]
    database: Option<Value>,
}

fn default_branch() -> String {
    MAIN.to_owned()
}

/// The parts of a `mysql://[user@]host[:port]/database` address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Server {
    user: Option<String>,
    host: String,
    port: u16,
    database: String,
}

impl Server {
    fn parse(url: &str) -> Result<Server> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "the dolt locator's url {why}: give `mysql://[user@]host[:port]/database`"
            ))
        };
        let rest = url
            .strip_prefix("mysql://")
            .ok_or_else(|| bad("is not a mysql:// URL"))?;
        let rest = rest.split(['?', '#']).next().unwrap_or_default();
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("names no database"))?;
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, hp)) => {
                let user = user.split(':').next().unwrap_or_default();
                (Some(user.to_owned()).filter(|u| !u.is_empty()), hp)
            }
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("has a port that is not a number"))?,
            ),
            _ => (hostport, 3306),
        };
        let database = path.trim_end_matches('/');
        if host.is_empty() {
            return Err(bad("names no host"));
        }
        if database.is_empty() || database.contains('/') {
            return Err(bad(
                "must name just the database (the branch is the locator's `branch`)",
            ));
        }
        Ok(Server {
            user,
            host: host.to_owned(),
            port,
            database: database.to_owned(),
        })
    }

    /// A revision database's URL: `mysql://user@host:port/db/rev`.
    fn revision_url(&self, rev: &str) -> String {
        let user = self
            .user
            .as_deref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        format!(
            "mysql://{user}{}:{}/{}/{rev}",
            self.host, self.port, self.database
        )
    }
}

impl Locator {
    fn url(&self) -> Result<&str> {
        self.url.as_deref().filter(|u| !u.is_empty()).ok_or_else(|| {
            let given = [("host", &self.host), ("port", &self.port), ("database", &self.database)]
                .iter()
                .filter(|(_, v)| v.is_some())
                .map(|(k, _)| *k)
                .collect::<Vec<_>>();
            let why = if given.is_empty() {
                "a dolt locator needs `url`".to_owned()
            } else {
                format!(
                    "a dolt locator needs `url`; {} alone cannot be connected to",
                    given.join(", ")
                )
            };
            Error::invalid(format!(
                "{why}: `tether add KEY --kind dolt --set url=mysql://[user@]host:port/database` \
                 (the password goes in .tether/secrets.toml under [uris.\"mysql://host:port\"])"
            ))
        })
    }

    fn server(&self) -> Result<Server> {
        Server::parse(self.url()?)
    }
}

/// The state of a commit.
fn state_json(commit: &str, dirty: bool) -> Value {
    if dirty {
        json!({"commit": commit, "dirty": true})
    } else {
        json!({"commit": commit})
    }
}

fn commit_of(state: &Value) -> Result<&str> {
    state
        .get("commit")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{state} is not a dolt state ({{\"commit\": <hash>}})"
            ))
        })
}

fn is_dirty(state: &Value) -> bool {
    state.get("dirty").and_then(Value::as_bool).unwrap_or(false)
}

/// The dolt backend.
#[derive(Debug, Default, Clone)]
pub struct DoltBackend;

fn branch_head(db: &Db, name: &str) -> Result<db::BranchHead> {
    db.branch(name)?
        .ok_or_else(|| Error::not_found(format!("branch {name} does not exist")))
}

/// The live tag of a pin and the commit it names.
fn live_pin_tag(tags: &BTreeMap<String, String>, pin: &PinRef) -> Option<(String, String)> {
    let tag = kit::live_generation(pin, tags.keys().map(String::as_str))?;
    Some((tag.to_owned(), tags[tag].clone()))
}

/// The commit a target names.
fn resolve(db: &Db, loc: &Locator, target: &Target) -> Result<String> {
    match target {
        Target::Base => match &loc.at {
            Some(at) => db.hash_of(at),
            None => Ok(branch_head(db, &loc.branch)?.commit),
        },
        Target::WorkingRef(name) => Ok(branch_head(db, name)?.commit),
        Target::Pinned(pin) => live_pin_tag(&db.tags()?, pin)
            .map(|(_, c)| c)
            .ok_or_else(|| {
                Error::not_found(format!("pin {} has no tag ({} is gone)", pin.id, pin.ref_))
            }),
        Target::Recorded(state) => {
            let commit = commit_of(state)?;
            if !db.has_commit(commit)? {
                return Err(Error::not_found(format!(
                    "commit {commit} is not in this database"
                )));
            }
            Ok(commit.to_owned())
        }
    }
}

/// A branch as [`kit::move_ref`] moves it: read its head, re-read and
/// compare right before `DOLT_BRANCH` moves it (Dolt has no conditional
/// branch update, so this is not atomic: CONDITIONAL_REF is not declared).
struct BranchRef<'a> {
    db: &'a Db,
    name: &'a str,
}

impl CasRef for BranchRef<'_> {
    type Head = String;
    type Token = String;

    fn name(&self) -> String {
        format!("branch {}", self.name)
    }

    fn read(&self) -> Result<Option<(String, String)>> {
        Ok(self
            .db
            .branch(self.name)?
            .map(|h| (h.commit.clone(), h.commit)))
    }

    fn state(&self, head: &String) -> Value {
        state_json(head, false)
    }

    fn swap(&self, token: Option<String>, target: &String) -> Result<Swap> {
        let now = self.db.branch(self.name)?.map(|h| h.commit);
        if now != token {
            return Ok(Swap::Lost(format!(
                "it is at {}",
                now.as_deref().unwrap_or("nothing (deleted)")
            )));
        }
        let args: Vec<&str> = match token {
            Some(_) => vec!["-f", self.name, target],
            None => vec![self.name, target],
        };
        self.db.call("DOLT_BRANCH", &args)?;
        Ok(Swap::Moved)
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fff]` (UTC, as Dolt stores commit dates) in RFC 3339.
fn rfc3339_of(date: &str) -> String {
    let d = date.trim().replacen(' ', "T", 1);
    if d.ends_with('Z') || d.contains('+') {
        d
    } else {
        format!("{d}Z")
    }
}

/// The base branch checked out, its head checked against `expected` and
/// refused when dirty: what promote and merge start from.
fn base_for_move(db: &Db, loc: &Locator, expected: &Expected) -> Result<db::BranchHead> {
    if loc.at.is_some() {
        return Err(Error::Capability(
            "this object is fixed at `at`; promote and merge move a branch".into(),
        ));
    }
    db.checkout(&loc.branch)?;
    let head = branch_head(db, &loc.branch)?;
    tether_sdk::check_expected(
        &format!("branch {}", loc.branch),
        Some(&state_json(&head.commit, false)),
        expected,
        &[],
    )?;
    if head.dirty {
        return Err(Error::backend(format!(
            "branch {} has uncommitted changes: commit them (CALL DOLT_COMMIT('-Am', ...)) \
             or discard them before tether moves it",
            loc.branch
        )));
    }
    Ok(head)
}

/// `CALL DOLT_MERGE(args)` inside an explicit transaction: conflicting
/// tables are reported and the transaction rolled back; otherwise it is
/// committed. The branch head is re-read inside the transaction and must
/// still be `head`.
fn merge_in_transaction(db: &Db, loc: &Locator, head: &str, args: &[&str]) -> Result<String> {
    let conn = db.conn();
    conn.begin(false)?;
    let outcome = (|| -> Result<()> {
        let now = branch_head(db, &loc.branch)?.commit;
        if now != head {
            return Err(Error::ref_moved(format!(
                "branch {} moved to {now} since it was read at {head}; nothing was written",
                loc.branch
            )));
        }
        let conflicts = match db.call("DOLT_MERGE", args) {
            Ok(rows) => match rows.first() {
                Some(row) => row
                    .get::<Option<i64>>("conflicts")
                    .ok()
                    .flatten()
                    .unwrap_or(0),
                None => 0,
            },
            Err(e) if db::is_conflict_error(&e) => 1,
            Err(e) => return Err(Error::backend(format!("DOLT_MERGE failed: {e}"))),
        };
        if conflicts > 0 {
            let mut tables = db.conflicted_tables()?;
            if tables.is_empty() {
                tables.push("(unknown table)".into());
            }
            return Err(Error::MergeConflict(tables));
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => conn.commit()?,
        Err(e) => {
            let _ = conn.rollback();
            return Err(e);
        }
    }
    let after = branch_head(db, &loc.branch)?;
    Ok(after.commit)
}

impl Backend for DoltBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("a stand-in Dolt server: doltlite 0.51.3 behind a MySQL-protocol server (not dolt sql-server or Hosted Dolt)")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            maturity: "experimental".into(),
            promote_hint: "The base branch has moved since the fork: `tether merge` runs \
                           DOLT_MERGE instead (a three-way merge)."
                .into(),
            ..descriptor("dolt", CAPABILITIES)
        }
    }

    fn configure(&mut self, config: Value) -> Result<()> {
        harness::remember_url(
            config
                .get(URL_KEY)
                .and_then(Value::as_str)
                .map(str::to_owned),
        );
        Ok(())
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        loc.server()?;
        if loc.branch.is_empty() {
            return Err(Error::invalid("locator `branch` must not be empty"));
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        let s = loc.server()?;
        Ok(json!({"host": s.host, "port": s.port, "database": s.database}))
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        let db = Db::open()?;
        let head = match (working_ref, &loc.at) {
            (Some(name), _) => branch_head(&db, name)?,
            (None, Some(at)) => db::BranchHead {
                commit: db.hash_of(at)?,
                dirty: false,
            },
            (None, None) => branch_head(&db, &loc.branch)?,
        };
        Ok(state_json(&head.commit, head.dirty))
    }

    fn pin(&self, _loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let commit = commit_of(state)?;
        if is_dirty(state) {
            return Err(Error::backend(format!(
                "the branch has uncommitted changes on top of commit {commit}, and a tag \
                 holds only commits: run CALL DOLT_COMMIT('-Am', '...') on the server, then \
                 commit again"
            )));
        }
        let db = Db::open()?;
        if !db.has_commit(commit)? {
            return Err(Error::not_found(format!(
                "commit {commit} is not in this database; cannot pin it"
            )));
        }
        for _ in 0..2 {
            let tags = db.tags()?;
            let slot = kit::pin_slot(
                pin_id,
                &commit.to_owned(),
                |_| Ok(false),
                |name| Ok(tags.get(name).cloned()),
            )?;
            match &slot {
                PinSlot::Reuse(_) => return Ok(slot.pin_ref(pin_id)),
                PinSlot::Create(tag) => match db.call("DOLT_TAG", &[tag, commit]) {
                    Ok(_) => return Ok(slot.pin_ref(pin_id)),
                    // Someone made it first: read the tags again.
                    Err(_) if db.tags()?.contains_key(tag) => {}
                    Err(e) => return Err(Error::backend(format!("DOLT_TAG failed: {e}"))),
                },
            }
        }
        Err(Error::backend(format!(
            "the tag for pin {pin_id} kept changing; gave up"
        )))
    }

    fn unpin(&self, _loc: &Locator, pin: &PinRef) -> Result<()> {
        let db = Db::open()?;
        while let Some((tag, _)) = live_pin_tag(&db.tags()?, pin) {
            db.call("DOLT_TAG", &["-d", &tag])?;
        }
        Ok(())
    }

    fn list_pins(&self, _loc: &Locator) -> Result<Vec<String>> {
        let db = Db::open()?;
        let mut ids: Vec<String> = db
            .tags()?
            .keys()
            .filter_map(|t| kit::pin_id_of_ref(t))
            .map(str::to_owned)
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    fn verify(
        &self,
        _loc: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let db = Db::open()?;
        let commit = commit_of(state)?.to_owned();
        let live = match pin {
            Some(pin) => live_pin_tag(&db.tags()?, pin),
            None => None,
        };
        let check = PinCheck {
            pin,
            state: commit,
            noun: "commit",
            deep,
        };
        check.report(live, |c| db.has_commit(c))
    }

    fn fork(
        &self,
        loc: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        kit::refuse_base(&loc.branch, name, "fork")?;
        kit::refuse_base(MAIN, name, "fork")?;
        let db = Db::open()?;
        let target = resolve(&db, loc, source)?;
        kit::move_ref(&BranchRef { db: &db, name }, expected, &[], |_| {
            Ok(Some(target.clone()))
        })?;
        Ok(name.to_owned())
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        kit::refuse_base(&loc.branch, working_ref, "delete_working_ref")?;
        kit::refuse_base(MAIN, working_ref, "delete_working_ref")?;
        let db = Db::open()?;
        if db.branch(working_ref)?.is_some() {
            db.call("DOLT_BRANCH", &["-D", working_ref])?;
        }
        Ok(())
    }

    fn list_working_refs(&self, _loc: &Locator) -> Result<Vec<String>> {
        let db = Db::open()?;
        Ok(db
            .branches()?
            .into_keys()
            .filter(|n| n.starts_with(tether_sdk::WORKING_REF_PREFIX))
            .collect())
    }

    fn promote(&self, loc: &Locator, source: &Target, expected: &Expected) -> Result<Value> {
        let db = Db::open()?;
        let source = resolve(&db, loc, source)?;
        let head = base_for_move(&db, loc, expected)?;
        if head.commit == source {
            return Ok(state_json(&head.commit, false));
        }
        if db.merge_base(&head.commit, &source)?.as_deref() != Some(head.commit.as_str()) {
            return Err(Error::backend(format!(
                "{} (at commit {}) is not an ancestor of commit {source}, so it cannot be \
                 fast-forwarded. {}",
                loc.branch,
                head.commit,
                self.describe().promote_hint
            )));
        }
        let commit = merge_in_transaction(&db, loc, &head.commit, &["--ff-only", &source])?;
        Ok(state_json(&commit, false))
    }

    fn merge(
        &self,
        loc: &Locator,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value> {
        let db = Db::open()?;
        let source = resolve(&db, loc, source)?;
        let head = base_for_move(&db, loc, expected)?;
        if db.merge_base(&head.commit, &source)?.as_deref() == Some(source.as_str()) {
            // The base already holds the source: nothing to merge.
            return Ok(state_json(&head.commit, false));
        }
        let message = if message.is_empty() {
            "tether merge"
        } else {
            message
        };
        let commit = merge_in_transaction(&db, loc, &head.commit, &["-m", message, &source])?;
        Ok(state_json(&commit, false))
    }

    fn ancestor_of(
        &self,
        _loc: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let db = Db::open()?;
        let (a, d) = (commit_of(ancestor)?, commit_of(descendant)?);
        if !db.has_commit(a)? || !db.has_commit(d)? {
            return Ok(None);
        }
        Ok(Some(db.merge_base(a, d)?.as_deref() == Some(a)))
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let db = Db::open()?;
        let server = loc.server()?;
        let commit = resolve(&db, loc, target)?;
        // The revision a reader opens: a branch (writable), a tag or a
        // commit (read-only in Dolt).
        let (rev, writable) = match target {
            Target::Base => match &loc.at {
                None => (loc.branch.clone(), true),
                Some(at) => (at.clone(), false),
            },
            Target::WorkingRef(name) => (name.clone(), true),
            Target::Pinned(pin) => (
                live_pin_tag(&db.tags()?, pin)
                    .map(|(t, _)| t)
                    .unwrap_or_else(|| commit.clone()),
                false,
            ),
            Target::Recorded(_) => (commit.clone(), false),
        };
        let url = server.revision_url(&rev);
        Ok(Handle {
            type_name: "DoltHandle".into(),
            address: url.clone(),
            read_only: read_only || !writable,
            fields: json!({
                "url": url,
                "database": server.database,
                "ref": rev,
                "commit": commit,
                "database_ref": format!("{}/{rev}", server.database),
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let db = Db::open()?;
        let start = match from_ref {
            Some(rev) => db.hash_of(rev)?,
            None => resolve(&db, loc, &Target::Base)?,
        };
        let mut refs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, head) in db.branches()? {
            refs.entry(head.commit).or_default().push(name);
        }
        for (name, commit) in db.tags()? {
            refs.entry(commit).or_default().push(name);
        }
        let rows = db.query(
            "SELECT commit_hash, committer, CAST(date AS CHAR) AS date, message \
             FROM dolt_log(?) LIMIT ?",
            &[start.as_str().into(), i64::from(limit).into()],
        )?;
        let mut out = Vec::new();
        for row in rows.iter() {
            let id: String = row.get("commit_hash").map_err(Error::from)?;
            let date: Option<String> = row.get("date").map_err(Error::from)?;
            let message: Option<String> = row.get("message").map_err(Error::from)?;
            let committer: Option<String> = row.get("committer").map_err(Error::from)?;
            let message = message.unwrap_or_default();
            out.push(HistoryEntry {
                refs: refs.remove(&id).unwrap_or_default(),
                id,
                when: date.as_deref().map(rfc3339_of),
                message: match committer {
                    Some(c) if !c.is_empty() => format!("{message} ({c})"),
                    _ => message,
                },
            });
        }
        Ok(out)
    }

    fn diff(
        &self,
        _loc: &Locator,
        a: &Value,
        b: &Value,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<ObjectDiff> {
        let (a, b) = (commit_of(a)?, commit_of(b)?);
        let mut out = ObjectDiff::new("tables");
        if a == b {
            return Ok(out);
        }
        let db = Db::open()?;
        let summary = db.query(
            "SELECT from_table_name, to_table_name, diff_type, data_change, schema_change \
             FROM dolt_diff_summary(?, ?)",
            &[a.into(), b.into()],
        )?;
        let stat = db.query(
            "SELECT table_name, rows_added, rows_deleted, rows_modified \
             FROM dolt_diff_stat(?, ?)",
            &[a.into(), b.into()],
        )?;
        let mut counts: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
        for row in stat.iter() {
            let n = |c: &str| row.get::<Option<i64>>(c).ok().flatten().unwrap_or(0);
            let table: String = row.get("table_name").map_err(Error::from)?;
            counts.insert(
                table,
                (n("rows_added"), n("rows_deleted"), n("rows_modified")),
            );
        }
        for row in summary.iter() {
            let from: Option<String> = row.get("from_table_name").map_err(Error::from)?;
            let to: Option<String> = row.get("to_table_name").map_err(Error::from)?;
            let kind: String = row.get("diff_type").map_err(Error::from)?;
            let schema: bool = row
                .get::<Option<bool>>("schema_change")
                .ok()
                .flatten()
                .unwrap_or(false);
            let (from, to) = (from.filter(|s| !s.is_empty()), to.filter(|s| !s.is_empty()));
            let Some(table) = to.clone().or(from.clone()) else {
                continue;
            };
            let change = match kind.as_str() {
                "added" => Change::Added,
                "dropped" | "removed" => Change::Removed,
                _ => Change::Modified,
            };
            let mut parts = Vec::new();
            if let Some((added, deleted, modified)) = counts
                .get(&table)
                .or_else(|| from.as_ref().and_then(|f| counts.get(f)))
            {
                for (n, sign) in [(added, "+"), (deleted, "-"), (modified, "~")] {
                    if *n != 0 {
                        parts.push(format!("{sign}{n} rows"));
                    }
                }
            }
            if schema && change == Change::Modified {
                parts.push("schema changed".into());
            }
            if kind == "renamed"
                && let Some(f) = &from
            {
                parts.push(format!("renamed from {f}"));
            }
            out.add(table, change, parts.join(", "));
        }
        Ok(out)
    }

    fn branch_scope(&self, loc: &Locator) -> Result<String> {
        self.ref_namespace(loc)
    }

    fn ref_namespace(&self, loc: &Locator) -> Result<String> {
        // Tags and branches belong to the database, whichever branch an
        // object follows.
        Ok(tether_sdk::canonical_json(&self.identity(loc)?))
    }

    fn state_addressable(&self, _loc: &Locator, state: &Value) -> Result<bool> {
        Db::open()?.has_commit(commit_of(state)?)
    }
}

/// The database: the locator's `url`, which the host opens with the server's
/// credentials from secrets.toml.
impl tether_sdk::DescribeNet for DoltBackend {
    fn sql_keys(&self) -> Vec<String> {
        vec![URL_KEY.into()]
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(DoltBackend, harness: DoltHarness, [describe_net]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let s = Server::parse("mysql://root@127.0.0.1:3307/db").unwrap();
        assert_eq!(
            s,
            Server {
                user: Some("root".into()),
                host: "127.0.0.1".into(),
                port: 3307,
                database: "db".into()
            }
        );
        assert_eq!(
            s.revision_url("tether.x"),
            "mysql://root@127.0.0.1:3307/db/tether.x"
        );
        let s = Server::parse("mysql://h/db").unwrap();
        assert_eq!((s.port, s.user.as_deref()), (3306, None));
        assert_eq!(s.revision_url("main"), "mysql://h:3306/db/main");
        for bad in [
            "postgres://h/db",
            "mysql://h",
            "mysql://h/",
            "mysql://h/db/main",
            "mysql://h:x/db",
        ] {
            assert!(Server::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locators_name_url() {
        let loc: Locator = serde_json::from_value(json!({"host": "h", "database": "d"})).unwrap();
        let err = DoltBackend.validate_locator(&loc).unwrap_err().to_string();
        assert!(
            err.contains("host, database alone") && err.contains("--set url="),
            "{err}"
        );
        let loc: Locator = serde_json::from_value(json!({"url": "mysql://u@h:1/d"})).unwrap();
        assert_eq!(
            DoltBackend.identity(&loc).unwrap(),
            json!({"host": "h", "port": 1, "database": "d"})
        );
    }

    #[test]
    fn states() {
        assert_eq!(state_json("c", false), json!({"commit": "c"}));
        assert_eq!(state_json("c", true), json!({"commit": "c", "dirty": true}));
        assert!(is_dirty(&state_json("c", true)));
        assert!(commit_of(&json!({"snapshot_id": 1})).is_err());
        assert_eq!(rfc3339_of("2026-12-01 20:38:51"), "2026-12-01T20:38:51Z");
    }
}
