//! Object keys: validation, derivation from a path, and `KEY...` selectors.
//!
//! A key names an object and its manifest file, `.tether/objects/<key>.toml`.
//! Keys arrive with every clone, so they are checked whenever a manifest is
//! read, not only at `add`: a key must never let tether write outside
//! `.tether/` (security model). The rules are deliberately portable: a key
//! that is valid here is a valid relative path on every platform.

use std::collections::BTreeSet;

use super::error::{ModelError, Result};

/// Kinds whose locator is a path, so `add` may derive the key from it.
pub const PATH_KINDS: &[&str] = &["file", "icechunk", "lance", "delta", "git"];

/// Whether `add` may leave the key out for `kind`.
pub fn derives_key(kind: &str) -> bool {
    PATH_KINDS.contains(&kind)
}

/// The suffix a store of `kind` conventionally carries, which a derived key
/// leaves out. `file` has none: a data file keeps its extension.
pub fn store_suffix(kind: &str) -> Option<&'static str> {
    match kind {
        "icechunk" => Some(".icechunk"),
        "lance" => Some(".lance"),
        "delta" => Some(".delta"),
        "git" => Some(".git"),
        _ => None,
    }
}

fn invalid(key: &str, rule: impl Into<String>) -> ModelError {
    ModelError::InvalidKey {
        key: key.to_string(),
        rule: rule.into(),
    }
}

