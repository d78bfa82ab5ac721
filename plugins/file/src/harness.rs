//! The conformance harness: fresh directories under a local scratch
//! directory, written through the `storage` capability as any writer would.

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child_dir;
use tether_sdk::kit::random_hex;
use tether_sdk::storage::{Bucket, PutMode};
use tether_sdk::{Error, Harness, Result};

use crate::{Locator, local_path};

/// Makes file objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileHarness;

impl Harness for FileHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let dir = scratch_child_dir(scratch_uri, "file", "obj")?;
        let bucket = Bucket::open(&dir)?;
        bucket.put(
            "a.txt",
            format!("alpha {}\n", random_hex(8)?).as_bytes(),
            PutMode::Create,
        )?;
        bucket.put("sub/b.bin", &[0, 1, 2, 3, 4, 5, 6, 7], PutMode::Create)?;
        Ok(json!({ "uri": dir }))
    }

    fn mutate(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "the file backend has no working refs (asked for {name})"
            )));
        }
        let bucket = Bucket::open(&local_path(&locator.uri)?)?;
        let id = random_hex(8)?;
        bucket.put(
            &format!("mut-{id}.txt"),
            format!("fresh {id}\n").as_bytes(),
            PutMode::Create,
        )?;
        Ok(())
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        let dir = scratch_child_dir(scratch_uri, "file", "fresh")?;
        Ok(json!({ "uri": dir }))
    }
}
