//! `tether snapshot [KEY...]`: fingerprint now and cache the states.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::Value;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::snapshot;
use crate::model::key;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects to fingerprint (exact keys or `prefix/`); all when none.
    keys: Vec<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let manifests = repo.manifests()?;
    let keys = key::select_keys(&args.keys, manifests.keys().map(String::as_str))?;
    let mut ws = repo.workspace()?;
    let states = snapshot::snapshot(&repo, &mut ws, &manifests, &keys).await?;
    // A changed immutable object is an error here as in `status`.
    let changed = snapshot::changed_immutables(&repo, &manifests, &states).await?;
    let failed = states.values().any(Result::is_err) || !changed.is_empty();
    if args.json {
        let out: BTreeMap<&String, Value> = states
            .iter()
            .map(|(k, r)| {
                (
                    k,
                    r.as_ref()
                        .map(|s| Value::Object(s.clone()))
                        .unwrap_or(Value::Null),
                )
            })
            .collect();
        print_json(&out)?;
    }
    for (k, r) in &states {
        match r {
            Ok(s) if !args.json => outln!("{k} {}", crate::engine::commit::brief(s)),
            Ok(_) => {}
            Err(e) => super::output::write_err(format_args!("error: {k}: {e}")),
        }
    }
    for k in changed {
        eprintln!(
            "error: {k}: {}",
            crate::engine::TetherError::ImmutableModified { key: k.clone() }
        );
    }
    Ok(if failed { Exit::Failed } else { Exit::Ok })
}
