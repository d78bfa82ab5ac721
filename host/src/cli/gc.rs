//! `tether gc [--dry-run | --no-dry-run] [--release-foreign]
//! [--prune-bookmarks [--keep-bookmark NAME]... [--force-prune]]
//! [--plan FILE | --from-plan FILE]`: a dry run unless told otherwise.

use std::path::PathBuf;

use anyhow::Result;

use super::frame::{Ctx, PlanMode, Planned, run_planned};
use super::output::{Exit, print_json};
use crate::engine::Repo;
use crate::engine::gc::{self, GcOptions, GcReport};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show the plan only (the default).
    #[arg(long, conflicts_with = "no_dry_run")]
    dry_run: bool,
    /// Apply the plan.
    #[arg(long)]
    no_dry_run: bool,
    /// Also release unreferenced pins this clone did not create.
    #[arg(long)]
    release_foreign: bool,
    /// Judge the tether.ws.* branches of bookmarks that are gone.
    #[arg(long)]
    prune_bookmarks: bool,
    /// A bookmark that exists elsewhere (another machine): keep its branches.
    #[arg(long, value_name = "NAME", requires = "prune_bookmarks")]
    keep_bookmark: Vec<String>,
    /// Delete branches with unpinned writes too (data lost).
    #[arg(long)]
    force_prune: bool,
    /// Experimental: delete stores this dataset created (add --create) once
    /// nothing references them; the owner marker decides.
    #[arg(long)]
    delete_stores: bool,
    /// A created store to judge by its marker alone (repeatable; with --delete-stores).
    #[arg(long, value_name = "KIND=LOCATOR")]
    store: Vec<String>,
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
    const COMMAND: &'static str = "gc";
    type Report = GcReport;

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let opts = GcOptions {
            release_foreign: self.release_foreign,
            prune_bookmarks: self.prune_bookmarks,
            keep_bookmarks: self.keep_bookmark.clone(),
            force_prune: self.force_prune,
            delete_stores: self.delete_stores,
            stores: self
                .store
                .iter()
                .map(|s| {
                    s.split_once('=')
                        .map(|(k, l)| (k.to_string(), l.to_string()))
                        .ok_or_else(|| anyhow::anyhow!("--store takes KIND=LOCATOR, got {s:?}"))
                })
                .collect::<Result<_>>()?,
        };
        Ok(gc::plan(repo, &opts).await?)
    }

    fn not_applied(&self, plan: &Plan) -> Option<String> {
        (!plan.is_empty()).then(|| "(not applied; `tether gc --no-dry-run` applies it)".into())
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<GcReport> {
        Ok(gc::apply(repo, plan).await?)
    }

    fn print(&self, report: &GcReport, json: bool) -> Result<Exit> {
        print_report(report, json)?;
        Ok(
            match (report.failed.is_empty(), report.applied_anything()) {
                (true, _) => Exit::Ok,
                (false, true) => Exit::Partial,
                (false, false) => Exit::Failed,
            },
        )
    }
}

/// The human report after applying (shared with `drop` and `abandon`).
pub fn print_report(r: &GcReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    let unpinned: usize = r.unpinned.values().map(Vec::len).sum();
    if unpinned > 0 {
        outln!("unpinned {unpinned} pin(s)");
        for (kind, ids) in &r.unpinned {
            for id in ids {
                outln!("  {kind}: {id}");
            }
        }
    }
    let already: usize = r.already_released.values().map(Vec::len).sum();
    if already > 0 {
        outln!("{already} pin(s) already released (this plan was applied before): nothing to do");
    }
    for (key, refs) in &r.deleted_working_refs {
        for reference in refs {
            outln!("deleted branch {reference} ({key})");
        }
    }
    for (key, refs) in &r.kept_working_refs {
        for reference in refs {
            outln!("kept branch {reference} ({key})");
        }
    }
    for (kind, ids) in &r.kept_pins {
        for id in ids {
            outln!("kept pin {kind}: {id} (not created by this clone)");
        }
    }
    for (key, refs) in &r.forgotten_working_refs {
        outln!("forgot {key}'s working ref {}", refs.join(", "));
    }
    for (key, what) in &r.deleted_stores {
        outln!("deleted store {key} ({what})");
    }
    for (key, why) in &r.kept_stores {
        outln!("kept store {key}: {why}");
    }
    for key in &r.forgotten_stores {
        outln!("forgot store {key} (no owner marker)");
    }
    if !r.deleted_listings.is_empty() {
        outln!("deleted {} orphan listing(s)", r.deleted_listings.len());
    }
    for (target, e) in &r.failed {
        super::output::write_err(format_args!("FAILED {target}: {e}"));
    }
    if !r.applied_anything() && r.failed.is_empty() {
        outln!("nothing to release");
    }
    Ok(())
}
