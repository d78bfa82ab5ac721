//! Opening a repository at the locator's `path` (the directory the host
//! preopened) and naming what the locator points at.

use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::bstr::ByteSlice;
use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::{Error, Result};

use crate::refs::{RefValue, Refs};

/// The committer and author of every commit tether writes (merge commits,
/// the harness's commits); fixed so a repository's config decides nothing.
pub const SIGNATURE_NAME: &str = "tether";
pub const SIGNATURE_EMAIL: &str = "tether@localhost";

/// A git object's locator, checked as it is parsed (the SDK's glue parses
/// it once per call and refuses a bad one as `invalid`).
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawLocator")]
pub struct Locator {
    /// The repository: an absolute local path.
    pub path: String,
    pub ref_: Option<String>,
    /// The initial position (`tether add --at`): an alias of `ref`.
    pub at: Option<String>,
    pub remote: Option<String>,
    pub allow_dirty: Option<Value>,
}

/// The locator's fields as written.
#[derive(Deserialize)]
struct RawLocator {
    /// The repository; `uri` (what `tether add`'s positional locator fills)
    /// is an alias.
    #[serde(default)]
    path: String,
    #[serde(default)]
    uri: Option<String>,
    #[serde(rename = "ref", default)]
    ref_: Option<String>,
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    remote: Option<String>,
    #[serde(default)]
    allow_dirty: Option<Value>,
}

impl TryFrom<RawLocator> for Locator {
    type Error = String;

    fn try_from(raw: RawLocator) -> std::result::Result<Locator, String> {
        let path = if raw.path.is_empty() {
            raw.uri.unwrap_or_default()
        } else {
            raw.path
        };
        let loc = Locator {
            path,
            ref_: raw.ref_,
            at: raw.at,
            remote: raw.remote,
            allow_dirty: raw.allow_dirty,
        };
        if loc.path.is_empty() {
            return Err("a git object needs `path`, the repository's directory: \
                 `tether add KEY --kind git PATH`"
                .to_owned());
        }
        if !loc.path.starts_with('/') {
            return Err(format!(
                "git `path` must be an absolute local path, not {:?} (tether stores it \
                 absolute at `add`)",
                loc.path
            ));
        }
        // A clone's manifest chooses no push target: the locator names a
        // remote the repository already has (spec/10, "Security model").
        if let Some(remote) = &loc.remote
            && !remote.is_empty()
            && !crate::remote::is_remote_name(remote)
        {
            return Err(format!(
                "git `remote` must be the name of a remote the repository has configured \
                 (`git remote -v` lists them), not {remote:?}: a URL or path goes only in \
                 .tether/secrets.toml, as `[objects.\"KEY\"] remote = ...`"
            ));
        }
        Ok(loc)
    }
}

impl Locator {
    /// A locator built in this crate (the harness), checked as the glue would.
    pub fn parse(locator: &Value) -> Result<Locator> {
        tether_sdk::locator(locator)
    }

    /// The ref the base stands for: `at`, else `ref`, else `HEAD`.
    pub fn base_ref(&self) -> &str {
        self.at
            .as_deref()
            .or(self.ref_.as_deref())
            .filter(|r| !r.is_empty())
            .unwrap_or("HEAD")
    }

    pub fn allow_dirty(&self) -> bool {
        match &self.allow_dirty {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => matches!(s.as_str(), "true" | "1" | "yes"),
            _ => false,
        }
    }
}

/// An open repository.
pub struct Repo {
    pub loc: Locator,
    /// The worktree root (`None` for a bare repository).
    pub worktree: Option<PathBuf>,
    /// Where `refs/`, `objects/` and `packed-refs` live.
    pub git_dir: PathBuf,
    pub refs: Refs,
    pub gix: gix::Repository,
}

