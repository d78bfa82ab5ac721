//! Listings: `.tether/listings/<name>.jsonl`, committed.
//!
//! A directory or prefix state is only a digest, so at commit time the
//! backend also hands the engine a per-file listing, one JSON object per
//! line (`{"p": path, "k": token, "s": size}` for `file`), which `diff
//! --content` compares file by file. Listings are content-addressed: the name
//! is `ids::listing_name(kind, identity, content_state)` (64 hex), so the
//! engine finds a state's listing from its manifest alone, and writing one
//! that exists is a no-op. `gc` deletes those no manifest names.
//!
//! The stored text is normalised: each line is the canonical JSON of its
//! object, lines end in `\n`, blank lines are dropped, order is kept (the
//! backend's order is part of its content).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::canonical;
use super::error::{ModelError, Result};
use super::fsutil;
use super::ids::is_listing_name;

/// One entry of a `file` backend listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingEntry {
    /// Path relative to the directory or prefix.
    pub p: String,
    /// Content token: a sha256 (local) or an etag (object store).
    pub k: String,
    /// Size in bytes.
    pub s: u64,
}

/// `<listings_dir>/<name>.jsonl`.
pub fn listing_path(listings_dir: &Path, name: &str) -> PathBuf {
    listings_dir.join(format!("{name}.jsonl"))
}

fn check_name(listings_dir: &Path, name: &str) -> Result<()> {
    if is_listing_name(name) {
        Ok(())
    } else {
        Err(ModelError::invalid(
            listings_dir,
            format!("{name:?} is not a listing name (64 lowercase hex)"),
        ))
    }
}

/// Normalise listing text: every non-blank line a JSON object, re-encoded
/// canonically. `what` names the listing in errors.
pub fn normalize(text: &str, what: &Path) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| ModelError::invalid(what, format!("line {} is not JSON ({e})", i + 1)))?;
        if !v.is_object() {
            return Err(ModelError::invalid(
                what,
                format!("line {} is not a JSON object", i + 1),
            ));
        }
        out.push_str(&canonical::to_string(&v));
        out.push('\n');
    }
    Ok(out)
}

/// Store a listing under `name`; a listing already there is kept (same
/// name, same content). Returns whether it wrote.
pub fn write_listing(listings_dir: &Path, name: &str, text: &str) -> Result<bool> {
    match stage_listing(listings_dir, name, text)? {
        Some((path, body)) => {
            fsutil::write_atomic(&path, body.as_bytes())?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// What [`write_listing`] would write, and where, for a caller writing
/// many files in one batch (`fsutil::AtomicBatch`); `None` when a listing
/// is already stored under `name`.
pub fn stage_listing(
    listings_dir: &Path,
    name: &str,
    text: &str,
) -> Result<Option<(std::path::PathBuf, String)>> {
    check_name(listings_dir, name)?;
    let path = listing_path(listings_dir, name);
    let body = normalize(text, &path)?;
    if path.exists() {
        return Ok(None);
    }
    Ok(Some((path, body)))
}

/// A stored listing's text, `None` when there is none.
pub fn read_listing(listings_dir: &Path, name: &str) -> Result<Option<String>> {
    check_name(listings_dir, name)?;
    fsutil::read_optional(&listing_path(listings_dir, name))
}

/// Parse `file` listing text into entries.
pub fn parse_entries(text: &str, what: &Path) -> Result<Vec<ListingEntry>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                ModelError::invalid(what, format!("line {} is not a listing entry ({e})", i + 1))
            })
        })
        .collect()
}

/// Encode `file` listing entries as listing text.
pub fn entries_to_text(entries: &[ListingEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let v = serde_json::to_value(e).expect("a listing entry is plain data");
        out.push_str(&canonical::to_string(&v));
        out.push('\n');
    }
    out
}

/// The names of every stored listing, sorted. Other files are ignored.
pub fn list_listings(listings_dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = match std::fs::read_dir(listings_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(ModelError::io(listings_dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| ModelError::io(listings_dir, e))?;
        if let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".jsonl"))
            .filter(|n| is_listing_name(n))
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Delete a listing; a missing one is not an error. Returns whether it existed.
pub fn remove_listing(listings_dir: &Path, name: &str) -> Result<bool> {
    check_name(listings_dir, name)?;
    let path = listing_path(listings_dir, name);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ModelError::io(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "e7a279c1973a37ef90fded8db271694d180b89450264a0c9b906774911ec8c72";

    #[test]
    fn write_read_list_remove() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("listings");
        assert_eq!(list_listings(&d).unwrap(), Vec::<String>::new());
        let entries = vec![
            ListingEntry {
                p: "b/x.tif".into(),
                k: "ab".into(),
                s: 4096,
            },
            ListingEntry {
                p: "a.csv".into(),
                k: "cd".into(),
                s: 1,
            },
        ];
        let text = entries_to_text(&entries);
        assert_eq!(
            text,
            "{\"k\":\"ab\",\"p\":\"b/x.tif\",\"s\":4096}\n{\"k\":\"cd\",\"p\":\"a.csv\",\"s\":1}\n"
        );
        assert!(write_listing(&d, NAME, "{\"s\":4096, \"p\":\"b/x.tif\",\"k\":\"ab\"}\n\n{\"p\":\"a.csv\",\"k\":\"cd\",\"s\":1}").unwrap());
        assert!(!write_listing(&d, NAME, &text).unwrap());
        let back = read_listing(&d, NAME).unwrap().unwrap();
        assert_eq!(back, text);
        assert_eq!(parse_entries(&back, &d).unwrap(), entries);
        std::fs::write(d.join("notes.txt"), "x").unwrap();
        assert_eq!(list_listings(&d).unwrap(), vec![NAME.to_string()]);
        assert!(remove_listing(&d, NAME).unwrap());
        assert!(!remove_listing(&d, NAME).unwrap());
        assert_eq!(read_listing(&d, NAME).unwrap(), None);
    }

    #[test]
    fn refuses_bad_names_and_lines() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            write_listing(dir.path(), "../x", "")
                .unwrap_err()
                .to_string()
                .contains("64 lowercase hex")
        );
        let e = write_listing(dir.path(), NAME, "{}\n[1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2 is not a JSON object"), "{e}");
        let e = write_listing(dir.path(), NAME, "nope")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1 is not JSON"), "{e}");
    }
}
