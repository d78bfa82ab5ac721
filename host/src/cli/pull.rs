//! `tether pull [BOOKMARK] [--key KEY]... [-m MESSAGE] [--json]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::pull::{self, PullOptions, PullReport, brief_change};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bookmark to pull: the one this working copy is on (the default).
    bookmark: Option<String>,
    /// Pull only this object: a key, or a prefix ending in '/' (zarr/);
    /// repeatable. Objects sharing a native branch space are named together.
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    /// Commit message (default: pull B: N objects).
    #[arg(short, long)]
    message: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let opts = PullOptions {
        bookmark: args.bookmark,
        keys: args.keys,
        message: args.message,
    };
    let report = pull::pull(&repo, &opts).await?;
    if args.json {
        print_json(&report)?;
    } else {
        print_human(&report);
    }
    Ok(Exit::Ok)
}

/// As the spec prints it: what moved, what did not, what was skipped, then
/// the commit.
fn print_human(r: &PullReport) {
    for (key, moved) in &r.committed {
        let (from, to) = brief_change(&moved.from, &moved.to);
        outln!("pulled {key} {from} -> {to}");
    }
    for key in &r.unchanged {
        outln!("up to date {key}");
    }
    for (key, why) in &r.skipped {
        outln!("skipped {key}: {why}");
    }
    match &r.vcs_commit {
        Some(c) => outln!("committed {} on {}", &c[..c.len().min(12)], r.bookmark),
        None => outln!("nothing moved; nothing committed on {}", r.bookmark),
    }
}
