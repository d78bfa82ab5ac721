//! # tether-plugin-neon: Neon Postgres (experimental)
//!
//! Kind `neon` (spec/11, "`neon`: Neon Postgres"; spec/14, "Neon"): one
//! database of a Neon project, whose branches are tether's pins and forks.
//!
//! ## Locator, configuration, state
//!
//! ```json
//! {"project_id": "prj-123", "database": "neondb", "role": "runner", "branch": "main"}
//! ```
//!
//! The identity is `{project_id, branch}`: a branch at an LSN is a snapshot
//! of the whole project, so two databases of one project share pins and
//! working branches. Configuration lives in `.tether/secrets.toml` only:
//! `api_url` (default Neon's API v2), `api_key_env` (default `NEON_API_KEY`;
//! or `api_key` itself), `allow_http` (loopback fakes), `protected_pins`.
//! The host sends the API key; this plugin never holds it. Nor does it hold
//! a role's password: the host takes it out of the API's connection URIs
//! and supplies it when the plugin opens one over `sql` ([`probe`]).
//!
//! A state is `{"branch", "commit_xid", "lsn", "timeline"}`, probed over SQL
//! on the branch's `read_write` endpoint ([`probe`]): `commit_xid` (the
//! newest committed transaction id) and `branch` (the lineage: the
//! locator's branch when the branch read descends from it) are content;
//! `lsn` and `timeline` (the branch it was read on) are volatile addresses.
//!
//! ## Refs
//!
//! A pin `tether.<pin_id>` is a child branch of the state's timeline at its
//! LSN. A fork is a child branch of its source; re-forking restores the
//! branch onto the source, unless pins hang off it (Neon will not restore a
//! branch with children): then the fork lands on a sibling `<name>.2`,
//! `.3`, ... and that name is returned. Every branch tether reads or writes
//! gets one `read_write` endpoint, created once (a second creator finds the
//! first's); pins are opened through a `read_only` one.
//!
//! ## Handles
//!
//! `open` hands back the endpoint's connection URI as the plugin got it,
//! without the password; the host puts back the one it learned from the
//! same API response (the user's own), and the CLI prints it only with
//! `--with-password`.

mod api;
mod harness;
mod probe;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::{
    Backend, Capability, Descriptor, Error, Expected, Handle, PinRef, Result, Target, VerifyReport,
    VerifyStatus, cap, descriptor,
};

use api::{Api, Branch, READ_ONLY, READ_WRITE};
pub use harness::NeonHarness;
use probe::Compute;

/// Capabilities of every neon object (spec/11's table).
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::PIN,
    cap::FORK,
    cap::RETENTION_BOUND,
    cap::NEEDS_QUIESCENCE,
    cap::BRANCH_IS_STORAGE,
];

/// How many siblings (`<name>.2` ...) a working branch may get.
const MAX_SIBLINGS: u32 = 99;

/// Neon's public API.
pub const DEFAULT_API_URL: &str = "https://console.neon.tech/api/v2";
/// The variable holding the API key when `api_key_env` is unset.
pub const DEFAULT_API_KEY_ENV: &str = "NEON_API_KEY";

/// What `promote` says when it refuses.
const PROMOTE_HINT: &str = "Neon cannot promote a child branch into its parent; work on the \
     trunk bookmark for writes that must land on the upstream branch";

/// A neon object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    #[serde(default)]
    project_id: String,
    #[serde(default)]
    database: String,
    #[serde(default)]
    role: String,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    at: Option<Value>,
}

fn default_branch() -> String {
    "main".to_owned()
}

/// `[backends.neon]` as the host passes it (secrets merged, the key removed).
#[derive(Debug, Clone, Default, Deserialize)]
struct Config {
    #[serde(default)]
    api_url: Option<String>,
    #[serde(default)]
    protected_pins: bool,
}

/// The neon backend. Holds only the configuration `configure` gave.
#[derive(Default, Clone)]
pub struct NeonBackend {
    config: Config,
}

