//! `tether open KEY [-r REV] [--read-only | --writable] [--with-password]`.

use anyhow::Result;
use serde_json::Value;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::open::{self, Access, OpenOptions};
use crate::model::display::escape_inline;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object to open.
    key: String,
    /// Open read-only at this revision's pinned state (default: $TETHER_REV).
    #[arg(short, long, env = "TETHER_REV", value_name = "REV")]
    rev: Option<String>,
    /// Force read-only.
    #[arg(long, conflicts_with = "writable")]
    read_only: bool,
    /// Force writable.
    #[arg(long)]
    writable: bool,
    /// Print a connection URL with its password; never honoured under --json.
    #[arg(long)]
    with_password: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    let repo = ctx.repo()?;
    let access = if args.read_only {
        Access::ReadOnly
    } else if args.writable {
        Access::Writable
    } else {
        Access::Default
    };
    let opts = OpenOptions {
        key: args.key,
        rev: args.rev,
        access,
        with_password: args.with_password && !args.json,
    };
    let opened = open::open(&repo, &opts).await?;
    for w in &opened.warnings {
        super::output::write_err(format_args!("warning: {w}"));
    }
    if args.json {
        print_json(&opened)?;
    } else {
        outln!("{}", opened.address);
        // The typed fields are for the person at the terminal (the
        // statement a DuckDB user runs, a URL's parts): stdout stays the
        // address alone, so `$(tether open KEY)` keeps working.
        for (name, value) in field_lines(&opened.fields) {
            super::output::write_err(format_args!("  {name}: {value}"));
        }
    }
    Ok(Exit::Ok)
}

/// A handle's top-level fields with a value, as `(name, value)` escaped for
/// one line each (a plugin wrote them); strings bare, the rest as JSON.
fn field_lines(fields: &Value) -> Vec<(String, String)> {
    let Some(map) = fields.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, value)| {
            let text = match value {
                Value::Null => return None,
                Value::String(s) if s.is_empty() => return None,
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some((
                escape_inline(name).into_owned(),
                escape_inline(&text).into_owned(),
            ))
        })
        .collect()
}
