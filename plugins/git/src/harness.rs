//! The conformance harness: real repositories under the scratch directory
//! (preopened by the host), written the way `git commit` would write them.

use std::path::Path;

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child_dir;
use tether_sdk::kit::random_hex;
use tether_sdk::{Error, Harness, Result};

use crate::refs::Prev;
use crate::repo::{Locator, Repo};
use crate::{checkout, commit_object, in_memory, init, odb};

/// Makes git objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct GitHarness;

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
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let dir = scratch_child_dir(scratch_uri, "git", "git")?;
        init(Path::new(&dir), "main", None)?;
        let locator = json!({ "path": dir });
        let repo = Repo::open(&Locator::parse(&locator)?)?;
        commit_file(
            &repo,
            "refs/heads/main",
            "a.txt",
            &format!("alpha {}\n", random_hex(8)?),
        )?;
        Ok(locator)
    }

    fn mutate(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        let repo = Repo::open(locator)?;
        let full = match working_ref {
            Some(name) => Repo::branch_ref(name),
            None => repo.base_branch()?,
        };
        let id = random_hex(8)?;
        commit_file(
            &repo,
            &full,
            &format!("mut-{id}.txt"),
            &format!("fresh {id}\n"),
        )
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let dir = scratch_child_dir(scratch_uri, "git", "fresh")?;
        Ok(json!({ "path": dir }))
    }
}
