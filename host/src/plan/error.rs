//! Why a plan cannot be loaded or applied.

use std::fmt;
use std::path::PathBuf;

use super::PLAN_FORMAT;
use super::precondition::Failed;

/// Everything that stops a plan. The stale kinds (another tether version, an
/// edited file, a missing required precondition, a precondition that moved)
/// all mean the same to a user: nothing was applied, plan again. The CLI maps
/// [`PlanError::is_stale`] to the spec's `StalePlanError`.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A saved plan from another tether version, older or newer.
    #[error("this plan was made by tether {made_by}; this is tether {this}: re-run the plan")]
    OtherVersion { made_by: String, this: String },

    /// A saved plan that records no version: from before plans recorded one.
    #[error(
        "this plan was made by an older tether (it records no version); this is tether {this}: \
         re-run the plan"
    )]
    NoVersion { this: String },

    /// A saved plan whose content no longer matches its digest.
    #[error(
        "this plan was edited after it was saved (it records digest {saved}, its content digests \
         to {actual}): re-run the plan rather than edit it"
    )]
    Edited { saved: String, actual: String },

    /// A plan without a precondition its command requires (spec 07's table).
    #[error(
        "this {command} plan lacks the {} precondition(s) tether requires of it: re-run the plan",
        .missing.join(", ")
    )]
    MissingPreconditions {
        command: String,
        missing: Vec<String>,
    },

    /// Preconditions that no longer hold, every one of them named.
    #[error(transparent)]
    Stale(#[from] StalePlanError),

    /// A plan file of another format.
    #[error(
        "this plan has format {found}; this tether reads format {PLAN_FORMAT}: re-run the plan"
    )]
    Format { found: String },

    /// `KEY...` given with `--from-plan` that is not the plan's selection.
    #[error(
        "KEY... given with --from-plan must be the plan's selection ({planned}), not ({given}); \
         leave the keys out, or plan again with them"
    )]
    SelectionMismatch { planned: String, given: String },

    /// `--from-plan FILE` naming a plan another command made.
    #[error("{path} is a plan for `tether {made_for}`, not for {command}")]
    OtherCommand {
        path: PathBuf,
        made_for: String,
        command: String,
    },

    /// A plan file that could not be read or written.
    #[error("plan file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    /// Text that is not a plan (bad JSON, a field of the wrong type).
    #[error("{what} is not a tether plan: {why}")]
    Invalid { what: String, why: String },
}

impl PlanError {
    /// Whether this is one of the spec's `StalePlanError` refusals: the plan
    /// describes another world (or another tether), and nothing was applied.
    pub fn is_stale(&self) -> bool {
        matches!(
            self,
            PlanError::OtherVersion { .. }
                | PlanError::NoVersion { .. }
                | PlanError::Edited { .. }
                | PlanError::MissingPreconditions { .. }
                | PlanError::Stale(_)
        )
    }
}

/// The preconditions of a plan that no longer hold. Apply checks them all
/// before its first action, so when this is returned nothing was applied.
#[derive(Clone, Debug, PartialEq)]
pub struct StalePlanError {
    pub command: String,
    pub failed: Vec<Failed>,
}

impl fmt::Display for StalePlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} plan is stale, and nothing was applied: ",
            self.command
        )?;
        for (i, failed) in self.failed.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&failed.message)?;
        }
        f.write_str(". Plan again and look")
    }
}

impl std::error::Error for StalePlanError {}
