//! A directory's content as entries (path, token, size), the state recipe
//! over them, the JSONL listing, and the `files` diff (crate docs).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tether_sdk::tree::{self, EntryKind};
use tether_sdk::{Change, Error, ObjectDiff, Result, canonical_json};

/// Token prefix of a symlink recorded by its target.
const SYMLINK_TOKEN: &str = "symlink:";

/// One listing line: `{"k": token, "p": path, "s": size}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedEntry {
    /// Path relative to the directory, `/`-separated.
    pub p: String,
    /// sha256 of the content, or `symlink:<target>`.
    pub k: String,
    /// Size in bytes (0 for a recorded symlink).
    pub s: u64,
}

/// A directory's entries, in byte order of path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirListing {
    pub entries: Vec<ListedEntry>,
}

impl DirListing {
    /// The current content of the directory at `root` (a resolved path),
    /// hashed by the host.
    pub fn walk(root: &str) -> Result<Self> {
        let mut entries = Vec::new();
        tree::walk(root, true, |e| -> Result<()> {
            match (e.kind, e.sha256) {
                // A file, or a symlink read through to one.
                (EntryKind::File | EntryKind::Symlink, Some(sha)) => entries.push(ListedEntry {
                    p: e.path,
                    k: sha,
                    s: e.size,
                }),
                (EntryKind::Symlink, None) => entries.push(ListedEntry {
                    p: e.path,
                    k: format!("{SYMLINK_TOKEN}{}", e.link_target.unwrap_or_default()),
                    s: 0,
                }),
                (EntryKind::File, None) => {
                    return Err(Error::backend(format!(
                        "the host returned no sha256 for {root}/{}",
                        e.path
                    )));
                }
                // Directories are structure, not content.
                (EntryKind::Dir, _) => {}
            }
            Ok(())
        })?;
        // The walk's key order already sorts files by path; sorting again
        // keeps the recipe independent of that detail.
        entries.sort_by(|a, b| a.p.cmp(&b.p));
        Ok(Self { entries })
    }

    /// sha256 of `path \0 token \n` per entry, lowercase hex.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for e in &self.entries {
            h.update(e.p.as_bytes());
            h.update([0]);
            h.update(e.k.as_bytes());
            h.update(b"\n");
        }
        hex::encode(h.finalize())
    }

    /// `{"type": "dir", "count", "size", "digest"}`.
    pub fn state(&self) -> Value {
        json!({
            "type": "dir",
            "count": self.entries.len(),
            "size": self.entries.iter().map(|e| e.s).sum::<u64>(),
            "digest": self.digest(),
        })
    }

    /// One canonical JSON line per entry.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            out.push_str(&canonical_json(&json!({"k": e.k, "p": e.p, "s": e.s})));
            out.push('\n');
        }
        out
    }

    /// Parse a stored listing (blank lines ignored).
    pub fn parse(text: &str) -> Result<Self> {
        let entries = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| Error::backend(format!("a stored listing line is corrupt: {e}")))
            })
            .collect::<Result<Vec<ListedEntry>>>()?;
        Ok(Self { entries })
    }
}

/// `4.0 KiB`, `512 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `+4.0 KiB`, `-512 B`, `+0 B`.
fn delta(from: u64, to: u64) -> String {
    if to >= from {
        format!("+{}", human(to - from))
    } else {
        format!("-{}", human(from - to))
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

fn field<'a>(state: &'a Value, key: &str) -> &'a Value {
    state.get(key).unwrap_or(&Value::Null)
}

fn num(state: &Value, key: &str) -> u64 {
    field(state, key).as_u64().unwrap_or(0)
}

/// What a token change means to a reader.
fn modified_detail(a: &ListedEntry, b: &ListedEntry) -> String {
    match (
        a.k.strip_prefix(SYMLINK_TOKEN),
        b.k.strip_prefix(SYMLINK_TOKEN),
    ) {
        (Some(ta), Some(tb)) => format!("symlink {ta} -> {tb}"),
        (Some(ta), None) => format!("symlink to {ta} -> file {}", delta(0, b.s)),
        (None, Some(tb)) => format!("file -> symlink to {tb}"),
        (None, None) => delta(a.s, b.s),
    }
}

