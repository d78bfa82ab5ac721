//! Kind `hostile`: a plugin that attacks its sandbox, for the host's tests.
//!
//! `fingerprint` does what the locator's `attack` says. An attack that gets
//! through returns `Ok` with `"escaped": true`, so a test tells a refusal (an
//! error, or a trap) from an escape. Its `describe-meta` is an attack too:
//! huge fields full of terminal escapes (`Backend::meta` below).
//!
//! | attack | what it tries |
//! | --- | --- |
//! | `none` | nothing: `{"ok": true}` (the normal object in a fan-out) |
//! | `read-host-file` | `std::fs::read(path)` with no directory preopened |
//! | `open-ungranted` | open storage URI `target`, which no locator key names |
//! | `symlink-escape` | read `key` from the granted `root` (a symlink inside points out) |
//! | `fs-read` | `std::fs::read(path)`, with the directory under `fsroot` preopened |
//! | `fs-write` | `std::fs::write(path, ..)`, likewise |
//! | `fs-list` | `std::fs::read_dir(path)`, likewise: the names it sees |
//! | `loop` | spin forever (the deadline must trap it) |
//! | `oom` | allocate and touch 16 MiB blocks until allocation fails |
//! | `panic` | panic |
//! | `huge-output` | return a state holding a string of `mib` MiB (default 300) |
//! | `huge-error` | fail with a message of `mib` MiB (default 300) |
//! | `reopen` | not an attack: two handles on `root` (the host shares one bucket between them) see each other's writes and deletes of `key`, even when `root` did not exist yet |

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::storage::{Bucket, PutMode};
use tether_sdk::{Backend, DescribeExt, DescribeFs, Descriptor, Error, Result, cap, descriptor};

#[derive(Deserialize)]
struct Locator {
    root: String,
    attack: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    mib: Option<usize>,
}

fn fs_refused(what: &str, path: &str, e: std::io::Error) -> Error {
    Error::backend(format!("{what} {path} was refused: {e}"))
}

#[derive(Default)]
pub struct Hostile;

impl Backend for Hostile {
    // Taken raw and parsed per attack: each attack reads other fields.
    type Locator = Value;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["root".into()],
            ..descriptor("hostile", &[cap::FINGERPRINT])
        }
    }

    /// Metadata that tries to flood and forge a listing: a 100 000-character
    /// name, an escape sequence, a bidi override and a line break.
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        tether_sdk::Meta {
            name: format!("evil\x1b[2J\u{202e}{}", "N".repeat(100_000)),
            version: "6.6.6\nFAKE-KIND  sha256:0000  built-in".into(),
            authors: (0..1000).map(|i| format!("author{i}\x07")).collect(),
            ..package
        }
        .tested_against("\u{9b}31m".repeat(10_000))
    }

    fn identity(&self, locator: &Value) -> Result<Value> {
        let loc: Locator = tether_sdk::locator(locator)?;
        Ok(json!({ "root": loc.root }))
    }

    fn fingerprint(&self, locator: &Value, _: Option<&str>) -> Result<Value> {
        let loc: Locator = tether_sdk::locator(locator)?;
        match loc.attack.as_str() {
            "none" => Ok(json!({ "ok": true })),
            "read-host-file" => match std::fs::read(&loc.path) {
                Ok(bytes) => Ok(json!({ "escaped": true, "len": bytes.len() })),
                Err(e) => Err(Error::backend(format!(
                    "reading {} was refused: {e}",
                    loc.path
                ))),
            },
            // Through the `describe-fs` grant: a real directory at `fsroot`.
            "fs-read" => match std::fs::read(&loc.path) {
                Ok(bytes) => Ok(json!({ "escaped": true, "len": bytes.len() })),
                Err(e) => Err(fs_refused("reading", &loc.path, e)),
            },
            "fs-write" => match std::fs::write(&loc.path, b"written by a plugin") {
                Ok(()) => Ok(json!({ "escaped": true })),
                Err(e) => Err(fs_refused("writing", &loc.path, e)),
            },
            "fs-list" => match std::fs::read_dir(&loc.path) {
                Ok(entries) => {
                    let mut names: Vec<String> = entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    Ok(json!({ "escaped": true, "names": names }))
                }
                Err(e) => Err(fs_refused("listing", &loc.path, e)),
            },
            "open-ungranted" => {
                Bucket::open(&loc.target)?;
                Ok(json!({ "escaped": true }))
            }
            "symlink-escape" => match Bucket::open(&loc.root)?.get(&loc.key)? {
                Some(object) => Ok(json!({ "escaped": true, "len": object.value.len() })),
                None => Err(Error::not_found(format!("{} not found", loc.key))),
            },
            "reopen" => {
                let (a, b) = (Bucket::open(&loc.root)?, Bucket::open(&loc.root)?);
                let text = |o: Option<tether_sdk::storage::Versioned<Vec<u8>>>| {
                    o.map(|o| String::from_utf8_lossy(&o.value).into_owned())
                };
                let before = text(b.get(&loc.key)?);
                a.put(&loc.key, b"one", PutMode::Overwrite)?;
                let written = text(b.get(&loc.key)?);
                a.delete(&loc.key)?;
                let deleted = text(b.get(&loc.key)?);
                Ok(json!({ "before": before, "written": written, "deleted": deleted }))
            }
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "oom" => {
                let mut hoard = Vec::new();
                loop {
                    let mut block = vec![0u8; 16 << 20];
                    // Touch every page, so the memory is really committed.
                    block.iter_mut().step_by(4096).for_each(|b| *b = 1);
                    hoard.push(std::hint::black_box(block));
                }
            }
            "panic" => panic!("hostile plugin panicked on purpose"),
            "huge-output" => Ok(json!({ "blob": "x".repeat(loc.mib.unwrap_or(300) << 20) })),
            "huge-error" => Err(Error::backend(format!(
                "\u{1b}[2J{}",
                "e".repeat(loc.mib.unwrap_or(300) << 20)
            ))),
            other => Err(Error::invalid(format!("unknown attack {other:?}"))),
        }
    }
}

impl DescribeExt for Hostile {
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

impl DescribeFs for Hostile {
    fn filesystem_keys(&self) -> Vec<String> {
        vec!["fsroot".into()]
    }
}

tether_sdk::export!(Hostile, [describe_ext, describe_fs]);
