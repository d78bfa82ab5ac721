//! `tether status [KEY...] [--snapshot | --no-snapshot]`.

use anyhow::Result;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::status::{self, ObjectState, SnapshotMode, StatusReport, Tier, VcsDrift};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Objects to report (exact keys or `prefix/`); all when none.
    keys: Vec<String>,
    /// Fingerprint every object first.
    #[arg(long, conflicts_with = "no_snapshot")]
    snapshot: bool,
    /// Show the cached snapshot, contacting nothing.
    #[arg(long)]
    no_snapshot: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

impl Args {
    /// Whether `--snapshot` was given: every object's backend is asked.
    pub(super) fn snapshot(&self) -> bool {
        self.snapshot
    }
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let mode = if args.snapshot {
        SnapshotMode::Fresh
    } else if args.no_snapshot {
        SnapshotMode::Cached
    } else {
        SnapshotMode::Default
    };
    let report = status::status(&repo, &args.keys, mode).await?;
    if args.json {
        print_json(&report)?;
    } else {
        print_human(&report);
    }
    Ok(if report.has_error() {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn print_human(r: &StatusReport) {
    let mut header = format!("dataset {}", r.manifest_hash);
    if r.stale {
        header.push_str(&format!(" (STALE: {})", r.stale_keys.join(", ")));
    }
    match (&r.bookmark, r.trunk) {
        (Some(b), true) => header.push_str(&format!("; on trunk bookmark {b}")),
        (Some(b), false) => header.push_str(&format!("; on bookmark {b}")),
        (None, _) => header.push_str("; on no bookmark: read-only"),
    }
    outln!("{header}");
    if !r.fresh
        && let Some(at) = &r.snapshot_at
    {
        outln!(
            "snapshot from {at} ({}); `tether status --snapshot` refreshes",
            super::output::age(at)
        );
    }
    for w in &r.bookmark_drift {
        outln!("warning: {w}");
    }
    for d in &r.vcs_drift {
        outln!("warning: {}", vcs_drift_line(d));
    }
    for w in &r.retention {
        outln!("warning: {w}");
    }
    for (kind, path) in &r.dev_plugins {
        outln!("plugin {kind}: dev: {path}");
    }
    for o in &r.objects {
        let mut line = format!(" {} [{}/{}]", o.key, o.kind, o.tier);
        if o.tier == Tier::Observed {
            line.push_str(" unrecoverable");
        }
        if o.origin.as_deref() == Some("created") {
            line.push_str(" (created)");
        }
        if let Some(v) = &o.verify {
            line.push_str(&format!(" verify={v}"));
        }
        super::output::write_styled_line(
            &o.state.to_string(),
            state_style(&o.state),
            format_args!("{line}"),
        );
        if let Some(e) = &o.error {
            super::output::write_err(format_args!("error: {}: {e}", o.key));
        }
    }
}

/// The colour of an object's state when stdout is coloured: clean green,
/// new and modified yellow, behind cyan, error red.
fn state_style(state: &ObjectState) -> clap::builder::styling::Style {
    use clap::builder::styling::{AnsiColor, Style};
    let colour = match state {
        ObjectState::Clean => AnsiColor::Green,
        ObjectState::New | ObjectState::Modified => AnsiColor::Yellow,
        ObjectState::Behind => AnsiColor::Cyan,
        ObjectState::Error => AnsiColor::Red,
    };
    Style::new().fg_color(Some(colour.into()))
}

/// `dataset commit 1a2b3c4d5e6f (op 3f1c9a2b7d4e) vanished from the VCS; ...`,
/// saying per key whether the manifests still reference its pins.
fn vcs_drift_line(d: &VcsDrift) -> String {
    let (commit, op) = (&d.commit, &d.op);
    let mut kept = Vec::new();
    let mut freed = Vec::new();
    for (k, still) in &d.referenced {
        if *still {
            kept.push(k.as_str());
        } else {
            freed.push(k.as_str());
        }
    }
    let mut line = format!(
        "dataset commit {} (op {op}) vanished from the VCS (jj undo, jj abandon, git reset?)",
        &commit[..commit.len().min(12)]
    );
    if !kept.is_empty() {
        line.push_str(&format!(
            "; the manifests still reference its pins of {}",
            kept.join(", ")
        ));
    }
    if !freed.is_empty() {
        line.push_str(&format!(
            "; no manifest references its pins of {} any more: `tether gc` releases them",
            freed.join(", ")
        ));
    }
    line
}
