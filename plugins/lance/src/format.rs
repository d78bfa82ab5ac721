//! Lance's on-disk layout (research/formats.md §1.1–§1.3): where a branch's
//! versions live, how manifest files are named in both schemes, the manifest
//! file's framing, and the reader feature flags this plugin understands.

use prost::Message;
use tether_sdk::{Error, Result};

use crate::proto::{self, Manifest};

/// The directory holding every non-main branch's tree.
pub const BRANCH_DIR: &str = "tree";
/// Tags, at the dataset root only.
pub const TAGS_DIR: &str = "_refs/tags/";
/// Branch ref files, at the dataset root only.
pub const BRANCHES_DIR: &str = "_refs/branches/";
/// The magic a manifest file ends with.
const MAGIC: &[u8; 4] = b"LANC";
/// The framing version the writer puts before the magic.
const MAJOR: i16 = 0;
const MINOR: i16 = 2;
/// The footer: manifest position (i64), major, minor (i16 each), magic.
const FOOTER: usize = 16;
/// The largest manifest this plugin reads (a bound on clone-controlled input).
pub const MAX_MANIFEST: u64 = 256 << 20;
/// How much of a manifest's tail one read fetches (Lance reads 64 KiB).
const TAIL: u64 = 64 << 10;

/// Reader feature flags (docs/src/format/table/versioning.md) whose meaning
/// this plugin's metadata-only view respects: deletion files, stable row
/// ids, the deprecated bit 4, table config, base paths, and transaction
/// files disabled. Any other bit refuses the dataset.
pub const KNOWN_READER_FLAGS: u64 = 1 | 2 | 4 | 8 | 16 | 32;
/// Base paths: what a shallow clone (a branch) sets.
pub const FLAG_BASE_PATHS: u64 = 16;

/// The name Lance's docs give a feature flag bit, for refusals.
fn flag_name(bit: u64) -> String {
    match bit {
        64 => "data overlay files (64)".into(),
        128 => "covered index metadata (128)".into(),
        256 => "mixed data-file versions (256)".into(),
        512 => "fragment-metadata tree / fragment reuse with stable row ids (512)".into(),
        1024 => "fragment reuse index (1024)".into(),
        2048 => "managed blobs (2048)".into(),
        other => format!("unknown feature flag {other}"),
    }
}

/// Refuse a manifest using a reader feature this plugin does not understand,
/// naming it; `what` names the manifest.
pub fn check_reader_flags(what: &str, flags: u64) -> Result<()> {
    let unknown = flags & !KNOWN_READER_FLAGS;
    if unknown == 0 {
        return Ok(());
    }
    let names: Vec<String> = (0..64)
        .map(|i| 1u64 << i)
        .filter(|b| unknown & b != 0)
        .map(flag_name)
        .collect();
    Err(Error::Capability(format!(
        "{what} uses Lance reader feature {} that tether's lance backend does not understand; \
         it reads and versions only datasets without it (use the dataset with Lance directly, \
         or track it with `--pin record` through another backend)",
        names.join(", ")
    )))
}

/// The key prefix of a branch's root: empty for `main`, `tree/<name>/` else.
pub fn branch_root(branch: &str) -> String {
    if branch == "main" {
        String::new()
    } else {
        format!("{BRANCH_DIR}/{branch}/")
    }
}

/// The V2 manifest name of `version` (`u64::MAX - version`, 20 digits).
pub fn v2_name(version: u64) -> String {
    format!("{:020}.manifest", u64::MAX - version)
}

/// The V1 manifest name of `version`.
pub fn v1_name(version: u64) -> String {
    format!("{version}.manifest")
}

/// Which naming scheme a file in `_versions/` uses, and its version;
/// `None` for anything else (detached `d*` manifests, temporary files, the
/// version hint, the obsolete `_latest.manifest`).
pub fn parse_version_name(name: &str) -> Option<(Scheme, u64)> {
    let stem = name.strip_suffix(".manifest")?;
    if !stem.bytes().all(|b| b.is_ascii_digit()) || stem.is_empty() {
        return None;
    }
    let n: u64 = stem.parse().ok()?;
    if name.len() == 29 {
        Some((Scheme::V2, u64::MAX - n))
    } else {
        Some((Scheme::V1, n))
    }
}

/// Manifest naming schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    V1,
    V2,
}

/// The footer of a manifest file: where the manifest message starts.
pub fn footer_position(what: &str, tail: &[u8], size: u64) -> Result<u64> {
    let corrupt = |why: &str| Error::backend(format!("{what} is not a Lance manifest: {why}"));
    if tail.len() < FOOTER || size < FOOTER as u64 {
        return Err(corrupt("too short"));
    }
    let footer = &tail[tail.len() - FOOTER..];
    if &footer[12..16] != MAGIC {
        return Err(corrupt("no LANC magic at the end"));
    }
    let pos = i64::from_le_bytes(footer[0..8].try_into().expect("8 bytes"));
    let major = i16::from_le_bytes([footer[8], footer[9]]);
    if major != MAJOR {
        return Err(Error::Capability(format!(
            "{what} has manifest framing version {major}, which tether's lance backend does \
             not read"
        )));
    }
    u64::try_from(pos)
        .ok()
        .filter(|p| p + 4 <= size - FOOTER as u64)
        .ok_or_else(|| corrupt("manifest position out of range"))
}

