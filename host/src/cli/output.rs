//! What every command shares: JSON or text output, `error: ...` on stderr,
//! and the spec's exit codes.

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::model::display::{self, escape};

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

/// Set once stdout fails: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// The first failure to write stdout other than a closed pipe.
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Write to stdout (the `out!` and `outln!` macros). A reader that went away
/// (`tether log KEY | head`) ends the output quietly, not the command: the
/// work is done, and the exit code still says how it went. Any other failure
/// (a full disk) is reported once the command is over, by [`unwritten`].
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    // Whatever a command prints may quote a clone, a store or a plugin
    // (locators, keys, store messages): nothing in it may drive the terminal.
    let text = args
        .as_str()
        .map_or_else(|| std::fmt::format(args).into(), std::borrow::Cow::Borrowed);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(escape(&text).as_bytes()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let mut first = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }
    }
}

/// Why the command's output could not be written, when it could not (a
/// closed pipe is not a failure).
pub fn unwritten() -> Option<anyhow::Error> {
    let error = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    error
        .as_ref()
        .map(|e| anyhow::anyhow!("cannot write the output to stdout: {e}"))
}

/// Print `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Print an error as `error: ...` (with its causes) and exit 1. The
/// message is escaped and bounded ([`display::message`]): it may quote a
/// clone's file or a plugin's reply.
pub fn fail(e: &anyhow::Error) -> ExitCode {
    let mut message = e.to_string();
    for cause in e.chain().skip(1) {
        message.push_str(&format!(": {cause}"));
    }
    write_err(format_args!("error: {message}"));
    ExitCode::from(1)
}

/// `eprintln!` for a line that may quote text tether did not write (a
/// plugin's error, a store's message): escaped and bounded like [`fail`].
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let text = args
        .as_str()
        .map_or_else(|| std::fmt::format(args).into(), std::borrow::Cow::Borrowed);
    eprintln!("{}", display::message(&text));
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
        outln!("{}", plan.to_json_pretty());
        return Ok(());
    }
    out!("{}", plan.render());
    if let Some(path) = save {
        outln!(
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