/// The `files` diff of two states (crate docs).
pub fn diff(a: &Value, b: &Value, la: Option<&str>, lb: Option<&str>) -> Result<ObjectDiff> {
    let mut out = ObjectDiff::new("files");
    if a == b {
        return Ok(out);
    }
    let (ta, tb) = (field(a, "type").as_str(), field(b, "type").as_str());
    match (ta, tb) {
        // A file and an object differ the same way: size, then content
        // token (a file's sha256, an object's etag).
        (Some(t @ ("file" | "object")), Some(u)) if t == u => {
            let token = if t == "file" { "sha256" } else { "etag" };
            let mut parts = Vec::new();
            if num(a, "size") != num(b, "size") {
                parts.push(format!(
                    "size {} -> {} ({})",
                    human(num(a, "size")),
                    human(num(b, "size")),
                    delta(num(a, "size"), num(b, "size"))
                ));
            }
            let (xa, xb) = (
                field(a, token).as_str().unwrap_or(""),
                field(b, token).as_str().unwrap_or(""),
            );
            if xa != xb {
                parts.push(format!("{token} {} -> {}", short(xa), short(xb)));
            }
            // spec/11: `etag a -> b, version v1 -> v2` for a versioned object.
            let (va, vb) = (
                field(a, "version_id").as_str(),
                field(b, "version_id").as_str(),
            );
            if va != vb && !parts.is_empty() {
                parts.push(format!(
                    "version {} -> {}",
                    va.unwrap_or("none"),
                    vb.unwrap_or("none")
                ));
            }
            if !parts.is_empty() {
                out.add(".", Change::Modified, parts.join(", "));
            }
        }
        // A directory and an S3 prefix follow one recipe and listing form.
        (Some(x @ ("dir" | "prefix")), Some(y)) if x == y => {
            if field(a, "digest") == field(b, "digest") {
                return Ok(out);
            }
            match (la, lb) {
                (Some(la), Some(lb)) => {
                    diff_listings(&mut out, &DirListing::parse(la)?, &DirListing::parse(lb)?)
                }
                _ => summary(&mut out, a, b),
            }
        }
        _ => {
            out.add(
                ".",
                Change::Modified,
                format!("{} -> {}", ta.unwrap_or("unknown"), tb.unwrap_or("unknown")),
            );
        }
    }
    Ok(out)
}

fn diff_listings(out: &mut ObjectDiff, a: &DirListing, b: &DirListing) {
    let before: BTreeMap<&str, &ListedEntry> =
        a.entries.iter().map(|e| (e.p.as_str(), e)).collect();
    let after: BTreeMap<&str, &ListedEntry> = b.entries.iter().map(|e| (e.p.as_str(), e)).collect();
    let mut paths: Vec<&str> = before.keys().chain(after.keys()).copied().collect();
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        match (before.get(path), after.get(path)) {
            (None, Some(new)) => {
                out.add(path, Change::Added, delta(0, new.s));
            }
            (Some(old), None) => {
                out.add(path, Change::Removed, delta(old.s, 0));
            }
            (Some(old), Some(new)) if old.k != new.k => {
                out.add(path, Change::Modified, modified_detail(old, new));
            }
            _ => {}
        }
    }
}

/// No listing for one side: counts inferred from the entry counts, and at
/// least one change when only the digest differs.
fn summary(out: &mut ObjectDiff, a: &Value, b: &Value) {
    let (ca, cb) = (num(a, "count"), num(b, "count"));
    let (sa, sb) = (num(a, "size"), num(b, "size"));
    let mut note = String::new();
    let _ = write!(
        note,
        "no stored listing for both sides: {ca} files, {} -> {cb} files, {} ({}); \
         per-file changes unknown",
        human(sa),
        human(sb),
        delta(sa, sb)
    );
    out.note(note);
    if cb > ca {
        for i in 0..(cb - ca) {
            out.add(format!("(unlisted {})", i + 1), Change::Added, "");
        }
    } else if ca > cb {
        for i in 0..(ca - cb) {
            out.add(format!("(unlisted {})", i + 1), Change::Removed, "");
        }
    } else {
        out.add("(unlisted)", Change::Modified, delta(sa, sb));
    }
}
