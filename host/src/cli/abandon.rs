//! `tether abandon REV... [--gc]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::abandon::{self, AbandonOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The commits to drop (git shas, or any revision naming one).
    #[arg(required = true)]
    revs: Vec<String>,
    /// Apply the gc plan for what only those commits pinned.
    #[arg(long)]
    gc: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let report = abandon::abandon(
        &repo,
        &AbandonOptions {
            revs: args.revs,
            gc: args.gc,
        },
    )
    .await?;
    if args.json {
        print_json(&report)?;
    } else {
        let short: Vec<&str> = report
            .abandoned
            .iter()
            .map(|c| &c[..c.len().min(12)])
            .collect();
        outln!("abandoned {}", short.join(", "));
        match &report.gc {
            Some(gc) => super::gc::print_report(gc, false)?,
            None => {
                out!("{}", report.plan.render());
                if !report.plan.is_empty() {
                    outln!(
                        "(not applied; `tether gc --no-dry-run` releases these, or re-run with --gc)"
                    );
                }
            }
        }
    }
    Ok(match &report.gc {
        Some(gc) if !gc.failed.is_empty() => Exit::Partial,
        _ => Exit::Ok,
    })
}
