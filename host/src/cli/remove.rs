//! `tether remove KEY`.

use anyhow::Result;

use super::output::Exit;
use crate::engine::{Repo, remove};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object to unregister (its manifest is deleted; the store is untouched).
    key: String,
}

pub fn run(args: Args) -> Result<Exit> {
    let repo = Repo::find(&std::env::current_dir()?)?;
    remove::remove(&repo, &args.key)?;
    outln!("removed {}", args.key);
    Ok(Exit::Ok)
}