/// A manifest file's bytes: `[u32 len][transaction]` then
/// `[u32 len][manifest]` and the footer, as Lance writes it (the inline
/// transaction at offset 0, which the manifest's transaction section names).
pub fn frame_manifest(transaction: &[u8], manifest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(transaction.len() + manifest.len() + 24);
    out.extend_from_slice(&(transaction.len() as u32).to_le_bytes());
    out.extend_from_slice(transaction);
    let pos = out.len() as i64;
    out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
    out.extend_from_slice(manifest);
    out.extend_from_slice(&pos.to_le_bytes());
    out.extend_from_slice(&MAJOR.to_le_bytes());
    out.extend_from_slice(&MINOR.to_le_bytes());
    out.extend_from_slice(MAGIC);
    out
}

/// A manifest read from storage: the decoded view and the raw message (for
/// a field-preserving rewrite).
#[derive(Debug, Clone)]
pub struct ManifestFile {
    pub manifest: Manifest,
    pub message: Vec<u8>,
    /// The whole file's size (what tags and branch refs record).
    pub size: u64,
    pub key: String,
}

/// Read the manifest at `key` (whose size is `size`) through `get_range`.
pub fn read_manifest(
    key: &str,
    size: u64,
    get_range: impl Fn(u64, u64) -> Result<Vec<u8>>,
) -> Result<ManifestFile> {
    if size > MAX_MANIFEST {
        return Err(Error::backend(format!(
            "{key} is {size} bytes, more than the {MAX_MANIFEST} a Lance manifest is read to"
        )));
    }
    let start = size.saturating_sub(TAIL);
    let tail = get_range(start, size - start)?;
    let pos = footer_position(key, &tail, size)?;
    let whole_region = |from: u64| -> Result<Vec<u8>> {
        if from >= start {
            let off = (from - start) as usize;
            Ok(tail[off..tail.len() - FOOTER].to_vec())
        } else {
            get_range(from, size - FOOTER as u64 - from)
        }
    };
    let region = whole_region(pos)?;
    let len = u32::from_le_bytes(region[..4].try_into().expect("4 bytes")) as usize;
    if len != region.len() - 4 {
        return Err(Error::backend(format!(
            "{key} is not a Lance manifest: its length prefix says {len} bytes, the file {}",
            region.len() - 4
        )));
    }
    let message = region[4..].to_vec();
    let manifest = Manifest::decode(message.as_slice())
        .map_err(|e| Error::backend(format!("{key}: cannot decode the manifest: {e}")))?;
    check_reader_flags(key, manifest.reader_feature_flags)?;
    Ok(ManifestFile {
        manifest,
        message,
        size,
        key: key.to_owned(),
    })
}

/// The operation of a manifest's inline transaction (`append`, ...), read
/// through `get_range`; empty when there is none.
pub fn inline_operation(
    file: &ManifestFile,
    get_range: impl Fn(u64, u64) -> Result<Vec<u8>>,
) -> Result<&'static str> {
    let Some(offset) = file.manifest.transaction_offset() else {
        return Ok("");
    };
    if offset + 4 > file.size {
        return Ok("");
    }
    let len = get_range(offset, 4)?;
    let len = u64::from(u32::from_le_bytes(len[..4].try_into().expect("4 bytes")));
    if offset + 4 + len > file.size || len > MAX_MANIFEST {
        return Ok("");
    }
    let txn = get_range(offset + 4, len)?;
    Ok(proto::operation_name(&txn))
}

/// A random UUID (version 4) in its hyphenated form, as Lance names
/// transactions.
pub fn uuid4() -> Result<[u8; 16]> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::Other(format!("no randomness: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Ok(b)
}

/// `8-4-4-4-12` hex.
pub fn hyphenated(u: &[u8; 16]) -> String {
    let h = hex::encode(u);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names() {
        assert_eq!(v2_name(1), "18446744073709551614.manifest");
        assert_eq!(
            parse_version_name("18446744073709551614.manifest"),
            Some((Scheme::V2, 1))
        );
        assert_eq!(parse_version_name("7.manifest"), Some((Scheme::V1, 7)));
        assert_eq!(parse_version_name("d7.manifest"), None);
        assert_eq!(parse_version_name("latest_version_hint.json"), None);
        assert_eq!(parse_version_name(".tmp_7.manifest_abc"), None);
        assert_eq!(branch_root("main"), "");
        assert_eq!(branch_root("a/b"), "tree/a/b/");
    }

    #[test]
    fn framing_round_trip() {
        let m = Manifest {
            version: 3,
            ..Default::default()
        }
        .encode_to_vec();
        let file = frame_manifest(b"txn", &m);
        let size = file.len() as u64;
        let read = read_manifest("k", size, |off, len| {
            Ok(file[off as usize..(off + len) as usize].to_vec())
        })
        .unwrap();
        assert_eq!(read.manifest.version, 3);
        assert_eq!(read.message, m);
        let mut bad = file.clone();
        let n = bad.len();
        bad[n - 1] = b'X';
        assert!(
            read_manifest("k", size, |off, len| {
                Ok(bad[off as usize..(off + len) as usize].to_vec())
            })
            .is_err()
        );
    }

    #[test]
    fn unknown_reader_flags_are_refused_by_name() {
        assert!(check_reader_flags("m", 1 | 16).is_ok());
        let e = check_reader_flags("m", 512 | 8192).unwrap_err().to_string();
        assert!(e.contains("fragment-metadata tree"), "{e}");
        assert!(e.contains("unknown feature flag 8192"), "{e}");
    }

    #[test]
    fn uuids() {
        let u = uuid4().unwrap();
        let h = hyphenated(&u);
        assert_eq!(h.len(), 36);
        assert_eq!(&h[14..15], "4");
    }
}
