//! `tether commit [KEY...] -m MESSAGE [--no-vcs] [--strict] [--force]
//! [--no-snapshot] [--dry-run | --plan FILE | --from-plan FILE]`.

use std::path::PathBuf;

use anyhow::Result;

use super::frame::{Ctx, PlanMode, Planned, run_planned};
use super::output::{Exit, UsageError, print_json};
use crate::engine::Repo;
use crate::engine::commit::{self, CommitOptions, CommitReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Commit only these objects (exact keys or `prefix/`).
    keys: Vec<String>,
    /// VCS commit message (required unless --from-plan).
    #[arg(short, long)]
    message: Option<String>,
    /// Write manifests but skip the VCS commit.
    #[arg(long)]
    no_vcs: bool,
    /// Fail instead of recording Observed objects unrecoverably.
    #[arg(long)]
    strict: bool,
    /// Skip quiescence checks.
    #[arg(long)]
    force: bool,
    /// Commit the cached fingerprints as they are instead of fingerprinting first.
    #[arg(long)]
    no_snapshot: bool,
    /// Show what would be pinned or recorded; write nothing.
    #[arg(long, conflicts_with_all = ["plan", "from_plan"])]
    dry_run: bool,
    /// Write the plan to FILE (implies --dry-run).
    #[arg(long, value_name = "PATH", conflicts_with = "from_plan")]
    plan: Option<PathBuf>,
    /// Apply a plan saved with --plan instead of replanning.
    #[arg(long, value_name = "PATH")]
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
    const COMMAND: &'static str = "commit";
    type Report = CommitReport;

    fn keys(&self) -> &[String] {
        &self.keys
    }

    fn check(&self, previewing: bool) -> Result<()> {
        if !previewing
            && !self.no_vcs
            && self.message.as_deref().is_none_or(|m| m.trim().is_empty())
        {
            return Err(UsageError::new("a commit message is required")
                .hint("`tether commit -m MESSAGE`")
                .into());
        }
        Ok(())
    }

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        for w in crate::engine::plugin_cmd::dev_warnings(repo, &self.keys)? {
            super::output::write_err(format_args!("warning: {w}"));
        }
        let opts = CommitOptions {
            keys: self.keys.clone(),
            message: self.message.clone(),
            no_vcs: self.no_vcs,
            strict: self.strict,
            force: self.force,
            no_snapshot: self.no_snapshot,
        };
        Ok(commit::plan(repo, &opts).await?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<CommitReport> {
        Ok(commit::apply(repo, plan, self.message.as_deref(), self.force).await?)
    }

    fn print(&self, report: &CommitReport, json: bool) -> Result<Exit> {
        print_report(report, json)?;
        Ok(Exit::Ok)
    }
}

fn print_report(r: &CommitReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    // As the spec prints it: pins first, then recorded states; unchanged
    // objects only when nothing else was committed.
    for (key, pin) in &r.pinned {
        if let Some(reference) = pin {
            outln!("pinned {key} -> {reference}");
        }
    }
    for (key, _) in r.pinned.iter().filter(|(_, pin)| pin.is_none()) {
        if r.unrecoverable.contains(key) {
            outln!("recorded {key} (not recoverable)");
        } else {
            outln!("recorded {key}");
        }
    }
    if r.pinned.is_empty() {
        for key in &r.unchanged {
            outln!("unchanged {key}");
        }
    }
    match &r.vcs_commit {
        Some(c) => outln!("committed {}", &c[..c.len().min(12)]),
        None if r.pinned.is_empty() => outln!("nothing to commit"),
        None => outln!("manifests written; no VCS commit (--no-vcs)"),
    }
    Ok(())
}
