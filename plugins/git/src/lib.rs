//! # tether-plugin-git: git (and colocated jj) repositories
//!
//! Kind `git` (spec/11, "`git`: git and jj repositories"): pin the *code*
//! that produced a dataset. Forkable, with `CHEAP_FINGERPRINT`, `ATOMIC_REF`,
//! `CONDITIONAL_REF`, `DIFF`, `HISTORY`, `PROMOTE`, `MERGE` and `CREATE`.
//!
//! The plugin is git itself, inside the sandbox: gix (pure Rust) reads
//! objects and refs, walks history, diffs trees and merges; this crate writes
//! refs (`refs.rs`), objects (`odb.rs`) and the checkout (`checkout.rs`) with
//! lock files as git does. It reaches the repository through the one
//! directory the host preopens for it (`describe-fs`: the locator's `path`)
//! and nothing else; it spawns nothing, so no hook, fsmonitor, diff or merge
//! driver, or transport a repository's config names can run.
//!
//! ## Locator
//!
//! ```json
//! {"path": "/abs/code", "ref": "HEAD", "allow_dirty": false}
//! ```
//!
//! `path` (or `uri`, which `tether add KEY --kind git PATH` fills) is the
//! checkout (or a bare repository), absolute (tether resolves a
//! relative one at `add`); a linked worktree is refused (its `.git` file
//! points outside the granted directory), and so is a dataset's own checkout
//! (`tether.toml` at its root). `ref` (default `HEAD`; `at` is an alias) is
//! the base; promote and merge move it, so it must be a branch, and with
//! `HEAD` the checked-out branch: a detached `HEAD` is refused with the
//! spec's sentence. `allow_dirty` pins despite uncommitted changes. `remote`
//! names a remote the repository has configured (a path or URL comes only
//! from `.tether/secrets.toml`, in the plugin's config): pins are pushed
//! there and unpins delete there first, for remotes on this machine
//! ([`remote`]; docs/git-backend.md says what else works).
//!
//! ## Identity and state
//!
//! Identity `{"path": ...}`. State `{"sha": <commit>}`, plus `dirty` when the
//! ref is the one checked out in the main worktree, and `change_id` when the
//! commit carries jj's `change-id` header; `dirty` and `change_id` are
//! volatile.
//!
//! ## Native names
//!
//! Pins are lightweight tags `tether.<pin-id>`; forks are branches
//! `tether.ws.<dataset>.<bookmark>` at the pin's commit. Every ref move is a
//! compare-and-swap on the old value under `<ref>.lock`; a branch checked out
//! in any worktree is never reset, renamed or deleted. Promote fast-forwards;
//! merge writes a real merge commit, or reports the conflicting paths and
//! writes nothing. Moving the branch checked out in the main worktree also
//! updates its files and index, and refuses a dirty checkout first.
//!
//! ## Create
//!
//! `git init` by hand: `.git` with `HEAD` on the base branch (`ref`, default
//! `main`), one root commit of the empty tree with a fixed author, committer,
//! dates and message ([`empty_root`], the same sha every time), and the owner in
//! `git config tether.owner`.

mod checkout;
mod harness;
mod odb;
mod refs;
mod remote;
mod repo;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::{Kind, WriteTo};
use serde_json::{Value, json};
use tether_sdk::kit::{self, CasRef, PinCheck, Swap};
use tether_sdk::{
    Backend, Capability, Change, DescribeExt, DescribeFs, Descriptor, Error, Expected, Handle,
    HistoryEntry, ObjectDiff, PinRef, Result, Target, VerifyItem, VerifyReport, VerifyStatus, cap,
    descriptor,
};

pub use harness::GitHarness;
use refs::Prev;
use remote::Remote;
use repo::{Repo, SIGNATURE_EMAIL, SIGNATURE_NAME, full_state, state_json, state_sha};

/// Capabilities of every git object.
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::CHEAP_FINGERPRINT,
    cap::ATOMIC_REF,
    cap::CONDITIONAL_REF,
    cap::DIFF,
    cap::HISTORY,
    cap::PROMOTE,
    cap::MERGE,
    cap::CREATE,
];

/// State keys that address but do not identify.
pub const VOLATILE_KEYS: &[&str] = &["dirty", "change_id"];

/// The root commit every created repository starts at: the empty tree, by
/// `tether <tether@localhost>` at 2000-01-01T00:00:00Z, message
/// `tether: empty root`, as its id and its encoded bytes.
pub fn empty_root() -> Result<(ObjectId, Vec<u8>)> {
    let empty_tree = ObjectId::empty_tree(gix::hash::Kind::Sha1);
    let commit = commit_object(empty_tree, &[], "tether: empty root", ROOT_TIME);
    let mut bytes = Vec::new();
    commit
        .write_to(&mut bytes)
        .map_err(|e| Error::backend(format!("cannot encode the root commit: {e}")))?;
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, Kind::Commit, &bytes)
        .map_err(|e| Error::backend(format!("cannot hash the root commit: {e}")))?;
    Ok((id, bytes))
}

