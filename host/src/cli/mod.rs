//! The command line: parse, call the engine, print. One file per command, on
//! one frame: `frame` finds the dataset once (`-C DIR`) and runs the planned
//! commands' plan → preview → apply → print; `output` holds what every
//! command shares (JSON vs text, errors, exit codes).

/// `print!`, through [`output::write_out`]: a closed stdout ends the output,
/// not the command.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!($($arg)*))
    };
}

/// `println!`, through [`output::write_out`].
macro_rules! outln {
    () => {
        $crate::cli::output::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod abandon;
mod add;
mod backends;
mod commit;
mod completion;
mod diff;
mod drop;
pub mod examples;
mod export;
mod forget_workspace;
mod frame;
mod gc;
mod import;
mod init;
mod log;
mod man;
mod new;
mod open;
mod ops;
mod output;
mod plugin;
mod progress;
mod promote;
mod publish;
mod pull;
mod recover;
mod remove;
mod repair;
mod restore;
mod set;
mod snapshot;
mod status;
mod undo;
mod verify;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use output::Exit;

/// Version control for datasets that span several storage systems.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, propagate_version = true)]
struct Cli {
    /// More log output: -v what tether does, -vv its decisions (debug), -vvv
    /// trace; -vvvv adds the libraries' own (wasmtime, sqlx, ...). RUST_LOG
    /// overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    verbose: u8,
    /// Run as if tether was started in DIR (as `git -C`); repeatable, each
    /// one relative to the last.
    #[arg(short = 'C', global = true, value_name = "DIR", action = clap::ArgAction::Append, help_heading = GLOBAL)]
    directory: Vec<PathBuf>,
    /// Print nothing on success but what was asked for: a command that
    /// changes things says nothing (its `--json` still prints), one that
    /// shows things still shows them; no progress and no lock-wait notice.
    /// Errors are always printed.
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    quiet: bool,
    /// Colour the human output: auto (on a terminal, unless NO_COLOR is set),
    /// always, or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t, help_heading = GLOBAL)]
    color: output::ColorChoice,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: a variant's size costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Make a dataset of an existing git or jj repository.
    Init(Deferred<init::Args>),
    /// List backend kinds with their maturity, tier, and capabilities.
    Backends(Deferred<backends::Args>),
    /// Register an object (writes its manifest; contacts nothing).
    Add(Deferred<add::Args>),
    /// Change objects' policies in place.
    Set(Deferred<set::Args>),
    /// Unregister an object (deletes its manifest only).
    Remove(Deferred<remove::Args>),
    /// Each object's state against its manifest.
    Status(Deferred<status::Args>),
    /// Fingerprint objects now and cache their states.
    Snapshot(Deferred<snapshot::Args>),
    /// Fetch the heads of this bookmark's branches and commit them onto it.
    ///
    /// The dataset's `git fetch` + rebase. On the trunk that is every
    /// object's upstream branch -- and, for systems without branches, the
    /// object itself: a table's current version, a directory's contents.
    /// What differs from the bookmark's commit is pinned and committed on the
    /// bookmark, which moves. Nothing moved: no commit. An immutable file that
    /// changed is refused. `undo` uncommits it (pins stay). `--key` pulls only
    /// those objects, and commits only their manifests, as `commit KEY...`
    /// does.
    Pull(Deferred<pull::Args>),
    /// Pin mutable objects and record their state in the manifests, then commit them.
    Commit(Deferred<commit::Args>),
    /// Start working on a bookmark: its store branches become your working refs.
    New(Deferred<new::Args>),
    /// Print a native handle for an object (address on stdout).
    Open(Deferred<open::Args>),
    /// Reset objects' working branches to what a commit pinned, or to a native ref.
    Restore(Deferred<restore::Args>),
    /// Land this bookmark on the trunk in every system, then move the trunk bookmark.
    Promote(Deferred<promote::Args>),
    /// Check that recorded states and pins still resolve.
    Verify(Deferred<verify::Args>),
    /// Show object-level manifest differences between two revisions.
    Diff(Deferred<diff::Args>),
    /// List an object's native history, newest first.
    Log(Deferred<log::Args>),
    /// Release pins and branches history no longer names (a dry run by default).
    Gc(Deferred<gc::Args>),
    /// Drop commits from a line you keep, then plan gc for what only they pinned.
    Abandon(Deferred<abandon::Args>),
    /// Throw a bookmark away: its commits, its branches, what only they pinned (dry run by default).
    Drop(Deferred<drop::Args>),
    /// Retire a checkout (git worktree remove) and its tether state; no store branch is touched.
    ForgetWorkspace(Deferred<forget_workspace::Args>),
    /// Show this checkout's operation log.
    Ops(Deferred<ops::Args>),
    /// Reverse an operation where the stores still allow it.
    ///
    /// commit/pull: uncommit (manifests become working-tree changes; pins
    /// stay). new/fork: delete the branches it *created* and restore
    /// workspace.toml and the VCS working copy; branches it reset are reported
    /// with their old head (`restore` / `new --discard` put them where you
    /// want). gc: restore the forgotten working refs and listings; deleted
    /// branches and pins are irreversible (see `repair`).
    /// import/add/remove/set: restore the manifests. promote: refused, with
    /// the previous base heads printed. drop, and the `new` and `gc` it runs:
    /// refused (the VCS's undo brings the commits back, `repair` the branches
    /// and pins). An older operation, named by id, gets back only the
    /// workspace fields it changed that no later operation changed again; the
    /// rest are listed as skipped.
    ///
    /// Exit code 3 when part of the work could not be reversed; the rest was.
    Undo(Deferred<undo::Args>),
    /// Recreate missing pins and working branches from the manifests.
    ///
    /// A manifest promises "this pin names this state". If the native ref is
    /// gone (an undone `gc`, a ref deleted by hand) but the state is still
    /// reachable in the store, `repair` recreates it; a working branch this
    /// workspace expects but the store lost is forked again from the
    /// manifest. Pins that exist but point elsewhere are reported, not
    /// overwritten. Exit code 3 if something could not be rebuilt. KEY...
    /// repairs only those objects: only their pins and working branches are
    /// checked, and only their stores contacted.
    Repair(Deferred<repair::Args>),
    /// List what the stores hold of a lost dataset, and the steps to take it back.
    Recover(Deferred<recover::Args>),
    /// [experimental] Write tether history as relational tables for registries.
    ///
    /// Tables: commits, commit_parents, refs, objects, object_states, plus
    /// listings / listing_entries (--listings) and workspace (--workspace);
    /// see the Registries guide for the schema. Query the SQLite file
    /// directly or `ATTACH` it in DuckDB; the parquet/csv/jsonl directories
    /// get one file per table and a schema.json.
    Export(Deferred<export::Args>),
    /// [experimental] Upsert the export tables into a Postgres schema.
    ///
    /// Idempotent and incremental: commits already present are skipped,
    /// `refs` and `tether_meta` are refreshed. Run it after each `tether
    /// commit` (or from CI) so a registry can join `objects.uri` /
    /// `objects.commit_id` against its own tables. The DSN never comes from
    /// tether.toml.
    Publish(Deferred<publish::Args>),
    /// [experimental] Register or sync objects from a registry query.
    ///
    /// Rows carry `key`, `kind`, and any of `uri`, `locator_json`,
    /// `policy_file`, `policy_pin`, `at`; write the mapping from your
    /// registry's columns in SQL. Import changes what is tracked (manifests
    /// only) -- run `tether commit` afterwards to record states. `--sync`
    /// removes objects the source no longer lists.
    Import(Deferred<import::Args>),
    /// Manage the plugins a dataset pins: add, trust, pin, list, verify, remove.
    // Defined whole in every run: its subcommands take their examples when
    // the definition is made, and `tether help plugin <sub>` is made from it.
    Plugin(plugin::Args),
    /// Print the shell completion script for SHELL (`tether completion bash > ...`).
    Completion(Deferred<completion::Args>),
    /// Write the manual pages (tether.1, tether-<command>.1) into a directory.
    #[command(hide = true)]
    Man(Deferred<man::Args>),
}

/// The command line's definition, every command's arguments defined (for
/// tests that walk every command, completions and manual pages).
pub fn command() -> clap::Command {
    examples::attach(<Cli as clap::CommandFactory>::command().long_version(LONG_VERSION.as_str()))
}

/// The command line's definition as a run parses it: each command's own
/// arguments are defined only when clap gets to that command. Defining all
/// of them on every start was a tenth of a cached `status` (`perf record`).
fn definition() -> clap::Command {
    DEFER.set(true);
    let cmd = command();
    DEFER.set(false);
    cmd
}

thread_local! {
    /// Whether [`Deferred`] arguments are being defined for a run.
    static DEFER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The heading the global options are listed under in every command's help.
const GLOBAL: &str = "Global Options";

/// A command's arguments (`T`), defined when clap gets to that command
/// (`Command::defer`) in the definition a run parses ([`definition`]), and
/// at once in the whole one ([`command`]): the two read the same.
#[derive(Debug)]
struct Deferred<T>(T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: clap::Args> clap::Args for Deferred<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        if DEFER.get() {
            cmd.defer(|cmd| keeping_about(cmd, T::augment_args))
        } else {
            T::augment_args(cmd)
        }
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        if DEFER.get() {
            cmd.defer(|cmd| keeping_about(cmd, T::augment_args_for_update))
        } else {
            T::augment_args_for_update(cmd)
        }
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

/// `cmd` with `augment`'s arguments, and the about it had before: a whole
/// definition sets a command's about (its variant's doc comment) after its
/// arguments, so the doc of a struct they flatten in (`new`'s plan options)
/// never replaces it; a deferred one must put it back.
fn keeping_about(
    cmd: clap::Command,
    augment: impl FnOnce(clap::Command) -> clap::Command,
) -> clap::Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let cmd = augment(cmd);
    let cmd = match about {
        Some(about) => cmd.about(about),
        None => cmd.about(None::<&str>),
    };
    match long_about {
        Some(long_about) => cmd.long_about(long_about),
        None => cmd.long_about(None::<&str>),
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

/// `tether --version`: what a bug report needs to name the build.
static LONG_VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{}\ncommit: {}\nbuilt: {}\nwasmtime: {}\nplugin ABI: {}",
        env!("CARGO_PKG_VERSION"),
        env!("TETHER_BUILD_COMMIT"),
        env!("TETHER_BUILD_DATE"),
        env!("TETHER_WASMTIME_VERSION"),
        tether_contract::ABI_VERSION,
    )
});

/// Parse the command line, run the command, and turn its outcome into the
/// spec's exit code (0 ok, 1 error, 2 usage, 3 partial).
pub fn main() -> ExitCode {
    let parsed = definition()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // The line could not be parsed, so whether it asked for --json
            // is read from the words themselves (before any `--`).
            let json = std::env::args_os()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| a == "--json");
            if json {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default();
                output::ErrorReport::usage(first.trim_start_matches("error: ").to_string())
                    .print_json();
            }
            let _ = e.print();
            return ExitCode::from(output::ErrorReport::usage(String::new()).exit_code());
        }
    };
    init_logging(cli.verbose, cli.color);
    output::configure(
        cli.color.enabled(std::io::stdout().is_terminal()),
        cli.quiet && !cli.command.shows(),
    );
    if !cli.quiet {
        progress::install(cli.verbose);
        // A wait on another tether's lock is said at once, not after the timeout.
        crate::lock::on_wait(|notice| eprintln!("{notice}"));
    }
    let json = cli.command.json();
    // `-C a -C b` is `-C a/b`, as git reads it.
    let chdir: Option<PathBuf> =
        (!cli.directory.is_empty()).then(|| cli.directory.iter().collect());
    let ctx = match frame::Ctx::new(chdir.as_deref(), json) {
        Ok(ctx) => ctx,
        Err(e) => return output::fail(&e, json),
    };
    if cli.command.calls_plugins() {
        // The wasm engine (a few milliseconds: its instance pool and the
        // host's interfaces) is built on another core while this one finds
        // the dataset and reads its files; the first plugin call takes it
        // from there, or waits for it. Started after `Ctx::new`, which may
        // change the process's directory before any thread starts.
        let _ = std::thread::Builder::new()
            .name("tether-engine".into())
            .spawn(|| {
                // A failure is the first plugin call's to report.
                let _ = crate::plugin::Runtime::global();
            });
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return output::fail(
                &anyhow::anyhow!("cannot start the async runtime: {e}"),
                json,
            );
        }
    };
    let ctx = &ctx;
    let result = runtime.block_on(async {
        match cli.command {
            Command::Init(Deferred(args)) => init::run(ctx, args),
            Command::Backends(Deferred(args)) => backends::run(ctx, args).await,
            Command::Add(Deferred(args)) => add::run(ctx, args).await,
            Command::Set(Deferred(args)) => set::run(ctx, args),
            Command::Remove(Deferred(args)) => remove::run(ctx, args),
            Command::Restore(Deferred(args)) => restore::run(ctx, args).await,
            Command::Status(Deferred(args)) => status::run(ctx, args).await,
            Command::Snapshot(Deferred(args)) => snapshot::run(ctx, args).await,
            Command::Commit(Deferred(args)) => commit::run(ctx, args).await,
            Command::New(Deferred(args)) => new::run(ctx, args).await,
            Command::Open(Deferred(args)) => open::run(ctx, args).await,
            Command::Verify(Deferred(args)) => verify::run(ctx, args).await,
            Command::Diff(Deferred(args)) => diff::run(ctx, args).await,
            Command::Log(Deferred(args)) => log::run(ctx, args).await,
            Command::Gc(Deferred(args)) => gc::run(ctx, args).await,
            Command::Abandon(Deferred(args)) => abandon::run(ctx, args).await,
            Command::Drop(Deferred(args)) => drop::run(ctx, args).await,
            Command::ForgetWorkspace(Deferred(args)) => forget_workspace::run(ctx, args).await,
            Command::Recover(Deferred(args)) => recover::run(ctx, args).await,
            Command::Ops(Deferred(args)) => ops::run(ctx, args).await,
            Command::Promote(Deferred(args)) => promote::run(ctx, args).await,
            Command::Export(Deferred(args)) => export::run(ctx, args).await,
            Command::Publish(Deferred(args)) => publish::run(ctx, args).await,
            Command::Import(Deferred(args)) => import::run(ctx, args).await,
            Command::Plugin(args) => plugin::run(ctx, args).await,
            Command::Undo(Deferred(args)) => undo::run(ctx, args).await,
            Command::Pull(Deferred(args)) => pull::run(ctx, args).await,
            Command::Repair(Deferred(args)) => repair::run(ctx, args).await,
            Command::Completion(Deferred(args)) => completion::run(args),
            Command::Man(Deferred(args)) => man::run(args),
        }
    });
    if let Some(stats) = crate::plugin::Runtime::global_stats() {
        tracing::debug!(
            target: "tether::runtime",
            instantiated = stats.instantiated,
            reused = stats.reused,
            "plugin instances"
        );
    }
    match result {
        Ok(exit) => output::unwritten().map_or(exit.into(), |e| output::fail(&e, json)),
        Err(e) => output::fail(&e, json),
    }
}

