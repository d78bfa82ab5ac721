//! `tether restore KEY... (--from REV | --at REF) [--discard]
//! [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::output::{Exit, PlanArgs, preview_plan, print_json};
use crate::engine::Repo;
use crate::engine::commit::brief;
use crate::engine::restore::{self, RestoreOptions, RestoreReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The objects to restore (exact keys or `prefix/`).
    keys: Vec<String>,
    /// Reset each branch to what this dataset commit pinned.
    #[arg(long, value_name = "REV", conflicts_with = "at")]
    from: Option<String>,
    /// Start each branch from this native ref or state in its store.
    #[arg(long, value_name = "REF")]
    at: Option<String>,
    /// Reset branches even if they hold writes never committed.
    #[arg(long)]
    discard: bool,
    #[command(flatten)]
    plans: PlanArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    let plan = match &args.plans.from_plan {
        Some(path) => restore::load_plan(path, &args.keys)?,
        None => {
            let opts = RestoreOptions {
                keys: args.keys.clone(),
                from: args.from.clone(),
                at: args.at.clone(),
                discard: args.discard,
            };
            let plan = restore::plan(&repo, &opts).await?;
            if args.plans.previewing() {
                preview_plan(&plan, args.plans.plan.as_deref(), args.json)?;
                return Ok(Exit::Ok);
            }
            plan
        }
    };
    let report = restore::apply(&repo, &plan).await?;
    print_report(&report, args.json)?;
    Ok(Exit::Ok)
}

fn print_report(r: &RestoreReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    for (k, branch) in &r.working_refs {
        let state = r
            .states
            .get(k)
            .and_then(|s| s.as_object())
            .map(brief)
            .unwrap_or_default();
        outln!("restored {k} -> {branch} at {state}");
    }
    Ok(())
}
