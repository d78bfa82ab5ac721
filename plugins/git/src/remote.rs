//! Pushing pins to a remote on this machine (spec/11, `git`, "Pin"): with
//! `remote` set, a pin is a pin only once its tag is in the remote too.
//!
//! The remote is either the locator's `remote`, the *name* of a remote the
//! repository's own config has (`remote.<name>.pushurl`, else `.url`), or a
//! path or `file://` URL `.tether/secrets.toml` gives the object
//! (`[objects."KEY"] remote`, which reaches the plugin in its config). Either
//! way its URL must be a local directory: the host preopens exactly that
//! directory for the call, reading the same config entry (DESIGN §4: grants
//! come from the host, never from the plugin). A network remote (ssh, https,
//! git://) is not this plugin's: it has no transport and must never see the
//! user's credentials, so the host pushes those tags with the user's own git
//! after the pin, and deletes them there before the unpin
//! (`host/src/vcs/pin_push.rs`); [`Remote::resolve`] answers `None` for it.
//!
//! A push is written here, like every other write of this plugin: the
//! objects reachable from the pinned commit that the remote lacks are copied
//! as loose objects (the walk stops at objects the remote has), in
//! dependency order (an object only after everything it names), so a push
//! cut short never leaves a commit whose history or files are missing; then
//! the tag is created with a compare-and-swap on the remote's ref.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::Exists;
use gix::objs::Kind;
use tether_sdk::{Error, Result};

use crate::odb;
use crate::refs::{Prev, Refs};
use crate::repo::{self, Repo};

/// A remote pins are pushed to, opened.
pub struct Remote {
    /// How to name it in messages: `remote origin`, or the secrets.toml one
    /// (whose URL is never printed).
    label: String,
    /// Where `refs/` and `objects/` live.
    git_dir: PathBuf,
    refs: Refs,
    gix: gix::Repository,
}

/// Whether `value` is a remote *name*, not a path or URL. The host applies
/// the same rule before it looks the name up (`host/src/plugin/fs_grants.rs`).
pub fn is_remote_name(value: &str) -> bool {
    !value.is_empty()
        && !value.contains(':')
        && !value.contains('\\')
        && !value.starts_with(['/', '.', '~'])
}

const RELATIVE: &str = "a relative path";

