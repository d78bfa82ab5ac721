//! `tether init [PATH] [--dataset-id ID]`.

use std::path::PathBuf;

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::init;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository to make a dataset of (default: the current directory).
    path: Option<PathBuf>,
    /// Use this dataset id (8 lowercase hex characters) instead of a new one.
    #[arg(long)]
    dataset_id: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub fn run(_ctx: &Ctx, args: Args) -> Result<Exit> {
    let path = args.path.unwrap_or_else(|| PathBuf::from("."));
    let report = init::init(&path, args.dataset_id.as_deref())?;
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "initialized dataset {} in {}",
            report.dataset_id,
            report.root
        );
    }
    Ok(Exit::Ok)
}