/// The fixed date of the root commit (2000-01-01T00:00:00Z).
const ROOT_TIME: i64 = 946_684_800;

fn volatile() -> Vec<String> {
    VOLATILE_KEYS.iter().map(|k| k.to_string()).collect()
}

fn short(name: &str) -> &str {
    name.strip_prefix("refs/heads/")
        .or_else(|| name.strip_prefix("refs/tags/"))
        .unwrap_or(name)
}

fn signature(seconds: i64) -> gix::actor::Signature {
    gix::actor::Signature {
        name: SIGNATURE_NAME.into(),
        email: SIGNATURE_EMAIL.into(),
        time: gix::date::Time::new(seconds, 0),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A commit object.
pub(crate) fn commit_object(
    tree: ObjectId,
    parents: &[ObjectId],
    message: &str,
    seconds: i64,
) -> gix::objs::Commit {
    let mut message = message.to_string();
    if !message.ends_with('\n') {
        message.push('\n');
    }
    gix::objs::Commit {
        tree,
        parents: parents.iter().copied().collect(),
        author: signature(seconds),
        committer: signature(seconds),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    }
}

/// `repo`'s gix handle with writes kept in memory until [`odb::persist`].
pub(crate) fn in_memory(repo: &Repo) -> gix::Repository {
    let mut mem = repo.gix.clone().with_object_memory();
    mem.object_cache_size_if_unset(8 << 20);
    mem
}

fn gix_err(what: &str) -> impl Fn(gix::Error) -> Error + '_ {
    move |e| Error::backend(format!("{what}: {e}"))
}

/// The git backend. Stateless: everything is in the repository; the config
/// carries only what `.tether/secrets.toml` gives the object.
#[derive(Debug, Default, Clone)]
pub struct GitBackend {
    /// `[objects."KEY"] remote`: a path or `file://` URL pins are pushed to,
    /// instead of the locator's remote name.
    remote: Option<String>,
}

impl GitBackend {
    /// The commit a target names.
    fn resolve(repo: &Repo, target: &Target) -> Result<ObjectId> {
        match target {
            Target::Base => repo.base_head(),
            Target::WorkingRef(name) => repo
                .refs
                .resolve(&Repo::branch_ref(name))?
                .ok_or_else(|| Error::not_found(format!("branch {name} does not exist"))),
            Target::Pinned(pin) => repo
                .refs
                .resolve(&Repo::tag_ref(&pin.ref_))?
                .ok_or_else(|| Error::not_found(format!("tag {} does not exist", pin.ref_)))
                .and_then(|id| repo.peel_to_commit(id)),
            Target::Recorded(state) => {
                let id = state_sha(state)?;
                if !repo.has_commit(id) {
                    return Err(Error::not_found(format!(
                        "commit {id} is not in {}",
                        repo.loc.path
                    )));
                }
                Ok(id)
            }
        }
    }

    /// Refuse `name` (short) when it is the base branch or checked out.
    fn refuse_busy(repo: &Repo, name: &str, what: &str) -> Result<()> {
        let full = Repo::branch_ref(name);
        if let Ok(base) = repo.base_branch()
            && base == full
        {
            return Err(Error::backend(format!(
                "{what} refuses the base branch {name}"
            )));
        }
        if let Some(place) = repo.checked_out_where(&full)? {
            return Err(Error::backend(format!(
                "{what} refuses branch {name}: it is checked out in {place} of {}; \
                 check out another branch there first",
                repo.loc.path
            )));
        }
        Ok(())
    }

    /// Move branch `full` to what `next` computes from its current head
    /// ([`kit::move_ref`]); when the branch is checked out in the main
    /// worktree, the checkout follows (refused when dirty). Returns the
    /// resulting head.
    fn move_branch(
        repo: &Repo,
        full: &str,
        expected: &Expected,
        mut next: impl FnMut(Option<ObjectId>) -> Result<Option<ObjectId>>,
    ) -> Result<ObjectId> {
        let branch = Branch {
            repo,
            full,
            checked_out: repo.is_main_checkout(full)?,
        };
        kit::move_ref(&branch, expected, &volatile(), |head| next(head.copied()))
    }

    /// Create tag `tether.<pin-id>` at `sha`, or find it there.
    fn tag(repo: &Repo, sha: ObjectId, pin_id: &str) -> Result<PinRef> {
        let name = format!("{}{pin_id}", tether_sdk::PIN_REF_PREFIX);
        let full = Repo::tag_ref(&name);
        let created = match repo.refs.update(&full, Prev::Absent, sha, |_| Ok(())) {
            Ok(()) => true,
            Err(Error::RefMoved(_)) => match repo.refs.resolve(&full)? {
                Some(at) if at == sha => false,
                Some(at) => {
                    return Err(Error::backend(format!(
                        "tag {name} exists at {at} instead of {sha}"
                    )));
                }
                None => return Err(Error::backend(format!("tag {name} is locked; retry"))),
            },
            Err(e) => return Err(e),
        };
        Ok(PinRef {
            id: pin_id.to_string(),
            ref_: name,
            created,
        })
    }

    /// `git log --decorate` names per commit.
    fn decorations(repo: &Repo) -> Result<BTreeMap<ObjectId, Vec<String>>> {
        let mut out: BTreeMap<ObjectId, Vec<String>> = BTreeMap::new();
        let head_branch = if repo.worktree.is_some() || repo.refs.read("HEAD")?.is_some() {
            repo.refs.head_branch()?
        } else {
            None
        };
        if head_branch.is_none()
            && let Some(id) = repo.refs.resolve("HEAD")?
        {
            out.entry(id).or_default().push("HEAD".into());
        }
        for (name, id) in repo.refs.list("refs/heads/")? {
            let label = if head_branch.as_deref() == Some(name.as_str()) {
                format!("HEAD -> {}", short(&name))
            } else {
                short(&name).to_string()
            };
            out.entry(id).or_default().push(label);
        }
        for (name, id) in repo.refs.list("refs/tags/")? {
            let id = repo.peel_to_commit(id).unwrap_or(id);
            out.entry(id)
                .or_default()
                .push(format!("tag: {}", short(&name)));
        }
        Ok(out)
    }
}

impl GitBackend {
    /// The remote pins go to, when the object has one.
    fn pin_remote(&self, repo: &Repo) -> Result<Option<Remote>> {
        Remote::resolve(repo, self.remote.as_deref())
    }

    /// With a `remote`, a pin is a pin only where it was pushed: the
    /// remote's tag must hold `sha` too (`tether repair` pushes it again).
    fn verify_pushed(&self, repo: &Repo, pin: &PinRef, sha: ObjectId) -> Result<VerifyReport> {
        Self::pushed_report(&self.pin_remote(repo), pin, sha, Remote::tag_at)
    }

    /// [`GitBackend::verify_pushed`] given the remote (resolved once for a
    /// batch) and how to read a tag there (a listing, for a batch).
    fn pushed_report(
        remote: &Result<Option<Remote>>,
        pin: &PinRef,
        sha: ObjectId,
        tag_at: impl Fn(&Remote, &str) -> Result<Option<ObjectId>>,
    ) -> Result<VerifyReport> {
        let report = |status, message: String| Ok(VerifyReport { status, message });
        let remote = match remote {
            Ok(None) => return report(VerifyStatus::Ok, format!("tag {} holds {sha}", pin.ref_)),
            Ok(Some(remote)) => remote,
            Err(e) => {
                return report(
                    VerifyStatus::Unknown,
                    format!(
                        "tag {} holds {sha}; the remote cannot be read: {e}",
                        pin.ref_
                    ),
                );
            }
        };
        let label = remote.label();
        match tag_at(remote, &Repo::tag_ref(&pin.ref_))? {
            None => report(
                VerifyStatus::Missing,
                format!("tag {} is not in {label}, where pins are pushed", pin.ref_),
            ),
            Some(at) if at != sha => report(
                VerifyStatus::Drifted,
                format!(
                    "tag {} in {label} points at {at} instead of {sha}",
                    pin.ref_
                ),
            ),
            Some(_) => report(
                VerifyStatus::Ok,
                format!("tag {} holds {sha} here and in {label}", pin.ref_),
            ),
        }
    }

    /// Push the tag of `pin` to `remote`; on failure remove the local tag
    /// when this call created it, so a pin exists only once it is pushed.
    fn push_pin(repo: &Repo, remote: &Remote, pin: &PinRef, sha: ObjectId) -> Result<()> {
        let full = Repo::tag_ref(&pin.ref_);
        let Err(e) = remote.push_tag(repo, &full, sha) else {
            return Ok(());
        };
        let local = if pin.created {
            match repo.refs.delete(&full, Prev::At(sha)) {
                Ok(()) => "the local tag was removed".to_string(),
                Err(d) => format!("removing the local tag failed too: {d}"),
            }
        } else {
            "the local tag was there before and is kept".to_string()
        };
        Err(Error::backend(format!(
            "pin {} was not pushed to {}, so it is no pin: {e}; {local}. Fix the remote, then \
             retry",
            pin.ref_,
            remote.label()
        )))
    }
}

/// A branch as [`kit::move_ref`] moves it: a locked ref update from the head
/// read, moving the main worktree's checkout along when it is checked out.
struct Branch<'a> {
    repo: &'a Repo,
    full: &'a str,
    checked_out: bool,
}

