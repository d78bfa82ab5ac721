//! One Lance dataset in a storage bucket: its versions per branch, its
//! manifests, tags (`_refs/tags/<name>.json`) and branch refs
//! (`_refs/branches/<name>.json`), in Lance's own JSON
//! (research/formats.md §1.5, §1.6).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tether_sdk::storage::{Bucket, PutMode, StorageError, Versioned};
use tether_sdk::{Error, Result};

use crate::format::{self, ManifestFile, Scheme};

/// A tag's content (Lance's `TagContents`, camelCase, pretty-printed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tag {
    /// `None` for `main`.
    pub branch: Option<String>,
    /// The version within that branch.
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// The byte size of the tagged manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_size: Option<u64>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl Tag {
    /// The branch the tag names (`main` for none).
    pub fn branch_name(&self) -> &str {
        self.branch.as_deref().unwrap_or("main")
    }
}

/// A branch's identity: the chain of (fork version, uuid) from `main`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Identifier {
    pub version_mapping: Vec<(u64, String)>,
}

/// A branch ref's content (Lance's `BranchContents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    /// `None`: forked from `main`.
    pub parent_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<IdentifierForm>,
    pub parent_version: u64,
    /// Unix seconds.
    #[serde(default)]
    pub create_at: u64,
    #[serde(default)]
    pub manifest_size: u64,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// The identifier as written (an object) or in Lance's string form
/// `ver1:uuid1:ver2:uuid2`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IdentifierForm {
    Mapping(Identifier),
    Text(String),
}

impl Branch {
    /// The version mapping: written, parsed from the string form, or (a
    /// legacy ref without one) derived from what the ref does say, so two
    /// lives of one name still differ by creation time.
    pub fn mapping(&self) -> Vec<(u64, String)> {
        match &self.identifier {
            Some(IdentifierForm::Mapping(m)) => m.version_mapping.clone(),
            Some(IdentifierForm::Text(t)) => {
                let parts: Vec<&str> = t.split(':').collect();
                parts
                    .chunks(2)
                    .filter_map(|c| match c {
                        [v, u] => Some((v.parse().ok()?, (*u).to_owned())),
                        _ => None,
                    })
                    .collect()
            }
            None => vec![(
                self.parent_version,
                format!(
                    "legacy-{}-{}",
                    self.parent_branch.as_deref().unwrap_or(""),
                    self.create_at
                ),
            )],
        }
    }

    /// The branch id tether records in a state: the mapping in Lance's
    /// string form.
    pub fn id(&self) -> String {
        id_of(&self.mapping())
    }
}

/// `ver1:uuid1:ver2:uuid2`.
pub fn id_of(mapping: &[(u64, String)]) -> String {
    mapping
        .iter()
        .map(|(v, u)| format!("{v}:{u}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One manifest file of a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionFile {
    pub version: u64,
    pub key: String,
    pub size: u64,
}

/// Lance's branch name rules (`check_valid_branch`).
pub fn check_branch_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name != "main"
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{name:?} is not a valid Lance branch name (`/`-separated segments of letters, \
             digits, `.`, `-`, `_`; not `main`)"
        )))
    }
}

/// The ref file name of a branch: `/` percent-encoded, as Lance's object
/// store paths write it.
fn branch_file(name: &str) -> String {
    format!("{}{}.json", format::BRANCHES_DIR, name.replace('/', "%2F"))
}

/// `%XX` decoded (ref file names); invalid escapes are kept as they are.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = [b[i + 1], b[i + 2]];
            let v = u8::from_str_radix(std::str::from_utf8(&hex).unwrap_or("00"), 16).unwrap_or(0);
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Lance dataset in a bucket.
#[derive(Debug, Clone)]
pub struct Table {
    pub bucket: Bucket,
    /// The storage URI (local path or `s3://...`), as base paths name the root.
    pub uri: String,
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> Error {
    Error::backend(format!("{key} is not valid Lance ref JSON: {e}"))
}

impl Table {
    pub fn open(uri: &str) -> Result<Self> {
        Ok(Self {
            bucket: Bucket::open(uri)?,
            uri: uri.to_owned(),
        })
    }

    /// Bytes `[offset, offset + len)` of `key`.
    pub fn range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.bucket
            .raw()
            .get_range(key, offset, len)
            .map_err(StorageError::from)?
            .ok_or_else(|| Error::not_found(format!("{key} disappeared while being read")))
    }

    /// Every manifest of `branch`, oldest first. A dataset that is not a
    /// Lance dataset (nothing in `_versions/`) is not found.
    pub fn versions(&self, branch: &str) -> Result<Vec<VersionFile>> {
        let dir = format!("{}_versions/", format::branch_root(branch));
        let mut out = Vec::new();
        let mut schemes = (false, false);
        for meta in self.bucket.list_all(&dir)? {
            let Some(name) = meta.key.strip_prefix(&dir) else {
                continue;
            };
            if name.contains('/') {
                continue;
            }
            if let Some((scheme, version)) = format::parse_version_name(name) {
                match scheme {
                    Scheme::V1 => schemes.0 = true,
                    Scheme::V2 => schemes.1 = true,
                }
                out.push(VersionFile {
                    version,
                    key: meta.key.clone(),
                    size: meta.size,
                });
            }
        }
        if schemes.0 && schemes.1 {
            return Err(Error::Capability(format!(
                "{}{dir} mixes both manifest naming schemes, which Lance itself refuses; \
                 run `migrate_manifest_paths_v2()` on it with Lance",
                self.display_root()
            )));
        }
        out.sort_by_key(|v| v.version);
        Ok(out)
    }

