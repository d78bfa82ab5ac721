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

/// `--color`: when the human output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (and not empty).
    #[default]
    Auto,
    /// Even when piped, and whatever `NO_COLOR` says.
    Always,
    /// Plain text.
    Never,
}

impl ColorChoice {
    /// Whether output to a stream that `is_terminal` or not is coloured.
    /// The flag beats `NO_COLOR`, as no-color.org asks.
    pub fn enabled(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// Whether stdout's human output is coloured (set once, by `main`).
static COLOUR: AtomicBool = AtomicBool::new(false);
/// `-q`: a command that changes things prints nothing on success but what
/// was asked for with `--json` (set once, by `main`).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Set how stdout is written for this process: coloured or not, quiet or not.
pub fn configure(colour: bool, quiet: bool) {
    COLOUR.store(colour, Ordering::Relaxed);
    QUIET.store(quiet, Ordering::Relaxed);
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
    if QUIET.load(Ordering::Relaxed) {
        return;
    }
    write_stdout(args);
}

/// A line that starts with `label` in `style` when stdout is coloured (a
/// status label), then `rest`. Both are escaped like every line; only the
/// style's own codes, which tether writes, reach the terminal as codes.
pub fn write_styled_line(
    label: &str,
    style: clap::builder::styling::Style,
    rest: std::fmt::Arguments<'_>,
) {
    if QUIET.load(Ordering::Relaxed) {
        return;
    }
    let label = escape(label);
    let rest = format!("{rest}\n");
    let rest = escape(&rest);
    if COLOUR.load(Ordering::Relaxed) {
        let (on, off) = (style.render(), style.render_reset());
        write_raw(&format!("{on}{label}{off}{rest}"));
    } else {
        write_raw(&format!("{label}{rest}"));
    }
}

/// [`write_out`] even under `-q`: output the user asked for by name (JSON).
fn write_stdout(args: std::fmt::Arguments<'_>) {
    // Whatever a command prints may quote a clone, a store or a plugin
    // (locators, keys, store messages): nothing in it may drive the terminal.
    let text = args
        .as_str()
        .map_or_else(|| std::fmt::format(args).into(), std::borrow::Cow::Borrowed);
    write_raw(&escape(&text));
}

/// Write text that is already safe for a terminal to stdout.
fn write_raw(text: &str) {
    use std::io::Write as _;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()) {
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
    write_stdout(format_args!("{}\n", serde_json::to_string_pretty(value)?));
    Ok(())
}

/// A usage error the CLI finds itself, past what clap checks (a missing
/// `-m`, a missing source or bookmark name): exit 2, class `UsageError`.
#[derive(Debug, thiserror::Error)]
#[error("{message}{}", hint.as_ref().map(|h| format!(": {h}")).unwrap_or_default())]
pub struct UsageError {
    message: String,
    hint: Option<String>,
}

impl UsageError {
    pub fn new(message: impl Into<String>) -> Self {
        UsageError {
            message: message.into(),
            hint: None,
        }
    }

    /// The command line that does it right.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// An error as scripts read it with `--json`:
/// `{"error": {"class", "message", "hints"}}`.
#[derive(Debug, Serialize)]
pub struct ErrorReport {
    /// The spec's error class (`ConfigError`, `StalePlanError`, ...).
    pub class: &'static str,
    /// What went wrong, with its causes.
    pub message: String,
    /// What to do about it, when tether knows (each a sentence or a command).
    pub hints: Vec<String>,
}

impl ErrorReport {
    /// The one place an error gets its spec class, message and hints.
    pub fn of(e: &anyhow::Error) -> ErrorReport {
        use crate::engine::TetherError;
        use crate::lock::LockError;
        use crate::model::ModelError;
        use crate::plan::PlanError;
        use crate::plugin::{BackendError, MultiObjectError};
        use crate::vcs::VcsError;
        if let Some(u) = e.downcast_ref::<UsageError>() {
            return ErrorReport {
                class: "UsageError",
                message: u.message.clone(),
                hints: u.hint.iter().cloned().collect(),
            };
        }
        let (class, hints) = if let Some(t) = e.downcast_ref::<TetherError>() {
            (t.class(), t.hints().to_vec())
        } else if let Some(m) = e.downcast_ref::<ModelError>() {
            (m.class(), Vec::new())
        } else if let Some(p) = e.downcast_ref::<PlanError>() {
            (
                if p.is_stale() {
                    "StalePlanError"
                } else {
                    "TetherError"
                },
                Vec::new(),
            )
        } else if e.downcast_ref::<LockError>().is_some() {
            ("LockTimeout", Vec::new())
        } else if e.downcast_ref::<VcsError>().is_some() {
            ("VcsError", Vec::new())
        } else if let Some(b) = e.downcast_ref::<BackendError>() {
            (b.class(), Vec::new())
        } else if e.downcast_ref::<MultiObjectError>().is_some() {
            ("MultiObjectError", Vec::new())
        } else {
            // The CLI's own refusals (a malformed `--set`, a missing
            // argument it checks itself): the spec's base class.
            ("TetherError", Vec::new())
        };
        let message = with_causes(
            match e.downcast_ref::<TetherError>() {
                Some(t) => t.reason(),
                None => e.to_string(),
            },
            e,
        );
        // Bounded like the text on stderr (it may quote a clone's file or a
        // plugin's reply); JSON's own escaping covers control characters.
        ErrorReport {
            class,
            message: display::bound(&message, display::MESSAGE_BYTES).into_owned(),
            hints: hints
                .iter()
                .map(|h| display::bound(h, display::MESSAGE_BYTES).into_owned())
                .collect(),
        }
    }

    /// A usage error clap found (an unknown option, a missing argument).
    pub fn usage(message: String) -> ErrorReport {
        ErrorReport {
            class: "UsageError",
            message,
            hints: Vec::new(),
        }
    }

    /// The spec's exit code for the error: 2 for a usage error, else 1.
    pub fn exit_code(&self) -> u8 {
        if self.class == "UsageError" { 2 } else { 1 }
    }

    /// Print `{"error": {...}}` on stdout.
    pub fn print_json(&self) {
        write_stdout(format_args!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({ "error": self })).unwrap_or_default()
        ));
    }
}

/// Print an error and return its exit code: `error: ...` (with its causes,
/// and the hints as the message always gave them) on stderr, and with
/// `--json` also `{"error": {"class", "message", "hints"}}` on stdout, so a
/// script never parses prose. The text on stderr is escaped and bounded
/// ([`display::message`]): it may quote a clone's file or a plugin's reply.
pub fn fail(e: &anyhow::Error, json: bool) -> ExitCode {
    let text = with_causes(e.to_string(), e);
    write_err(format_args!("error: {text}"));
    let report = ErrorReport::of(e);
    if json {
        report.print_json();
    }
    ExitCode::from(report.exit_code())
}

/// `text` (what `e` says) followed by each of `e`'s causes, but for one the
/// text already ends with: an error whose message quotes its source (`plan
/// file X: No such file ...`) would otherwise say it twice.
fn with_causes(mut text: String, e: &anyhow::Error) -> String {
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// `eprintln!` for a line that may quote text tether did not write (a
/// plugin's error, a store's message): escaped and bounded like [`fail`].
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let text = args
        .as_str()
        .map_or_else(|| std::fmt::format(args).into(), std::borrow::Cow::Borrowed);
    eprintln!("{}", display::message(&text));
}

/// A note on stderr that `-q` silences (the registry commands' one-line
/// "experimental" note).
pub fn write_note(args: std::fmt::Arguments<'_>) {
    if !QUIET.load(Ordering::Relaxed) {
        write_err(args);
    }
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

/// Print a plan for `--dry-run` / `--plan FILE` (saving it first), the
/// command's own notes under it, and the command that applies a saved one.
pub fn preview_plan(
    plan: &crate::plan::Plan,
    save: Option<&std::path::Path>,
    json: bool,
    notes: &[String],
) -> anyhow::Result<()> {
    if let Some(path) = save {
        plan.save(path)?;
    }
    if json {
        outln!("{}", plan.to_json_pretty());
        return Ok(());
    }
    out!("{}", plan.render());
    for note in notes {
        outln!("{note}");
    }
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
    /// The mode [`super::frame::run_planned`] runs in.
    pub fn mode(&self) -> super::frame::PlanMode<'_> {
        super::frame::PlanMode::new(
            self.dry_run,
            self.plan.as_deref(),
            self.from_plan.as_deref(),
        )
    }
}
