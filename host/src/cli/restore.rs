//! `tether restore KEY... (--from REV | --at REF) [--discard]
//! [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::frame::{Ctx, Planned, run_planned};
use super::output::{Exit, PlanArgs, print_json};
use crate::engine::Repo;
use crate::engine::commit::brief;
use crate::engine::restore::{self, RestoreOptions, RestoreReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The objects to restore (exact keys or `prefix/`).
    keys: Vec<String>,
    /// Reset each branch to what this dataset commit pinned.
    #[arg(short, long, value_name = "REV", conflicts_with = "at")]
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
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    run_planned(ctx, &args, args.plans.mode()).await
}

impl Planned for Args {
    const COMMAND: &'static str = "restore";
    type Report = RestoreReport;

    fn keys(&self) -> &[String] {
        &self.keys
    }

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let opts = RestoreOptions {
            keys: self.keys.clone(),
            from: self.from.clone(),
            at: self.at.clone(),
            discard: self.discard,
        };
        Ok(restore::plan(repo, &opts).await?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<RestoreReport> {
        Ok(restore::apply(repo, plan).await?)
    }

    fn print(&self, report: &RestoreReport, json: bool) -> Result<Exit> {
        print_report(report, json)?;
        Ok(Exit::Ok)
    }
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
