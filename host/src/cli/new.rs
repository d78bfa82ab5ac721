//! `tether new [REV] [-b NAME] [--shared] [--keep] [--eager | --lazy]
//! [--defer-record | --no-defer-record] [--discard | --adopt]
//! [--dry-run | --plan FILE | --from-plan FILE]`.

use anyhow::Result;

use super::frame::{Ctx, Planned, run_planned};
use super::output::{Exit, PlanArgs, print_json};
use crate::engine::Repo;
use crate::engine::new::{self, NewOptions, NewReport, SetUp};
use crate::plan::Plan;

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
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    run_planned(ctx, &args, args.plans.mode()).await
}

impl Planned for Args {
    const COMMAND: &'static str = "new";
    type Report = NewReport;

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let opts = NewOptions {
            rev: self.rev.clone(),
            create: self.bookmark.clone(),
            shared: self.shared,
            keep: self.keep,
            eager: (self.eager || self.lazy).then_some(self.eager),
            defer_record: (self.defer_record || self.no_defer_record).then_some(self.defer_record),
            discard: self.discard,
            adopt: self.adopt,
        };
        Ok(new::plan(repo, &opts).await?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<NewReport> {
        Ok(new::apply(repo, plan).await?)
    }

    fn print(&self, report: &NewReport, json: bool) -> Result<Exit> {
        print_report(report, json)?;
        Ok(if report.failed.is_empty() {
            Exit::Ok
        } else {
            Exit::Failed
        })
    }
}

fn print_report(r: &NewReport, json: bool) -> Result<()> {
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
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
        let note = match how {
            SetUp::Deferred => "created on first writable open",
            SetUp::Forked => "created",
            SetUp::Reset => "reset onto the pin",
            SetUp::Reused => "already at the pin",
            SetUp::Adopted => "adopted as it is",
            SetUp::Shared => "shared with its branch scope",
            SetUp::Trunk => "trunk",
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
