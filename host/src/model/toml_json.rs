//! How the JSON of locators and states is stored in TOML files, and back.
//!
//! Locators and states are JSON objects: the backends speak canonical JSON
//! and pin ids hash it. Manifests and `workspace.toml` are TOML so people can
//! read and review them. The mapping is lossless for every value tether
//! stores, and refuses (never mangles) the few it cannot hold:
//!
//! | JSON | TOML |
//! | --- | --- |
//! | object | table (keys any string; quoted when needed) |
//! | array | array (mixed types allowed, as TOML 1.0 allows) |
//! | string | string |
//! | `true` / `false` | boolean |
//! | number that fits `i64` | integer |
//! | any other number (has a fraction or exponent) | float, printed so it reads back to the same `f64` |
//! | `null` as an object member | *omitted*: absent and `null` are one value |
//! | `null` in an array, or at the top | refused |
//! | integer above `i64::MAX` | refused (TOML integers are 64-bit signed) |
//!
//! Reading back: integer → JSON integer, float → JSON float (NaN and the
//! infinities, which JSON lacks, are refused), a TOML date-time (only a hand
//! edit can put one there) → its RFC 3339 text as a JSON string.
//!
//! Because `null` members are dropped on write, [`strip_nulls`] is applied
//! wherever a value is hashed (pin ids, listing names, `manifest_hash`), so a
//! state hashes the same before it is written and after it is read back.

use serde_json::{Map, Number, Value};

/// Parse a TOML file tether reads (a manifest, `tether.toml`,
/// `workspace.toml`). A VCS conflict left in it is named as one, with what
/// to do, rather than as the TOML error its markers cause.
pub fn parse_table(text: &str) -> Result<toml::Table, String> {
    toml::from_str(text).map_err(
        |e| match text.lines().position(|l| l.starts_with("<<<<<<<")) {
            Some(i) => format!(
                "has unresolved conflict markers (line {}): resolve the conflict first \
                 (`jj resolve`, `git mergetool`, or edit the file), then run the command again",
                i + 1
            ),
            None => toml_error(text, &e),
        },
    )
}

/// A TOML error as one bounded line: where it is, what is wrong, and an
/// escaped excerpt of the line around it. toml's own message quotes the whole
/// line, which in a clone's file may be megabytes of anything.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    use super::display;
    let what = display::excerpt(e.message().trim(), display::EXCERPT_CHARS);
    let Some(at) = e.span().map(|s| s.start.min(text.len())) else {
        return format!("not valid TOML: {what}");
    };
    let mut at = at;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line_no = text[..line_start].matches('\n').count() + 1;
    let column = text[line_start..at].chars().count() + 1;
    // Up to half an excerpt on each side of the error.
    let half = display::EXCERPT_CHARS / 2;
    let from = text[line_start..at]
        .char_indices()
        .rev()
        .nth(half.saturating_sub(1))
        .map_or(line_start, |(i, _)| line_start + i);
    let near = display::excerpt(&text[from..line_end], 2 * half);
    let lead = if from > line_start { "…" } else { "" };
    format!("not valid TOML at line {line_no}, column {column}: {what} (near: {lead}{near})")
}

/// `null` members dropped at any depth: the one null rule, shared with the
/// SDK (`tether_contract::state`).
pub use tether_contract::state::{strip_nulls, strip_nulls_map};

/// The TOML form of a JSON value. `Err` says why it cannot be stored; the
/// caller names the value.
pub fn json_to_toml(value: &Value) -> Result<toml::Value, String> {
    json_to_toml_at(value, "")
}

/// The TOML table of a JSON object.
pub fn json_map_to_table(map: &Map<String, Value>) -> Result<toml::Table, String> {
    map_to_table(map, "")
}

fn map_to_table(map: &Map<String, Value>, at: &str) -> Result<toml::Table, String> {
    // Insert in sorted order so the result is the same whether or not some
    // crate enabled toml's `preserve_order`.
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut table = toml::Table::new();
    for (k, v) in entries {
        if v.is_null() {
            continue;
        }
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        table.insert(k.clone(), json_to_toml_at(v, &path)?);
    }
    Ok(table)
}

fn json_to_toml_at(value: &Value, at: &str) -> Result<toml::Value, String> {
    let here = || {
        if at.is_empty() {
            "the value".to_string()
        } else {
            format!("`{at}`")
        }
    };
    Ok(match value {
        Value::Null => {
            return Err(format!(
                "{} is null, which TOML cannot hold (only an object member may be null, and it is then left out)",
                here()
            ));
        }
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                toml::Value::Integer(i)
            } else if n.is_u64() {
                return Err(format!(
                    "{} is {n}, above the largest TOML integer ({}); store it as a string",
                    here(),
                    i64::MAX
                ));
            } else {
                match n.as_f64() {
                    Some(f) if f.is_finite() => toml::Value::Float(f),
                    _ => return Err(format!("{} is {n}, not a finite number", here())),
                }
            }
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(json_to_toml_at(item, &format!("{at}[{i}]"))?);
            }
            toml::Value::Array(out)
        }
        Value::Object(map) => toml::Value::Table(map_to_table(map, at)?),
    })
}

/// The JSON form of a TOML value.
pub fn toml_to_json(value: &toml::Value) -> Result<Value, String> {
    toml_to_json_at(value, "")
}

/// The JSON object of a TOML table.
pub fn table_to_json_map(table: &toml::Table) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in table {
        out.insert(k.clone(), toml_to_json_at(v, k)?);
    }
    Ok(out)
}

