//! Timestamps as tether writes them: RFC 3339, UTC, milliseconds, `Z`
//! (`2026-09-04T22:10:03.118Z`). One fixed width keeps files diffable and
//! lets timestamps compare as strings.

use chrono::{DateTime, SecondsFormat, Utc};

/// `at` in tether's timestamp form.
pub fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The current time in tether's timestamp form.
pub fn now_timestamp() -> String {
    format_timestamp(Utc::now())
}

/// Parse a timestamp; any RFC 3339 offset is accepted (hand edits), the
/// result is UTC.
pub fn parse_timestamp(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            format!("{text:?} is not an RFC 3339 timestamp like \"2026-09-04T22:10:03.118Z\" ({e})")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn fixed_form() {
        let t = Utc.with_ymd_and_hms(2026, 9, 4, 22, 10, 3).unwrap()
            + chrono::Duration::milliseconds(118);
        assert_eq!(format_timestamp(t), "2026-09-04T22:10:03.118Z");
        let whole = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(format_timestamp(whole), "2026-01-02T03:04:05.000Z");
        assert_eq!(parse_timestamp("2026-09-04T22:10:03.118Z").unwrap(), t);
        assert_eq!(parse_timestamp("2026-09-05T00:10:03.118+02:00").unwrap(), t);
        assert!(parse_timestamp("yesterday").is_err());
        assert_eq!(now_timestamp().len(), 24);
    }
}
