//! `tether diff [REV_A] [REV_B] [--key KEY]... [--content] [--limit N]`:
//! object-level differences between two sets of manifests.
//!
//! - No revision: the last commit (`HEAD`; nothing before the first commit)
//!   against the working tree. One: that revision against the working tree.
//!   Two: `REV_A` against `REV_B`.
//! - `--key` selects from the keys either side has, so a key only one side
//!   has can be named.
//! - Per key: `added`, `removed`, `changed` or `unchanged` (left out of the
//!   result). `why` lists what differs of `state` (the content state: keys
//!   the backend calls volatile are ignored), `pin`, `locator` and `policy`.
//! - `--content` asks each changed object's backend for a native diff of the
//!   two states (metadata only), concurrently, where it has DIFF. The stored
//!   listings (`.tether/listings/`, read at the respective revision or from
//!   the working tree) go along for backends that diff by listing. A failed
//!   native diff is reported in `detail_error`, never fails the command.
//! - `limit` caps the entries kept per object (`truncated` is then set).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use crate::model::{Manifest, ids, key, listing};
use crate::plugin::{BackendError, ChangeEntry, Descriptor, ObjectDiff, fan_out};
use crate::vcs::CommitId;

#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    pub rev_a: Option<String>,
    pub rev_b: Option<String>,
    pub keys: Vec<String>,
    pub content: bool,
    /// Max entries kept per object.
    pub limit: Option<usize>,
}

/// A native diff as `--json` shows it: the backend's `ObjectDiff` with a
/// one-line `summary` (`+0 -0 ~1 nodes`).
#[derive(Debug, Clone, Serialize)]
pub struct DetailDiff {
    pub summary: String,
    pub unit: String,
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub truncated: bool,
    pub note: String,
    pub entries: Vec<ChangeEntry>,
}

impl DetailDiff {
    fn new(d: ObjectDiff, limit: Option<usize>) -> DetailDiff {
        let mut entries = d.entries;
        let mut truncated = d.truncated;
        if let Some(limit) = limit
            && entries.len() > limit
        {
            entries.truncate(limit);
            truncated = true;
        }
        DetailDiff {
            summary: format!("+{} -{} ~{} {}", d.added, d.removed, d.modified, d.unit),
            unit: d.unit,
            added: d.added,
            removed: d.removed,
            modified: d.modified,
            truncated,
            note: d.note,
            entries,
        }
    }
}

/// One object's difference (a row of `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct ObjectChange {
    pub key: String,
    /// `added`, `removed` or `changed`.
    pub change: String,
    /// Of `state`, `pin`, `locator`, `policy`.
    pub why: Vec<String>,
    /// The pin id on each side.
    pub a: Option<String>,
    pub b: Option<String>,
    pub detail: Option<DetailDiff>,
    pub detail_error: Option<String>,
}

/// Which manifests a side of the diff reads.
#[derive(Debug, Clone)]
enum Side {
    /// Nothing (before the first commit).
    Empty,
    Commit(CommitId),
    WorkingTree,
}

impl Side {
    fn manifests(&self, repo: &Repo) -> Result<BTreeMap<String, Manifest>> {
        match self {
            Side::Empty => Ok(BTreeMap::new()),
            Side::Commit(c) => repo.manifests_at(c),
            Side::WorkingTree => repo.manifests(),
        }
    }

    /// The stored listing `name` as this side has it.
    fn listing(&self, repo: &Repo, name: &str) -> Result<Option<String>> {
        let dir = repo.layout.listings_dir();
        match self {
            Side::Empty => Ok(None),
            Side::WorkingTree => Ok(listing::read_listing(&dir, name)?),
            Side::Commit(c) => {
                let path = repo.vcs_path(&listing::listing_path(&dir, name));
                Ok(repo
                    .vcs
                    .read_file(c, &path)?
                    .map(|b| String::from_utf8_lossy(&b).into_owned()))
            }
        }
    }
}

fn sides(repo: &Repo, opts: &DiffOptions) -> Result<(Side, Side)> {
    let resolve = |rev: &str| -> Result<Side> { Ok(Side::Commit(repo.vcs.resolve(rev)?)) };
    Ok(match (&opts.rev_a, &opts.rev_b) {
        (None, None) => (
            repo.vcs.head()?.map(Side::Commit).unwrap_or(Side::Empty),
            Side::WorkingTree,
        ),
        (Some(a), None) => (resolve(a)?, Side::WorkingTree),
        (Some(a), Some(b)) => (resolve(a)?, resolve(b)?),
        (None, Some(_)) => {
            return Err(TetherError::refused("REV_B needs REV_A").hint("`tether diff REV_A REV_B`"));
        }
    })
}

/// The content states of both manifests, compared as the backend would.
fn states_differ(a: &Manifest, b: &Manifest, descriptor: Option<&Descriptor>) -> bool {
    let strip = |m: &Manifest| -> Option<Map<String, Value>> {
        m.state.as_ref().map(|s| match descriptor {
            Some(d) => content(s, d),
            None => s.clone(),
        })
    };
    strip(a) != strip(b)
}

