//! The frame every command runs on, so each command file holds only its own
//! arguments, the engine calls it makes, and how it prints.
//!
//! - [`Ctx`]: where the command runs (`-C DIR`), whether it prints JSON, and
//!   the one place a command finds its dataset ([`Ctx::repo`]).
//! - [`Planned`] and [`run_planned`]: the skeleton of the commands that plan
//!   before they write (spec/09, "Plans"): a saved plan loaded and checked
//!   (`--from-plan`), or a fresh one made and previewed (`--dry-run`,
//!   `--plan FILE`, and the default dry run of `gc` and `drop`), then applied,
//!   printed as text or JSON, and turned into the exit code. Apply takes the
//!   locks and writes the journal in the engine (`<command>::apply`), which a
//!   library caller uses as it is.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::output::{Exit, preview_plan};
use crate::engine::Repo;
use crate::model::Layout;
use crate::plan::Plan;

/// What every command shares: the directory it runs in, and `--json`.
#[derive(Debug)]
pub struct Ctx {
    dir: PathBuf,
    json: bool,
}

impl Ctx {
    /// The context of a command started in the current directory, or, as
    /// git's `-C DIR` does, as if started in `chdir`: relative paths in the
    /// arguments (`--plan FILE`, `init PATH`, an `add` locator) are read from
    /// there too. Called before any other thread starts, since it changes the
    /// process's directory.
    pub fn new(chdir: Option<&Path>, json: bool) -> Result<Ctx> {
        if let Some(dir) = chdir {
            std::env::set_current_dir(dir)
                .with_context(|| format!("cannot change to {}", dir.display()))?;
        }
        let dir = std::env::current_dir().context("cannot read the current directory")?;
        Ok(Ctx { dir, json })
    }

    /// The directory the command runs in (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the command was asked for `--json`.
    pub fn json(&self) -> bool {
        self.json
    }

    /// The dataset the command runs in (the nearest `tether.toml` at or above
    /// [`Ctx::dir`]), opened.
    pub fn repo(&self) -> crate::engine::Result<Repo> {
        Repo::find(&self.dir)
    }

    /// Whether the command runs inside a dataset at all.
    pub fn in_dataset(&self) -> bool {
        Layout::find(&self.dir).is_ok()
    }
}

/// How a planned command was asked to run: `--dry-run`, `--plan FILE`,
/// `--from-plan FILE`, and whether a dry run is its default.
#[derive(Debug, Clone, Copy)]
pub struct PlanMode<'a> {
    /// Only show (or save) the plan.
    pub previewing: bool,
    /// `--plan FILE`: where the previewed plan is saved.
    pub save: Option<&'a Path>,
    /// `--from-plan FILE`: the saved plan to apply instead of planning.
    pub from: Option<&'a Path>,
    /// A dry run unless told otherwise (`gc`, `drop`): its preview says how
    /// to apply it.
    pub dry_run_by_default: bool,
}

impl<'a> PlanMode<'a> {
    /// The flags of a command that applies unless told `--dry-run`.
    pub fn new(dry_run: bool, save: Option<&'a Path>, from: Option<&'a Path>) -> Self {
        PlanMode {
            previewing: dry_run || save.is_some(),
            save,
            from,
            dry_run_by_default: false,
        }
    }

    /// The flags of a command that is a dry run unless given `--no-dry-run`
    /// or `--from-plan` (spec/09: `gc` and `drop`).
    pub fn dry_run_by_default(
        no_dry_run: bool,
        save: Option<&'a Path>,
        from: Option<&'a Path>,
    ) -> Self {
        PlanMode {
            previewing: !no_dry_run || save.is_some(),
            save,
            from,
            dry_run_by_default: true,
        }
    }
}

/// A command that plans before it writes: its own planning, applying and
/// printing; [`run_planned`] does the rest.
pub(crate) trait Planned {
    /// The command's name, as its plans record it (`forget-workspace`).
    const COMMAND: &'static str;
    /// What applying reports.
    type Report;

    /// The `KEY...` given, which a saved plan's selection must match (none:
    /// the plan's own).
    fn keys(&self) -> &[String] {
        &[]
    }

    /// Refuse arguments that cannot make a plan, before anything is planned.
    fn check(&self, _previewing: bool) -> Result<()> {
        Ok(())
    }

    /// Plan afresh.
    async fn plan(&self, repo: &Repo) -> Result<Plan>;

    /// Lines printed under a previewed plan's text (not with `--json`).
    fn preview_notes(&self, _plan: &Plan) -> Vec<String> {
        Vec::new()
    }

    /// What a default dry run says about applying the plan it showed.
    fn not_applied(&self, _plan: &Plan) -> Option<String> {
        None
    }

    /// Apply a plan (fresh or saved).
    async fn apply(&self, repo: &Repo, plan: &Plan) -> Result<Self::Report>;

    /// Print what applying did, and say how the command ended.
    fn print(&self, report: &Self::Report, json: bool) -> Result<Exit>;
}

/// Run a planned command: load and check a saved plan or make one, preview
/// it or apply it, print the result, and return the exit code.
pub(crate) async fn run_planned<C: Planned>(
    ctx: &Ctx,
    cmd: &C,
    mode: PlanMode<'_>,
) -> Result<Exit> {
    let repo = ctx.repo()?;
    let plan = match mode.from {
        Some(path) => Plan::load_for(path, C::COMMAND, cmd.keys())?,
        None => {
            cmd.check(mode.previewing)?;
            let plan = cmd.plan(&repo).await?;
            if mode.previewing {
                preview_plan(&plan, mode.save, ctx.json(), &cmd.preview_notes(&plan))?;
                if mode.dry_run_by_default
                    && !ctx.json()
                    && mode.save.is_none()
                    && let Some(how) = cmd.not_applied(&plan)
                {
                    outln!("{how}");
                }
                // A preview exits 0 whatever the plan says.
                return Ok(Exit::Ok);
            }
            plan
        }
    };
    let report = cmd.apply(&repo, &plan).await?;
    cmd.print(&report, ctx.json())
}