thread_local! {
    // The configuration this instance was given, for the harness: the SDK
    // makes the harness afresh per call, but the host configures the
    // instance first, with the same grants.
    static CONFIGURED: std::cell::RefCell<Option<Value>> = const { std::cell::RefCell::new(None) };
}

/// The configuration `configure` gave this instance.
fn harness_config() -> Option<Value> {
    CONFIGURED.with(|c| c.borrow().clone())
}

/// One project's branches, listed once per call.
struct Project {
    api: Api,
    branches: Vec<Branch>,
}

impl Project {
    fn by_name(&self, name: &str) -> Option<&Branch> {
        self.branches.iter().find(|b| b.name == name)
    }

    fn by_id(&self, id: &str) -> Option<&Branch> {
        self.branches.iter().find(|b| b.id == id)
    }

    fn named(&self, name: &str) -> Result<&Branch> {
        self.by_name(name).ok_or_else(|| {
            Error::not_found(format!("branch {name} does not exist in the Neon project"))
        })
    }

    /// The branches whose parent is `b`.
    fn children(&self, b: &Branch) -> Vec<&Branch> {
        self.branches
            .iter()
            .filter(|c| c.parent_id.as_deref() == Some(b.id.as_str()))
            .collect()
    }

    /// Whether `b` is `ancestor` or descends from it.
    fn descends(&self, b: &Branch, ancestor: &str) -> bool {
        let mut cur = Some(b);
        let mut steps = 0;
        while let Some(c) = cur {
            if c.name == ancestor {
                return true;
            }
            steps += 1;
            if steps > self.branches.len() {
                return false;
            }
            cur = c.parent_id.as_deref().and_then(|p| self.by_id(p));
        }
        false
    }
}

fn field<'a>(state: &'a Value, key: &str) -> Result<&'a str> {
    state
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid(format!("a neon state needs `{key}`: {state}")))
}

impl NeonBackend {
    fn api_url(&self) -> &str {
        self.config.api_url.as_deref().unwrap_or(DEFAULT_API_URL)
    }

    fn project(&self, loc: &Locator) -> Result<Project> {
        let api = Api::new(self.api_url(), &loc.project_id);
        let branches = api.branches()?;
        Ok(Project { api, branches })
    }

    /// The connection URI of the object's database on `branch` through its
    /// endpoint of `kind` (created when missing), as the host hands it on:
    /// without the role's password, which the host keeps.
    fn uri(&self, p: &Project, loc: &Locator, branch: &Branch, kind: &str) -> Result<String> {
        let ep = p.api.endpoint(&branch.id, kind)?;
        p.api
            .connection_uri(&branch.id, &ep.id, &loc.database, &loc.role)
    }

    /// A connection to the object's database on `branch` (endpoint `kind`).
    fn compute(&self, p: &Project, loc: &Locator, branch: &Branch, kind: &str) -> Result<Compute> {
        Compute::open(&self.uri(p, loc, branch, kind)?)
    }

    fn probe_state(
        &self,
        p: &Project,
        loc: &Locator,
        branch: &Branch,
        kind: &str,
    ) -> Result<Value> {
        let (lsn, xid) = self.compute(p, loc, branch, kind)?.state()?;
        let lineage = if p.descends(branch, &loc.branch) {
            loc.branch.clone()
        } else {
            branch.name.clone()
        };
        Ok(json!({
            "branch": lineage,
            "commit_xid": xid,
            "lsn": lsn,
            "timeline": branch.name,
        }))
    }

