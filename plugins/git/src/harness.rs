//! The conformance harness: real repositories under the scratch directory
//! (preopened by the host), written the way `git commit` would write them.

use std::path::Path;

use serde_json::{Value, json};
use tether_sdk::harness::child_uri;
use tether_sdk::{Error, Harness, Result};

use crate::refs::Prev;
use crate::repo::Repo;
use crate::{checkout, commit_object, in_memory, init, odb, random_hex};

/// Makes git objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct GitHarness;

fn scratch_dir(scratch_uri: &str) -> Result<String> {
    let path = scratch_uri.strip_prefix("file://").unwrap_or(scratch_uri);
    if !path.starts_with('/') {
        return Err(Error::Capability(format!(
            "the git harness needs a local scratch directory, not {scratch_uri}"
        )));
    }
    Ok(path.trim_end_matches('/').to_string())
}

/// Commit a new file on branch `full` (a child of its head), moving the
/// checkout along when the branch is checked out in the main worktree.
fn commit_file(repo: &Repo, full: &str, name: &str, content: &str) -> Result<()> {
    let head = repo
        .refs
        .resolve(full)?
        .ok_or_else(|| Error::not_found(format!("{full} does not exist")))?;
    let mut mem = in_memory(repo);
    let err = |what: &str| {
        let what = what.to_string();
        move |e: gix::Error| Error::backend(format!("cannot {what}: {e}"))
    };
    let tree = mem
        .find_commit(head)
        .map_err(err("read the head"))?
        .tree_id()
        .map_err(err("read the head tree"))?
        .detach();
    let blob = mem
        .write_blob(content.as_bytes())
        .map_err(err("write a blob"))?
        .detach();
    let mut editor = mem.edit_tree(tree).map_err(err("edit the tree"))?;
    editor
        .upsert(name, gix::object::tree::EntryKind::Blob, blob)
        .map_err(err("edit the tree"))?;
    let tree = editor.write().map_err(err("write the tree"))?.detach();
    let commit = commit_object(tree, &[head], &format!("harness: add {name}"), crate::now());
    let id = mem
        .write_object(&commit)
        .map_err(err("write the commit"))?
        .detach();
    odb::persist(&mut mem, &repo.objects_dir())?;
    let checked_out = repo.is_main_checkout(full)?;
    repo.refs.update(full, Prev::At(head), id, |old| {
        if checked_out {
            checkout::sync(repo, old, id)?;
        }
        Ok(())
    })
}

impl Harness for GitHarness {
    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let dir = child_uri(
            &scratch_dir(scratch_uri)?,
            &format!("git-{}", random_hex()?),
        );
        init(Path::new(&dir), "main", None)?;
        let locator = json!({ "path": dir });
        let repo = Repo::open(&locator)?;
        commit_file(
            &repo,
            "refs/heads/main",
            "a.txt",
            &format!("alpha {}\n", random_hex()?),
        )?;
        Ok(locator)
    }

    fn mutate(&self, locator: &Value, working_ref: Option<&str>) -> Result<()> {
        let repo = Repo::open(locator)?;
        let full = match working_ref {
            Some(name) => Repo::branch_ref(name),
            None => repo.base_branch()?,
        };
        let id = random_hex()?;
        commit_file(
            &repo,
            &full,
            &format!("mut-{id}.txt"),
            &format!("fresh {id}\n"),
        )
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let dir = child_uri(
            &scratch_dir(scratch_uri)?,
            &format!("fresh-{}", random_hex()?),
        );
        Ok(json!({ "path": dir }))
    }
}