pub async fn diff(repo: &Repo, opts: &DiffOptions) -> Result<Vec<ObjectChange>> {
    let (side_a, side_b) = sides(repo, opts)?;
    let a = side_a.manifests(repo)?;
    let b = side_b.manifests(repo)?;
    let every: BTreeSet<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    let keys = key::select_keys(&opts.keys, every)?;
    let plugins = repo.plugins().await?;
    let pin_of = |m: Option<&Manifest>| m.and_then(|m| m.pin.as_ref().map(|p| p.id.clone()));

    let mut changes = Vec::new();
    for k in keys {
        let (ma, mb) = (a.get(&k), b.get(&k));
        let (change, why) = match (ma, mb) {
            (None, None) => continue,
            (None, Some(_)) => ("added", Vec::new()),
            (Some(_), None) => ("removed", Vec::new()),
            (Some(x), Some(y)) => {
                let descriptor = plugins.get(&y.kind).map(|p| p.descriptor());
                let mut why = Vec::new();
                if x.kind != y.kind || states_differ(x, y, descriptor) {
                    why.push("state".to_string());
                }
                if x.pin.as_ref().map(|p| (&p.id, &p.r#ref))
                    != y.pin.as_ref().map(|p| (&p.id, &p.r#ref))
                {
                    why.push("pin".to_string());
                }
                if x.locator != y.locator {
                    why.push("locator".to_string());
                }
                if x.policy != y.policy {
                    why.push("policy".to_string());
                }
                if why.is_empty() {
                    continue;
                }
                ("changed", why)
            }
        };
        changes.push(ObjectChange {
            key: k.clone(),
            change: change.to_string(),
            why,
            a: pin_of(ma),
            b: pin_of(mb),
            detail: None,
            detail_error: None,
        });
    }
    if opts.content {
        content_diffs(repo, &side_a, &side_b, &a, &b, &mut changes, opts.limit).await?;
    }
    Ok(changes)
}

/// Ask the backends of objects whose state changed for native diffs.
async fn content_diffs(
    repo: &Repo,
    side_a: &Side,
    side_b: &Side,
    a: &BTreeMap<String, Manifest>,
    b: &BTreeMap<String, Manifest>,
    changes: &mut [ObjectChange],
    limit: Option<usize>,
) -> Result<()> {
    let plugins = repo.plugins().await?;
    // Which objects can be diffed: changed state, one kind, both committed,
    // and a backend with DIFF.
    let mut wanted = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if c.change != "changed" || !c.why.iter().any(|w| w == "state") {
            continue;
        }
        let (x, y) = (&a[&c.key], &b[&c.key]);
        if x.kind != y.kind || x.state.is_none() || y.state.is_none() {
            continue;
        }
        match plugins.get(&y.kind) {
            Some(p) if p.descriptor().has("DIFF") => wanted.push((i, p.clone())),
            _ => {}
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    // Identities first (listing names derive from them), concurrently.
    let mut calls = Vec::new();
    for (i, plugin) in &wanted {
        let y = &b[&changes[*i].key];
        let client = repo.client_for(plugin, &Value::Object(y.locator.clone()));
        calls.push((*i, async move { client.identity().await }));
    }
    let identities: BTreeMap<usize, std::result::Result<Value, BackendError>> =
        fan_out(calls).await.results.into_iter().collect();
    let mut diffs = Vec::new();
    for (i, plugin) in &wanted {
        let key = changes[*i].key.clone();
        let (x, y) = (&a[&key], &b[&key]);
        let descriptor = plugin.descriptor();
        let identity = match &identities[i] {
            Ok(id) => id.clone(),
            Err(e) => {
                changes[*i].detail_error = Some(e.to_string());
                continue;
            }
        };
        let state_a = Value::Object(x.state.clone().unwrap_or_default());
        let state_b = Value::Object(y.state.clone().unwrap_or_default());
        let listing_of = |side: &Side, m: &Manifest| -> Result<Option<String>> {
            let state = content(m.state.as_ref().expect("checked above"), descriptor);
            let name = ids::listing_name(&m.kind, &identity, &Value::Object(state));
            side.listing(repo, &name)
        };
        let listing_a = listing_of(side_a, x)?;
        let listing_b = listing_of(side_b, y)?;
        let client = repo.client_for(plugin, &Value::Object(y.locator.clone()));
        diffs.push((*i, async move {
            client
                .diff(
                    &state_a,
                    &state_b,
                    listing_a.as_deref(),
                    listing_b.as_deref(),
                )
                .await
        }));
    }
    for (i, result) in fan_out(diffs).await.results {
        match result {
            Ok(d) => changes[i].detail = Some(DetailDiff::new(d, limit)),
            Err(e) => changes[i].detail_error = Some(e.to_string()),
        }
    }
    Ok(())
}