impl Command {
    /// Whether the command's output is what it is for (it shows things, as
    /// `status` or `open` do), so `-q` leaves it alone.
    fn shows(&self) -> bool {
        matches!(
            self,
            Command::Backends(_)
                | Command::Status(_)
                | Command::Open(_)
                | Command::Verify(_)
                | Command::Diff(_)
                | Command::Log(_)
                | Command::Ops(_)
                | Command::Recover(_)
                | Command::Completion(_)
        )
    }

    /// Whether the command calls a plugin whatever the dataset holds (a
    /// `status` without `--snapshot` may answer from its cache alone).
    fn calls_plugins(&self) -> bool {
        match self {
            Command::Status(a) => a.snapshot(),
            Command::Add(_)
            | Command::Backends(_)
            | Command::Snapshot(_)
            | Command::Commit(_)
            | Command::Pull(_)
            | Command::New(_)
            | Command::Open(_)
            | Command::Restore(_)
            | Command::Promote(_)
            | Command::Verify(_)
            | Command::Gc(_)
            | Command::Drop(_)
            | Command::Export(_)
            | Command::Publish(_)
            | Command::Import(_) => true,
            _ => false,
        }
    }

    /// Whether the command was asked for `--json`: its errors are then
    /// printed as JSON too.
    fn json(&self) -> bool {
        match self {
            Command::Add(a) => a.json,
            Command::Remove(a) => a.json,
            Command::Init(a) => a.json,
            Command::Backends(a) => a.json,
            Command::Set(a) => a.json,
            Command::Status(a) => a.json,
            Command::Snapshot(a) => a.json,
            Command::Pull(a) => a.json,
            Command::Commit(a) => a.json,
            Command::New(a) => a.json,
            Command::Open(a) => a.json,
            Command::Restore(a) => a.json,
            Command::Promote(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Diff(a) => a.json,
            Command::Log(a) => a.json,
            Command::Gc(a) => a.json,
            Command::Abandon(a) => a.json,
            Command::Drop(a) => a.json,
            Command::ForgetWorkspace(a) => a.json,
            Command::Ops(a) => a.json,
            Command::Undo(a) => a.json,
            Command::Repair(a) => a.json,
            Command::Recover(a) => a.json,
            Command::Export(a) => a.json,
            Command::Publish(a) => a.json,
            Command::Import(a) => a.json,
            Command::Plugin(a) => a.json(),
            Command::Completion(_) | Command::Man(_) => false,
        }
    }
}

fn init_logging(verbose: u8, color: output::ColorChoice) {
    use tracing_subscriber::EnvFilter;
    // -v to -vvv are tether's own decisions; the libraries under it
    // (wasmtime, Cranelift, sqlx, object_store, ...) stay at warnings until
    // -vvvv, where their internals would otherwise bury tether's lines.
    let default = match verbose {
        0 => "warn",
        1 => "warn,tether=info",
        2 => "warn,tether=debug",
        3 => "warn,tether=trace",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only for a person at a terminal: a log sent to a file or a
    // pipe stays plain text, and NO_COLOR turns them off everywhere.
    let colour = color.enabled(std::io::stderr().is_terminal());
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    // From -vv on, or with RUST_LOG, each line says when it happened since
    // the process started: where a slow command spends its time.
    if verbose >= 2 || std::env::var_os("RUST_LOG").is_some() {
        let _ = fmt
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .try_init();
    } else {
        let _ = fmt.without_time().try_init();
    }
}

#[cfg(test)]
mod tests {
    use super::{command, definition};

    /// Each command path of `cmd`, its subcommands' after it.
    fn paths(cmd: &clap::Command, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            let mut path = at.clone();
            path.push(sub.get_name().to_string());
            out.push(path.clone());
            paths(sub, path, out);
        }
    }

    /// What `tether <path> <flag>` (`--help` or `-h`) prints, from `cmd`.
    fn help(cmd: clap::Command, path: &[String], flag: &str) -> String {
        let words = std::iter::once("tether")
            .chain(path.iter().map(String::as_str))
            .chain([flag]);
        match cmd.try_get_matches_from(words) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
            other => panic!("{path:?} --help: {other:?}"),
        }
    }

