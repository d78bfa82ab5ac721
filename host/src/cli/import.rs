//! `tether import SOURCE [--table T | --query SQL] [--sync]
//! [--dry-run | --plan FILE | --from-plan FILE]` (experimental).

use anyhow::Result;

use super::frame::{Ctx, Planned, run_planned};
use super::output::{Exit, PlanArgs, print_json, write_note};
use crate::engine::Repo;
use crate::engine::export;
use crate::engine::import::{self, ImportReport, ImportRequest};
use crate::plan::Plan;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A PostgreSQL DSN, a SQLite file, a .csv, a .jsonl, or an export's directory.
    source: String,
    /// SQL sources: read every row of this table.
    #[arg(long, value_name = "TEXT")]
    table: Option<String>,
    /// SQL sources: run this query (must yield key, kind, and locator
    /// columns). Defaults to [import] query in .tether/secrets.toml.
    #[arg(long, value_name = "TEXT")]
    query: Option<String>,
    /// Also remove registered objects the source does not list.
    #[arg(long)]
    sync: bool,
    #[command(flatten)]
    plans: PlanArgs,
    /// Machine-readable output.
    #[arg(long)]
    pub(super) json: bool,
    #[arg(skip)]
    cwd: std::path::PathBuf,
}

pub async fn run(ctx: &Ctx, mut args: Args) -> Result<Exit> {
    write_note(format_args!("{}", export::experimental_note("import")));
    args.cwd = ctx.dir().to_path_buf();
    run_planned(ctx, &args, args.plans.mode()).await
}

impl Planned for Args {
    const COMMAND: &'static str = "import";
    type Report = ImportReport;

    async fn plan(&self, repo: &Repo) -> Result<Plan> {
        let req = ImportRequest {
            source: self.source.clone(),
            table: self.table.clone(),
            query: self.query.clone(),
            sync: self.sync,
            cwd: self.cwd.clone(),
        };
        Ok(import::plan(repo, &req).await?)
    }

    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<ImportReport> {
        Ok(import::apply(repo, plan)?)
    }

    fn print(&self, report: &ImportReport, json: bool) -> Result<Exit> {
        if json {
            print_json(report)?;
            return Ok(Exit::Ok);
        }
        for k in &report.added {
            outln!("added {k}");
        }
        for k in &report.updated {
            outln!("updated {k}");
        }
        for k in &report.removed {
            outln!("removed {k}");
        }
        outln!(
            "imported: {} added, {} updated, {} removed, {} unchanged",
            report.added.len(),
            report.updated.len(),
            report.removed.len(),
            report.unchanged.len()
        );
        if !(report.added.is_empty() && report.updated.is_empty() && report.removed.is_empty()) {
            outln!("next: `tether status`, then `tether commit` to record their states");
        }
        Ok(Exit::Ok)
    }
}
