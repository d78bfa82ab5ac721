//! `tether undo [OP_ID] [--discard] [--json]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::undo::{self, UndoOptions, UndoReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The operation to reverse (an id from `tether ops`, or a unique prefix);
    /// default: the newest one.
    #[arg(value_name = "OP_ID")]
    op_id: Option<String>,
    /// Delete the branches the operation created even if they gained writes.
    #[arg(long)]
    discard: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let opts = UndoOptions {
        op_id: args.op_id,
        discard: args.discard,
    };
    let report = undo::undo(&repo, &opts).await?;
    if args.json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(if report.is_partial() {
        Exit::Partial
    } else {
        Exit::Ok
    })
}

/// `undid ID (command: what)`, then one line per part, labelled as spec/09
/// prints them.
fn print_report(r: &UndoReport) {
    if r.what.is_empty() {
        outln!("undid {} ({})", r.undone, r.command);
    } else {
        outln!("undid {} ({}: {})", r.undone, r.command, r.what);
    }
    let groups = [
        ("restored", &r.restored),
        ("IRREVERSIBLE", &r.irreversible),
        ("FAILED", &r.failed),
        ("skipped", &r.skipped),
    ];
    for (label, items) in groups {
        for item in items {
            outln!("  {label:<10} {item}");
        }
    }
}