impl CasRef for Branch<'_> {
    type Head = ObjectId;
    type Token = ObjectId;

    fn name(&self) -> String {
        format!("branch {}", short(self.full))
    }

    fn read(&self) -> Result<Option<(ObjectId, ObjectId)>> {
        Ok(self.repo.refs.resolve(self.full)?.map(|h| (h, h)))
    }

    fn state(&self, head: &ObjectId) -> Value {
        state_json(*head, None)
    }

    fn swap(&self, token: Option<ObjectId>, target: &ObjectId) -> Result<Swap> {
        let (repo, target) = (self.repo, *target);
        let prev = token.map(Prev::At).unwrap_or(Prev::Absent);
        let moved = repo.refs.update(self.full, prev, target, |old| {
            if self.checked_out {
                if let Some(why) = checkout::dirt(repo)? {
                    return Err(Error::backend(format!(
                        "the checkout at {} has uncommitted changes ({why}); commit or \
                         stash them, then retry",
                        repo.loc.path
                    )));
                }
                checkout::sync(repo, old, target)?;
            }
            Ok(())
        });
        match moved {
            Ok(()) => Ok(Swap::Moved),
            Err(Error::RefMoved(m)) => Ok(Swap::Lost(m)),
            Err(e) => Err(e),
        }
    }
}

