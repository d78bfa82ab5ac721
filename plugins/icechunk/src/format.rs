//! Icechunk's file envelope, ids, metadata values and clock
//! (research/icechunk.md §2-§4).
//!
//! Every file but chunks is: the magic `ICE🧊CHUNK`, a 24-byte implementation
//! name, the spec version byte, the file type byte, the compression byte
//! (1 = zstd; icechunk rejects anything else), then one zstd frame holding a
//! flatbuffer with file identifier `Ichk`.

use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use tether_sdk::{Error, Result};

/// The magic every Icechunk file starts with.
pub const MAGIC: &[u8; 12] = b"ICE\xF0\x9F\xA7\x8ACHUNK";
/// What we write as implementation name (space-padded to 24 bytes).
pub const IMPLEMENTATION: &str = concat!("tether-", env!("CARGO_PKG_VERSION"));
/// The one spec version this plugin reads and writes.
pub const SPEC_VERSION: u8 = 2;
/// The flatbuffer file identifier.
pub const FILE_IDENTIFIER: &str = "Ichk";
const HEADER_LEN: usize = 39;
const COMPRESSION_ZSTD: u8 = 1;

/// File type bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Snapshot = 1,
    TransactionLog = 4,
    RepoInfo = 6,
}

/// A file that is not an Icechunk file this plugin can read.
fn corrupt(key: &str, why: impl std::fmt::Display) -> Error {
    Error::backend(format!("{key} is not a valid Icechunk file: {why}"))
}

/// The spec version a file's header declares, refused unless it is 2.
pub fn check_spec_version(key: &str, version: u8) -> Result<()> {
    match version {
        SPEC_VERSION => Ok(()),
        1 => Err(Error::Capability(format!(
            "{key} is Icechunk spec version 1 (written by icechunk 1.x); tether reads spec \
             version 2 only: upgrade the repository with icechunk 2.x \
             (`icechunk.upgrade_icechunk_repository`) first"
        ))),
        v => Err(Error::Capability(format!(
            "{key} is Icechunk spec version {v}, newer than the version 2 this tether \
             understands; upgrade tether"
        ))),
    }
}

/// The flatbuffer inside an Icechunk file of type `want`.
pub fn decode(key: &str, data: &[u8], want: FileType) -> Result<Vec<u8>> {
    if data.len() < HEADER_LEN || &data[..12] != MAGIC {
        return Err(corrupt(key, "no Icechunk header"));
    }
    check_spec_version(key, data[36])?;
    if data[37] != want as u8 {
        return Err(corrupt(
            key,
            format!("file type {} where {want:?} was expected", data[37]),
        ));
    }
    if data[38] != COMPRESSION_ZSTD {
        return Err(corrupt(
            key,
            format!("unknown compression code {}", data[38]),
        ));
    }
    let mut out = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(&data[HEADER_LEN..])
        .map_err(|e| corrupt(key, format!("bad zstd frame: {e}")))?
        .read_to_end(&mut out)
        .map_err(|e| corrupt(key, format!("bad zstd frame: {e}")))?;
    Ok(out)
}

/// An Icechunk file of type `ty` holding `flatbuffer`.
pub fn encode(ty: FileType, flatbuffer: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + flatbuffer.len() / 2 + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(format!("{IMPLEMENTATION:<24.24}").as_bytes());
    out.extend_from_slice(&[SPEC_VERSION, ty as u8, COMPRESSION_ZSTD]);
    out.extend(ruzstd::encoding::compress_to_vec(
        flatbuffer,
        ruzstd::encoding::CompressionLevel::Fastest,
    ));
    out
}

/// Crockford base32, upper case, no padding (Icechunk's text form of ids).
fn b32(bytes: &[u8]) -> String {
    base32::encode(base32::Alphabet::Crockford, bytes)
}

/// A 12-byte id: snapshots, manifests, chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id12(pub [u8; 12]);

/// An 8-byte id: nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id8(pub [u8; 8]);

impl Id12 {
    /// Every repository's first snapshot (`1CECHNKREP0F1RSTCMT0`).
    pub const INITIAL: Id12 = Id12([
        0x0b, 0x1c, 0xc8, 0xd6, 0x78, 0x75, 0x80, 0xf0, 0xe3, 0x3a, 0x65, 0x34,
    ]);

    pub fn random() -> Result<Self> {
        Ok(Self(random_bytes()?))
    }

    /// Parse the 20-character text form; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        if text.len() != 20 {
            return None;
        }
        let bytes = base32::decode(base32::Alphabet::Crockford, text)?;
        let id = Self(bytes.get(..12)?.try_into().ok()?);
        // Reject non-canonical spellings (lower case, aliases) so one id has
        // one text.
        (id.to_string() == text).then_some(id)
    }
}

impl Id8 {
    pub fn random() -> Result<Self> {
        Ok(Self(random_bytes()?))
    }
}

impl std::fmt::Display for Id12 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&b32(&self.0))
    }
}

impl std::fmt::Display for Id8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&b32(&self.0))
    }
}

// The ids are `[uint8:N]` structs: pushed inline, byte-aligned.
impl flatbuffers::Push for Id12 {
    type Output = Id12;
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst.copy_from_slice(&self.0);
    }
    fn alignment() -> flatbuffers::PushAlignment {
        flatbuffers::PushAlignment::new(1)
    }
}

impl flatbuffers::Push for Id8 {
    type Output = Id8;
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst.copy_from_slice(&self.0);
    }
    fn alignment() -> flatbuffers::PushAlignment {
        flatbuffers::PushAlignment::new(1)
    }
}

/// `N` bytes from wasi:random.
pub fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| Error::Other(format!("no randomness: {e}")))?;
    Ok(bytes)
}

/// 12 random bytes in base32, for backup names.
pub fn random_name() -> Result<String> {
    Ok(b32(&random_bytes::<12>()?))
}

/// Microseconds since the epoch (wasi:clocks).
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A metadata value: FlexBuffers of a JSON value, as icechunk writes it
/// (`flexbuffers::to_vec` of a `serde_json::Value`).
pub fn flex_value(value: &serde_json::Value) -> Vec<u8> {
    // Serialising a JSON value cannot fail: every JSON value has a
    // FlexBuffers form.
    flexbuffers::to_vec(value).unwrap_or_default()
}

/// The string a metadata value holds, when it holds one.
pub fn flex_as_string(value: &[u8]) -> Option<String> {
    match flexbuffers::from_slice::<serde_json::Value>(value).ok()? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// The metadata of Icechunk's initial snapshot: `{"__icechunk": {"is_root": true}}`.
pub fn flex_initial_marker() -> Vec<u8> {
    flex_value(&serde_json::json!({ "__icechunk": { "is_root": true } }))
}