    fn display_root(&self) -> String {
        format!("{}/", self.uri.trim_end_matches('/'))
    }

    /// The newest manifest of `branch`; a not-found error when there is none.
    pub fn latest(&self, branch: &str) -> Result<VersionFile> {
        if let Some(v) = self.versions(branch)?.pop() {
            return Ok(v);
        }
        if branch == "main" && self.bucket.exists("_latest.manifest")? {
            return Err(Error::Capability(format!(
                "{} has only the obsolete `_latest.manifest` layout (Lance before 0.17); \
                 open and re-commit it with a current Lance first",
                self.uri
            )));
        }
        Err(Error::not_found(if branch == "main" {
            format!(
                "no Lance dataset at {} (no manifests in _versions/)",
                self.uri
            )
        } else {
            format!("branch {branch} of {} has no versions", self.uri)
        }))
    }

    /// The manifest of `version` on `branch` (V2 name first, then V1).
    pub fn version_file(&self, branch: &str, version: u64) -> Result<Option<VersionFile>> {
        let root = format::branch_root(branch);
        for name in [format::v2_name(version), format::v1_name(version)] {
            let key = format!("{root}_versions/{name}");
            if let Some(meta) = self.bucket.head(&key)? {
                return Ok(Some(VersionFile {
                    version,
                    key,
                    size: meta.size,
                }));
            }
        }
        Ok(None)
    }

    /// Read and decode a manifest (refusing unknown reader flags).
    pub fn read(&self, file: &VersionFile) -> Result<ManifestFile> {
        format::read_manifest(&file.key, file.size, |off, len| {
            self.range(&file.key, off, len)
        })
    }

