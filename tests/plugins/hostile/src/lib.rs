//! Kind `hostile`: a plugin that attacks its sandbox, for the host's tests.
//!
//! `fingerprint` does what the locator's `attack` says. An attack that gets
//! through returns `Ok` with `"escaped": true`, so a test tells a refusal (an
//! error, or a trap) from an escape.
//!
//! | attack | what it tries |
//! | --- | --- |
//! | `none` | nothing: `{"ok": true}` (the normal object in a fan-out) |
//! | `read-host-file` | `std::fs::read(path)` with no directory preopened |
//! | `open-ungranted` | open storage URI `target`, which no locator key names |
//! | `symlink-escape` | read `key` from the granted `root` (a symlink inside points out) |
//! | `loop` | spin forever (the deadline must trap it) |
//! | `oom` | allocate and touch 16 MiB blocks until allocation fails |
//! | `panic` | panic |

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::storage::Bucket;
use tether_sdk::{Backend, Descriptor, Error, Result, cap, descriptor};

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
}

#[derive(Default)]
pub struct Hostile;

impl Backend for Hostile {
    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["root".into()],
            ..descriptor("hostile", &[cap::FINGERPRINT])
        }
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
            "open-ungranted" => {
                Bucket::open(&loc.target)?;
                Ok(json!({ "escaped": true }))
            }
            "symlink-escape" => match Bucket::open(&loc.root)?.get(&loc.key)? {
                Some(object) => Ok(json!({ "escaped": true, "len": object.value.len() })),
                None => Err(Error::not_found(format!("{} not found", loc.key))),
            },
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
            other => Err(Error::invalid(format!("unknown attack {other:?}"))),
        }
    }
}

tether_sdk::export!(Hostile);