impl Backend for GitBackend {
    type Locator = repo::Locator;

    fn configure(&mut self, config: Value) -> Result<()> {
        self.remote = match config.get("remote") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "`remote` in .tether/secrets.toml must be a path or file:// URL, not {other}"
                )));
            }
        };
        Ok(())
    }

    fn describe(&self) -> Descriptor {
        Descriptor {
            volatile_keys: volatile(),
            local_path_keys: vec!["path".into(), "uri".into()],
            // `tree` only to remove the emptied directory in `delete_store`.
            tree_keys: vec!["path".into(), "uri".into()],
            promote_hint: "The base branch has moved since the fork: promote with \
                           `--strategy merge`, or fork again from the new base."
                .into(),
            ..descriptor("git", CAPABILITIES)
        }
    }

    fn validate_locator(&self, locator: &repo::Locator) -> Result<()> {
        let loc = locator;
        let path = Path::new(&loc.path);
        if path.join("tether.toml").is_file() || path.join(".tether").is_dir() {
            return Err(Error::invalid(format!(
                "{} is a tether dataset checkout; the git object must be a repository outside it",
                loc.path
            )));
        }
        // A remote is checked now (configured, on this machine, a
        // repository), unless `add --create` is about to make the repository.
        if repo::git_dir_of(path).is_some() {
            self.pin_remote(&Repo::open(locator)?)?;
        }
        Ok(())
    }

    fn identity(&self, locator: &repo::Locator) -> Result<Value> {
        let loc = locator;
        Ok(json!({ "path": loc.path }))
    }

    fn fingerprint(&self, locator: &repo::Locator, working_ref: Option<&str>) -> Result<Value> {
        let repo = Repo::open(locator)?;
        let (sha, checked_out) = match working_ref {
            Some(name) => {
                let full = Repo::branch_ref(name);
                let sha = repo
                    .refs
                    .resolve(&full)?
                    .ok_or_else(|| Error::not_found(format!("branch {name} does not exist")))?;
                (sha, repo.is_main_checkout(&full)?)
            }
            None => {
                let sha = repo.base_head()?;
                let base = repo.loc.base_ref();
                let checked_out = repo.worktree.is_some()
                    && (base == "HEAD" || repo.is_main_checkout(&Repo::branch_ref(base))?);
                (sha, checked_out)
            }
        };
        let dirty = if checked_out {
            Some(checkout::dirt(&repo)?.is_some())
        } else {
            None
        };
        Ok(full_state(&repo, sha, dirty))
    }

    fn pin(&self, locator: &repo::Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let repo = Repo::open(locator)?;
        let sha = state_sha(state)?;
        if state.get("dirty") == Some(&Value::Bool(true)) && !repo.loc.allow_dirty() {
            let why = checkout::dirt(&repo)?.unwrap_or_else(|| "it was dirty when read".into());
            return Err(Error::backend(format!(
                "{} has uncommitted changes ({why}): commit them first, or set \
                 `allow_dirty = true` on the object to pin the last commit anyway",
                repo.loc.path
            )));
        }
        if !repo.has_commit(sha) {
            return Err(Error::not_found(format!(
                "commit {sha} is not in {}",
                repo.loc.path
            )));
        }
        // Resolved before the local tag exists: a remote that cannot be
        // pushed to fails the pin with nothing written.
        let remote = self.pin_remote(&repo)?;
        let pin = Self::tag(&repo, sha, pin_id)?;
        if let Some(remote) = &remote {
            Self::push_pin(&repo, remote, &pin, sha)?;
        }
        Ok(pin)
    }

    fn unpin(&self, locator: &repo::Locator, pin: &PinRef) -> Result<()> {
        let repo = Repo::open(locator)?;
        let full = Repo::tag_ref(&pin.ref_);
        // The remote first: a tag left there alone would be a pin nobody
        // releases, so its failure keeps the local tag too.
        if let Some(remote) = self.pin_remote(&repo)? {
            remote.delete_tag(&full).map_err(|e| {
                Error::backend(format!(
                    "cannot delete {} in {}: {e}; the local tag is kept",
                    pin.ref_,
                    remote.label()
                ))
            })?;
        }
        match repo.refs.read(&full)?.and_then(|v| v.object()) {
            None => Ok(()),
            Some(at) => repo.refs.delete(&full, Prev::At(at)),
        }
    }

    fn list_pins(&self, locator: &repo::Locator) -> Result<Vec<String>> {
        let repo = Repo::open(locator)?;
        Ok(repo
            .refs
            .list("refs/tags/")?
            .keys()
            .filter_map(|name| short(name).strip_prefix(tether_sdk::PIN_REF_PREFIX))
            .map(str::to_string)
            .collect())
    }

    fn verify(
        &self,
        locator: &repo::Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let repo = Repo::open(locator)?;
        let sha = state_sha(state)?;
        let live = match pin {
            Some(pin) => repo
                .refs
                .resolve(&Repo::tag_ref(&pin.ref_))?
                .map(|at| (pin.ref_.clone(), at)),
            None => None,
        };
        let check = PinCheck {
            pin,
            state: sha,
            noun: "commit",
            deep,
        };
        let report = check.report(live, |sha| Ok(repo.has_commit(*sha)))?;
        match pin {
            // With a remote, a pin is a pin only where it was pushed.
            Some(pin) if report.status == VerifyStatus::Ok => self.verify_pushed(&repo, pin, sha),
            _ => Ok(report),
        }
    }

    /// `verify` of each item with the repository opened once, its tags
    /// listed once, and (with a remote) the remote resolved and its tags
    /// listed once. A pin's tag missing from a listing is looked up on its
    /// own, as `verify` looks it up.
    fn verify_many(
        &self,
        locator: &repo::Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let repo = Repo::open(locator)?;
        let tags = repo.refs.list("refs/tags/");
        let remote = OnceCell::new();
        let remote_tags = OnceCell::new();
        let answer = |item: &VerifyItem| -> Result<VerifyReport> {
            let sha = state_sha(&item.state)?;
            let pin = item.pin.as_ref();
            let live = match pin {
                Some(pin) => {
                    let full = Repo::tag_ref(&pin.ref_);
                    let listed = match &tags {
                        Ok(tags) => tags.get(&full).copied(),
                        Err(e) => return Err(e.clone()),
                    };
                    match listed {
                        Some(at) => Some(at),
                        None => repo.refs.resolve(&full)?,
                    }
                    .map(|at| (pin.ref_.clone(), at))
                }
                None => None,
            };
            let check = PinCheck {
                pin,
                state: sha,
                noun: "commit",
                deep,
            };
            let report = check.report(live, |sha| Ok(repo.has_commit(*sha)))?;
            match pin {
                Some(pin) if report.status == VerifyStatus::Ok => {
                    let remote = remote.get_or_init(|| self.pin_remote(&repo));
                    Self::pushed_report(remote, pin, sha, |r, full| {
                        match remote_tags.get_or_init(|| r.tags()) {
                            Ok(tags) => match tags.get(full) {
                                Some(at) => Ok(Some(*at)),
                                None => r.tag_at(full),
                            },
                            Err(e) => Err(e.clone()),
                        }
                    })
                }
                _ => Ok(report),
            }
        };
        Ok(items.iter().map(answer).collect())
    }

    fn fork(
        &self,
        locator: &repo::Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        let repo = Repo::open(locator)?;
        Self::refuse_busy(&repo, name, "fork")?;
        let source = Self::resolve(&repo, source)?;
        Self::move_branch(&repo, &Repo::branch_ref(name), expected, |_| {
            Ok(Some(source))
        })?;
        Ok(name.to_string())
    }

    fn delete_working_ref(&self, locator: &repo::Locator, working_ref: &str) -> Result<()> {
        let repo = Repo::open(locator)?;
        Self::refuse_busy(&repo, working_ref, "delete_working_ref")?;
        let full = Repo::branch_ref(working_ref);
        match repo.refs.read(&full)?.and_then(|v| v.object()) {
            None => Ok(()),
            Some(at) => repo.refs.delete(&full, Prev::At(at)),
        }
    }

    fn working_ref_blockers(
        &self,
        locator: &repo::Locator,
        working_ref: &str,
    ) -> Result<Option<String>> {
        let repo = Repo::open(locator)?;
        Ok(repo
            .checked_out_where(&Repo::branch_ref(working_ref))?
            .map(|place| format!("branch {working_ref} is checked out in {place}")))
    }

    fn list_working_refs(&self, locator: &repo::Locator) -> Result<Vec<String>> {
        let repo = Repo::open(locator)?;
        Ok(repo
            .refs
            .list("refs/heads/")?
            .keys()
            .map(|name| short(name).to_string())
            .filter(|name| name.starts_with(tether_sdk::WORKING_REF_PREFIX))
            .collect())
    }

    fn rename_pin(
        &self,
        locator: &repo::Locator,
        old: &PinRef,
        state: &Value,
        new_id: &str,
    ) -> Result<PinRef> {
        let repo = Repo::open(locator)?;
        let sha = state_sha(state)?;
        let old_full = Repo::tag_ref(&old.ref_);
        match repo.refs.resolve(&old_full)? {
            Some(at) if at != sha => {
                return Err(Error::backend(format!(
                    "tag {} points at {at}, not {sha}; not renaming it",
                    old.ref_
                )));
            }
            _ => {}
        }
        let remote = self.pin_remote(&repo)?;
        let new = Self::tag(&repo, sha, new_id)?;
        if let Some(remote) = &remote {
            Self::push_pin(&repo, remote, &new, sha)?;
            if old.ref_ != new.ref_ {
                remote.delete_tag(&old_full)?;
            }
        }
        if old.ref_ != new.ref_ && repo.refs.resolve(&old_full)?.is_some() {
            repo.refs.delete(&old_full, Prev::At(sha))?;
        }
        Ok(new)
    }

    fn rename_working_ref(&self, locator: &repo::Locator, old: &str, new: &str) -> Result<String> {
        let repo = Repo::open(locator)?;
        Self::refuse_busy(&repo, old, "rename_working_ref")?;
        Self::refuse_busy(&repo, new, "rename_working_ref")?;
        let (old_full, new_full) = (Repo::branch_ref(old), Repo::branch_ref(new));
        let sha = repo
            .refs
            .resolve(&old_full)?
            .ok_or_else(|| Error::not_found(format!("branch {old} does not exist")))?;
        repo.refs.update(&new_full, Prev::Absent, sha, |_| Ok(()))?;
        repo.refs.delete(&old_full, Prev::At(sha))?;
        Ok(new.to_string())
    }

    fn promote(
        &self,
        locator: &repo::Locator,
        source: &Target,
        expected: &Expected,
    ) -> Result<Value> {
        let repo = Repo::open(locator)?;
        let base = repo.base_branch()?;
        let source = Self::resolve(&repo, source)?;
        let hint = self.describe().promote_hint;
        let head = Self::move_branch(&repo, &base, expected, |head| {
            let head = head.ok_or_else(|| {
                Error::not_found(format!("branch {} does not exist", short(&base)))
            })?;
            if head == source {
                Ok(None)
            } else if repo.is_ancestor(head, source)? {
                Ok(Some(source))
            } else {
                Err(Error::backend(format!(
                    "{} ({head}) is not an ancestor of {source}, so it cannot fast-forward. {hint}",
                    short(&base)
                )))
            }
        })?;
        Ok(full_state(&repo, head, None))
    }

    fn merge(
        &self,
        locator: &repo::Locator,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value> {
        let repo = Repo::open(locator)?;
        let base = repo.base_branch()?;
        let theirs = Self::resolve(&repo, source)?;
        let head = Self::move_branch(&repo, &base, expected, |head| {
            let ours = head.ok_or_else(|| {
                Error::not_found(format!("branch {} does not exist", short(&base)))
            })?;
            if repo.is_ancestor(theirs, ours)? {
                return Ok(None); // Already merged.
            }
            if repo.is_ancestor(ours, theirs)? {
                return Ok(Some(theirs)); // Fast-forward.
            }
            merge_commit(&repo, ours, theirs, message).map(Some)
        })?;
        Ok(full_state(&repo, head, None))
    }

    fn ancestor_of(
        &self,
        locator: &repo::Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let repo = Repo::open(locator)?;
        let (a, d) = (state_sha(ancestor)?, state_sha(descendant)?);
        if !repo.has_commit(a) || !repo.has_commit(d) {
            return Ok(None);
        }
        repo.is_ancestor(a, d).map(Some)
    }

    fn open(&self, locator: &repo::Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let repo = Repo::open(locator)?;
        let (name, branch) = match target {
            Target::Base => match repo.base_branch() {
                Ok(full) => (Some(short(&full).to_string()), true),
                Err(_) => (Some(repo.loc.base_ref().to_string()), false),
            },
            Target::WorkingRef(name) => (Some(name.clone()), true),
            Target::Pinned(pin) => (Some(pin.ref_.clone()), false),
            Target::Recorded(_) => (None, false),
        };
        let sha = Self::resolve(&repo, target)?;
        Ok(Handle {
            type_name: "GitHandle".into(),
            address: format!("{}@{sha}", repo.loc.path),
            read_only: read_only || !branch,
            fields: json!({
                "path": repo.loc.path,
                "sha": sha.to_string(),
                "worktree": repo.worktree.as_ref().map(|w| w.to_string_lossy().into_owned()),
                "ref": name,
            }),
        })
    }

    fn history(
        &self,
        locator: &repo::Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let repo = Repo::open(locator)?;
        let start = match from_ref {
            Some(rev) => repo.rev(rev)?,
            None => repo.base_head()?,
        };
        let decorations = Self::decorations(&repo)?;
        let walk = repo
            .gix
            .rev_walk([start])
            .sorting(gix::revision::walk::Sorting::ByCommitTime(
                Default::default(),
            ))
            .all()
            .map_err(|e| Error::backend(format!("cannot walk history: {e}")))?;
        let mut out = Vec::new();
        for info in walk.take(limit as usize) {
            let info = info.map_err(|e| Error::backend(format!("cannot walk history: {e}")))?;
            let commit = repo
                .gix
                .find_commit(info.id)
                .map_err(|e| Error::backend(format!("cannot read commit {}: {e}", info.id)))?;
            let when = commit
                .time()
                .ok()
                .map(|t| kit::rfc3339(t.seconds, 0, kit::SecondsFormat::Secs));
            let message = commit
                .message_raw()
                .map(|m| m.to_str_lossy().trim_end().to_string())
                .unwrap_or_default();
            out.push(HistoryEntry {
                id: info.id.to_string(),
                when,
                message,
                refs: decorations.get(&info.id).cloned().unwrap_or_default(),
            });
        }
        Ok(out)
    }

    fn diff(
        &self,
        locator: &repo::Locator,
        a: &Value,
        b: &Value,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<ObjectDiff> {
        let repo = Repo::open(locator)?;
        let tree = |state: &Value| -> Result<gix::Tree<'_>> {
            let sha = state_sha(state)?;
            repo.gix
                .find_commit(sha)
                .map_err(|e| Error::not_found(format!("commit {sha} is not there: {e}")))?
                .tree()
                .map_err(|e| Error::backend(format!("cannot read the tree of {sha}: {e}")))
        };
        let (old, new) = (tree(a)?, tree(b)?);
        let changes = repo
            .gix
            .diff_tree_to_tree(Some(&old), Some(&new), None)
            .map_err(gix_err("cannot diff trees"))?;
        let mut cache = repo
            .gix
            .diff_resource_cache_for_tree_diff()
            .map_err(gix_err("cannot prepare a diff"))?;
        let mut diff = ObjectDiff::new("files");
        for change in &changes {
            use gix::object::tree::diff::ChangeDetached as C;
            use gix::prelude::TreeDiffChangeExt;
            if !change.entry_mode().is_blob_or_symlink() {
                continue;
            }
            let counts = change
                .attach(&repo.gix, &repo.gix)
                .diff(&mut cache)
                .and_then(|mut p| p.line_counts())
                .map_err(gix_err("cannot count lines"))?;
            cache.clear_resource_cache_keep_allocation();
            let stat = match counts {
                Some(c) => format!("+{} -{}", c.insertions, c.removals),
                None => "binary".to_string(),
            };
            let path = change.location().to_str_lossy().into_owned();
            match change {
                C::Addition { .. } => diff.add(path, Change::Added, stat),
                C::Deletion { .. } => diff.add(path, Change::Removed, stat),
                C::Modification { .. } => diff.add(path, Change::Modified, stat),
                C::Rewrite {
                    source_location, ..
                } => diff.add(
                    path,
                    Change::Modified,
                    format!("renamed from {}, {stat}", source_location.to_str_lossy()),
                ),
            };
        }
        Ok(diff)
    }

    fn create(&self, locator: &repo::Locator, owner: &str) -> Result<Value> {
        let loc = locator;
        let branch = match loc.base_ref() {
            "HEAD" => "main".to_string(),
            other => short(other).to_string(),
        };
        let root = init(Path::new(&loc.path), &branch, Some(owner))?;
        Ok(state_json(root, Some(false)))
    }

    fn owner(&self, locator: &repo::Locator) -> Result<Option<String>> {
        let loc = locator;
        if repo::git_dir_of(Path::new(&loc.path)).is_none() {
            return Ok(None);
        }
        let repo = Repo::open(locator)?;
        let config = repo.gix.config_snapshot();
        Ok(config
            .string("tether.owner")
            .map(|s| s.to_str_lossy().into_owned()))
    }

    fn is_ref_empty(&self, locator: &repo::Locator, ignoring: &[String]) -> Result<Option<bool>> {
        let repo = Repo::open(locator)?;
        let base = repo.base_branch()?;
        let ignored = |name: &str| ignoring.iter().any(|i| i == short(name) || i == name);
        for (name, _) in repo.refs.list("refs/")? {
            if name != base && !ignored(&name) {
                return Ok(Some(false));
            }
        }
        let (root, _) = empty_root()?;
        if repo.refs.resolve(&base)? != Some(root) {
            return Ok(Some(false));
        }
        // Any file in the checkout is data: untracked, staged or ignored.
        if let Some(root) = &repo.worktree {
            let entries = fs::read_dir(root)
                .map_err(|e| Error::backend(format!("cannot list {}: {e}", repo.loc.path)))?;
            if entries
                .filter_map(|e| e.ok())
                .any(|e| e.file_name() != ".git")
            {
                return Ok(Some(false));
            }
            if repo.git_dir.join("index").exists() {
                return Ok(Some(checkout::dirt(&repo)?.is_none()));
            }
        }
        Ok(Some(true))
    }

    fn delete_store(&self, locator: &repo::Locator, owner: &str) -> Result<()> {
        let loc = locator;
        kit::guard_delete(&loc.path, self.owner(locator)?.as_deref(), owner, || {
            Ok(self.is_ref_empty(locator, &[])? == Some(true))
        })?;
        let (git_dir, bare) = repo::git_dir_of(Path::new(&loc.path))
            .ok_or_else(|| Error::not_found(format!("{} is not a repository", loc.path)))?;
        let err = |e: std::io::Error| Error::backend(format!("cannot delete {}: {e}", loc.path));
        if bare {
            for entry in fs::read_dir(&git_dir).map_err(err)? {
                let path = entry.map_err(err)?.path();
                if path.is_dir() {
                    fs::remove_dir_all(&path).map_err(err)?;
                } else {
                    fs::remove_file(&path).map_err(err)?;
                }
            }
        } else {
            fs::remove_dir_all(&git_dir).map_err(err)?;
        }
        // The preopened directory itself cannot be removed from inside it.
        tether_sdk::tree::remove_empty_dir(&loc.path)
            .map_err(|e| Error::backend(format!("cannot remove {}: {e:?}", loc.path)))?;
        Ok(())
    }

    fn state_addressable(&self, _: &repo::Locator, state: &Value) -> Result<bool> {
        Ok(state_sha(state).is_ok())
    }
}