    /// The operation that made a version (`append`, `overwrite`, ...).
    pub fn operation(&self, file: &ManifestFile) -> Result<&'static str> {
        format::inline_operation(file, |off, len| self.range(&file.key, off, len))
    }

    // -- tags

    fn tag_key(name: &str) -> String {
        format!("{}{name}.json", format::TAGS_DIR)
    }

    /// Every tag by name.
    pub fn tags(&self) -> Result<BTreeMap<String, Tag>> {
        let mut out = BTreeMap::new();
        for meta in self.bucket.list_all(format::TAGS_DIR)? {
            let Some(name) = meta
                .key
                .strip_prefix(format::TAGS_DIR)
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            if name.contains('/') {
                continue;
            }
            if let Some(tag) = self.tag(name)? {
                out.insert(name.to_owned(), tag.value);
            }
        }
        Ok(out)
    }

    /// One tag, with its etag; `None` when absent.
    pub fn tag(&self, name: &str) -> Result<Option<Versioned<Tag>>> {
        let key = Self::tag_key(name);
        let Some(obj) = self.bucket.get(&key)? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&obj.value).map_err(|e| corrupt(&key, e))?;
        Ok(Some(Versioned {
            value,
            etag: obj.etag,
        }))
    }

    /// Create a tag only if the name is free (Lance's `put_if_absent`);
    /// `false` when it already exists.
    pub fn create_tag(&self, name: &str, tag: &Tag) -> Result<bool> {
        let body = serde_json::to_vec_pretty(tag).map_err(|e| Error::Other(e.to_string()))?;
        match self
            .bucket
            .put(&Self::tag_key(name), &body, PutMode::Create)
        {
            Ok(_) => Ok(true),
            Err(StorageError::AlreadyExists(_) | StorageError::PreconditionFailed(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Delete a tag; `false` when it was already gone.
    pub fn delete_tag(&self, name: &str) -> Result<bool> {
        Ok(self.bucket.delete(&Self::tag_key(name))?)
    }

    // -- branches

    /// Every branch ref by name (nested names from either file layout).
    pub fn branches(&self) -> Result<BTreeMap<String, Branch>> {
        let mut out = BTreeMap::new();
        for meta in self.bucket.list_all(format::BRANCHES_DIR)? {
            let Some(name) = meta
                .key
                .strip_prefix(format::BRANCHES_DIR)
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let Some(obj) = self.bucket.get(&meta.key)? else {
                continue;
            };
            let branch = serde_json::from_slice(&obj.value).map_err(|e| corrupt(&meta.key, e))?;
            out.insert(percent_decode(name), branch);
        }
        Ok(out)
    }

    /// One branch ref with its etag; `None` when absent.
    pub fn branch(&self, name: &str) -> Result<Option<Versioned<Branch>>> {
        let mut keys = vec![branch_file(name)];
        if name.contains('/') {
            keys.push(format!("{}{name}.json", format::BRANCHES_DIR));
        }
        for key in keys {
            if let Some(obj) = self.bucket.get(&key)? {
                let value = serde_json::from_slice(&obj.value).map_err(|e| corrupt(&key, e))?;
                return Ok(Some(Versioned {
                    value,
                    etag: obj.etag,
                }));
            }
        }
        Ok(None)
    }

    /// Write a branch ref: `Create` for a new branch, `IfMatch` to claim an
    /// existing one. `false`: someone else got there first.
    pub fn put_branch(&self, name: &str, branch: &Branch, mode: PutMode) -> Result<bool> {
        let body = serde_json::to_vec_pretty(branch).map_err(|e| Error::Other(e.to_string()))?;
        match self.bucket.put(&branch_file(name), &body, mode) {
            Ok(_) => Ok(true),
            Err(StorageError::AlreadyExists(_) | StorageError::PreconditionFailed(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Delete a branch ref file (either layout).
    pub fn delete_branch_ref(&self, name: &str) -> Result<()> {
        self.bucket.delete(&branch_file(name))?;
        if name.contains('/') {
            self.bucket
                .delete(&format!("{}{name}.json", format::BRANCHES_DIR))?;
        }
        Ok(())
    }

    /// Delete a branch's own files under `tree/<name>/` (Lance's directories
    /// only: a nested branch `<name>/x` keeps its tree); whether any were there.
    pub fn delete_tree(&self, name: &str) -> Result<bool> {
        let root = format::branch_root(name);
        let mut any = false;
        for meta in self.bucket.list_all(&root)? {
            let rest = &meta.key[root.len()..];
            let own = [
                "_versions/",
                "_transactions/",
                "data/",
                "_deletions/",
                "_indices/",
                "_blobs/",
            ]
            .iter()
            .any(|d| rest.starts_with(d));
            if own {
                self.bucket.delete(&meta.key)?;
                any = true;
            }
        }
        Ok(any)
    }

    /// Map a base path (as a writer recorded it) to a key prefix in this
    /// bucket: the root itself, or a branch tree under it. Base paths hold
    /// the URI the writer was given, which need not be this one (a moved or
    /// relatively opened dataset), so a `/tree/<branch>` suffix is what counts.
    pub fn base_prefix(&self, path: &str) -> String {
        let path = path
            .strip_prefix("file://")
            .unwrap_or(path)
            .trim_end_matches('/');
        let root = self.uri.trim_end_matches('/');
        if let Some(rest) = path.strip_prefix(root)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            let rest = rest.trim_start_matches('/');
            return if rest.is_empty() {
                String::new()
            } else {
                format!("{rest}/")
            };
        }
        match path.find(&format!("/{}/", format::BRANCH_DIR)) {
            Some(i) => format!("{}/", &path[i + 1..]),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_json_is_lances() {
        let legacy: Tag =
            serde_json::from_str(r#"{"branch":"feature","version":10,"manifestSize":2048}"#)
                .unwrap();
        assert_eq!(legacy.branch_name(), "feature");
        let t = Tag {
            branch: None,
            version: 1,
            created_at: Some("2026-11-30T01:15:22.006894208Z".into()),
            updated_at: Some("2026-11-30T01:15:22.006894208Z".into()),
            manifest_size: Some(442),
            metadata: BTreeMap::new(),
        };
        let text = String::from_utf8(serde_json::to_vec_pretty(&t).unwrap()).unwrap();
        assert!(text.starts_with("{\n  \"branch\": null,\n  \"version\": 1,\n  \"createdAt\""));
        assert!(text.contains("\"manifestSize\": 442"));
    }

    #[test]
    fn branch_json_and_ids() {
        let b: Branch = serde_json::from_str(
            r#"{"parentBranch": null, "identifier": {"version_mapping": [[2, "902f"]]},
                "parentVersion": 2, "createAt": 1796001322, "manifestSize": 462, "metadata": {}}"#,
        )
        .unwrap();
        assert_eq!(b.id(), "2:902f");
        let text: Branch = serde_json::from_str(
            r#"{"parentBranch": "a", "identifier": "2:u1:3:u2", "parentVersion": 3}"#,
        )
        .unwrap();
        assert_eq!(text.mapping(), vec![(2, "u1".into()), (3, "u2".into())]);
        let legacy: Branch =
            serde_json::from_str(r#"{"parentBranch": null, "parentVersion": 4, "createAt": 9}"#)
                .unwrap();
        assert_eq!(legacy.id(), "4:legacy--9");
        let out = String::from_utf8(serde_json::to_vec_pretty(&b).unwrap()).unwrap();
        assert!(out.contains("\"version_mapping\""), "{out}");
        assert!(out.contains("\"parentVersion\": 2"), "{out}");
    }

    #[test]
    fn names() {
        assert_eq!(branch_file("feature/x"), "_refs/branches/feature%2Fx.json");
        assert_eq!(percent_decode("feature%2Fx"), "feature/x");
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert!(check_branch_name("tether.ws.d1.relabel").is_ok());
        assert!(check_branch_name("main").is_err());
        assert!(check_branch_name("a//b").is_err());
        assert!(check_branch_name("a..b").is_err());
    }
}
