//! `tether ops [-n N]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::ops;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show the newest N entries.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let entries = ops::ops(&repo, args.limit).await?;
    if args.json {
        print_json(&entries)?;
        return Ok(Exit::Ok);
    }
    if entries.is_empty() {
        outln!("no operations in this checkout's log");
    }
    let short = ops::short_ids(&repo)?;
    let short = |id: &str| short.get(id).cloned().unwrap_or_else(|| id.to_string());
    for e in &entries {
        let mut parts = vec![short(&e.id), e.at.clone(), e.command.clone()];
        let what = ops::describe(e);
        if !what.is_empty() {
            parts.push(what);
        }
        parts.extend(e.flags());
        outln!("{}", parts.join("  "));
    }
    Ok(Exit::Ok)
}
