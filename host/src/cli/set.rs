//! `tether set KEY... | --all [--file immutable|versioned] [--pin native|record]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, UsageError, print_json};
use crate::engine::set;
use crate::model::{FileMode, PinMode};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects to change (exact keys or `prefix/`).
    keys: Vec<String>,
    /// Change every object.
    #[arg(long, conflicts_with = "keys")]
    all: bool,
    /// immutable | versioned (file objects).
    #[arg(long, value_parser = ["immutable", "versioned"])]
    file: Option<String>,
    /// native | record: a native ref per commit, or state only.
    #[arg(long, value_parser = ["native", "record"])]
    pin: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    if args.keys.is_empty() && !args.all {
        return Err(UsageError::new("name the objects to change (KEY...), or pass --all").into());
    }
    if args.file.is_none() && args.pin.is_none() {
        return Err(UsageError::new("nothing to set: give --file and/or --pin").into());
    }
    let repo = ctx.repo()?;
    let file = args
        .file
        .as_deref()
        .map(str::parse::<FileMode>)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let pin = args
        .pin
        .as_deref()
        .map(str::parse::<PinMode>)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let report = set::set(&repo, &args.keys, file, pin)?;
    if args.json {
        print_json(&report)?;
        return Ok(Exit::Ok);
    }
    for (key, fields) in &report.changed {
        for (field, change) in fields {
            outln!("set {key} {field}: {} -> {}", change.from, change.to);
        }
    }
    for key in &report.unchanged {
        outln!("unchanged {key}");
    }
    Ok(Exit::Ok)
}
