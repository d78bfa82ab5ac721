//! # tether-plugin-lance: Lance datasets
//!
//! Kind `lance` (spec/11, "`lance`: Lance datasets"): a Forkable backend
//! over a Lance dataset, read and written in Lance's own on-disk format
//! through the host's `storage` capability. There is no Lance library
//! inside: the layout, manifest framing, tag and branch JSON and the clone
//! manifest are those of research/formats.md §1, checked against pylance
//! 14.0.2 (and verified by `host/tests/lance.rs`, which drives the real
//! pylance against what this plugin writes). Manifests are protobuf, decoded
//! with hand-written prost message structs holding only the fields read
//! ([`proto`]); the one rewrite (a branch's clone manifest) works at the wire
//! level so every field it does not touch survives byte for byte.
//!
//! ## Locator and state
//!
//! ```json
//! {"uri": "/data/labels.lance", "branch": "main", "at": "<version N, BRANCH@N or a tag>"}
//! ```
//!
//! `uri` is a local path or `s3://bucket/prefix` (a storage key, and for
//! local paths a tree key so the identity resolves symlinks); `branch` is the
//! upstream branch (default `main`). The identity is `{"uri": <resolved>}`.
//! A state is `{"branch": "main", "version": 3}`, and on any other branch
//! also `"branch_id"`: the branch's version mapping in Lance's string form
//! (`2:<uuid>`), since version numbers restart when a branch is deleted and
//! re-created. A branch whose only version is the one it was forked at (an
//! untouched fork) reports its parent's state, so a commit right after a
//! fork is a no-op.
//!
//! ## Refs
//!
//! - Pins are tags `_refs/tags/tether.<pin_id>.json` in Lance's JSON (`branch`
//!   null for main, `version`, `manifestSize`, times), created put-if-absent.
//!   `cleanup_old_versions` keeps tagged versions. A deleted tag's name can
//!   be used again, so `repair` recreates it under the same name.
//! - Working refs are Lance branches made as `create_branch` makes them:
//!   the shallow clone manifest under `tree/<name>/_versions/` and
//!   `_refs/branches/<name>.json` with a fresh branch identifier. The ref
//!   file is claimed first by a conditional put (create-only, or if-match
//!   for a reset), so of several racing forks exactly one wins
//!   (`CONDITIONAL_REF`); the clone manifest follows. Lance refuses to delete
//!   a branch that a tag or another branch references, so a reset of such a
//!   branch (or one onto a version of the branch itself) forks `<name>.2`,
//!   `<name>.3`, ... instead and returns that name; the engine records it.
//! - Lance cannot move a branch head onto another branch: no `PROMOTE` and
//!   no `MERGE`; `promote` refuses with what to do instead.
//!
//! ## What is refused
//!
//! Manifests with a reader feature flag this plugin does not understand
//! (anything beyond deletion files, stable row ids, table config, base
//! paths and disabled transaction files), with the flag named; directories
//! mixing both manifest naming schemes; the obsolete `_latest.manifest`
//! layout; forking a version that has indices (take a branch Lance made with
//! `tether new --adopt` instead).

mod clone;
mod format;
mod harness;
mod proto;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit::{self, PinCheck, PinSlot, SecondsFormat};
use tether_sdk::storage::PutMode;
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyItem, VerifyReport, VerifyStatus, cap, check_expected,
    descriptor, tree,
};

pub use harness::LanceHarness;
use table::{Branch, Identifier, IdentifierForm, Table, Tag, VersionFile};

/// Capabilities of every lance object; `CONDITIONAL_REF` is added per object
/// ([`LanceBackend::effective_capabilities`]).
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::ATOMIC_REF,
    cap::DIFF,
    cap::HISTORY,
];

/// What `promote` and the engine say instead of landing a Lance branch.
pub const PROMOTE_HINT: &str = "Lance cannot move a branch head onto another branch yet: write \
     the result onto the base branch from the trunk (`tether new main`, then write with Lance, \
     e.g. `lance.write_dataset(table, uri, mode=\"append\")`, and `tether commit`)";

/// How many branch generations (`name`, `name.2`, ...) a fork tries.
const MAX_GENERATION: u32 = 1000;

/// A lance object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    uri: String,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    at: Option<String>,
}

