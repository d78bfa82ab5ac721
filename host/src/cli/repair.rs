//! `tether repair [KEY...] [--all-history] [--dry-run | --plan FILE |
//! --from-plan FILE] [--json]`.

use std::path::PathBuf;

use anyhow::Result;

use super::output::{Exit, print_json};
use crate::engine::Repo;
use crate::engine::repair::{self, RepairOptions, RepairReport};

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
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    if let Some(path) = &args.from_plan {
        let plan = repair::load_plan(path, &args.keys)?;
        let report = repair::apply(&repo, &plan).await?;
        return print_report(&report, args.json);
    }
    let opts = RepairOptions {
        keys: args.keys,
        all_history: args.all_history,
    };
    let plan = repair::plan(&repo, &opts).await?;
    if args.dry_run || args.plan.is_some() {
        if let Some(path) = &args.plan {
            plan.save(path)?;
        }
        if args.json {
            outln!("{}", plan.to_json_pretty());
        } else {
            out!("{}", plan.render());
            for (target, why) in repair::unrepairable(&plan) {
                outln!("  cannot rebuild {target}: {why}");
            }
            if let Some(path) = &args.plan {
                outln!(
                    "plan saved to {}; apply it with `tether repair --from-plan {}`",
                    path.display(),
                    path.display()
                );
            }
        }
        return Ok(Exit::Ok);
    }
    let report = repair::apply(&repo, &plan).await?;
    print_report(&report, args.json)
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
