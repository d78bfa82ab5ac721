//! What a DuckLake snapshot says it did: the `changes_made` text of
//! `ducklake_snapshot_changes` (DuckLake 1.0: comma-separated `kind:value`
//! entries, a value being a catalog id or double-quoted names joined by
//! `.`, `created_table:"main"."t",inserted_into_table:1`), table names as
//! the spec prints them, and the catalog's timestamps.

use chrono::{DateTime, NaiveDateTime};
use tether_sdk::{Error, Result};

/// One entry of a snapshot's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    CreatedSchema(String),
    /// `(schema, table)`.
    CreatedTable(String, String),
    /// A table id.
    DroppedTable(i64),
    /// Rows written (to data files or inlined).
    Inserted(i64),
    /// Rows deleted (delete files or inlined).
    Deleted(i64),
    /// Columns, name or properties changed.
    Altered(i64),
    /// Files rewritten without changing rows (compaction, inlined flush).
    Compacted(i64),
    /// Anything else (views, macros, schema drops): `kind:value` as read.
    Other(String, String),
}

impl Change {
    /// The table id this entry is about, when it names one by id.
    pub fn table_id(&self) -> Option<i64> {
        match self {
            Change::DroppedTable(id)
            | Change::Inserted(id)
            | Change::Deleted(id)
            | Change::Altered(id)
            | Change::Compacted(id) => Some(*id),
            _ => None,
        }
    }
}

/// Split `text` at the commas outside double quotes.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out
}

/// `"a"."b""c"` -> `["a", "b\"c"]`; an unquoted part is taken as is.
fn names(value: &str) -> Vec<String> {
    split_top(value, '.')
        .into_iter()
        .map(|part| {
            let part = part.trim();
            match part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
                Some(inner) => inner.replace("\"\"", "\""),
                None => part.to_owned(),
            }
        })
        .collect()
}

/// Parse one snapshot's `changes_made`.
pub fn parse(text: &str) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    for entry in split_top(text, ',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let (kind, value) = entry.split_once(':').ok_or_else(|| {
            Error::backend(format!(
                "a snapshot's changes entry {entry:?} is not `kind:value`"
            ))
        })?;
        let id = || {
            value.trim().parse::<i64>().map_err(|_| {
                Error::backend(format!(
                    "a snapshot's changes entry {entry:?} does not name a table id"
                ))
            })
        };
        out.push(match kind {
            "created_schema" => Change::CreatedSchema(names(value).concat()),
            "created_table" => {
                let mut parts = names(value);
                let table = parts.pop().unwrap_or_default();
                let schema = parts.pop().unwrap_or_else(|| "main".to_owned());
                Change::CreatedTable(schema, table)
            }
            "dropped_table" => Change::DroppedTable(id()?),
            "inserted_into_table" | "inlined_insert" => Change::Inserted(id()?),
            "deleted_from_table" | "inlined_delete" => Change::Deleted(id()?),
            "altered_table" => Change::Altered(id()?),
            "compacted_table" | "flushed_inlined" | "merge_adjacent" => Change::Compacted(id()?),
            other => Change::Other(other.to_owned(), value.to_owned()),
        });
    }
    Ok(out)
}

/// One line for `history`: what a snapshot did, tables by name.
pub fn describe(changes: &[Change], name_of: impl Fn(i64) -> String) -> String {
    let parts: Vec<String> = changes
        .iter()
        .map(|c| match c {
            Change::CreatedSchema(s) => format!("created schema {}", ident(s)),
            Change::CreatedTable(s, t) => format!("created table {}", table_path(s, t)),
            Change::DroppedTable(id) => format!("dropped table {}", name_of(*id)),
            Change::Inserted(id) => format!("inserted into {}", name_of(*id)),
            Change::Deleted(id) => format!("deleted from {}", name_of(*id)),
            Change::Altered(id) => format!("altered {}", name_of(*id)),
            Change::Compacted(id) => format!("compacted {}", name_of(*id)),
            Change::Other(kind, value) => format!("{} {value}", kind.replace('_', " ")),
        })
        .collect();
    parts.join("; ")
}

/// A name part as the spec prints it: double-quoted unless a plain identifier.
pub fn ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// `schema.table`, each part quoted when it must be.
pub fn table_path(schema: &str, table: &str) -> String {
    format!("{}.{}", ident(schema), ident(table))
}

