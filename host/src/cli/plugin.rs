//! `tether plugin add | dev | trust | untrust | pin | update | call | list |
//! verify | remove`.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use super::frame::Ctx;
use super::output::{Exit, print_json};
use crate::engine::plugin_cmd;
use crate::model::display::escape_inline;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

/// `--json`, as every plugin subcommand takes it.
#[derive(Debug, Clone, Copy, clap::Args)]
struct Json {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Validate a plugin component, store it in .tether/plugins/ and pin its kind to it.
    Add {
        /// The component (`.wasm`, built for wasm32-wasip2).
        path: PathBuf,
        /// The kind it must serve (refused when its descriptor says otherwise).
        #[arg(long)]
        kind: Option<String>,
        /// Re-pin a kind already pinned to another component.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        out: Json,
    },
    /// Run the component at PATH for its kind in this checkout, reading it
    /// again on every command, so each rebuild is picked up (for plugin
    /// authors; recorded in .tether/secrets.toml, never committed).
    Dev {
        /// The component (`.wasm`) to run; its path is kept, not its bytes.
        #[arg(required_unless_present = "off", conflicts_with = "off")]
        path: Option<PathBuf>,
        /// The kind it must serve (refused when its descriptor says otherwise).
        #[arg(long, conflicts_with = "off")]
        kind: Option<String>,
        /// Stop running a dev build for KIND: its pin (or the built-in) serves it again.
        #[arg(long, value_name = "KIND")]
        off: Option<String>,
        #[command(flatten)]
        out: Json,
    },
    /// Let this checkout run the plugin with this digest (recorded in .tether/secrets.toml).
    Trust {
        /// `sha256:<64 hex>`, a unique prefix of a pinned or trusted digest, or a pinned kind.
        digest: String,
        #[command(flatten)]
        out: Json,
    },
    /// Stop trusting a plugin digest in this checkout.
    Untrust {
        /// `sha256:<64 hex>`, a unique prefix of a pinned or trusted digest, or a pinned kind.
        digest: String,
        #[command(flatten)]
        out: Json,
    },
    /// Pin kinds to the plugin that serves them now (default: every kind the dataset uses).
    Pin {
        /// The kinds to pin (default: every kind the dataset uses).
        kinds: Vec<String>,
        /// Also store pinned built-in components under .tether/plugins/.
        #[arg(long)]
        vendor: bool,
        #[command(flatten)]
        out: Json,
    },
    /// Move pins to this tether's built-in plugins (after an upgrade), as a
    /// tether.toml change to review and commit.
    Update {
        /// The kinds whose pins to move (default: every pinned kind this
        /// tether has a built-in of).
        kinds: Vec<String>,
        /// Say what would move; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        out: Json,
    },
    /// Run one contract method against one store and print its answer (for
    /// plugin authors and for debugging).
    Call {
        /// The kind whose plugin to run (in a dataset: the one it pins).
        kind: String,
        /// The method, as the contract names it (only those that change
        /// nothing in the store).
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(plugin_cmd::CALLABLE))]
        method: String,
        /// The arguments as a JSON object: `locator` (every method but
        /// describe) and the method's own (`ref`, `policy`, `state`, `pin`,
        /// `deep`, `limit`).
        #[arg(default_value = "{}", value_parser = parse_json)]
        args: serde_json::Value,
        /// Run it on this object of the dataset (its locator and secrets).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        #[command(flatten)]
        out: Json,
    },
    /// The dataset's plugin pins and where each resolves.
    List {
        #[command(flatten)]
        out: Json,
    },
    /// Check that every pinned plugin resolves, is trusted, and loads.
    Verify {
        #[command(flatten)]
        out: Json,
    },
    /// Drop a kind's pin (and its stored component when no other kind uses it).
    Remove {
        /// The kind whose pin to drop.
        kind: String,
        #[command(flatten)]
        out: Json,
    },
}

impl Args {
    /// Whether the subcommand was asked for `--json`.
    pub(super) fn json(&self) -> bool {
        let (Command::Add { out, .. }
        | Command::Dev { out, .. }
        | Command::Trust { out, .. }
        | Command::Untrust { out, .. }
        | Command::Pin { out, .. }
        | Command::Update { out, .. }
        | Command::Call { out, .. }
        | Command::List { out }
        | Command::Verify { out }
        | Command::Remove { out, .. }) = &self.command;
        out.json
    }
}