fn default_branch() -> String {
    "main".to_owned()
}

impl Locator {
    /// The storage URI: `file://` folded, trailing slashes gone.
    fn storage_uri(&self) -> String {
        kit::storage_uri(&self.uri)
    }

    fn is_local(&self) -> bool {
        self.storage_uri().starts_with('/')
    }
}

fn open(loc: &Locator) -> Result<Table> {
    Table::open(&loc.storage_uri())
}

/// A state as recorded.
#[derive(Debug, Clone, Deserialize)]
struct State {
    branch: String,
    version: u64,
    #[serde(default)]
    branch_id: Option<String>,
}

/// A version of a branch: what a tag names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    branch: String,
    version: u64,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.version, self.branch)
    }
}

impl Point {
    fn of_tag(tag: &Tag) -> Self {
        Self {
            branch: tag.branch_name().to_owned(),
            version: tag.version,
        }
    }

    /// The tag's `branch`: null for main.
    fn tag_branch(&self) -> Option<String> {
        (self.branch != "main").then(|| self.branch.clone())
    }
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::NotFound(_))
}

fn branch_ref(t: &Table, name: &str) -> Result<Branch> {
    t.branch(name)?
        .map(|v| v.value)
        .ok_or_else(|| Error::not_found(format!("branch {name} does not exist in {}", t.uri)))
}

/// Where a point really is: an untouched fork's first version is the
/// version it was forked from, on its parent.
fn normalize(t: &Table, mut p: Point) -> Result<Point> {
    for _ in 0..64 {
        if p.branch == "main" {
            return Ok(p);
        }
        let b = branch_ref(t, &p.branch)?;
        if p.version != b.parent_version {
            return Ok(p);
        }
        p.branch = b.parent_branch.unwrap_or_else(|| "main".into());
    }
    Err(Error::backend(format!(
        "branch {} is forked more than 64 levels deep",
        p.branch
    )))
}

/// The state of a point (normalized).
fn state_of(t: &Table, p: Point) -> Result<Value> {
    let p = normalize(t, p)?;
    if p.branch == "main" {
        return Ok(json!({ "branch": "main", "version": p.version }));
    }
    let id = branch_ref(t, &p.branch)?.id();
    Ok(json!({ "branch": p.branch, "version": p.version, "branch_id": id }))
}

fn parse_state(state: &Value) -> Result<State> {
    tether_sdk::state::<State>(state)
}

/// The manifest file a state names; not found when the version or the
/// branch's life it was on is gone.
fn resolve_state(t: &Table, state: &Value) -> Result<(Point, VersionFile)> {
    let s = parse_state(state)?;
    if s.branch != "main" {
        let b = branch_ref(t, &s.branch).map_err(|_| {
            Error::not_found(format!(
                "branch {} of {} is gone, and version {} with it",
                s.branch, t.uri, s.version
            ))
        })?;
        if let Some(id) = &s.branch_id
            && *id != b.id()
        {
            return Err(Error::not_found(format!(
                "branch {} of {} was deleted and re-created since version {} was recorded \
                 (branch id {id}, now {})",
                s.branch,
                t.uri,
                s.version,
                b.id()
            )));
        }
    }
    let file = t.version_file(&s.branch, s.version)?.ok_or_else(|| {
        Error::not_found(format!(
            "version {} of branch {} is gone from {} (cleaned up?)",
            s.version, s.branch, t.uri
        ))
    })?;
    Ok((
        Point {
            branch: s.branch,
            version: s.version,
        },
        file,
    ))
}

/// `at` / a revision: `N` (a version of `branch`), `BRANCH@N`, or a tag.
fn resolve_rev(t: &Table, branch: &str, rev: &str) -> Result<(Point, Option<String>)> {
    if !rev.is_empty() && rev.bytes().all(|b| b.is_ascii_digit()) {
        let version = rev
            .parse()
            .map_err(|_| Error::invalid(format!("{rev:?} is not a version number")))?;
        return Ok((
            Point {
                branch: branch.to_owned(),
                version,
            },
            None,
        ));
    }
    if let Some((b, v)) = rev.rsplit_once('@')
        && let Ok(version) = v.parse()
    {
        return Ok((
            Point {
                branch: b.to_owned(),
                version,
            },
            None,
        ));
    }
    match t.tag(rev)? {
        Some(tag) => Ok((Point::of_tag(&tag.value), Some(rev.to_owned()))),
        None => Err(Error::not_found(format!(
            "{rev:?} is no version, BRANCH@VERSION or tag of {}",
            t.uri
        ))),
    }
}

