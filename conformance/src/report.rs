//! The outcome of a run: one [`CheckResult`] per check (or per skipped
//! capability), printable one line each, or as JSON.

use std::fmt;

use serde::Serialize;
use serde_json::{Value, json};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

impl Status {
    /// The fixed-width label of the human output.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One check: `fork.stale-expected-refused`, the capability it belongs to
/// (`FORK`), and for a failure or skip a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub name: String,
    pub capability: String,
    pub status: Status,
    pub reason: Option<String>,
}

impl CheckResult {
    pub(crate) fn pass(name: &str, capability: &str) -> Self {
        CheckResult {
            name: name.to_string(),
            capability: capability.to_string(),
            status: Status::Pass,
            reason: None,
        }
    }

    pub(crate) fn fail(name: &str, capability: &str, reason: impl Into<String>) -> Self {
        Self::with_reason(name, capability, Status::Fail, reason.into())
    }

    pub(crate) fn skip(name: &str, capability: &str, reason: impl Into<String>) -> Self {
        Self::with_reason(name, capability, Status::Skip, reason.into())
    }

    fn with_reason(name: &str, capability: &str, status: Status, reason: String) -> Self {
        CheckResult {
            name: name.to_string(),
            capability: capability.to_string(),
            status,
            reason: Some(one_line(&reason)),
        }
    }
}

impl fmt::Display for CheckResult {
    /// `PASS  fork.fresh-equals-pin`, `FAIL  name: reason`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {}", self.status.label(), self.name)?;
        if let Some(reason) = &self.reason {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

/// Plugin errors can carry a trap's backtrace or a plugin's stderr; the
/// output promises one line per check.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Everything a run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The plugin's kind.
    pub kind: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    /// The capabilities the descriptor declares.
    pub declared: Vec<String>,
    /// The capabilities the harness's objects have, which the suite checked.
    pub tested: Vec<String>,
    pub checks: Vec<CheckResult>,
}

impl Report {
    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    pub fn passed(&self) -> usize {
        self.count(Status::Pass)
    }

    pub fn failed(&self) -> usize {
        self.count(Status::Fail)
    }

    pub fn skipped(&self) -> usize {
        self.count(Status::Skip)
    }

    /// Whether nothing failed (skips are fine).
    pub fn success(&self) -> bool {
        self.failed() == 0
    }

    /// The results of the checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|c| c.status == Status::Fail)
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        )
    }

    /// The `--json` form.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind,
            "digest": self.digest,
            "declared": self.declared,
            "tested": self.tested,
            "checks": self.checks,
            "passed": self.passed(),
            "failed": self.failed(),
            "skipped": self.skipped(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_summary() {
        let report = Report {
            kind: "k".into(),
            digest: "sha256:0".into(),
            declared: vec![],
            tested: vec![],
            checks: vec![
                CheckResult::pass("fork.fresh-equals-pin", "FORK"),
                CheckResult::fail(
                    "conditional_ref.one-winner",
                    "CONDITIONAL_REF",
                    "8 of 8\nforks   succeeded",
                ),
                CheckResult::skip("merge", "MERGE", "not declared by the plugin"),
            ],
        };
        let lines: Vec<String> = report.checks.iter().map(ToString::to_string).collect();
        assert_eq!(lines[0], "PASS  fork.fresh-equals-pin");
        assert_eq!(
            lines[1],
            "FAIL  conditional_ref.one-winner: 8 of 8 forks succeeded"
        );
        assert_eq!(lines[2], "SKIP  merge: not declared by the plugin");
        assert_eq!(report.summary(), "1 passed, 1 failed, 1 skipped");
        assert!(!report.success());
        let json = report.to_json();
        assert_eq!(json["checks"][0]["status"], "pass");
        assert_eq!(json["checks"][0]["reason"], Value::Null);
        assert_eq!(json["checks"][1]["capability"], "CONDITIONAL_REF");
    }
}
