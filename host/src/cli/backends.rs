//! `tether backends [--json]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::backends;
use crate::model::display::escape_inline;
use crate::plugin::Runtime;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let runtime = Runtime::global()?;
    // Inside a dataset, list what the dataset runs (its pins honoured);
    // elsewhere, this tether's built-ins.
    let rows = if ctx.in_dataset() {
        backends::list_for(&ctx.repo()?).await?
    } else {
        backends::list(&runtime).await?
    };
    tracing::debug!(stats = ?runtime.stats(), "plugin runtime");
    if args.json {
        print_json(&rows)?;
        return Ok(Exit::Ok);
    }
    let width = rows.iter().map(|r| r.kind.len()).max().unwrap_or(4).max(4);
    outln!(
        "{:width$}  {:12}  {:11}  {:8}  CAPABILITIES",
        "KIND",
        "MATURITY",
        "TIER",
        "SOURCE"
    );
    for r in &rows {
        outln!(
            "{:width$}  {:12}  {:11}  {:8}  {}",
            r.kind,
            r.maturity.as_deref().unwrap_or("-"),
            r.tier.as_deref().unwrap_or("-"),
            r.source,
            r.capabilities.join(", "),
        );
        outln!(
            "{:width$}  digest {}{}",
            "",
            r.digest,
            if r.pinned { " (pinned)" } else { "" }
        );
        if !r.imports.is_empty() {
            outln!("{:width$}  imports {}", "", r.imports.join(", "));
        }
        // Plugin-controlled: bounded and stripped at load, escaped again here.
        match &r.meta {
            Some(m) => {
                outln!("{:width$}  plugin {}", "", escape_inline(&m.summary()));
                if let Some(t) = &m.tested_against {
                    outln!("{:width$}  tested against: {}", "", escape_inline(t));
                }
            }
            None if r.installed => outln!("{:width$}  plugin -", ""),
            None => {}
        }
        if let Some(note) = &r.note {
            outln!("{:width$}  note: {note}", "");
        }
    }
    Ok(Exit::Ok)
}