/// The base point: the locator's `at`, else the newest version of its branch.
fn base_point(t: &Table, loc: &Locator) -> Result<(Point, Option<String>)> {
    kit::base_head(
        &Heads {
            t,
            branch: &loc.branch,
        },
        loc.at.as_deref(),
        &loc.branch,
    )
}

/// The newest version of branch `name` (which must exist).
fn branch_head(t: &Table, name: &str) -> Result<Point> {
    if name != "main" {
        branch_ref(t, name)?;
    }
    Ok(Point {
        branch: name.to_owned(),
        version: t.latest(name)?.version,
    })
}

/// The tag a pin resolves through: its own ref, else the live generation.
fn live_pin_tag(tags: &BTreeMap<String, Tag>, pin: &PinRef) -> Option<(String, Point)> {
    kit::live_tag(tags, pin).map(|(name, tag)| (name, Point::of_tag(&tag)))
}

/// A table's versions as [`kit::resolve_target`] finds them, for a locator
/// on `branch` (a bare version number is one of its versions). A head is
/// the point with the tag that names it, if any.
struct Heads<'a> {
    t: &'a Table,
    branch: &'a str,
}

impl kit::Heads for Heads<'_> {
    type Head = (Point, Option<String>);

    fn rev(&self, rev: &str) -> Result<Self::Head> {
        resolve_rev(self.t, self.branch, rev)
    }

    fn branch(&self, name: &str) -> Result<Self::Head> {
        Ok((branch_head(self.t, name)?, None))
    }

    fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, Self::Head)>> {
        Ok(live_pin_tag(&self.t.tags()?, pin).map(|(tag, p)| (tag.clone(), (p, Some(tag)))))
    }

    fn recorded(&self, state: &Value) -> Result<Self::Head> {
        Ok((resolve_state(self.t, state)?.0, None))
    }
}

/// The point a target names, with the tag that names it, if any.
fn resolve_target(t: &Table, loc: &Locator, target: &Target) -> Result<(Point, Option<String>)> {
    let heads = Heads {
        t,
        branch: &loc.branch,
    };
    kit::resolve_target(&heads, loc.at.as_deref(), &loc.branch, target)
}

/// The manifest of a point, or not found.
fn point_file(t: &Table, p: &Point) -> Result<VersionFile> {
    t.version_file(&p.branch, p.version)?.ok_or_else(|| {
        Error::not_found(format!(
            "version {} of branch {} is not in {}",
            p.version, p.branch, t.uri
        ))
    })
}

/// The URI of a branch's root, as a base path records it.
fn root_path(t: &Table, branch: &str) -> String {
    let root = t.uri.trim_end_matches('/');
    if branch == "main" {
        root.to_owned()
    } else {
        format!("{root}/{}/{branch}", format::BRANCH_DIR)
    }
}

/// Why branch `name` cannot be deleted (Lance's rules): tags on it (all of
/// them, or only those that are not tether pins) and branches forked from it.
fn delete_blockers(t: &Table, name: &str, pins_too: bool) -> Result<Option<String>> {
    let tags: Vec<String> = t
        .tags()?
        .into_iter()
        .filter(|(n, tag)| {
            tag.branch_name() == name && (pins_too || kit::pin_id_of_ref(n).is_none())
        })
        .map(|(n, tag)| format!("{n} (version {})", tag.version))
        .collect();
    let children: Vec<String> = t
        .branches()?
        .into_iter()
        .filter(|(_, b)| b.parent_branch.as_deref() == Some(name))
        .map(|(n, b)| format!("{n} (forked at {})", b.parent_version))
        .collect();
    let mut why = Vec::new();
    if !tags.is_empty() {
        why.push(format!("tags {}", tags.join(", ")));
    }
    if !children.is_empty() {
        why.push(format!("branches {}", children.join(", ")));
    }
    Ok((!why.is_empty()).then(|| {
        format!(
            "Lance branch {name} is referenced by {}; Lance cannot delete a branch that a tag \
             or another branch references",
            why.join(" and ")
        )
    }))
}