/// A three-way merge of `theirs` into `ours` as a merge commit; its objects
/// are written only when it has no conflict.
fn merge_commit(repo: &Repo, ours: ObjectId, theirs: ObjectId, message: &str) -> Result<ObjectId> {
    let mut mem = in_memory(repo);
    let options = mem
        .tree_merge_options()
        .map_err(gix_err("cannot read merge options"))?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: None,
        current: Some("ours".into()),
        other: Some("theirs".into()),
    };
    let mut outcome = mem
        .merge_commits(ours, theirs, labels, options.into())
        .map_err(gix_err("cannot merge"))?;
    let how = gix::merge::tree::TreatAsUnresolved::git();
    if outcome.tree_merge.has_unresolved_conflicts(how) {
        let mut paths: Vec<String> = outcome
            .tree_merge
            .conflicts
            .iter()
            .filter(|c| c.is_unresolved(how))
            .flat_map(|c| [c.ours.location(), c.theirs.location()])
            .map(|p| p.to_str_lossy().into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        return Err(Error::MergeConflict(paths));
    }
    let tree = outcome
        .tree_merge
        .tree
        .write()
        .map_err(|e| Error::backend(format!("cannot write the merged tree: {e}")))?
        .detach();
    drop(outcome);
    let message = if message.trim().is_empty() {
        format!("Merge {theirs} into {ours}")
    } else {
        message.to_string()
    };
    let commit = commit_object(tree, &[ours, theirs], &message, now());
    let id = mem
        .write_object(&commit)
        .map_err(|e| Error::backend(format!("cannot write the merge commit: {e}")))?
        .detach();
    odb::persist(&mut mem, &repo.objects_dir())?;
    Ok(id)
}

