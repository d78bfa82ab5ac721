//! `tether drop BOOKMARK [--to BOOKMARK] [--force-prune]
//! [--dry-run | --no-dry-run | --plan FILE | --from-plan FILE]`: a dry run
//! unless told otherwise.

use std::path::PathBuf;

use anyhow::Result;

use super::frame::{Ctx, PlanMode, Planned, run_planned};
use super::output::{Exit, UsageError, print_json};
use crate::engine::Repo;
use crate::engine::drop::{self, DropOptions, DropReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bookmark to throw away.
    bookmark: Option<String>,
    /// Where this checkout goes when it is on the bookmark (default: the trunk).
    #[arg(long, value_name = "BOOKMARK")]
    to: Option<String>,
    /// Delete branches with writes no commit recorded too (data lost).
    #[arg(long)]
    force_prune: bool,
    /// Experimental: also delete the stores this dataset created that nothing
    /// references once the commits are gone.
    #[arg(long)]
    delete_stores: bool,
    /// Show the plan only (the default).
    #[arg(long, conflicts_with = "no_dry_run")]
    dry_run: bool,
    /// Apply the plan.
    #[arg(long)]
    no_dry_run: bool,
    /// Write the plan to FILE.
    #[arg(long, value_name = "PATH", conflicts_with = "from_plan")]
    plan: Option<PathBuf>,
    /// Apply a plan saved with --plan.
    #[arg(long, value_name = "PATH", conflicts_with = "dry_run")]
    from_plan: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let mode = PlanMode::dry_run_by_default(
        args.no_dry_run,
        args.plan.as_deref(),
        args.from_plan.as_deref(),
    );
    run_planned(ctx, &args, mode).await
}

impl Planned for Args {
    const COMMAND: &'static str = "drop";
    type Report = DropReport;

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let Some(bookmark) = self.bookmark.clone() else {
            return Err(UsageError::new("name the bookmark to drop")
                .hint("`tether drop BOOKMARK`")
                .into());
        };
        let opts = DropOptions {
            bookmark,
            to: self.to.clone(),
            force_prune: self.force_prune,
            delete_stores: self.delete_stores,
        };
        Ok(drop::plan(repo, &opts).await?)
    }

    fn not_applied(&self, plan: &Plan) -> Option<String> {
        Some(format!(
            "(not applied; `tether drop {} --no-dry-run` applies it)",
            plan.context["bookmark"].as_str().unwrap_or_default()
        ))
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<DropReport> {
        Ok(drop::apply(repo, plan).await?)
    }

    fn print(&self, report: &DropReport, json: bool) -> Result<Exit> {
        if json {
            print_json(report)?;
        } else {
            if let Some(to) = &report.left_for {
                outln!("left {} for {to}", report.bookmark);
            }
            if !report.abandoned.is_empty() {
                let short: Vec<&str> = report
                    .abandoned
                    .iter()
                    .map(|c| &c[..c.len().min(12)])
                    .collect();
                outln!("abandoned {}", short.join(", "));
            }
            outln!("deleted bookmark {}", report.bookmark);
            if let Some(gc) = &report.gc {
                super::gc::print_report(gc, false)?;
            }
        }
        Ok(match &report.gc {
            Some(gc) if !gc.failed.is_empty() => Exit::Partial,
            _ => Exit::Ok,
        })
    }
}