    /// The branch and parent LSN a fork or open starts from.
    fn source<'p>(
        &self,
        p: &'p Project,
        loc: &Locator,
        source: &Target,
    ) -> Result<(&'p Branch, Option<String>)> {
        match source {
            Target::Base => Ok((p.named(&loc.branch)?, None)),
            Target::WorkingRef(name) => Ok((p.named(name)?, None)),
            Target::Pinned(pin) => Ok((p.named(&pin.ref_)?, None)),
            Target::Recorded(state) => Ok((
                p.named(field(state, "timeline")?)?,
                Some(field(state, "lsn")?.to_owned()),
            )),
        }
    }

    /// The content keys of a state.
    fn content(state: &Value) -> (Option<&str>, Option<&str>) {
        (
            state.get("branch").and_then(Value::as_str),
            state.get("commit_xid").and_then(Value::as_str),
        )
    }

    /// Create `name` off `parent` (at `lsn`), or restore it there; the name.
    fn place(&self, p: &Project, name: &str, parent: &Branch, lsn: Option<&str>) -> Result<String> {
        match p.by_name(name) {
            None => {
                if p.api.create_branch(name, &parent.id, lsn, false)?.is_none() {
                    return Err(Error::ref_moved(format!(
                        "branch {name} was created concurrently; nothing was moved"
                    )));
                }
            }
            Some(existing) => p.api.restore_branch(&existing.id, &parent.id, lsn)?,
        }
        Ok(name.to_owned())
    }
}