fn parse_json(s: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(s).map_err(|e| format!("not JSON: {e}"))
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<Exit> {
    // The one subcommand that also runs outside a dataset (on the built-ins).
    if let Command::Call {
        kind,
        method,
        args,
        key,
        ..
    } = &args.command
    {
        let repo = if ctx.in_dataset() {
            Some(ctx.repo()?)
        } else {
            None
        };
        let answer = plugin_cmd::call(repo.as_ref(), kind, method, key.as_deref(), args).await?;
        // The answer is JSON either way: it is what the plugin said.
        print_json(&answer)?;
        return Ok(Exit::Ok);
    }
    let repo = ctx.repo()?;
    match args.command {
        Command::Add {
            path,
            kind,
            replace,
            out,
        } => {
            let a = plugin_cmd::add(&repo, &path, kind.as_deref(), replace).await?;
            if out.json {
                print_json(&a)?;
                return Ok(Exit::Ok);
            }
            outln!("added plugin {} {} ({})", a.kind, a.digest, a.stored);
            if let Some(old) = &a.replaced {
                outln!("replaced {old}");
            }
            outln!("pinned in tether.toml and trusted in this checkout; commit both files");
        }
        Command::Dev {
            path,
            kind,
            off,
            out,
        } => {
            if let Some(kind) = off {
                let d = plugin_cmd::dev_off(&repo, &kind)?;
                if out.json {
                    print_json(&d)?;
                    return Ok(Exit::Ok);
                }
                outln!("kind {} no longer runs the dev plugin {}", d.kind, d.path);
                match &d.now {
                    Some(now) => outln!("it runs {now} again"),
                    None => outln!("no plugin serves kind {} now", d.kind),
                }
                return Ok(Exit::Ok);
            }
            let path = path.expect("clap requires PATH without --off");
            let d = plugin_cmd::dev(&repo, &path, kind.as_deref()).await?;
            if out.json {
                print_json(&d)?;
                return Ok(Exit::Ok);
            }
            outln!(
                "kind {} runs the dev plugin {} in this checkout (now {})",
                d.kind,
                d.path,
                d.digest
            );
            if let Some(old) = &d.replaced {
                outln!("instead of {old}");
            }
            outln!(
                "every command reads it again; `tether plugin dev --off {}` ends it, \
                 `tether plugin add {} --kind {}` pins a build to share",
                d.kind,
                d.path,
                d.kind
            );
        }
        Command::Trust { digest, out } => {
            let (digest, changed) = plugin_cmd::trust(&repo, &digest, true)?;
            if out.json {
                print_json(&json!({"digest": digest, "trusted": true, "changed": changed}))?;
                return Ok(Exit::Ok);
            }
            outln!(
                "{} {digest}",
                if changed {
                    "trusted"
                } else {
                    "already trusted"
                }
            );
        }
        Command::Untrust { digest, out } => {
            let (digest, changed) = plugin_cmd::trust(&repo, &digest, false)?;
            if out.json {
                print_json(&json!({"digest": digest, "trusted": false, "changed": changed}))?;
                return Ok(Exit::Ok);
            }
            outln!(
                "{} {digest}",
                if changed {
                    "untrusted"
                } else {
                    "was not trusted"
                }
            );
        }
        Command::Pin { kinds, vendor, out } => {
            let pinned = plugin_cmd::pin(&repo, &kinds, vendor).await?;
            if out.json {
                print_json(&pinned)?;
                return Ok(Exit::Ok);
            }
            for p in pinned {
                outln!(
                    "pinned {} {} ({}{})",
                    p.kind,
                    p.digest,
                    p.source,
                    if p.vendored { ", vendored" } else { "" }
                );
            }
        }
        Command::Update {
            kinds,
            dry_run,
            out,
        } => {
            let updated = plugin_cmd::update(&repo, &kinds, dry_run).await?;
            if out.json {
                print_json(&updated)?;
                return Ok(Exit::Ok);
            }
            let verb = if dry_run { "would update" } else { "updated" };
            for u in &updated {
                if u.changed {
                    outln!(
                        "{verb} {} {} -> {}{}",
                        u.kind,
                        u.from,
                        u.to,
                        if u.vendored { " (vendored)" } else { "" }
                    );
                    if let Some(f) = &u.deleted {
                        outln!("deleted {f}");
                    }
                } else {
                    outln!("{} is already at {}", u.kind, u.to);
                }
            }
            if !dry_run && updated.iter().any(|u| u.changed) {
                outln!("review the change to tether.toml (`git diff`) and commit it");
            }
        }
        Command::Call { .. } => unreachable!("handled above"),
        Command::List { out: Json { json } } => {
            let rows = plugin_cmd::list(&repo).await?;
            if json {
                print_json(&rows)?;
            } else if rows.is_empty() {
                outln!("no plugins pinned and no objects");
            } else {
                for r in &rows {
                    // Plugin-controlled: bounded and stripped at load,
                    // escaped again here.
                    let meta = r
                        .meta
                        .as_ref()
                        .map_or_else(|| "-".to_string(), |m| escape_inline(&m.summary()).into());
                    outln!(
                        "{}  {}  {}  {meta}{}",
                        r.kind,
                        r.digest.as_deref().unwrap_or("(not pinned)"),
                        r.source,
                        if r.trusted { "" } else { "  (not trusted)" }
                    );
                    if let Some(p) = &r.problem {
                        outln!("    {p}");
                    }
                }
            }
        }
        Command::Verify { out: Json { json } } => {
            let rows = plugin_cmd::verify(&repo).await?;
            let failed = rows.iter().filter(|r| !r.ok).count();
            if json {
                print_json(&rows)?;
            } else {
                for r in &rows {
                    match &r.problem {
                        None => outln!(
                            "ok      {} {} ({})",
                            r.kind,
                            r.digest,
                            r.source.as_deref().unwrap_or("-")
                        ),
                        Some(p) => outln!("FAILED  {} {}: {p}", r.kind, r.digest),
                    }
                }
                if rows.is_empty() {
                    outln!("no plugins pinned");
                }
            }
            if failed > 0 {
                eprintln!("error: {failed} pinned plugin(s) failed verification");
                return Ok(Exit::Failed);
            }
        }
        Command::Remove { kind, out } => {
            let r = plugin_cmd::remove(&repo, &kind)?;
            if out.json {
                print_json(&r)?;
                return Ok(Exit::Ok);
            }
            outln!("removed pin {} {}", r.kind, r.digest);
            if let Some(f) = &r.deleted {
                outln!("deleted {f}");
            }
        }
    }
    Ok(Exit::Ok)
}
