//! `tether log KEY [--ref REF] [-n N]`, or `tether log LOCATOR --kind KIND
//! [--branch B] [--set k=v]...` for an unregistered object.

use anyhow::{Result, bail};

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::log::{self, LogOptions, LogTarget};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A registered object's key, or with --kind an unregistered object's locator.
    target: String,
    /// Browse an unregistered object of this backend kind.
    #[arg(long)]
    kind: Option<String>,
    /// Start from this branch/tag/id (default: working ref or base).
    #[arg(long = "ref", value_name = "REF")]
    from_ref: Option<String>,
    /// Max entries.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: u32,
    /// With --kind: base branch.
    #[arg(long, requires = "kind")]
    branch: Option<String>,
    /// With --kind: extra locator field key=value (repeatable).
    #[arg(long = "set", value_name = "K=V", requires = "kind")]
    set: Vec<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let cwd = ctx.dir().to_path_buf();
    let target = match args.kind {
        None => LogTarget::Key(args.target),
        Some(kind) => {
            let mut fields = Vec::new();
            if let Some(b) = args.branch {
                fields.push(("branch".to_string(), b));
            }
            for kv in &args.set {
                let Some((k, v)) = kv.split_once('=') else {
                    bail!("--set takes KEY=VALUE, got {kv:?}");
                };
                fields.push((k.to_string(), v.to_string()));
            }
            LogTarget::Locator {
                kind,
                locator: args.target,
                fields,
            }
        }
    };
    let opts = LogOptions {
        target,
        from_ref: args.from_ref,
        limit: args.limit,
        cwd,
    };
    let entries = log::log(&repo, &opts).await?;
    if args.json {
        print_json(&entries)?;
        return Ok(Exit::Ok);
    }
    for e in &entries {
        let mut line = format!(
            "{}  {}  {}",
            e.id,
            e.when.as_deref().unwrap_or("-"),
            e.message.lines().next().unwrap_or("")
        );
        if !e.refs.is_empty() {
            line.push_str(&format!("  ({})", e.refs.join(", ")));
        }
        outln!("{line}");
    }
    Ok(Exit::Ok)
}
