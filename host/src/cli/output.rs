//! What every command shares: JSON or text output, `error: ...` on stderr,
//! and the spec's exit codes.

use std::process::ExitCode;

use serde::Serialize;

/// How a command ended (spec/09 "Exit codes and errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Ok,
    /// 1: a report that is not ok (verify, status `error`), or nothing applied.
    Failed,
    /// 3: part of the work was done.
    Partial,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        match e {
            Exit::Ok => ExitCode::SUCCESS,
            Exit::Failed => ExitCode::from(1),
            Exit::Partial => ExitCode::from(3),
        }
    }
}

/// Print `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Print an error as `error: ...` (with its causes) and exit 1.
pub fn fail(e: &anyhow::Error) -> ExitCode {
    let mut message = e.to_string();
    for cause in e.chain().skip(1) {
        message.push_str(&format!(": {cause}"));
    }
    eprintln!("error: {message}");
    ExitCode::from(1)
}

/// How long ago an RFC 3339 timestamp was, in words (`3 minutes ago`).
pub fn age(timestamp: &str) -> String {
    let Ok(then) = crate::model::time::parse_timestamp(timestamp) else {
        return "age unknown".into();
    };
    let secs = (chrono::Utc::now() - then).num_seconds().max(0);
    let (n, unit) = match secs {
        0..60 => (secs, "second"),
        60..3600 => (secs / 60, "minute"),
        3600..86400 => (secs / 3600, "hour"),
        _ => (secs / 86400, "day"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

/// Print a plan for `--dry-run` / `--plan FILE` (saving it first), with the
/// command that applies a saved one.
pub fn preview_plan(
    plan: &crate::plan::Plan,
    save: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<()> {
    if let Some(path) = save {
        plan.save(path)?;
    }
    if json {
        println!("{}", plan.to_json_pretty());
        return Ok(());
    }
    print!("{}", plan.render());
    if let Some(path) = save {
        println!(
            "plan saved to {}; apply it with `tether {} --from-plan {}`",
            path.display(),
            plan.command,
            path.display()
        );
    }
    Ok(())
}

/// `--dry-run | --plan FILE | --from-plan FILE`, as every command that plans
/// before it writes takes them (spec/09, "Plans").
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Show the plan; write nothing.
    #[arg(long, conflicts_with_all = ["plan", "from_plan"])]
    pub dry_run: bool,
    /// Write the plan to FILE (implies --dry-run).
    #[arg(long, value_name = "PATH", conflicts_with = "from_plan")]
    pub plan: Option<std::path::PathBuf>,
    /// Apply a plan saved with --plan instead of planning again.
    #[arg(long, value_name = "PATH")]
    pub from_plan: Option<std::path::PathBuf>,
}

impl PlanArgs {
    /// Whether the plan is only shown (or saved), not applied.
    pub fn previewing(&self) -> bool {
        self.dry_run || self.plan.is_some()
    }
}
