//! `tether promote [KEY...] [-r REV] [--strategy auto|ff|merge] [-m MESSAGE]
//! [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::frame::{Ctx, Planned, run_planned};
use super::output::{Exit, PlanArgs, print_json};
use crate::engine::Repo;
use crate::engine::commit::brief;
use crate::engine::promote::{self, PromoteOptions, PromoteReport, Strategy};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Land only these objects (exact keys or `prefix/`); the trunk bookmark then stays.
    keys: Vec<String>,
    /// Promote the states pinned at this dataset commit instead of this workspace's branches.
    #[arg(short, long)]
    rev: Option<String>,
    /// auto: fast-forward when the base is unchanged, else merge; ff: only
    /// fast-forwards; merge: only merges.
    #[arg(long, default_value = "auto", value_parser = ["auto", "ff", "merge"])]
    strategy: String,
    /// Merge message for systems that record one.
    #[arg(short, long)]
    message: Option<String>,
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
    const COMMAND: &'static str = "promote";
    type Report = PromoteReport;

    fn keys(&self) -> &[String] {
        &self.keys
    }

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let opts = PromoteOptions {
            keys: self.keys.clone(),
            rev: self.rev.clone(),
            strategy: Strategy::parse(&self.strategy)?,
            message: self.message.clone(),
        };
        Ok(promote::plan(repo, &opts).await?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<PromoteReport> {
        Ok(promote::apply(repo, plan).await?)
    }

    fn print(&self, report: &PromoteReport, json: bool) -> Result<Exit> {
        print_report(report, json)?;
        let trouble = !report.refused.is_empty()
            || !report.held.is_empty()
            || !report.failed.is_empty()
            || !report.conflicts.is_empty();
        Ok(match (trouble, report.landed()) {
            (false, _) => Exit::Ok,
            (true, false) => Exit::Failed,
            (true, true) => Exit::Partial,
        })
    }
}

fn print_report(r: &PromoteReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    for (k, s) in &r.fast_forwarded {
        outln!(
            "fast-forwarded {k} -> {}",
            brief(s.as_object().unwrap_or(&Default::default()))
        );
    }
    for (k, s) in &r.merged {
        outln!(
            "merged {k} -> {}",
            brief(s.as_object().unwrap_or(&Default::default()))
        );
    }
    for k in &r.skipped {
        outln!("skipped {k}");
    }
    for (k, why) in &r.held {
        outln!("held {k}: {why}");
    }
    for (k, why) in &r.refused {
        outln!("refused {k}: {why}");
    }
    for (k, units) in &r.conflicts {
        outln!("conflict {k}: {}", units.join(", "));
    }
    for (k, why) in &r.kept_forks {
        outln!("kept {k}: {why}");
    }
    for (k, e) in &r.failed {
        super::output::write_err(format_args!("FAILED {k}: {e}"));
    }
    match (&r.trunk_moved, &r.trunk_held) {
        (Some(c), _) => outln!("moved the trunk bookmark to {}", &c[..c.len().min(12)]),
        (None, Some(why)) => outln!("the trunk bookmark stays: {why}"),
        (None, None) => {}
    }
    if !r.landed() {
        outln!("nothing moved");
    }
    Ok(())
}
