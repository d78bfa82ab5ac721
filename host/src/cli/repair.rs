//! `tether repair [KEY...] [--all-history] [--dry-run | --plan FILE |
//! --from-plan FILE] [--json]`.

use std::path::PathBuf;

use anyhow::Result;

use super::frame::{Ctx, PlanMode, Planned, run_planned};
use super::output::{Exit, print_json};
use crate::engine::Repo;
use crate::engine::repair::{self, RepairOptions, RepairReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects to repair (exact keys or `prefix/`); all when none.
    keys: Vec<String>,
    /// Also check the pins of every commit in history.
    #[arg(long)]
    all_history: bool,
    /// Show what would be rebuilt; write nothing.
    #[arg(long, conflicts_with_all = ["plan", "from_plan"])]
    dry_run: bool,
    /// Write the plan to FILE (implies --dry-run).
    #[arg(long, value_name = "PATH", conflicts_with = "from_plan")]
    plan: Option<PathBuf>,
    /// Apply a plan saved with --plan instead of replanning.
    #[arg(long, value_name = "PATH", conflicts_with = "all_history")]
    from_plan: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let mode = PlanMode::new(
        args.dry_run,
        args.plan.as_deref(),
        args.from_plan.as_deref(),
    );
    run_planned(ctx, &args, mode).await
}

impl Planned for Args {
    const COMMAND: &'static str = "repair";
    type Report = RepairReport;

    fn keys(&self) -> &[String] {
        &self.keys
    }

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let opts = RepairOptions {
            keys: self.keys.clone(),
            all_history: self.all_history,
        };
        Ok(repair::plan(repo, &opts).await?)
    }

    fn preview_notes(&self, plan: &Plan) -> Vec<String> {
        repair::unrepairable(plan)
            .into_iter()
            .map(|(target, why)| format!("  cannot rebuild {target}: {why}"))
            .collect()
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<RepairReport> {
        Ok(repair::apply(repo, plan).await?)
    }

    fn print(&self, report: &RepairReport, json: bool) -> Result<Exit> {
        print_report(report, json)
    }
}

/// What was rebuilt, then each part that could not be (`FAILED`), then the
/// notes; exit 3 when something failed.
fn print_report(r: &RepairReport, json: bool) -> Result<Exit> {
    if json {
        print_json(r)?;
    } else {
        for (label, reference) in &r.repinned_refs {
            outln!("repinned {label} -> {reference}");
        }
        for (key, reference) in &r.reforked {
            outln!("reforked {key} -> {reference}");
        }
        for (target, why) in &r.failed {
            outln!("FAILED {target}: {why}");
        }
        for (id, how) in &r.closed {
            outln!("closed interrupted operation {id} ({how})");
        }
        for note in &r.notes {
            outln!("{note}");
        }
        if r.repinned.is_empty()
            && r.reforked.is_empty()
            && r.failed.is_empty()
            && r.closed.is_empty()
        {
            outln!("nothing to repair");
        }
    }
    Ok(if r.partial() { Exit::Partial } else { Exit::Ok })
}
