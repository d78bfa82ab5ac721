//! `tether publish [--to DSN] [--schema NAME] [--rev REV]... [--listings]
//! [--dry-run]` (experimental).

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, preview_plan, print_json, write_note};
use crate::engine::export::{self, ExportOptions};
use crate::engine::publish::{self, PublishRequest};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// PostgreSQL DSN (postgresql://...). Defaults to $TETHER_PUBLISH_DSN.
    #[arg(long, value_name = "TEXT")]
    to: Option<String>,
    /// Target schema name.
    #[arg(long, default_value = "tether")]
    schema: String,
    /// Publish only these revisions (repeatable).
    #[arg(short = 'r', long = "rev", value_name = "TEXT")]
    revs: Vec<String>,
    /// Include per-file listings (listings, listing_entries).
    #[arg(long)]
    listings: bool,
    /// Show what would be written per table; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    write_note(format_args!("{}", export::experimental_note("publish")));
    let req = PublishRequest {
        to: args.to.clone(),
        schema: args.schema.clone(),
        export: ExportOptions {
            revs: args.revs.clone(),
            listings: args.listings,
            workspace: false,
        },
        dry_run: args.dry_run,
    };
    let report = publish::publish(&repo, &req).await?;
    if args.dry_run {
        preview_plan(&report.plan(), None, args.json, &[])?;
        return Ok(Exit::Ok);
    }
    if args.json {
        print_json(&report)?;
        return Ok(Exit::Ok);
    }
    outln!(
        "published {} row(s) to schema '{}' ({} commit(s) already present)",
        report.total(),
        report.schema,
        report.skipped_commits
    );
    for (table, n) in &report.upserted {
        outln!("  {table} {n} row(s)");
    }
    Ok(Exit::Ok)
}
