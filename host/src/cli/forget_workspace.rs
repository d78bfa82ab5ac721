//! `tether forget-workspace [ID] [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::output::{Exit, PlanArgs, preview_plan, print_json};
use crate::engine::Repo;
use crate::engine::forget_workspace;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace id (or a unique prefix) of the checkout to forget; default: this one.
    id: Option<String>,
    #[command(flatten)]
    plans: PlanArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    let plan = match &args.plans.from_plan {
        Some(path) => forget_workspace::load_plan(path)?,
        None => {
            let plan = forget_workspace::plan(&repo, args.id.as_deref())?;
            if args.plans.previewing() {
                preview_plan(&plan, args.plans.plan.as_deref(), args.json)?;
                return Ok(Exit::Ok);
            }
            plan
        }
    };
    let report = forget_workspace::apply(&repo, &plan)?;
    if args.json {
        print_json(&report)?;
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