/// A catalog timestamp (`2026-01-02 03:04:05.123456+00`, the offset
/// optional and UTC when absent; `T` accepted for the space) in
/// microseconds since the epoch.
pub fn timestamp_us(text: &str) -> Result<i64> {
    let bad = || Error::backend(format!("snapshot_time {text:?} is not a timestamp"));
    let text = text.trim();
    // The offset starts at the last sign after the date.
    let (local, offset) = match text
        .char_indices()
        .skip(10)
        .filter(|(_, c)| *c == '+' || *c == '-')
        .last()
    {
        Some((i, _)) => (&text[..i], Some(&text[i..])),
        None => (text.strip_suffix('Z').unwrap_or(text), None),
    };
    let local = local.replacen('T', " ", 1);
    let naive = NaiveDateTime::parse_from_str(&local, "%Y-%m-%d %H:%M:%S%.f").map_err(|_| bad())?;
    let offset_secs = match offset {
        None => 0,
        Some(o) => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let digits: Vec<&str> = o[1..].split(':').collect();
            let num = |s: Option<&&str>| -> Result<i64> {
                s.map_or(Ok(0), |s| s.parse::<i64>().map_err(|_| bad()))
            };
            let (h, m, s) = if digits.len() == 1 && digits[0].len() == 4 {
                (
                    num(Some(&&digits[0][..2]))?,
                    num(Some(&&digits[0][2..]))?,
                    0,
                )
            } else {
                (
                    num(digits.first())?,
                    num(digits.get(1))?,
                    num(digits.get(2))?,
                )
            };
            sign * (h * 3600 + m * 60 + s)
        }
    };
    let utc = naive.and_utc();
    Ok(utc.timestamp_micros() - offset_secs * 1_000_000)
}

/// RFC 3339 (UTC, microseconds) of epoch microseconds.
pub fn rfc3339_us(us: i64) -> String {
    match DateTime::from_timestamp_micros(us) {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        None => us.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse() {
        let c = parse(r#"created_table:"main"."t",inlined_insert:1"#).unwrap();
        assert_eq!(
            c,
            [
                Change::CreatedTable("main".into(), "t".into()),
                Change::Inserted(1)
            ]
        );
        let c =
            parse(r#"created_schema:"a,b",created_table:"a,b"."x""y",dropped_table:3"#).unwrap();
        assert_eq!(
            c,
            [
                Change::CreatedSchema("a,b".into()),
                Change::CreatedTable("a,b".into(), "x\"y".into()),
                Change::DroppedTable(3)
            ]
        );
        assert!(parse("inserted_into_table:x").is_err());
        assert_eq!(parse("").unwrap(), []);
        assert!(
            matches!(&parse("created_view:\"v\"").unwrap()[0], Change::Other(k, _) if k == "created_view")
        );
    }

    #[test]
    fn names_are_quoted_when_they_must_be() {
        assert_eq!(table_path("sales", "orders"), "sales.orders");
        assert_eq!(table_path("a.child", "t"), "\"a.child\".t");
        assert_eq!(ident("Has Space"), "\"Has Space\"");
        assert_eq!(ident("1x"), "\"1x\"");
    }

    #[test]
    fn timestamps() {
        let t = timestamp_us("1970-01-01 00:00:01.5+00").unwrap();
        assert_eq!(t, 1_500_000);
        assert_eq!(timestamp_us("1970-01-01 01:00:01.5+01").unwrap(), 1_500_000);
        assert_eq!(
            timestamp_us("1970-01-01 01:30:01.5+01:30").unwrap(),
            1_500_000
        );
        assert_eq!(timestamp_us("1969-12-31 23:00:01.5-01").unwrap(), 1_500_000);
        assert_eq!(timestamp_us("1970-01-01 00:00:01.5").unwrap(), 1_500_000);
        assert_eq!(timestamp_us("1970-01-01T00:00:01Z").unwrap(), 1_000_000);
        assert_eq!(
            timestamp_us("2026-12-01 20:38:53.753469+00").unwrap() % 1_000_000,
            753_469
        );
        assert!(timestamp_us("yesterday").is_err());
        assert_eq!(rfc3339_us(1_500_000), "1970-01-01T00:00:01.500000Z");
    }
}
