//! The conformance harness: fresh Lance datasets under the scratch URI and
//! new versions on them, written the way Lance writes them (a transaction
//! file, then the manifest put create-only). A new dataset is an empty
//! table with one int64 column `id` (what `lance.write_dataset` of an empty
//! table writes); each `mutate` is a new version adding a column, so the
//! datasets need no data files and pylance reads them as they are.

use serde_json::{Value, json};
use tether_sdk::harness::scratch_child;
use tether_sdk::storage::PutMode;
use tether_sdk::{Harness, Result};

use crate::table::Table;
use crate::{Locator, clone, format};

/// Makes lance objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct LanceHarness;

fn write(t: &Table, branch: &str, version: u64, new: &clone::NewVersion) -> Result<()> {
    let root = format::branch_root(branch);
    t.bucket.put(
        &format!("{root}_transactions/{}", new.transaction_name),
        &new.transaction,
        PutMode::Create,
    )?;
    t.bucket.put(
        &format!("{root}_versions/{}", format::v2_name(version)),
        &new.manifest_file,
        PutMode::Create,
    )?;
    Ok(())
}

impl Harness for LanceHarness {
    type Locator = Locator;

    fn new_object(&self, scratch_uri: &str) -> Result<Value> {
        let uri = format!("{}.lance", scratch_child(scratch_uri, "table")?);
        let t = Table::open(&uri)?;
        write(&t, "main", 1, &clone::empty_dataset()?)?;
        Ok(json!({ "uri": uri }))
    }

    fn mutate(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        let branch = working_ref.unwrap_or(&locator.branch);
        let t = crate::open(locator)?;
        let latest = t.latest(branch)?;
        let file = t.read(&latest)?;
        let column = format!("c{}", latest.version + 1);
        write(
            &t,
            branch,
            latest.version + 1,
            &clone::add_column(&file, &column)?,
        )
    }

    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value> {
        Ok(json!({ "uri": format!("{}.lance", scratch_child(scratch_uri, "fresh")?) }))
    }
}