/// What one fork attempt at one name did.
enum Forked {
    Done,
    /// The branch exists, differs, and tags or branches reference it.
    Blocked,
}

/// The lance backend. Stateless: everything is in the dataset.
#[derive(Debug, Default, Clone, Copy)]
pub struct LanceBackend;

impl LanceBackend {
    /// `verify`'s answer for `state` given the pin's live tag.
    fn report(
        t: &Table,
        state: &Value,
        pin: Option<&PinRef>,
        live: Option<(String, Point)>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let s = parse_state(state)?;
        let want = Point {
            branch: s.branch.clone(),
            version: s.version,
        };
        let mut gone = None;
        let check = PinCheck {
            pin,
            state: want,
            noun: "version",
            deep,
        };
        let mut report = check.report(live, |_| match resolve_state(t, state) {
            Ok((p, file)) => match Self::files_exist(t, &file, &p.branch)? {
                Some(missing) => {
                    gone = Some(format!("{missing} is missing"));
                    Ok(false)
                }
                None => Ok(true),
            },
            Err(Error::NotFound(m)) => {
                gone = Some(m);
                Ok(false)
            }
            Err(e) => Err(e),
        })?;
        if let Some(why) = gone
            && report.status == VerifyStatus::Missing
        {
            report.message = format!("{}: {why}", report.message);
        }
        if pin.is_some() && report.status == VerifyStatus::Missing {
            report
                .message
                .push_str(" (`tether repair` recreates the tag while the version exists)");
        }
        Ok(report)
    }

    /// Fork `name` at `src` (a normalized point) if `expected` allows.
    fn fork_one(
        t: &Table,
        loc: &Locator,
        src: &Point,
        src_state: &Value,
        name: &str,
        expected: &Expected,
    ) -> Result<Forked> {
        for _ in 0..kit::MOVE_ATTEMPTS {
            let current = t.branch(name)?;
            let head = match &current {
                None => None,
                Some(_) => match branch_head(t, name).and_then(|p| state_of(t, p)) {
                    Ok(s) => Some(s),
                    // A ref without versions: a fork or create that crashed
                    // half way. Taken over like an absent branch.
                    Err(e) if is_not_found(&e) => None,
                    Err(e) => return Err(e),
                },
            };
            check_expected(&format!("branch {name}"), head.as_ref(), expected, &[])?;
            if head.as_ref() == Some(src_state) {
                return Ok(Forked::Done);
            }
            // A reset deletes the branch's tree: not when the source lives
            // on it (its versions would go), nor when tags or other branches
            // reference it (Lance's rule).
            if head.is_some() && (src.branch == name || delete_blockers(t, name, true)?.is_some()) {
                return Ok(Forked::Blocked);
            }
            let mut mapping = if src.branch == "main" {
                Vec::new()
            } else {
                branch_ref(t, &src.branch)?.mapping()
            };
            mapping.push((src.version, hex::encode(format::uuid4()?)));
            let file = point_file(t, src)?;
            // Made before anything is claimed or deleted, so a refusal
            // (indices, unknown writer flags) leaves the store as it was.
            let parent = t.read(&file)?;
            let parent_branch = src.tag_branch();
            let from = clone::CloneSource {
                branch: parent_branch.as_deref(),
                root_path: root_path(t, &src.branch),
                version: src.version,
            };
            let new = clone::clone_version(&parent, &from, name)?;
            let contents = Branch {
                parent_branch: src.tag_branch(),
                identifier: Some(IdentifierForm::Mapping(Identifier {
                    version_mapping: mapping,
                })),
                parent_version: src.version,
                create_at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or_default(),
                manifest_size: file.size,
                metadata: BTreeMap::new(),
            };
            // Claim the ref first: exactly one of several racing forks wins.
            let mode = match &current {
                Some(v) => PutMode::IfMatch(v.etag.clone()),
                None => PutMode::Create,
            };
            if !t.put_branch(name, &contents, mode)? {
                if matches!(expected, Expected::Unconditional) {
                    continue;
                }
                return Err(Error::ref_moved(format!(
                    "branch {name} moved concurrently; nothing was written"
                )));
            }
            t.delete_tree(name)?;
            let root = format::branch_root(name);
            t.bucket.put(
                &format!("{root}_transactions/{}", new.transaction_name),
                &new.transaction,
                PutMode::Create,
            )?;
            t.bucket
                .put(
                    &format!("{root}_versions/{}", format::v2_name(src.version)),
                    &new.manifest_file,
                    PutMode::Create,
                )
                .map_err(|e| {
                    Error::ref_moved(format!(
                        "branch {name} was written concurrently while it was forked ({e})"
                    ))
                })?;
            if loc.is_local() {
                // Lance keeps this hint on local stores; it is only a hint.
                t.bucket.put(
                    &format!("{root}_versions/latest_version_hint.json"),
                    format!("{{\"version\":{}}}", src.version).as_bytes(),
                    PutMode::Overwrite,
                )?;
            }
            return Ok(Forked::Done);
        }
        Err(Error::backend(format!(
            "branch {name} kept moving; gave up after {} attempts",
            kit::MOVE_ATTEMPTS
        )))
    }

