//! `tether verify [KEY...] [-r REV] [--all-history] [--deep]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::verify::{self, VerifyOptions, VerifyResult};
use crate::plugin::VerifyStatus;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects to verify (exact keys or `prefix/`); all when none. With
    /// --all-history, at every commit that has them.
    keys: Vec<String>,
    /// Verify the manifests at this revision.
    #[arg(short, long, value_name = "REV", conflicts_with = "all_history")]
    rev: Option<String>,
    /// Verify every commit in the repository.
    #[arg(long)]
    all_history: bool,
    /// Actually open recorded states (resolves `unknown`).
    #[arg(long)]
    deep: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let opts = VerifyOptions {
        keys: args.keys,
        rev: args.rev,
        all_history: args.all_history,
        deep: args.deep,
    };
    let result = verify::verify(&repo, &opts).await?;
    if args.json {
        print_json(&result)?;
    } else {
        print_human(&result);
    }
    Ok(if result.all_ok() {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

fn print_human(r: &VerifyResult) {
    if r.reports.is_empty() {
        outln!("nothing to verify: no committed pin or recoverable state selected");
        return;
    }
    // One write for the report: `--all-history` has a line per pin and commit.
    let mut out = String::new();
    for (label, report) in &r.reports {
        let word = VerifyStatus::as_str(report.status);
        // A pin living under a later generation is worth saying even when ok.
        let generation = report.message.contains("pinned as");
        if report.status == VerifyStatus::Ok && !generation {
            out.push_str(&format!("{word} {label}\n"));
        } else {
            out.push_str(&format!("{word} {label}: {}\n", report.message));
        }
    }
    out!("{out}");
}