/// `git init -b <branch>` plus the fixed empty root commit; returns its id.
/// `path` must be missing or an empty directory.
pub(crate) fn init(path: &Path, branch: &str, owner: Option<&str>) -> Result<ObjectId> {
    refs::validate_name(&Repo::branch_ref(branch))?;
    let refuse = || {
        Error::backend(format!(
            "{} is not empty; create never adopts an existing directory",
            path.display()
        ))
    };
    match fs::read_dir(path) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(refuse());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir(path)
                .map_err(|e| Error::backend(format!("cannot create {}: {e}", path.display())))?;
        }
        Err(e) => {
            return Err(Error::backend(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    }
    let git_dir = path.join(".git");
    let err =
        |e: std::io::Error| Error::backend(format!("cannot initialize {}: {e}", path.display()));
    // The `.git` directory is the claim: of two racing creates one fails here.
    fs::create_dir(&git_dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => refuse(),
        _ => err(e),
    })?;
    for dir in [
        "objects/info",
        "objects/pack",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        fs::create_dir_all(git_dir.join(dir)).map_err(err)?;
    }
    let mut config = String::from(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
         \tlogallrefupdates = true\n",
    );
    if let Some(owner) = owner {
        config.push_str(&format!("[tether]\n\towner = {owner}\n"));
    }
    fs::write(git_dir.join("config"), config).map_err(err)?;
    fs::write(git_dir.join("HEAD"), format!("ref: refs/heads/{branch}\n")).map_err(err)?;
    let objects = git_dir.join("objects");
    let empty_tree = ObjectId::empty_tree(gix::hash::Kind::Sha1);
    odb::write_loose(&objects, empty_tree, Kind::Tree, &[])?;
    let (root, bytes) = empty_root()?;
    odb::write_loose(&objects, root, Kind::Commit, &bytes)?;
    refs::Refs::new(&git_dir).update(&Repo::branch_ref(branch), Prev::Absent, root, |_| Ok(()))?;
    Ok(root)
}

/// Nothing from a committed `[backends.git]` is read.
impl DescribeExt for GitBackend {
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The repository's directory, preopened for every call, and its remote's:
/// `remote` is a remote *name*, which the host looks up in the repository's
/// config (or a path `.tether/secrets.toml` gives the object).
impl DescribeFs for GitBackend {
    fn filesystem_keys(&self) -> Vec<String> {
        vec!["path".into(), "uri".into(), "remote".into()]
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(GitBackend, harness: GitHarness, [describe_ext, describe_fs]);