/// gix options that read only the repository's own config (no system or
/// global files, no environment, which may try to run `git`), with a fixed
/// identity.
pub(crate) fn open_options() -> gix::open::Options {
    gix::open::Options::isolated().config_overrides([
        format!("user.name={SIGNATURE_NAME}"),
        format!("user.email={SIGNATURE_EMAIL}"),
        format!("committer.name={SIGNATURE_NAME}"),
        format!("committer.email={SIGNATURE_EMAIL}"),
        // Nothing a repository's config says may run (nothing can spawn under
        // WASI anyway): no fsmonitor, and no external diff or merge drivers.
        "core.fsmonitor=false".to_string(),
    ])
}

/// The git directory of `path`: `path/.git` (a directory), or `path` itself
/// when it is a bare repository.
pub fn git_dir_of(path: &Path) -> Option<(PathBuf, bool)> {
    let dot_git = path.join(".git");
    if dot_git.is_dir() {
        return Some((dot_git, false));
    }
    if path.join("HEAD").is_file() && path.join("objects").is_dir() && path.join("refs").is_dir() {
        return Some((path.to_path_buf(), true));
    }
    None
}

impl Repo {
    pub fn open(loc: &Locator) -> Result<Repo> {
        let loc = loc.clone();
        let path = PathBuf::from(&loc.path);
        if path.join(".git").is_file() {
            return Err(Error::Capability(format!(
                "{} is a linked worktree (its .git is a file pointing elsewhere); add the \
                 main checkout instead",
                loc.path
            )));
        }
        let Some((git_dir, bare)) = git_dir_of(&path) else {
            return Err(Error::not_found(format!(
                "{} is not a git repository (no .git directory there)",
                loc.path
            )));
        };
        let gix = gix::open_opts(&git_dir, open_options()).map_err(|e| {
            Error::backend(format!(
                "cannot open the git repository at {}: {e}",
                loc.path
            ))
        })?;
        Ok(Repo {
            worktree: (!bare).then_some(path),
            refs: Refs::new(&git_dir),
            git_dir,
            gix,
            loc,
        })
    }

    pub fn objects_dir(&self) -> PathBuf {
        self.git_dir.join("objects")
    }

    /// The full ref name of a branch (`main` → `refs/heads/main`).
    pub fn branch_ref(name: &str) -> String {
        if name.starts_with("refs/") {
            name.to_string()
        } else {
            format!("refs/heads/{name}")
        }
    }

    /// The full ref name of a pin tag.
    pub fn tag_ref(name: &str) -> String {
        if name.starts_with("refs/") {
            name.to_string()
        } else {
            format!("refs/tags/{name}")
        }
    }

    /// The branch the base stands for, as a full ref name; `Err` with the
    /// spec's sentence for a detached `HEAD`, or when `ref` names no branch.
    pub fn base_branch(&self) -> Result<String> {
        let base = self.loc.base_ref();
        if base == "HEAD" {
            return match self.refs.read("HEAD")? {
                Some(RefValue::Symbolic(target)) => Ok(target),
                _ => Err(Error::Capability(format!(
                    "{}: HEAD is detached (a colocated jj checkout always is), so there is no \
                     branch to move: set the locator's `ref` to the branch name",
                    self.loc.path
                ))),
            };
        }
        let full = Self::branch_ref(base);
        if full.starts_with("refs/heads/") && self.refs.read(&full)?.is_some() {
            Ok(full)
        } else {
            Err(Error::Capability(format!(
                "{}: `ref` {base} is not a branch, so promote and merge have nothing to move: \
                 set `ref` to a branch name",
                self.loc.path
            )))
        }
    }

    /// The commit the base is at.
    pub fn base_head(&self) -> Result<ObjectId> {
        let base = self.loc.base_ref();
        if base == "HEAD" {
            return self.refs.resolve("HEAD")?.ok_or_else(|| {
                Error::not_found(format!("{}: HEAD names no commit yet", self.loc.path))
            });
        }
        self.rev(base)
    }

