//! `tether forget-workspace [ID] [--dry-run | --plan FILE | --from-plan FILE]`.

use std::path::PathBuf;

use anyhow::Result;

use super::output::{Exit, preview_plan, print_json};
use crate::engine::Repo;
use crate::engine::forget_workspace;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace id (or a unique prefix) of the checkout to forget; default: this one.
    id: Option<String>,
    /// Show what would be removed; write nothing.
    #[arg(long, conflicts_with_all = ["plan", "from_plan"])]
    dry_run: bool,
    /// Write the plan to FILE (implies --dry-run).
    #[arg(long, value_name = "PATH", conflicts_with = "from_plan")]
    plan: Option<PathBuf>,
    /// Apply a plan saved with --plan.
    #[arg(long, value_name = "PATH")]
    from_plan: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    let plan = match &args.from_plan {
        Some(path) => forget_workspace::load_plan(path)?,
        None => {
            let plan = forget_workspace::plan(&repo, args.id.as_deref())?;
            if args.dry_run || args.plan.is_some() {
                preview_plan(&plan, args.plan.as_deref(), args.json)?;
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
            println!("removed {f}");
        }
        if let Some(v) = &report.vcs {
            println!("{v}");
        }
        for (target, e) in &report.failed {
            eprintln!("FAILED {target}: {e}");
        }
        println!("forgot workspace {}", report.workspace);
    }
    Ok(if report.failed.is_empty() {
        Exit::Ok
    } else {
        Exit::Partial
    })
}
