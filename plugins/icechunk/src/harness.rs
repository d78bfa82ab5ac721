//! The conformance harness: fresh Icechunk repositories under the scratch
//! URI, and commits on them written the way Icechunk writes them (a snapshot
//! file, its transaction log, then the `repo` object by the update protocol),
//! each changing the root group's attributes.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::storage::PutMode;
use tether_sdk::{Error, Harness, Result};

use crate::Locator;
use crate::format::{self, Id8, Id12};
use crate::repo::{self, Edit, Field, Repo, SnapshotInfo, Store, update};
use crate::snapshot::{self, Node, NodeKind};

/// Makes icechunk objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct IcechunkHarness;

impl Harness for IcechunkHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let uri = scratch_child(scratch_uri, "repo")?;
        let store = Store::open(&uri)?;
        let now = format::now_micros();
        snapshot::write_initial(&store.bucket, now)?;
        let repo = Repo::initial(now, &["main"], BTreeMap::new());
        store.bucket.put(
            repo::REPO_KEY,
            &format::encode(format::FileType::RepoInfo, &repo.encode()),
            PutMode::Create,
        )?;
        Ok(json!({ "uri": uri }))
    }

    fn mutate(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        let branch = working_ref.unwrap_or(&locator.branch).to_owned();
        let store = crate::open(locator)?;
        let parent = store
            .load()?
            .repo
            .branches
            .get(&branch)
            .copied()
            .ok_or_else(|| Error::not_found(format!("branch {branch} does not exist")))?;
        // The parent's nodes with the root group's attributes changed (or a
        // root group added).
        let mut nodes = snapshot::nodes(&store.bucket, parent)?;
        let user_data = json!({
            "zarr_format": 3,
            "node_type": "group",
            "attributes": { "tether_conformance": format::random_name()? },
        })
        .to_string()
        .into_bytes();
        let (mut new_groups, mut updated_groups) = (Vec::new(), Vec::new());
        match nodes.iter_mut().find(|n| n.path == "/") {
            Some(root) => {
                root.user_data = user_data;
                updated_groups.push(root.id);
            }
            None => {
                let id = Id8::random()?;
                nodes.push(Node {
                    id,
                    path: "/".to_owned(),
                    user_data,
                    kind: NodeKind::Group,
                });
                new_groups.push(id);
            }
        }
        let id = Id12::random()?;
        let now = format::now_micros();
        let message = "tether conformance write";
        store.bucket.put(
            &snapshot::snapshot_key(id),
            &snapshot::encode_snapshot(id, &nodes, now, message, &[])?,
            PutMode::Create,
        )?;
        store.bucket.put(
            &snapshot::transaction_key(id),
            &snapshot::encode_transactions(id, &new_groups, &updated_groups),
            PutMode::Create,
        )?;
        store.update(|repo| {
            if repo.branches.get(&branch) != Some(&parent) {
                return Err(Error::ref_moved(format!(
                    "branch {branch} moved during the harness write"
                )));
            }
            repo.snapshots.insert(
                id,
                SnapshotInfo {
                    parent: Some(parent),
                    flushed_at: now,
                    message: message.to_owned(),
                    metadata: Some(Vec::new()),
                    pruned_ancestor_tx_logs: None,
                },
            );
            repo.branches.insert(branch.clone(), id);
            Ok(Edit::Write(
                (),
                update::NEW_COMMIT,
                vec![Field::Str(branch.clone()), Field::Id(id)],
            ))
        })
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        Ok(json!({ "uri": scratch_child(scratch_uri, "fresh")? }))
    }
}
