//! What a commit did, in one line (`WRITE: +2 rows, +1 files`), and the
//! table's retention properties.
//!
//! `commitInfo` is free-form (research/formats.md §2.4): delta-rs writes
//! snake_case metrics as JSON numbers, Spark camelCase metrics as strings, and
//! each operation names its counters differently. Both spellings and both
//! value types are read; counts a commit's metrics do not give come from its
//! `add`/`remove` actions and the files' `numRecords` statistics.

use serde_json::Value;

use crate::log::Commit;

/// A metric under any of `names`, a JSON number or a numeric string.
fn metric(info: &Value, names: &[&str]) -> Option<i64> {
    let metrics = info.get("operationMetrics")?;
    names.iter().find_map(|n| match metrics.get(*n)? {
        Value::Number(x) => x.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// The counts one commit reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub rows_added: Option<i64>,
    pub rows_deleted: Option<i64>,
    pub rows_updated: Option<i64>,
    pub files_added: Option<i64>,
    pub files_removed: Option<i64>,
}

impl Counts {
    pub fn of(commit: &Commit) -> Counts {
        let null = Value::Null;
        let info = commit.info.as_ref().unwrap_or(&null);
        let m = |names: &[&str]| metric(info, names);
        let has_metrics = info
            .get("operationMetrics")
            .and_then(Value::as_object)
            .is_some_and(|o| !o.is_empty());
        // Without metrics, the actions say how many files; rows come from
        // the added files' statistics when every one has them.
        let action_files = |n: usize| (!has_metrics && n > 0).then_some(n as i64);
        let stats_rows = || {
            if has_metrics || commit.adds.is_empty() {
                return None;
            }
            commit.adds.iter().map(|a| a.num_records()).sum()
        };
        Counts {
            rows_added: m(&[
                "num_added_rows",
                "numOutputRows",
                "num_target_rows_inserted",
                "numTargetRowsInserted",
                "numAddedRows",
            ])
            .or_else(stats_rows),
            rows_deleted: m(&[
                "num_deleted_rows",
                "numDeletedRows",
                "num_target_rows_deleted",
                "numTargetRowsDeleted",
            ]),
            rows_updated: m(&[
                "num_updated_rows",
                "numUpdatedRows",
                "num_target_rows_updated",
                "numTargetRowsUpdated",
            ]),
            files_added: m(&[
                "num_added_files",
                "numAddedFiles",
                "numFiles",
                "num_target_files_added",
                "numTargetFilesAdded",
            ])
            .or_else(|| action_files(commit.adds.len())),
            files_removed: m(&[
                "num_removed_files",
                "numRemovedFiles",
                "num_target_files_removed",
                "numTargetFilesRemoved",
            ])
            .or_else(|| action_files(commit.removes.len())),
        }
    }

    /// `+2 rows, -1 rows, ~3 rows, +1 files, -1 files`, zeros left out.
    pub fn render(&self) -> String {
        let parts = [
            ("+", self.rows_added, "rows"),
            ("-", self.rows_deleted, "rows"),
            ("~", self.rows_updated, "rows"),
            ("+", self.files_added, "files"),
            ("-", self.files_removed, "files"),
        ];
        parts
            .iter()
            .filter_map(|(sign, n, unit)| {
                n.filter(|n| *n != 0).map(|n| format!("{sign}{n} {unit}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The commit's operation (`WRITE`), `UNKNOWN` without commitInfo.
pub fn operation(commit: &Commit) -> String {
    commit
        .info
        .as_ref()
        .and_then(|i| i.get("operation"))
        .and_then(Value::as_str)
        .unwrap_or("UNKNOWN")
        .to_owned()
}

/// `WRITE: +2 rows, +1 files` (the diff's detail).
pub fn line(commit: &Commit) -> String {
    let counts = Counts::of(commit).render();
    let op = operation(commit);
    if counts.is_empty() {
        op
    } else {
        format!("{op}: {counts}")
    }
}

/// `WRITE (mode=Append): +2 rows, +1 files` (a history message): the line
/// with the operation's parameters.
pub fn message(commit: &Commit) -> String {
    let params = commit
        .info
        .as_ref()
        .and_then(|i| i.get("operationParameters"))
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let counts = Counts::of(commit).render();
    let mut out = operation(commit);
    if !params.is_empty() {
        out.push_str(&format!(" ({params})"));
    }
    if !counts.is_empty() {
        out.push_str(&format!(": {counts}"));
    }
    out
}

// ---------------------------------------------------------------------------
// Retention

/// `delta.logRetentionDuration`'s default (delta-rs and Spark).
pub const DEFAULT_LOG_RETENTION: &str = "interval 30 days";
/// `delta.deletedFileRetentionDuration`'s default.
pub const DEFAULT_DELETED_FILE_RETENTION: &str = "interval 1 weeks";

/// A Delta interval (`interval 30 days`, `interval 1 weeks`, `7 days`) in
/// milliseconds.
pub fn interval_ms(text: &str) -> Option<i64> {
    let mut words = text.split_whitespace();
    let mut first = words.next()?;
    if first.eq_ignore_ascii_case("interval") {
        first = words.next()?;
    }
    let n: i64 = first.parse().ok()?;
    let unit = words.next()?.to_ascii_lowercase();
    if words.next().is_some() {
        return None;
    }
    let ms = match unit.trim_end_matches('s') {
        "nanosecond" => return Some(n / 1_000_000),
        "microsecond" => return Some(n / 1000),
        "millisecond" => 1,
        "second" => 1000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        "week" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms)
}

/// A span for people: `29d 22h`, `3h 5m`, `12m`, `40s`.
pub fn human(ms: i64) -> String {
    let s = ms.abs() / 1000;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{}s", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn commit(info: Value) -> Commit {
        Commit {
            info: Some(info),
            ..Commit::default()
        }
    }

    #[test]
    fn delta_rs_metrics_are_snake_case_numbers() {
        let c = commit(
            json!({"operation": "WRITE", "operationParameters": {"mode": "Append"},
            "operationMetrics": {"num_added_files": 1, "num_removed_files": 0, "num_added_rows": 2}}),
        );
        assert_eq!(line(&c), "WRITE: +2 rows, +1 files");
        assert_eq!(message(&c), "WRITE (mode=Append): +2 rows, +1 files");
        let c = commit(json!({"operation": "DELETE", "operationMetrics":
            {"num_added_files": 1, "num_removed_files": 1, "num_deleted_rows": 1, "num_copied_rows": 2}}));
        assert_eq!(line(&c), "DELETE: -1 rows, +1 files, -1 files");
    }

    #[test]
    fn spark_metrics_are_camel_case_strings() {
        let c = commit(json!({"operation": "WRITE",
            "operationMetrics": {"numFiles": "2", "numOutputRows": "10", "numOutputBytes": "900"}}));
        assert_eq!(line(&c), "WRITE: +10 rows, +2 files");
        let c = commit(json!({"operation": "MERGE", "operationMetrics": {
            "numTargetRowsInserted": "3", "numTargetRowsUpdated": "2", "numTargetRowsDeleted": "1",
            "numTargetFilesAdded": "1", "numTargetFilesRemoved": "1"}}));
        assert_eq!(
            line(&c),
            "MERGE: +3 rows, -1 rows, ~2 rows, +1 files, -1 files"
        );
        assert_eq!(
            line(&commit(json!({"operation": "VACUUM END"}))),
            "VACUUM END"
        );
    }

    #[test]
    fn intervals() {
        assert_eq!(interval_ms("interval 30 days"), Some(30 * 86_400_000));
        assert_eq!(interval_ms("interval 1 weeks"), Some(7 * 86_400_000));
        assert_eq!(interval_ms("interval 0 seconds"), Some(0));
        assert_eq!(interval_ms("2 hours"), Some(7_200_000));
        assert_eq!(interval_ms("soon"), None);
        assert_eq!(human(30 * 86_400_000 - 7_200_000), "29d 22h");
        assert_eq!(human(185_000), "3m");
    }
}
