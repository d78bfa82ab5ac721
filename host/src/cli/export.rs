//! `tether export PATH [--rev REV]... [--format F] [--listings] [--workspace]
//! [--append]` (experimental).

use std::path::PathBuf;

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json, write_note};
use crate::engine::export::{self, ExportOptions, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The SQLite file, or the directory for parquet / csv / jsonl.
    path: PathBuf,
    /// Export only these revisions (repeatable).
    #[arg(short = 'r', long = "rev", value_name = "TEXT")]
    revs: Vec<String>,
    /// Export every reachable commit (default when no --rev is given).
    #[arg(long, overrides_with = "no_all_history")]
    all_history: bool,
    /// Only the revisions given with --rev.
    #[arg(long, overrides_with = "all_history")]
    no_all_history: bool,
    /// sqlite (default), parquet, csv, or jsonl.
    #[arg(long, default_value = "sqlite", value_parser = ["sqlite", "parquet", "csv", "jsonl"])]
    format: String,
    /// Include per-file listings (listings, listing_entries).
    #[arg(long)]
    listings: bool,
    /// Include this checkout's working refs and snapshot.
    #[arg(long)]
    workspace: bool,
    /// sqlite: upsert into an existing file instead of replacing it.
    #[arg(long)]
    append: bool,
    /// Machine-readable output: `{"path", "format", "head", "rows"}`.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    if args.all_history && !args.revs.is_empty() {
        return Err(super::output::UsageError::new(
            "--all-history exports every commit; drop --rev",
        )
        .into());
    }
    if args.no_all_history && args.revs.is_empty() {
        return Err(super::output::UsageError::new("--no-all-history needs --rev REV").into());
    }
    write_note(format_args!("{}", export::experimental_note("export")));
    let format: Format = args.format.parse().map_err(anyhow::Error::msg)?;
    let opts = ExportOptions {
        revs: args.revs,
        listings: args.listings,
        workspace: args.workspace,
    };
    let path = ctx.dir().join(&args.path);
    let report = export::export(&repo, &opts, &path, format, args.append).await?;
    if args.json {
        print_json(&report)?;
        return Ok(Exit::Ok);
    }
    let total: usize = report.rows.values().sum();
    outln!(
        "exported {total} row(s) to {} ({})",
        crate::model::display::quote(&args.path.display().to_string()),
        format.as_str()
    );
    for (table, n) in &report.rows {
        outln!("  {table} {n} row(s)");
    }
    Ok(Exit::Ok)
}
