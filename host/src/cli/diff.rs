//! `tether diff [REV_A] [REV_B] [--key KEY]... [--content] [--limit N]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::diff::{self, DiffOptions, ObjectChange};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The older side (default: the last commit).
    rev_a: Option<String>,
    /// The newer side (default: the working tree).
    rev_b: Option<String>,
    /// Only this object: a key, or a prefix ending in '/' (zarr/); repeatable.
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    /// Also describe what changed inside each object.
    #[arg(short, long)]
    content: bool,
    /// Max entries shown per object.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let opts = DiffOptions {
        rev_a: args.rev_a,
        rev_b: args.rev_b,
        keys: args.keys,
        content: args.content,
        limit: Some(args.limit),
    };
    let changes = diff::diff(&repo, &opts).await?;
    if args.json {
        print_json(&changes)?;
    } else {
        print_human(&changes);
    }
    Ok(Exit::Ok)
}

fn print_human(changes: &[ObjectChange]) {
    if changes.is_empty() {
        outln!("no object changed");
        return;
    }
    for c in changes {
        let mut line = format!("{} {}", c.change, c.key);
        // A content change is the usual case; say so only when it is not.
        if c.change == "changed" && !c.why.iter().any(|w| w == "state") {
            line.push_str(&format!(" ({})", c.why.join(", ")));
        }
        if let Some(d) = &c.detail {
            line.push_str(&format!(" [{}]", d.summary));
        }
        outln!("{line}");
        if let Some(d) = &c.detail {
            for e in &d.entries {
                let entry = format!("  {} {} {}", e.change, e.path, e.detail);
                outln!("{}", entry.trim_end());
            }
            if d.truncated {
                let shown = d.entries.len() as u64;
                let total = d.added + d.removed + d.modified;
                if total > shown {
                    outln!("  ... {} more", total - shown);
                } else {
                    outln!("  ... (truncated)");
                }
            }
            if !d.note.is_empty() {
                outln!("  note: {}", d.note);
            }
        }
        if let Some(e) = &c.detail_error {
            super::output::write_err(format_args!("warning: {}: no content diff: {e}", c.key));
        }
    }
}
