//! `tether recover [KEY...]`: what the stores still hold of a lost dataset,
//! and the commands that take it back. Writes nothing.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::recover::{self, RecoverReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these objects (exact keys or `prefix/`); no id or commit is suggested.
    keys: Vec<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let report = recover::recover(&repo, &args.keys).await?;
    if args.json {
        print_json(&report)?;
    } else {
        print_human(&report);
    }
    Ok(if report.any_error() {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn print_human(r: &RecoverReport) {
    outln!("dataset id {} (tether.toml)", r.dataset_id);
    for o in &r.objects {
        if let Some(e) = &o.error {
            super::output::write_err(format_args!(
                "error: {} [{}]: its store could not be listed: {e}",
                o.key, o.kind
            ));
            continue;
        }
        if !o.holds_refs {
            outln!("{} [{}]: no refs of tether's", o.key, o.kind);
        }
        for d in &o.datasets {
            let mine = if d.current { " (this dataset)" } else { "" };
            let mut parts = vec![format!("{} pin(s)", d.pins)];
            if !d.bookmarks.is_empty() {
                let names: Vec<String> = d
                    .bookmarks
                    .iter()
                    .map(|b| match b.generation {
                        Some(g) => format!("{} (.{g})", b.bookmark),
                        None => b.bookmark.clone(),
                    })
                    .collect();
                parts.push(format!("bookmarks: {}", names.join(", ")));
            }
            for l in &d.legacy {
                parts.push(format!(
                    "legacy branches of workspace {}: {}",
                    l.workspace,
                    l.branches.len()
                ));
            }
            outln!(
                "{} [{}] {}{mine}: {}",
                o.key,
                o.kind,
                d.dataset_id,
                parts.join("; ")
            );
        }
        if let Some(p) = &o.missing_pin {
            outln!(
                "{}: its manifest names pin {p}, which the store lacks",
                o.key
            );
        }
        for u in &o.unrecognized {
            outln!(
                "{}: {u} looks like tether's but carries no readable dataset id",
                o.key
            );
        }
    }
    if r.any_error() {
        outln!(
            "no steps: fix access to the stores above, or leave them out with `tether recover KEY...`"
        );
        return;
    }
    outln!("next steps:");
    for (i, s) in r.steps.iter().enumerate() {
        match &s.command {
            Some(c) => outln!("{}. {c}\n   # {}", i + 1, s.note),
            None => outln!("{}. # {}", i + 1, s.note),
        }
    }
}
