//! `tether remove KEY`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::Exit;
use crate::engine::remove;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object to unregister (its manifest is deleted; the store is untouched).
    key: String,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    remove::remove(&repo, &args.key)?;
    outln!("removed {}", args.key);
    Ok(Exit::Ok)
}