    #[test]
    fn a_run_defines_only_the_command_it_runs_and_every_help_reads_the_same() {
        // A run's definition leaves each command's own arguments undefined
        // (the globals are the parent's, copied in when clap builds it)...
        let lazy = definition();
        let status = lazy.find_subcommand("status").expect("status");
        assert_eq!(status.get_arguments().count(), 0);
        let whole = command();
        let status = whole.find_subcommand("status").expect("status");
        assert!(
            status
                .get_arguments()
                .any(|a| a.get_long() == Some("snapshot"))
        );
        // ... and yet every command's help, and the top level's, is the
        // same from either, the global options listed last in each.
        let mut all = vec![Vec::new()];
        paths(&whole, Vec::new(), &mut all);
        assert!(all.len() > 30, "{all:?}");
        for path in &all {
            let short = help(command(), path, "-h");
            assert_eq!(short, help(definition(), path, "-h"), "tether {path:?} -h");
            let text = help(command(), path, "--help");
            assert_eq!(
                text,
                help(definition(), path, "--help"),
                "tether {path:?} --help"
            );
            if !path.is_empty() {
                let global = text.find("Global Options:").expect("a global heading");
                assert!(text[global..].contains("--verbose"), "{text}");
            }
        }
        // A run parses the same: a deferred command's arguments are there.
        let m = definition()
            .try_get_matches_from(["tether", "-q", "status", "--snapshot", "db"])
            .expect("parses");
        let (name, sub) = m.subcommand().expect("a command");
        assert_eq!(name, "status");
        assert!(sub.get_flag("snapshot"));
        assert!(m.get_flag("quiet"));
    }
}
