//! `tether new [REV] [-b NAME] [--shared] [--keep] [--eager | --lazy]
//! [--defer-record | --no-defer-record] [--discard | --adopt]
//! [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::output::{Exit, PlanArgs, preview_plan, print_json};
use crate::engine::Repo;
use crate::engine::new::{self, NewOptions, NewReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A bookmark to join, or a revision (read-only when no bookmark is there).
    rev: Option<String>,
    /// Create this bookmark at REV (default: here) and work on it.
    #[arg(short = 'b', long = "bookmark", value_name = "NAME")]
    bookmark: Option<String>,
    /// Work on a bookmark another live checkout already holds.
    #[arg(long)]
    shared: bool,
    /// Keep the current working refs; only refresh the baseline.
    #[arg(long, conflicts_with = "adopt")]
    keep: bool,
    /// Create every working branch now.
    #[arg(long, conflicts_with = "lazy")]
    eager: bool,
    /// Create working branches on the first writable open (default: [new] fork).
    #[arg(long)]
    lazy: bool,
    /// Leave pin=record objects for the first writable open too.
    #[arg(long, conflicts_with = "no_defer_record")]
    defer_record: bool,
    /// Fork pin=record objects now (default: [new] record).
    #[arg(long)]
    no_defer_record: bool,
    /// Reset working branches even if they hold writes never committed.
    #[arg(long, conflicts_with = "adopt")]
    discard: bool,
    /// Take the bookmark's existing store branches as they are.
    #[arg(long)]
    adopt: bool,
    #[command(flatten)]
    plans: PlanArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    let plan = match &args.plans.from_plan {
        Some(path) => new::load_plan(path)?,
        None => {
            let opts = NewOptions {
                rev: args.rev.clone(),
                create: args.bookmark.clone(),
                shared: args.shared,
                keep: args.keep,
                eager: (args.eager || args.lazy).then_some(args.eager),
                defer_record: (args.defer_record || args.no_defer_record)
                    .then_some(args.defer_record),
                discard: args.discard,
                adopt: args.adopt,
            };
            let plan = new::plan(&repo, &opts).await?;
            if args.plans.previewing() {
                preview_plan(&plan, args.plans.plan.as_deref(), args.json)?;
                return Ok(Exit::Ok);
            }
            plan
        }
    };
    let report = new::apply(&repo, &plan).await?;
    print_report(&report, args.json)?;
    Ok(if report.failed.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

fn print_report(r: &NewReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    let Some(bookmark) = &r.bookmark else {
        match &r.parked {
            Some(branch) => outln!("on no bookmark: read-only (checked out on {branch})"),
            None => outln!("on no bookmark: read-only"),
        }
        return Ok(());
    };
    if r.trunk {
        outln!("on trunk bookmark {bookmark}; every object works on its upstream branch");
        for (key, branch) in &r.working_refs {
            outln!("  {key} -> {branch}");
        }
        return Ok(());
    }
    let mut lines = Vec::new();
    for (key, how) in &r.how {
        let name = r
            .working_refs
            .get(key)
            .or_else(|| r.pending_forks.get(key))
            .cloned()
            .unwrap_or_default();
        let note = match how.as_str() {
            "deferred" => "created on first writable open",
            "forked" => "created",
            "reset" => "reset onto the pin",
            "reused" => "already at the pin",
            "adopted" => "adopted as it is",
            "shared" => "shared with its branch scope",
            other => other,
        };
        lines.push(format!("  {key} -> {name} ({note})"));
    }
    if lines.is_empty() {
        outln!("on bookmark {bookmark}; no Forkable object to fork");
    } else {
        outln!("on bookmark {bookmark}; working refs set up");
        for l in lines {
            outln!("{l}");
        }
    }
    for (key, error) in &r.failed {
        super::output::write_err(format_args!(
            "error: {key}: the fork failed ({error}); the other branches are in place; run `tether new` again once the cause is gone"
        ));
    }
    Ok(())
}
