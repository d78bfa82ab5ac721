//! `tether forget-workspace [ID] [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::frame::{Ctx, Planned, run_planned};
use super::output::{Exit, PlanArgs, print_json};
use crate::engine::Repo;
use crate::engine::forget_workspace::{self, ForgetReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace id (or a unique prefix) of the checkout to forget; default: this one.
    id: Option<String>,
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
    const COMMAND: &'static str = "forget-workspace";
    type Report = ForgetReport;

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        Ok(forget_workspace::plan(repo, self.id.as_deref())?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<ForgetReport> {
        Ok(forget_workspace::apply(repo, plan)?)
    }

    fn print(&self, report: &ForgetReport, json: bool) -> Result<Exit> {
        if json {
            print_json(report)?;
        } else {
            for f in &report.removed_files {
                outln!("removed {f}");
            }
            if let Some(v) = &report.vcs {
                outln!("{v}");
            }
            for (target, e) in &report.failed {
                super::output::write_err(format_args!("FAILED {target}: {e}"));
            }
            outln!("forgot workspace {}", report.workspace);
        }
        Ok(if report.failed.is_empty() {
            Exit::Ok
        } else {
            Exit::Partial
        })
    }
}