/// Check a key against every rule; the error names the key and the rule.
///
/// A key is `/`-separated segments. It may not be empty, start with `/`,
/// hold an empty segment (`a//b`, a trailing `/`), a `.` or `..` segment, a
/// `\`, a control character, or start with a drive letter (`C:`).
pub fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(invalid(key, "a key may not be empty"));
    }
    if let Some(c) = key.chars().find(|c| c.is_control()) {
        return Err(invalid(
            key,
            format!(
                "a key may not hold control characters (found U+{:04X})",
                c as u32
            ),
        ));
    }
    if key.contains('\\') {
        return Err(invalid(
            key,
            "a key may not hold '\\'; separate segments with '/'",
        ));
    }
    if key.starts_with('/') {
        return Err(invalid(
            key,
            "a key may not start with '/'; keys are relative",
        ));
    }
    let b = key.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(invalid(key, "a key may not start with a drive letter"));
    }
    for seg in key.split('/') {
        match seg {
            "" => {
                return Err(invalid(
                    key,
                    "a key may not hold an empty segment ('//' or a trailing '/')",
                ));
            }
            "." | ".." => {
                return Err(invalid(
                    key,
                    format!("a key may not hold a '{seg}' segment"),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The key `add` gives an object of a path kind when none is named: the
/// path's last segment, less the kind's store suffix
/// (`s3://lab/greetings.icechunk` → `greetings`). A data file keeps its
/// extension (`/d/a.csv` → `a.csv`). When the last segment *is* the suffix
/// (`/src/proj/.git`) the segment before it names the store (`proj`).
pub fn derive_key(kind: &str, path: &str) -> Result<String> {
    let cannot = |why: &str| {
        invalid(
            path,
            format!("cannot derive a key from this path ({why}); give the object a key"),
        )
    };
    // Drop a query or fragment, then the scheme, then trailing separators.
    let mut p = path.split(['?', '#']).next().unwrap_or("");
    if let Some((_, rest)) = p.split_once("://") {
        p = rest;
    }
    let segments: Vec<&str> = p
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let suffix = store_suffix(kind);
    let mut iter = segments.iter().rev();
    let mut last = *iter.next().ok_or_else(|| cannot("it has no name"))?;
    if let Some(sfx) = suffix {
        if last == sfx {
            last = *iter
                .next()
                .ok_or_else(|| cannot("it has no name before the suffix"))?;
        } else if let Some(stem) = last.strip_suffix(sfx) {
            last = stem;
        }
    }
    if last == ".." || last.ends_with(':') {
        return Err(cannot("its last segment is not a name"));
    }
    validate_key(last)?;
    Ok(last.to_string())
}

/// Resolve `KEY...` selectors against the keys that exist.
///
/// A selector is an exact key, or a prefix ending in `/` that takes every key
/// under it (`zarr/` takes `zarr/a`, not `zarrish`). Selectors may overlap;
/// each key counts once. A selector that matches nothing is an error naming
/// it. No selectors means every key. The result is in sorted key order.
pub fn select_keys<'a, S: AsRef<str>>(
    selectors: &[S],
    keys: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>> {
    let keys: BTreeSet<&str> = keys.into_iter().collect();
    if selectors.is_empty() {
        return Ok(keys.into_iter().map(str::to_string).collect());
    }
    let mut chosen = BTreeSet::new();
    for sel in selectors {
        let sel = sel.as_ref();
        let mut matched = false;
        if sel.ends_with('/') {
            for k in keys.range(sel..).take_while(|k| k.starts_with(sel)) {
                matched = true;
                chosen.insert(*k);
            }
        } else if keys.contains(sel) {
            matched = true;
            chosen.insert(sel);
        }
        if !matched {
            return Err(ModelError::NoMatch {
                selector: sel.to_string(),
            });
        }
    }
    Ok(chosen.into_iter().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_keys() {
        for k in [
            "a",
            "zarr/imaging",
            "db/metrics.v2",
            "a b/c",
            "é/ü",
            "-x",
            "db:metrics",
        ] {
            validate_key(k).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
    }

    #[test]
    fn invalid_keys_name_key_and_rule() {
        for (k, rule) in [
            ("", "empty"),
            ("../etc/passwd", "'..' segment"),
            ("a/../b", "'..' segment"),
            ("a/./b", "'.' segment"),
            ("a\\b", "'\\'"),
            ("/abs", "start with '/'"),
            ("C:/x", "drive letter"),
            ("c:", "drive letter"),
            ("a//b", "empty segment"),
            ("a/", "empty segment"),
            ("a\nb", "control characters (found U+000A)"),
            ("a\u{7f}", "control characters"),
        ] {
            let e = validate_key(k).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{k:?}")) && e.contains(rule),
                "{k:?}: {e}"
            );
        }
    }

    #[test]
    fn derived_keys() {
        for (kind, path, key) in [
            ("icechunk", "s3://lab/greetings.icechunk", "greetings"),
            ("icechunk", "s3://lab/greetings.icechunk/", "greetings"),
            ("icechunk", "/data/plate-01.zarr", "plate-01.zarr"),
            ("lance", "/data/vectors.lance", "vectors"),
            ("delta", "s3://b/tables/events", "events"),
            ("delta", "s3://b/tables/events.delta", "events"),
            ("git", "/src/proj/.git", "proj"),
            ("git", "/src/proj.git", "proj"),
            ("git", "/src/proj", "proj"),
            ("file", "/data/raw/a.csv", "a.csv"),
            ("file", "s3://bucket/prefix/", "prefix"),
            ("file", "file:///data/raw", "raw"),
            ("file", "s3://bucket", "bucket"),
            ("file", "s3://b/x.icechunk", "x.icechunk"),
            ("file", "https://h/p/data.csv?x=1", "data.csv"),
        ] {
            assert_eq!(derive_key(kind, path).unwrap(), key, "{kind} {path}");
        }
        for (kind, path) in [
            ("file", "/"),
            ("git", ".git"),
            ("file", "s3://"),
            ("file", "C:"),
        ] {
            let e = derive_key(kind, path).unwrap_err().to_string();
            assert!(
                e.contains("give the object a key") || e.contains("drive"),
                "{e}"
            );
        }
        assert!(derives_key("lance") && !derives_key("neon"));
    }

    #[test]
    fn selectors() {
        let keys = ["zarr/a", "zarr/b", "zarrish", "db/x", "z"];
        let sel = |s: &[&str]| select_keys(s, keys.iter().copied());
        assert_eq!(
            sel(&[]).unwrap(),
            ["db/x", "z", "zarr/a", "zarr/b", "zarrish"]
        );
        assert_eq!(sel(&["zarr/"]).unwrap(), ["zarr/a", "zarr/b"]);
        assert_eq!(
            sel(&["zarrish", "zarr/", "zarr/a"]).unwrap(),
            ["zarr/a", "zarr/b", "zarrish"]
        );
        assert_eq!(sel(&["z"]).unwrap(), ["z"]);
        let e = sel(&["db/x", "zar"]).unwrap_err().to_string();
        assert!(e.contains("\"zar\""), "{e}");
        assert!(
            sel(&["nope/"])
                .unwrap_err()
                .to_string()
                .contains("\"nope/\"")
        );
    }
}
