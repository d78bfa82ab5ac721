//! `tether remove KEY`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::remove;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object to unregister (its manifest is deleted; the store is untouched).
    key: String,
    /// Machine-readable output: `{"removed": KEY}`.
    #[arg(long)]
    pub(super) json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    remove::remove(&repo, &args.key)?;
    if args.json {
        print_json(&serde_json::json!({ "removed": args.key }))?;
    } else {
        outln!("removed {}", args.key);
    }
    Ok(Exit::Ok)
}