fn toml_to_json_at(value: &toml::Value, at: &str) -> Result<Value, String> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::Number((*i).into()),
        toml::Value::Float(f) => match Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            None => return Err(format!("`{at}` is {f}, which JSON cannot hold")),
        },
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(toml_to_json_at(item, &format!("{at}[{i}]"))?);
            }
            Value::Array(out)
        }
        toml::Value::Table(t) => {
            let mut out = Map::new();
            for (k, v) in t {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(k.clone(), toml_to_json_at(v, &path)?);
            }
            Value::Object(out)
        }
    })
}

/// A TOML document in a fixed layout: the top-level scalars named in
/// `scalars` (in that order), then each table named in `sections` (in that
/// order) with its keys sorted and its sub-tables after it. Other entries of
/// `table` are not written. Section names must be bare TOML keys. An empty section keeps its header, so an empty
/// table reads back as an empty table rather than as absent.
pub fn write_document(
    table: &toml::Table,
    scalars: &[&str],
    sections: &[&str],
) -> Result<String, String> {
    let mut out = String::new();
    for name in scalars {
        if let Some(v) = table.get(*name) {
            let mut one = toml::Table::new();
            one.insert(name.to_string(), v.clone());
            out.push_str(&toml::to_string(&one).map_err(|e| e.to_string())?);
        }
    }
    for name in sections {
        if let Some(v) = table.get(*name) {
            let mut one = toml::Table::new();
            one.insert(name.to_string(), v.clone());
            let text = toml::to_string(&one).map_err(|e| e.to_string())?;
            if !out.is_empty() {
                out.push('\n');
            }
            if !text.starts_with('[') {
                // The serializer writes nothing for an empty table.
                out.push_str(&format!("[{name}]\n"));
            }
            out.push_str(&text);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_markers_are_named_as_a_conflict() {
        let conflicted = "kind = \"memory\"\n<<<<<<< conflict 1 of 1\n%%%%%%% diff\n";
        let e = parse_table(conflicted).unwrap_err();
        assert!(
            e.starts_with("has unresolved conflict markers (line 2)"),
            "{e}"
        );
        assert!(e.contains("jj resolve"), "{e}");
        let e = parse_table("kind = ").unwrap_err();
        assert!(e.starts_with("not valid TOML at line 1, column 8: "), "{e}");
        assert_eq!(parse_table("a = 1").unwrap()["a"].as_integer(), Some(1));
    }

    #[test]
    fn a_syntax_error_quotes_an_escaped_excerpt_of_its_line() {
        // A megabyte-long line: the error quotes a little of it.
        let long = format!(
            "a = 1\nkind = \"{}\" junk {}\n",
            "x".repeat(1 << 20),
            "y".repeat(1 << 20)
        );
        let e = parse_table(&long).unwrap_err();
        assert!(e.starts_with("not valid TOML at line 2, column "), "{e}");
        assert!(e.len() < 1024, "{} bytes", e.len());
        assert!(e.contains("more bytes)"), "{e}");
        // Control characters in the line are shown escaped.
        let e = parse_table("kind = \u{1b}[2J\u{7}").unwrap_err();
        assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e:?}");
        assert!(e.contains("\\u001b[2J"), "{e}");
    }
    use crate::model::canonical;
    use serde_json::json;

    fn round_trip(v: &Value) -> Value {
        let Value::Object(map) = v else { panic!() };
        let mut doc = toml::Table::new();
        doc.insert(
            "x".into(),
            toml::Value::Table(json_map_to_table(map).unwrap()),
        );
        let text = toml::to_string(&doc).unwrap();
        let back: toml::Table = toml::from_str(&text).unwrap();
        toml_to_json(&back["x"]).unwrap()
    }

    #[test]
    fn lossless_for_what_json_and_toml_share() {
        let v = json!({
            "s": "tab\t \"quoted\" \u{1} é 💾",
            "i": -42, "big": i64::MAX, "f": 1.5, "whole": 2.0, "tiny": 1e-300, "huge": 1.5e300,
            "neg0": -0.0, "t": true,
            "arr": [1, "two", 3.0, {"k": "v"}, [false]],
            "objs": [{"a": 1}, {"b": {"c": "d"}}],
            "empty": {}, "none": [], "nested": {"x.y": {"\"q\"": 1}},
            "weird key = 1": "ok"
        });
        let back = round_trip(&v);
        assert_eq!(canonical::to_string(&back), canonical::to_string(&v));
    }

    #[test]
    fn nulls_are_absent_and_refused_where_they_cannot_be() {
        let v = json!({"a": null, "b": {"c": null, "d": 1}});
        assert_eq!(round_trip(&v), json!({"b": {"d": 1}}));
        assert_eq!(strip_nulls(&v), json!({"b": {"d": 1}}));
        let err = json_to_toml(&json!({"a": [1, null]})).unwrap_err();
        assert!(err.contains("`a[1]` is null"), "{err}");
        let err = json_to_toml(&json!({"n": u64::MAX})).unwrap_err();
        assert!(err.contains("`n` is 18446744073709551615"), "{err}");
    }

    #[test]
    fn toml_only_values() {
        let t: toml::Table = toml::from_str("d = 1979-05-27T07:32:00Z\nn = nan").unwrap();
        assert_eq!(
            toml_to_json(&t["d"]).unwrap(),
            json!("1979-05-27T07:32:00Z")
        );
        assert!(table_to_json_map(&t).unwrap_err().contains("`n`"));
    }
}