impl Backend for NeonBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("a faithful fake of the Neon API v2 and SQL-over-HTTP, each branch a real PostgreSQL 15 cluster (not the Neon service)")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            maturity: "experimental".into(),
            volatile_keys: vec!["lsn".into(), "timeline".into()],
            promote_hint: PROMOTE_HINT.into(),
            ..descriptor("neon", CAPABILITIES)
        }
    }

    fn configure(&mut self, config: Value) -> Result<()> {
        CONFIGURED.with(|c| *c.borrow_mut() = Some(config.clone()));
        self.config = serde_json::from_value(config)
            .map_err(|e| Error::invalid(format!("[backends.neon]: {e}")))?;
        Ok(())
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        for (key, value) in [
            ("project_id", &loc.project_id),
            ("database", &loc.database),
            ("role", &loc.role),
            ("branch", &loc.branch),
        ] {
            if value.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "a neon locator needs `{key}` (Neon builds no connection URI without \
                     project, database and role)"
                )));
            }
        }
        if loc.at.is_some() {
            return Err(Error::invalid(
                "neon does not support `at`: the first commit pins the branch's head",
            ));
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        self.validate_locator(loc)?;
        Ok(json!({"project_id": loc.project_id, "branch": loc.branch}))
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        self.validate_locator(loc)?;
        let p = self.project(loc)?;
        let branch = p.named(working_ref.unwrap_or(&loc.branch))?;
        self.probe_state(&p, loc, branch, READ_WRITE)
    }

    fn pin(&self, loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let p = self.project(loc)?;
        let name = tether_sdk::kit::pin_ref_name(pin_id, 1);
        let lsn = field(state, "lsn")?;
        let reuse = |b: &Branch| -> Result<PinRef> {
            if b.parent_lsn.as_deref() != Some(lsn) {
                return Err(Error::backend(format!(
                    "branch {name} exists at LSN {} instead of {lsn}; a pin never moves",
                    b.parent_lsn.as_deref().unwrap_or("?")
                )));
            }
            Ok(PinRef {
                id: pin_id.to_owned(),
                ref_: name.clone(),
                created: false,
            })
        };
        if let Some(b) = p.by_name(&name) {
            return reuse(b);
        }
        let timeline = p.named(field(state, "timeline")?)?;
        match p
            .api
            .create_branch(&name, &timeline.id, Some(lsn), self.config.protected_pins)?
        {
            Some(_) => Ok(PinRef {
                id: pin_id.to_owned(),
                ref_: name,
                created: true,
            }),
            // Another object of the project cut it first.
            None => reuse(self.project(loc)?.named(&name)?),
        }
    }

    fn unpin(&self, loc: &Locator, pin: &PinRef) -> Result<()> {
        let p = self.project(loc)?;
        let Some(b) = p.by_name(&pin.ref_) else {
            return Ok(());
        };
        let children = p.children(b);
        if !children.is_empty() {
            let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::backend(format!(
                "pin branch {} has child branches ({}); Neon deletes only leaves",
                b.name,
                names.join(", ")
            )));
        }
        p.api.delete_branch(&b.id)
    }

    fn list_pins(&self, loc: &Locator) -> Result<Vec<String>> {
        let p = self.project(loc)?;
        let mut ids: Vec<String> = p
            .branches
            .iter()
            .filter_map(|b| tether_sdk::kit::pin_id_of_ref(&b.name))
            .map(str::to_owned)
            .collect();
        ids.sort();
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
        let report = |status, message: String| Ok(VerifyReport { status, message });
        let Some(pin) = pin else {
            return report(
                VerifyStatus::Unknown,
                "no pin: a Neon state is held only by its pin branch".into(),
            );
        };
        let p = self.project(loc)?;
        let Some(b) = p.by_name(&pin.ref_) else {
            return report(
                VerifyStatus::Missing,
                format!("pin branch {} is gone", pin.ref_),
            );
        };
        let lsn = field(state, "lsn")?;
        if b.parent_lsn.as_deref() != Some(lsn) {
            return report(
                VerifyStatus::Drifted,
                format!(
                    "pin branch {} was cut at LSN {}, not the recorded {lsn}",
                    b.name,
                    b.parent_lsn.as_deref().unwrap_or("?")
                ),
            );
        }
        if let Some(parent) = b.parent_id.as_deref().and_then(|id| p.by_id(id))
            && parent.name != field(state, "timeline")?
        {
            return report(
                VerifyStatus::Drifted,
                format!(
                    "pin branch {} hangs off {}, not the recorded {}",
                    b.name,
                    parent.name,
                    field(state, "timeline")?
                ),
            );
        }
        if !deep {
            return report(
                VerifyStatus::Ok,
                format!("pin branch {} at LSN {lsn}", b.name),
            );
        }
        // Deep: read the pin through a read-only endpoint; its newest commit
        // must be the recorded one.
        let now = self.probe_state(&p, loc, b, READ_ONLY)?;
        if Self::content(&now).1 != Self::content(state).1 {
            return report(
                VerifyStatus::Drifted,
                format!(
                    "pin branch {} holds commit_xid {}, not the recorded {}",
                    b.name,
                    Self::content(&now).1.unwrap_or("?"),
                    Self::content(state).1.unwrap_or("?")
                ),
            );
        }
        report(
            VerifyStatus::Ok,
            format!(
                "pin branch {} read back at commit_xid {}",
                b.name,
                Self::content(state).1.unwrap_or("?")
            ),
        )
    }

    fn fork(
        &self,
        loc: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        tether_sdk::kit::refuse_base(&loc.branch, name, "fork")?;
        let p = self.project(loc)?;
        let existing = p.by_name(name);
        match (expected, existing) {
            (Expected::Absent, Some(_)) => {
                return Err(Error::ref_moved(format!(
                    "branch {name} exists; expected it absent"
                )));
            }
            (Expected::At(want), Some(b)) => {
                let now = self.probe_state(&p, loc, b, READ_WRITE)?;
                if Self::content(&now) != Self::content(want) {
                    return Err(Error::ref_moved(format!(
                        "branch {name} is at commit_xid {}, not the expected {}; nothing moved",
                        Self::content(&now).1.unwrap_or("?"),
                        Self::content(want).1.unwrap_or("?")
                    )));
                }
            }
            (Expected::At(_), None) => {
                return Err(Error::ref_moved(format!(
                    "branch {name} does not exist; expected it at a state"
                )));
            }
            _ => {}
        }
        let (parent, lsn) = self.source(&p, loc, source)?;
        let Some(b) = existing else {
            return self.place(&p, name, parent, lsn.as_deref());
        };
        // Already at the source: nothing to move (a commit then `new` reuses
        // the branch its pin hangs off).
        let at_source = match source {
            Target::Recorded(state) => Some(state.clone()),
            _ => self
                .probe_state(
                    &p,
                    loc,
                    parent,
                    if matches!(source, Target::Pinned(_)) {
                        READ_ONLY
                    } else {
                        READ_WRITE
                    },
                )
                .ok(),
        };
        if let Some(src) = at_source {
            let now = self.probe_state(&p, loc, b, READ_WRITE)?;
            if Self::content(&now) == Self::content(&src) {
                return Ok(name.to_owned());
            }
        }
        if p.children(b).is_empty() {
            return self.place(&p, name, parent, lsn.as_deref());
        }
        // Pins hang off it: Neon restores no branch with children, so the
        // fork lands on the first sibling that has none.
        for generation in 2..=MAX_SIBLINGS {
            let sibling = format!("{name}.{generation}");
            match p.by_name(&sibling) {
                Some(s) if !p.children(s).is_empty() => continue,
                _ => return self.place(&p, &sibling, parent, lsn.as_deref()),
            }
        }
        Err(Error::backend(format!(
            "every sibling of {name} up to .{} has pins hanging off it",
            MAX_SIBLINGS
        )))
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        tether_sdk::kit::refuse_base(&loc.branch, working_ref, "delete_working_ref")?;
        let p = self.project(loc)?;
        let Some(b) = p.by_name(working_ref) else {
            return Ok(());
        };
        if let Some(why) = blockers(&p, b) {
            return Err(Error::backend(why));
        }
        p.api.delete_branch(&b.id)
    }

    fn working_ref_blockers(&self, loc: &Locator, working_ref: &str) -> Result<Option<String>> {
        let p = self.project(loc)?;
        Ok(p.by_name(working_ref).and_then(|b| blockers(&p, b)))
    }

    fn list_working_refs(&self, loc: &Locator) -> Result<Vec<String>> {
        let p = self.project(loc)?;
        Ok(p.branches
            .iter()
            .filter(|b| b.name.starts_with(tether_sdk::WORKING_REF_PREFIX))
            .map(|b| b.name.clone())
            .collect())
    }

    fn rename_pin(
        &self,
        loc: &Locator,
        old: &PinRef,
        state: &Value,
        new_id: &str,
    ) -> Result<PinRef> {
        let p = self.project(loc)?;
        let new = tether_sdk::kit::pin_ref_name(new_id, 1);
        if p.by_name(&new).is_some() {
            let pinned = self.pin(loc, state, new_id)?;
            self.unpin(loc, old)?;
            return Ok(pinned);
        }
        let b = p.named(&old.ref_)?;
        p.api.rename_branch(&b.id, &new)?;
        Ok(PinRef {
            id: new_id.to_owned(),
            ref_: new,
            created: true,
        })
    }

    fn rename_working_ref(&self, loc: &Locator, old: &str, new: &str) -> Result<String> {
        tether_sdk::kit::refuse_base(&loc.branch, old, "rename_working_ref")?;
        let p = self.project(loc)?;
        if p.by_name(new).is_some() {
            return Err(Error::ref_moved(format!("branch {new} exists already")));
        }
        let b = p.named(old)?;
        p.api.rename_branch(&b.id, new)?;
        Ok(new.to_owned())
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let p = self.project(loc)?;
        let (branch, writable) = match target {
            Target::Base => (p.named(&loc.branch)?, true),
            Target::WorkingRef(name) => (p.named(name)?, true),
            Target::Pinned(pin) => (p.named(&pin.ref_)?, false),
            Target::Recorded(_) => {
                return Err(Error::Capability(
                    "a recorded Neon state is read through its pin branch; this object \
                     records states without pins"
                        .into(),
                ));
            }
        };
        let kind = if writable { READ_WRITE } else { READ_ONLY };
        let uri = self.uri(&p, loc, branch, kind)?;
        Ok(Handle {
            type_name: "NeonHandle".into(),
            address: uri.clone(),
            read_only: read_only || !writable,
            fields: json!({
                "url": uri,
                "branch": branch.name,
                "project_id": loc.project_id,
                "database": loc.database,
                "role": loc.role,
            }),
        })
    }

    fn check_quiescence(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        let p = self.project(loc)?;
        let branch = p.named(working_ref.unwrap_or(&loc.branch))?;
        let writers = self.compute(&p, loc, branch, READ_WRITE)?.writers()?;
        if writers > 0 {
            return Err(Error::backend(format!(
                "{writers} session(s) on Neon branch {} hold an open write transaction \
                 (pg_stat_activity)",
                branch.name
            )));
        }
        Ok(())
    }

    fn branch_scope(&self, loc: &Locator) -> Result<String> {
        self.ref_namespace(loc)
    }

    fn ref_namespace(&self, loc: &Locator) -> Result<String> {
        Ok(tether_sdk::canonical_json(
            &json!({"project_id": loc.project_id}),
        ))
    }

    fn state_addressable(&self, _loc: &Locator, _state: &Value) -> Result<bool> {
        Ok(false)
    }
}

