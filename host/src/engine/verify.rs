//! `tether verify [KEY...] [-r REV] [--all-history] [--deep]`: do the pins
//! and recorded states the manifests name still resolve to what they record?
//!
//! - Which manifests: the working tree's (labels `key`), one commit's with
//!   `-r REV`, or every commit of visible history with `--all-history`
//!   (labels `<rev12>:<key>`); a conflicted jj commit's are every side's and
//!   base's. History is read in one streaming walk
//!   ([`Vcs::history`](crate::vcs::Vcs::history)); a commit whose manifests
//!   are byte-identical to one already read is not parsed again, nor is a
//!   manifest another commit holds unchanged.
//! - Which objects: per "Selecting objects" in the spec, from the manifests
//!   read (with `--all-history`, from every key history has had).
//! - Each distinct `(kind, locator, state, pin)` is verified once, however
//!   many commits hold it, and its report is given under every label. The
//!   calls fan out concurrently, in bounded batches. A label several checks
//!   answer (each side and base of a conflicted jj commit) reports the worst
//!   of them: `missing`, then `drifted`, then `unknown`, then `ok`.
//! - What is not verified: an object never committed (no state yet) has
//!   nothing to check, and an Observed object recorded unrecoverably has only
//!   a digest, which no store can resolve (spec 05: "cannot be opened at a
//!   revision"). Both are left out of the report rather than counted
//!   `unknown`, as the spec's own examples do (`raw/plate1` is not listed);
//!   `status --snapshot` is what catches an Observed object's drift.
//! - A recorded (pin-less, recoverable) state is `unknown` unless `--deep`:
//!   the backend decides, since only it knows how to open a state.
//!
//! The report is `ok`, `drifted`, `missing` or `unknown` per label; the CLI
//! exits 1 when any is not `ok`.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::checks::LabelReport;
use super::checks::{check, subjects};
use super::error::Result;
use super::repo::Repo;
use crate::plugin::VerifyStatus;

#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    pub keys: Vec<String>,
    pub rev: Option<String>,
    pub all_history: bool,
    pub deep: bool,
}

/// Label → report, in label order.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(transparent)]
pub struct VerifyResult {
    pub reports: BTreeMap<String, LabelReport>,
}

impl VerifyResult {
    /// Whether every report is `ok` (`unknown` is not).
    pub fn all_ok(&self) -> bool {
        self.reports.values().all(|r| r.status == VerifyStatus::Ok)
    }
}

pub async fn verify(repo: &Repo, opts: &VerifyOptions) -> Result<VerifyResult> {
    let select = || subjects(repo, &opts.keys, opts.rev.as_deref(), opts.all_history);
    let subjects = if opts.all_history {
        repo.warming_plugins(select)?
    } else {
        select()?
    };
    let checked = check(repo, subjects, opts.deep).await?;
    // Every label with its report, sorted by label (the worst last among a
    // label's reports), then built into the map in one pass: inserting each
    // of `--all-history`'s labels into the map searched it once per label.
    let mut labelled: Vec<(String, LabelReport)> =
        Vec::with_capacity(checked.iter().map(|(s, _)| s.labels.len()).sum());
    for (subject, report) in checked {
        labelled.extend(subject.labels.into_iter().map(|l| (l, report.clone())));
    }
    labelled.sort_unstable_by(|(a, x), (b, y)| {
        (a, severity(x.status), &x.message).cmp(&(b, severity(y.status), &y.message))
    });
    // A conflicted jj commit gives one label several manifests (each side
    // and base): the label answers with the worst of them, so one side's
    // lost pin is never hidden by another side's good one.
    labelled.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    Ok(VerifyResult {
        reports: labelled.into_iter().collect(),
    })
}

/// How bad a status is, for a label several checks answer.
fn severity(status: VerifyStatus) -> u8 {
    match status {
        VerifyStatus::Ok => 0,
        VerifyStatus::Unknown => 1,
        VerifyStatus::Drifted => 2,
        VerifyStatus::Missing => 3,
    }
}