/// Whether `url` names another machine (ssh, http(s), git://, scp-like
/// `host:path`): the host's rule for the remotes it pushes to itself.
pub fn is_network_url(url: &str) -> bool {
    if url.starts_with("file://") || url.starts_with('/') {
        return false;
    }
    if url.contains("://") {
        return true;
    }
    match url.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

/// The directory a remote URL names, lexically normalized like the host's
/// preopen (the path the plugin sees it under), or why it names none.
fn local_dir(url: &str) -> std::result::Result<String, String> {
    let path = match url.strip_prefix("file://") {
        Some(rest) if rest.starts_with('/') => rest,
        Some(_) => return Err("a file:// URL with a host".into()),
        None if url.starts_with('/') => url,
        None if url.contains("://") => {
            let scheme = url.split("://").next().unwrap_or_default();
            return Err(format!("a {scheme}:// URL"));
        }
        None if url.contains(':') => return Err("an ssh (host:path) URL".into()),
        None => return Err(RELATIVE.into()),
    };
    let mut out = PathBuf::from("/");
    for c in Path::new(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Ok(out.to_string_lossy().into_owned())
}

impl Remote {
    /// The remote `repo`'s pins go to: `secret` (the secrets.toml value) when
    /// set, else the locator's `remote` name; `None` when neither is.
    pub fn resolve(repo: &Repo, secret: Option<&str>) -> Result<Option<Remote>> {
        let named = repo.loc.remote.as_deref().filter(|r| !r.is_empty());
        let (label, name, url) = match (secret.filter(|s| !s.is_empty()), named) {
            (Some(url), _) => (
                "the remote .tether/secrets.toml gives this object".to_string(),
                None,
                url.to_string(),
            ),
            (None, Some(name)) => {
                let config = repo.gix.config_snapshot();
                let url = config
                    .string(format!("remote.{name}.pushurl").as_str())
                    .or_else(|| config.string(format!("remote.{name}.url").as_str()))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "{} has no remote named {name:?} (`git -C {} remote -v` lists them): \
                             `remote` must name a remote the repository already has. Add it with \
                             `git remote add {name} PATH`, or remove `remote`",
                            repo.loc.path, repo.loc.path
                        ))
                    })?;
                (
                    format!("remote {name}"),
                    Some(name.to_string()),
                    url.to_str_lossy().into_owned(),
                )
            }
            (None, None) => return Ok(None),
        };
        let push_yourself = format!(
            "git -C {} push {} 'refs/tags/tether.*'",
            repo.loc.path,
            name.as_deref().unwrap_or("REMOTE")
        );
        let dir = local_dir(&url).map_err(|what| {
            if what == RELATIVE {
                return Error::invalid(match &name {
                    Some(n) => format!(
                        "{label}'s URL is a relative path, which git and tether may resolve \
                         differently: make it absolute (`git remote set-url {n} /abs/path`)"
                    ),
                    None => format!("{label} is a relative path: give an absolute path"),
                });
            }
            Error::Capability(format!(
                "{label} is {what}: tether pushes pins to a remote on this machine (an \
                 absolute path or a file:// URL) or over ssh or http(s). Remove `remote` from \
                 the object and push the tags yourself: {push_yourself}"
            ))
        });
        let dir = match dir {
            Ok(dir) => dir,
            // The host pushes to it (see the module docs).
            Err(_) if is_network_url(&url) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some((git_dir, _)) = repo::git_dir_of(Path::new(&dir)) else {
            return Err(Error::not_found(format!(
                "{label} ({}) is not a git repository tether can reach; create it \
                 (`git init --bare`), or fix its URL",
                if name.is_some() {
                    dir.as_str()
                } else {
                    "its path"
                }
            )));
        };
        let gix = gix::open_opts(&git_dir, repo::open_options())
            .map_err(|e| Error::backend(format!("cannot open {label}: {e}")))?;
        Ok(Some(Remote {
            label,
            refs: Refs::new(&git_dir),
            git_dir,
            gix,
        }))
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Copy what the remote lacks of `sha`'s history, then create tag `full`
    /// there at `sha` (a compare-and-swap on its absence; already there at
    /// `sha` is success).
    pub fn push_tag(&self, repo: &Repo, full: &str, sha: ObjectId) -> Result<()> {
        let copied = self.copy_missing(repo, sha)?;
        tether_sdk::debug!("{}: copied {copied} objects", self.label);
        match self.refs.update(full, Prev::Absent, sha, |_| Ok(())) {
            Ok(()) => Ok(()),
            Err(Error::RefMoved(m)) => match self.refs.resolve(full)? {
                Some(at) if at == sha => Ok(()),
                Some(at) => Err(Error::backend(format!(
                    "{} already has {full} at {at}, not {sha}",
                    self.label
                ))),
                None => Err(Error::ref_moved(m)),
            },
            Err(e) => Err(e),
        }
    }

    /// Where tag `full` points in the remote, if it exists there.
    pub fn tag_at(&self, full: &str) -> Result<Option<ObjectId>> {
        self.refs.resolve(full)
    }

    /// Every tag of the remote (`refs/tags/...` → object), listed once for
    /// a batch of pins.
    pub fn tags(&self) -> Result<BTreeMap<String, ObjectId>> {
        self.refs.list("refs/tags/")
    }

    /// Delete tag `full` in the remote (compare-and-swap on what it holds);
    /// absent is success.
    pub fn delete_tag(&self, full: &str) -> Result<()> {
        match self.refs.read(full)?.and_then(|v| v.object()) {
            None => Ok(()),
            Some(at) => self.refs.delete(full, Prev::At(at)),
        }
    }

    /// Whether the remote holds `id` itself (gix's `has_object` answers yes
    /// for the empty tree, which may not be stored).
    fn has(&self, id: ObjectId) -> bool {
        self.gix.objects.exists(&id)
    }

    /// Copy every object reachable from `tip` that the remote lacks, each
    /// after the objects it names (post-order); returns how many. A blob is
    /// read once, to be written; a commit or tree once, to list what it
    /// names, and written from that read.
    fn copy_missing(&self, repo: &Repo, tip: ObjectId) -> Result<usize> {
        enum Step {
            /// Visit an object; `true` when it is known to be a blob.
            Enter(ObjectId, bool),
            /// Write it: its kind and bytes when already read.
            Exit(ObjectId, Option<(Kind, Vec<u8>)>),
        }
        let objects = self.git_dir.join("objects");
        let read = |id: ObjectId| {
            let mut object = repo.gix.find_object(id).map_err(|e| {
                Error::backend(format!(
                    "cannot read object {id} of {} to push it: {e}",
                    repo.loc.path
                ))
            })?;
            Ok::<_, Error>((object.kind, std::mem::take(&mut object.data)))
        };
        let bad = |id: ObjectId, e: &dyn std::fmt::Display| {
            Error::backend(format!("cannot decode object {id}: {e}"))
        };
        let mut seen = HashSet::new();
        let mut stack = vec![Step::Enter(tip, false)];
        let mut copied = 0;
        while let Some(step) = stack.pop() {
            match step {
                Step::Exit(id, read_before) => {
                    let (kind, data) = match read_before {
                        Some(object) => object,
                        None => read(id)?,
                    };
                    if odb::write_loose(&objects, id, kind, &data)? {
                        copied += 1;
                    }
                }
                Step::Enter(id, is_blob) => {
                    // A DAG has no cycles, so an object seen before has been
                    // written already (or will be, before what names it now).
                    if !seen.insert(id) || self.has(id) {
                        continue;
                    }
                    if is_blob {
                        stack.push(Step::Exit(id, None));
                        continue;
                    }
                    let (kind, data) = read(id)?;
                    let mut children = Vec::new();
                    match kind {
                        Kind::Commit => {
                            let commit = gix::objs::CommitRef::from_bytes(&data, id.kind())
                                .map_err(|e| bad(id, &e))?;
                            children.push(Step::Enter(commit.tree(), false));
                            children.extend(commit.parents().map(|p| Step::Enter(p, false)));
                        }
                        Kind::Tree => {
                            let tree = gix::objs::TreeRef::from_bytes(&data, id.kind())
                                .map_err(|e| bad(id, &e))?;
                            // A submodule's commit lives in another repository.
                            children.extend(
                                tree.entries
                                    .iter()
                                    .filter(|e| !e.mode.is_commit())
                                    .map(|e| Step::Enter(e.oid.to_owned(), !e.mode.is_tree())),
                            );
                        }
                        Kind::Blob | Kind::Tag => {}
                    }
                    stack.push(Step::Exit(id, Some((kind, data))));
                    stack.extend(children);
                }
            }
        }
        Ok(copied)
    }
}