/// Why branch `b` cannot be deleted now: pins hang off it.
fn blockers(p: &Project, b: &Branch) -> Option<String> {
    let children = p.children(b);
    if children.is_empty() {
        return None;
    }
    let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    Some(format!(
        "cannot be deleted: Neon branch {} has child branches ({}), the pins taken on it",
        b.name,
        names.join(", ")
    ))
}

impl tether_sdk::DescribeExt for NeonBackend {
    /// Nothing of `[backends.neon]` may be committed (spec/11: secrets.toml only).
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

impl tether_sdk::DescribeNet for NeonBackend {
    fn http_grants(&self) -> Vec<tether_sdk::HttpGrant> {
        vec![tether_sdk::HttpGrant {
            default_url: Some(DEFAULT_API_URL.into()),
            token_key: Some("api_key".into()),
            token_env_key: Some("api_key_env".into()),
            default_token_env: Some(DEFAULT_API_KEY_ENV.into()),
            ..tether_sdk::HttpGrant::url("api_url")
        }]
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(NeonBackend, harness: NeonHarness, [describe_ext, describe_net]);

#[cfg(test)]
mod tests {
    use super::*;

    fn branch(id: &str, name: &str, parent: Option<&str>) -> Branch {
        Branch {
            id: id.into(),
            name: name.into(),
            parent_id: parent.map(Into::into),
            parent_lsn: None,
        }
    }

    #[test]
    fn lineage_follows_parents() {
        let p = Project {
            api: Api::new("http://x", "p"),
            branches: vec![
                branch("1", "main", None),
                branch("2", "tether.0a1b2c3d.ff", Some("1")),
                branch("3", "tether.ws.0a1b2c3d.feat", Some("2")),
                branch("4", "other", None),
            ],
        };
        assert!(p.descends(p.named("tether.ws.0a1b2c3d.feat").unwrap(), "main"));
        assert!(!p.descends(p.named("other").unwrap(), "main"));
        assert_eq!(p.children(p.named("main").unwrap()).len(), 1);
        assert!(blockers(&p, p.named("tether.0a1b2c3d.ff").unwrap()).is_some());
        assert!(blockers(&p, p.named("tether.ws.0a1b2c3d.feat").unwrap()).is_none());
    }

    #[test]
    fn locators_need_project_database_and_role() {
        let b = NeonBackend::default();
        let loc: Locator =
            serde_json::from_value(json!({"project_id": "p", "database": "d"})).unwrap();
        assert!(b.validate_locator(&loc).is_err());
        let loc: Locator =
            serde_json::from_value(json!({"project_id": "p", "database": "d", "role": "r"}))
                .unwrap();
        assert_eq!(
            b.identity(&loc).unwrap(),
            json!({"project_id": "p", "branch": "main"})
        );
        let loc: Locator = serde_json::from_value(
            json!({"project_id": "p", "database": "d", "role": "r", "at": "x"}),
        )
        .unwrap();
        assert!(b.validate_locator(&loc).is_err());
    }
}