    /// Any commit-ish: a full ref, a branch, a tag, a sha.
    pub fn rev(&self, spec: &str) -> Result<ObjectId> {
        for name in [
            spec.to_string(),
            Self::branch_ref(spec),
            Self::tag_ref(spec),
        ] {
            if (name.starts_with("refs/") || name == "HEAD")
                && let Some(id) = self.refs.resolve(&name)?
            {
                return self.peel_to_commit(id);
            }
        }
        let id = self
            .gix
            .rev_parse_single(spec)
            .map_err(|e| Error::not_found(format!("{}: no commit {spec:?}: {e}", self.loc.path)))?;
        self.peel_to_commit(id.detach())
    }

    pub fn peel_to_commit(&self, id: ObjectId) -> Result<ObjectId> {
        let object = self.gix.find_object(id).map_err(|e| {
            Error::not_found(format!("{}: object {id} is missing: {e}", self.loc.path))
        })?;
        let commit = object
            .peel_to_commit()
            .map_err(|e| Error::backend(format!("{}: {id} is not a commit: {e}", self.loc.path)))?;
        Ok(commit.id)
    }

    /// Whether the commit exists in the object database.
    pub fn has_commit(&self, id: ObjectId) -> bool {
        self.gix.find_commit(id).is_ok()
    }

    /// Whether `ancestor` is in `descendant`'s history (or equal).
    pub fn is_ancestor(&self, ancestor: ObjectId, descendant: ObjectId) -> Result<bool> {
        if ancestor == descendant {
            return Ok(true);
        }
        let base = self
            .gix
            .merge_base(ancestor, descendant)
            .map_err(|e| Error::backend(format!("{}: merge-base failed: {e}", self.loc.path)))?;
        Ok(base.is_some_and(|b| b.detach() == ancestor))
    }

    /// The branch (full name) checked out in any worktree, if `full` is, with
    /// where.
    pub fn checked_out_where(&self, full: &str) -> Result<Option<String>> {
        Ok(self
            .refs
            .checked_out(self.worktree.is_none())?
            .into_iter()
            .find(|(branch, _)| branch == full)
            .map(|(_, place)| place))
    }

    /// Whether `full` is the branch checked out in the main worktree at `path`.
    pub fn is_main_checkout(&self, full: &str) -> Result<bool> {
        Ok(self.worktree.is_some() && self.refs.head_branch()?.as_deref() == Some(full))
    }
}

/// A state: `{"sha": ...}`, plus `dirty` when computed.
pub fn state_json(sha: ObjectId, dirty: Option<bool>) -> Value {
    match dirty {
        Some(dirty) => json!({ "sha": sha.to_string(), "dirty": dirty }),
        None => json!({ "sha": sha.to_string() }),
    }
}

/// [`state_json`] plus the volatile `change_id` when the commit carries
/// one: jj writes its change id into every git commit it makes, as a
/// `change-id` header in the reverse-hex form `jj log -T change_id` prints
/// (`k`..`z`, 32 of them). Read from the commit object, so no jj runs.
pub fn full_state(repo: &Repo, sha: ObjectId, dirty: Option<bool>) -> Value {
    let mut state = state_json(sha, dirty);
    if let Some(change_id) = change_id(repo, sha) {
        state["change_id"] = Value::String(change_id);
    }
    state
}

/// The jj change id the commit `sha` carries, if any.
pub fn change_id(repo: &Repo, sha: ObjectId) -> Option<String> {
    let commit = repo.gix.find_commit(sha).ok()?;
    let decoded = commit.decode().ok()?;
    let value = decoded.extra_headers().find("change-id")?.to_str().ok()?;
    let jj_form = !value.is_empty() && value.bytes().all(|b| (b'k'..=b'z').contains(&b));
    jj_form.then(|| value.to_string())
}

#[derive(Deserialize)]
struct State {
    sha: String,
}

pub fn state_sha(state: &Value) -> Result<ObjectId> {
    let s: State = tether_sdk::state(state)?;
    ObjectId::from_hex(s.sha.as_bytes())
        .map_err(|e| Error::invalid(format!("state sha {:?} is not a git object id: {e}", s.sha)))
}
