//! The conformance harness: fresh directories under a local scratch
//! directory, written through the `storage` capability as any writer would.

use serde_json::{Value, json};
use tether_sdk::harness::child_uri;
use tether_sdk::storage::{Bucket, PutMode};
use tether_sdk::{Error, Harness, Result};

use crate::local_path;

/// Makes file objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileHarness;

/// 16 random hex digits (wasi:random), so concurrent runs never share a name.
fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| Error::Other(format!("no randomness: {e}")))?;
    Ok(hex::encode(bytes))
}

/// The scratch URI as a local directory; the file backend has no other home.
fn scratch_dir(scratch_uri: &str) -> Result<String> {
    local_path(&json!({ "uri": scratch_uri })).map_err(|e| {
        Error::Capability(format!(
            "the file harness needs a local scratch directory, not {scratch_uri}: {e}"
        ))
    })
}

impl Harness for FileHarness {
    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let dir = child_uri(
            &scratch_dir(scratch_uri)?,
            &format!("obj-{}", random_hex()?),
        );
        let bucket = Bucket::open(&dir)?;
        bucket.put(
            "a.txt",
            format!("alpha {}\n", random_hex()?).as_bytes(),
            PutMode::Create,
        )?;
        bucket.put("sub/b.bin", &[0, 1, 2, 3, 4, 5, 6, 7], PutMode::Create)?;
        Ok(json!({ "uri": dir }))
    }

    fn mutate(&self, locator: &Value, working_ref: Option<&str>) -> Result<()> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "the file backend has no working refs (asked for {name})"
            )));
        }
        let bucket = Bucket::open(&local_path(locator)?)?;
        let id = random_hex()?;
        bucket.put(
            &format!("mut-{id}.txt"),
            format!("fresh {id}\n").as_bytes(),
            PutMode::Create,
        )?;
        Ok(())
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let dir = child_uri(
            &scratch_dir(scratch_uri)?,
            &format!("fresh-{}", random_hex()?),
        );
        Ok(json!({ "uri": dir }))
    }
}