    fn refuse_base(loc: &Locator, name: &str, what: &str) -> Result<()> {
        kit::refuse_base(&loc.branch, name, what)?;
        kit::refuse_base("main", name, what)
    }

    /// Whether every data and deletion file of a manifest exists.
    fn files_exist(t: &Table, file: &VersionFile, branch: &str) -> Result<Option<String>> {
        let m = t.read(file)?.manifest;
        let own = format::branch_root(branch);
        let base = |id: Option<u32>| -> String {
            match id.and_then(|id| m.base_paths.iter().find(|b| b.id == id)) {
                Some(b) => t.base_prefix(&b.path),
                None => own.clone(),
            }
        };
        for f in &m.fragments {
            for d in &f.files {
                let key = format!("{}data/{}", base(d.base_id), d.path);
                if !t.bucket.exists(&key)? {
                    return Ok(Some(key));
                }
            }
            if let Some(del) = &f.deletion_file {
                let key = format!("{}_deletions/{}", base(del.base_id), del.file_name(f.id));
                if !t.bucket.exists(&key)? {
                    return Ok(Some(key));
                }
            }
        }
        Ok(None)
    }
}

impl Backend for LanceBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("pylance 14.0.2 (Lance data format 2.2) on local directories")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["uri".into()],
            tree_keys: vec!["uri".into()],
            local_path_keys: vec!["uri".into()],
            promote_hint: PROMOTE_HINT.into(),
            ..descriptor("lance", CAPABILITIES)
        }
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        kit::check_bucket_uri("lance", &loc.uri)?;
        if loc.branch != "main" {
            table::check_branch_name(&loc.branch)?;
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        kit::uri_identity(&loc.uri)
    }

    fn effective_capabilities(&self, loc: &Locator, policy: &Value) -> Result<Vec<String>> {
        let mut caps = kit::policy_capabilities(self.describe().capabilities, policy);
        // Every store this backend accepts gives conditional puts (the host
        // makes them atomic on local paths; S3 and memory have them), and a
        // fork claims the branch ref with one.
        let _ = loc;
        caps.push(cap::CONDITIONAL_REF.as_str().to_owned());
        Ok(caps)
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        let t = open(loc)?;
        let point = match working_ref {
            Some(name) => branch_head(&t, name)?,
            None => {
                let (p, _) = base_point(&t, loc)?;
                point_file(&t, &p)?;
                p
            }
        };
        // Refuse what this plugin cannot read before anyone relies on it.
        t.read(&point_file(&t, &point)?)?;
        state_of(&t, point)
    }

    fn pin(&self, loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let t = open(loc)?;
        let (point, file) = resolve_state(&t, state).map_err(|e| match e {
            Error::NotFound(m) => Error::not_found(format!("cannot pin: {m}")),
            e => e,
        })?;
        for _ in 0..kit::MOVE_ATTEMPTS {
            let slot = kit::pin_slot(
                pin_id,
                &point,
                |_| Ok(false),
                |name| Ok(t.tag(name)?.map(|v| Point::of_tag(&v.value))),
            )?;
            let PinSlot::Create(name) = &slot else {
                return Ok(slot.pin_ref(pin_id));
            };
            let now = kit::now_rfc3339(SecondsFormat::Nanos);
            let tag = Tag {
                branch: point.tag_branch(),
                version: point.version,
                created_at: now.clone(),
                updated_at: now,
                manifest_size: Some(file.size),
                metadata: BTreeMap::new(),
            };
            if t.create_tag(name, &tag)? {
                return Ok(slot.pin_ref(pin_id));
            }
            // Someone created the name meanwhile: decide again.
        }
        Err(Error::backend(format!(
            "tag tether.{pin_id} kept changing while it was pinned"
        )))
    }

    fn unpin(&self, loc: &Locator, pin: &PinRef) -> Result<()> {
        let t = open(loc)?;
        for name in t.tags()?.keys() {
            if *name == pin.ref_ || kit::pin_generation_of(&pin.id, name).is_some() {
                t.delete_tag(name)?;
            }
        }
        Ok(())
    }

    fn list_pins(&self, loc: &Locator) -> Result<Vec<String>> {
        let t = open(loc)?;
        let tags = t.tags()?;
        let ids: BTreeSet<&str> = tags.keys().filter_map(|n| kit::pin_id_of_ref(n)).collect();
        Ok(ids.into_iter().map(str::to_owned).collect())
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let t = open(loc)?;
        parse_state(state)?;
        let live = match pin {
            Some(pin) => live_pin_tag(&t.tags()?, pin),
            None => None,
        };
        Self::report(&t, state, pin, live, deep)
    }

    /// `verify` of each item with the table opened once and its tags read
    /// and indexed once (`verify` reads every tag per pin).
    fn verify_many(
        &self,
        loc: &Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let t = open(loc)?;
        let all = t.tags();
        let index = match &all {
            Ok(tags) => kit::PinTags::new(tags.keys().map(String::as_str)),
            Err(_) => kit::PinTags::default(),
        };
        let answer = |item: &VerifyItem| {
            parse_state(&item.state)?;
            let pin = item.pin.as_ref();
            let live = match pin {
                Some(pin) => {
                    let tags = all.as_ref().map_err(Clone::clone)?;
                    index
                        .live(pin)
                        .map(|name| (name.to_owned(), Point::of_tag(&tags[name])))
                }
                None => None,
            };
            Self::report(&t, &item.state, pin, live, deep)
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
        table::check_branch_name(name)?;
        Self::refuse_base(loc, name, "fork")?;
        let t = open(loc)?;
        let (src, _) = resolve_target(&t, loc, source)?;
        let src = normalize(&t, src)?;
        point_file(&t, &src)?;
        let src_state = state_of(&t, src.clone())?;
        for g in 1..=MAX_GENERATION {
            let candidate = if g == 1 {
                name.to_owned()
            } else {
                format!("{name}.{g}")
            };
            // Later generations are tether's own: taken over unconditionally.
            let expected = if g == 1 {
                expected
            } else {
                &Expected::Unconditional
            };
            match Self::fork_one(&t, loc, &src, &src_state, &candidate, expected)? {
                Forked::Done => return Ok(candidate),
                Forked::Blocked => continue,
            }
        }
        Err(Error::backend(format!(
            "every generation of branch {name} up to .{MAX_GENERATION} is referenced by tags"
        )))
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        Self::refuse_base(loc, working_ref, "delete_working_ref")?;
        let t = open(loc)?;
        if t.branch(working_ref)?.is_some() {
            if let Some(why) = delete_blockers(&t, working_ref, true)? {
                return Err(Error::backend(format!(
                    "{why}; it stays until they are released (`tether gc` releases tether's \
                     pins once no commit names them)"
                )));
            }
            t.delete_branch_ref(working_ref)?;
        }
        t.delete_tree(working_ref)?;
        if loc.is_local() {
            // The host removes files, not directories: tidy what Lance's
            // own delete would have removed. Best effort.
            let dir = root_path(&t, working_ref);
            for sub in [
                "_versions",
                "_transactions",
                "data",
                "_deletions",
                "_indices",
            ] {
                let _ = tree::remove_empty_dir(&format!("{dir}/{sub}"));
            }
            let _ = tree::remove_empty_dir(&dir);
        }
        Ok(())
    }

    fn working_ref_blockers(&self, loc: &Locator, working_ref: &str) -> Result<Option<String>> {
        let t = open(loc)?;
        // tether's own pins are released before branches are deleted, so
        // only what tether cannot release blocks.
        delete_blockers(&t, working_ref, false)
    }

    fn list_working_refs(&self, loc: &Locator) -> Result<Vec<String>> {
        let t = open(loc)?;
        Ok(t.branches()?
            .into_keys()
            .filter(|b| b.starts_with(tether_sdk::WORKING_REF_PREFIX))
            .collect())
    }

    fn promote(&self, _: &Locator, _: &Target, _: &Expected) -> Result<Value> {
        Err(Error::Capability(format!(
            "promote is refused: {PROMOTE_HINT}"
        )))
    }

    fn ancestor_of(
        &self,
        loc: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let t = open(loc)?;
        let (Ok((a, _)), Ok((d, _))) = (resolve_state(&t, ancestor), resolve_state(&t, descendant))
        else {
            return Ok(None);
        };
        let (a, mut d) = (normalize(&t, a)?, normalize(&t, d)?);
        for _ in 0..64 {
            if d.branch == a.branch {
                return Ok(Some(a.version <= d.version));
            }
            if d.branch == "main" {
                return Ok(Some(false));
            }
            let b = branch_ref(&t, &d.branch)?;
            d = Point {
                branch: b.parent_branch.unwrap_or_else(|| "main".into()),
                version: b.parent_version,
            };
        }
        Ok(None)
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let t = open(loc)?;
        let (point, mut tag) = resolve_target(&t, loc, target)?;
        let file = point_file(&t, &point)?;
        t.read(&file)?;
        // Only a branch head opens writable.
        let writable_branch = match target {
            Target::Base => loc.at.is_none(),
            Target::WorkingRef(_) => true,
            _ => false,
        } && !read_only;
        if tag.is_none() && !writable_branch && point.branch != "main" {
            // A version on another branch is easiest to open by a tag.
            tag = t
                .tags()?
                .into_iter()
                .find(|(_, tg)| Point::of_tag(tg) == point)
                .map(|(n, _)| n);
        }
        let uri = t.uri.clone();
        let fragment = match (&tag, writable_branch) {
            (Some(tag), _) => tag.clone(),
            (None, true) => point.branch.clone(),
            (None, false) if point.branch == "main" => point.version.to_string(),
            (None, false) => format!("{}@{}", point.branch, point.version),
        };
        Ok(Handle {
            type_name: "LanceHandle".into(),
            address: format!("{uri}#{fragment}"),
            read_only: !writable_branch,
            fields: json!({
                "uri": uri,
                "dataset": uri,
                "branch": point.branch,
                "version": point.version,
                "tag": tag,
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let t = open(loc)?;
        let start = match from_ref {
            None => base_point(&t, loc)?.0,
            Some(r) if r == "main" || t.branch(r)?.is_some() => branch_head(&t, r)?,
            Some(r) => resolve_rev(&t, &loc.branch, r)?.0,
        };
        let mut refs: BTreeMap<Point, Vec<String>> = BTreeMap::new();
        for (name, tag) in t.tags()? {
            refs.entry(Point::of_tag(&tag)).or_default().push(name);
        }
        let versions = t.versions(&start.branch)?;
        let newest = versions.last().map(|v| v.version);
        let mut out = Vec::new();
        for v in versions
            .iter()
            .rev()
            .filter(|v| v.version <= start.version)
            .take(limit as usize)
        {
            let file = t.read(v)?;
            let when =
                file.manifest.timestamp.as_ref().map(|ts| {
                    kit::rfc3339(ts.seconds, ts.nanos.max(0) as u32, SecondsFormat::Micros)
                });
            let p = Point {
                branch: start.branch.clone(),
                version: v.version,
            };
            let mut names = refs.remove(&p).unwrap_or_default();
            if Some(v.version) == newest {
                names.insert(0, start.branch.clone());
            }
            out.push(HistoryEntry {
                id: if start.branch == loc.branch {
                    v.version.to_string()
                } else {
                    format!("{}@{}", start.branch, v.version)
                },
                when,
                message: t.operation(&file)?.to_owned(),
                refs: names,
            });
        }
        Ok(out)
    }

    fn diff(
        &self,
        loc: &Locator,
        a: &Value,
        b: &Value,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<ObjectDiff> {
        let t = open(loc)?;
        let mut diff = ObjectDiff::new("fragments");
        let (_, fa) = resolve_state(&t, a)?;
        let (_, fb) = resolve_state(&t, b)?;
        let (ma, mb) = (t.read(&fa)?.manifest, t.read(&fb)?.manifest);
        if fa.key == fb.key || ma == mb {
            return Ok(diff);
        }
        let old: BTreeMap<u64, &proto::DataFragment> =
            ma.fragments.iter().map(|f| (f.id, f)).collect();
        let new: BTreeMap<u64, &proto::DataFragment> =
            mb.fragments.iter().map(|f| (f.id, f)).collect();
        let ids: BTreeSet<u64> = old.keys().chain(new.keys()).copied().collect();
        for id in ids {
            let path = format!("fragment {id}");
            match (old.get(&id), new.get(&id)) {
                (None, Some(f)) => {
                    diff.add(path, Change::Added, format!("+{} rows", f.live_rows()));
                }
                (Some(f), None) => {
                    diff.add(path, Change::Removed, format!("-{} rows", f.live_rows()));
                }
                (Some(o), Some(n)) => {
                    let mut what = Vec::new();
                    let deleted = |f: &proto::DataFragment| {
                        f.deletion_file.as_ref().map_or(0, |d| d.num_deleted_rows)
                    };
                    if o.deletion_file != n.deletion_file {
                        let (d0, d1) = (deleted(o), deleted(n));
                        what.push(if d1 >= d0 {
                            format!("{} rows deleted", d1 - d0)
                        } else {
                            format!("deletion file changed ({d0} -> {d1} deleted rows)")
                        });
                    }
                    let files = |f: &proto::DataFragment| -> BTreeSet<String> {
                        f.files.iter().map(|d| d.path.clone()).collect()
                    };
                    let (f0, f1) = (files(o), files(n));
                    let added = f1.difference(&f0).count();
                    let removed = f0.difference(&f1).count();
                    if added > 0 {
                        what.push(format!("+{added} data files"));
                    }
                    if removed > 0 {
                        what.push(format!("-{removed} data files"));
                    }
                    if o.physical_rows != n.physical_rows {
                        what.push(format!("rows {} -> {}", o.physical_rows, n.physical_rows));
                    }
                    if !what.is_empty() {
                        diff.add(path, Change::Modified, what.join(", "));
                    }
                }
                (None, None) => {}
            }
        }
        let cols = |m: &proto::Manifest| -> BTreeMap<i32, proto::Field> {
            m.fields.iter().map(|f| (f.id, f.clone())).collect()
        };
        let (c0, c1) = (cols(&ma), cols(&mb));
        let ids: BTreeSet<i32> = c0.keys().chain(c1.keys()).copied().collect();
        for id in ids {
            match (c0.get(&id), c1.get(&id)) {
                (None, Some(f)) => {
                    diff.add(format!("column {}", f.name), Change::Added, &f.logical_type);
                }
                (Some(f), None) => {
                    diff.add(
                        format!("column {}", f.name),
                        Change::Removed,
                        &f.logical_type,
                    );
                }
                (Some(o), Some(n)) if o != n => {
                    let mut what = Vec::new();
                    if o.name != n.name {
                        what.push(format!("renamed from {}", o.name));
                    }
                    if o.logical_type != n.logical_type {
                        what.push(format!("{} -> {}", o.logical_type, n.logical_type));
                    }
                    if o.nullable != n.nullable {
                        what.push(format!("nullable {} -> {}", o.nullable, n.nullable));
                    }
                    if !what.is_empty() {
                        diff.add(
                            format!("column {}", n.name),
                            Change::Modified,
                            what.join(", "),
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(diff)
    }

    fn state_addressable(&self, loc: &Locator, state: &Value) -> Result<bool> {
        let t = open(loc)?;
        match resolve_state(&t, state) {
            Ok(_) => Ok(true),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Committed `[backends.lance]` takes the storage options every storage
/// backend does; the rest belongs in `.tether/secrets.toml`.
impl tether_sdk::DescribeExt for LanceBackend {
    fn config_keys(&self) -> Vec<String> {
        kit::storage_option_keys()
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(LanceBackend, harness: LanceHarness, [describe_ext]);
