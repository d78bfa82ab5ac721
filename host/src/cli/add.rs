//! `tether add [KEY] [LOCATOR] --kind KIND [locator options] [--set k=v]...`.

use std::io::{IsTerminal as _, Write as _};

use anyhow::{Result, bail};

use super::frame::Ctx;
use super::output::{Exit, UsageError, print_json};
use crate::engine::add::{self, AddRequest};
use crate::model::display::escape_inline as escape;
use crate::model::{FileMode, PinMode};
use crate::plugin::HistoryEntry;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `[KEY] [LOCATOR]`: the key may be left out for path kinds (file,
    /// icechunk, lance, delta, git), which derive it from the path.
    #[arg(value_name = "KEY_OR_LOCATOR", num_args = 0..=2)]
    positionals: Vec<String>,
    /// The backend kind (`tether backends` lists them).
    #[arg(long)]
    kind: String,
    /// The object's upstream branch (default main).
    #[arg(long)]
    branch: Option<String>,
    /// The initial position the first commit pins instead of the branch head.
    #[arg(long)]
    at: Option<String>,
    /// Neon project.
    #[arg(long)]
    project_id: Option<String>,
    /// Neon/Dolt database.
    #[arg(long)]
    database: Option<String>,
    /// Neon role.
    #[arg(long)]
    role: Option<String>,
    /// git remote to push pins to.
    #[arg(long)]
    remote: Option<String>,
    /// Object-store region.
    #[arg(long)]
    region: Option<String>,
    /// Dolt server host.
    #[arg(long)]
    host: Option<String>,
    /// Dolt server port.
    #[arg(long, value_parser = parse_port)]
    port: Option<String>,
    /// DuckLake table scope.
    #[arg(long)]
    table: Option<String>,
    /// Any other locator field (repeatable).
    #[arg(long = "set", value_name = "K=V")]
    set: Vec<String>,
    /// immutable (default) or versioned.
    #[arg(long, value_parser = ["immutable", "versioned"])]
    file: Option<String>,
    /// native (default) or record.
    #[arg(long, value_parser = ["native", "record"])]
    pin: Option<String>,
    /// Experimental: make an empty store there first, marked as this dataset's
    /// (refused if anything exists there).
    #[arg(long, conflicts_with = "at")]
    create: bool,
    /// List the system's history and choose the base state interactively
    /// (needs a terminal; the choice becomes `--at`).
    #[arg(long, conflicts_with_all = ["at", "create"])]
    pick: bool,
    /// Machine-readable output: the add report.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let cwd = ctx.dir().to_path_buf();
    let mut fields = Vec::new();
    for (name, value) in [
        ("branch", &args.branch),
        ("project_id", &args.project_id),
        ("database", &args.database),
        ("role", &args.role),
        ("remote", &args.remote),
        ("region", &args.region),
        ("host", &args.host),
        ("port", &args.port),
        ("table", &args.table),
    ] {
        if let Some(v) = value {
            fields.push((name.to_string(), v.clone()));
        }
    }
    for kv in &args.set {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--set takes KEY=VALUE, got {kv:?}");
        };
        fields.push((k.to_string(), v.to_string()));
    }
    if args.positionals.is_empty() {
        // Every kind needs one of them: a path kind derives the key from it.
        return Err(UsageError::new(
            "give the object's KEY and LOCATOR (or the path, for path kinds)",
        )
        .hint("`tether add KEY LOCATOR --kind KIND`")
        .into());
    }
    if args.pick && !std::io::stdin().is_terminal() {
        return Err(UsageError::new(
            "--pick asks which state to start at, and stdin is not a terminal",
        )
        .hint(
            "`tether log LOCATOR --kind KIND` lists the states; pass the one you want as `--at ID`",
        )
        .into());
    }
    let mut req = AddRequest {
        positionals: args.positionals,
        kind: args.kind,
        fields,
        at: args.at,
        file: args
            .file
            .as_deref()
            .map(str::parse::<FileMode>)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        pin: args
            .pin
            .as_deref()
            .map(str::parse::<PinMode>)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        cwd,
        create: args.create,
    };
    if args.pick {
        let (key, entries) = add::history(&repo, &req, PICK_LIMIT).await?;
        req.at = Some(pick(&key, &entries)?);
    }
    let report = add::add(&repo, req).await?;
    if args.json {
        print_json(&report)?;
        return Ok(Exit::Ok);
    }
    outln!("added {} [{}]", report.key, report.kind);
    if report.created.is_some() {
        outln!(
            "note: created the store (experimental): it is marked as this dataset's, and `tether gc --delete-stores` may delete it once nothing references it"
        );
    }
    if let Some(r) = &report.working_ref {
        outln!("working ref {r} (created)");
    }
    if let Some(note) = report.note {
        outln!("note: {note}");
    }
    Ok(Exit::Ok)
}

/// How many of the newest states `--pick` offers.
const PICK_LIMIT: u32 = 20;

/// `--pick`: show `entries` numbered on the terminal (stderr) and read the
/// number of one from stdin; asks again on anything else, and gives up at
/// the end of input.
fn pick(key: &str, entries: &[HistoryEntry]) -> Result<String> {
    if entries.is_empty() {
        bail!("{key}: the system has no history to pick from; add it without --pick");
    }
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "{} states of {}, newest first:",
        entries.len(),
        escape(key)
    )?;
    for (i, e) in entries.iter().enumerate() {
        let mut line = format!(
            "{:>3}  {}  {}  {}",
            i + 1,
            e.id,
            e.when.as_deref().unwrap_or("-"),
            e.message.lines().next().unwrap_or("")
        );
        if !e.refs.is_empty() {
            line.push_str(&format!("  ({})", e.refs.join(", ")));
        }
        writeln!(err, "{}", escape(&line))?;
    }
    let stdin = std::io::stdin();
    loop {
        write!(
            err,
            "start {} at which state? [1-{}]: ",
            escape(key),
            entries.len()
        )?;
        err.flush()?;
        let mut answer = String::new();
        if stdin.read_line(&mut answer)? == 0 {
            writeln!(err)?;
            return Err(UsageError::new("--pick: no state chosen (end of input)")
                .hint("pass the state as `--at ID` instead")
                .into());
        }
        match answer.trim().parse::<usize>() {
            Ok(n) if (1..=entries.len()).contains(&n) => return Ok(entries[n - 1].id.clone()),
            _ => writeln!(
                err,
                "{:?} is not one of them: type a number from 1 to {}",
                answer.trim(),
                entries.len()
            )?,
        }
    }
}

/// `--port`: a TCP port, 1 to 65535, kept as the locator's text.
fn parse_port(s: &str) -> std::result::Result<String, String> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p.to_string()),
        _ => Err(format!(
            "{s:?} is not a port: give a number from 1 to 65535"
        )),
    }
}
