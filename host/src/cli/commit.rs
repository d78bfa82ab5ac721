//! `tether commit [KEY...] -m MESSAGE [--no-vcs] [--strict] [--force]
//! [--no-snapshot] [--dry-run | --plan FILE | --from-plan FILE]`.

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::output::{Exit, preview_plan, print_json};
use crate::engine::Repo;
use crate::engine::commit::{self, CommitOptions, CommitReport};

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
    json: bool,
}

pub async fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    if let Some(path) = &args.from_plan {
        let plan = commit::load_plan(path, &args.keys)?;
        let report = commit::apply(&repo, &plan, args.message.as_deref()).await?;
        print_report(&report, args.json)?;
        return Ok(Exit::Ok);
    }
    let previewing = args.dry_run || args.plan.is_some();
    if !previewing && !args.no_vcs && args.message.as_deref().is_none_or(|m| m.trim().is_empty()) {
        bail!("a commit message is required: `tether commit -m MESSAGE`");
    }
    let opts = CommitOptions {
        keys: args.keys,
        message: args.message.clone(),
        no_vcs: args.no_vcs,
        strict: args.strict,
        force: args.force,
        no_snapshot: args.no_snapshot,
    };
    let plan = commit::plan(&repo, &opts).await?;
    if previewing {
        preview_plan(&plan, args.plan.as_deref(), args.json)?;
        return Ok(Exit::Ok);
    }
    let report = commit::apply(&repo, &plan, args.message.as_deref()).await?;
    print_report(&report, args.json)?;
    Ok(Exit::Ok)
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
