//! The conformance harness: each object is a new Neon project (made
//! through the API the run's configuration grants), and a write is an
//! insert over SQL on the branch's read-write endpoint.

use serde_json::{Value, json};
use tether_sdk::kit::scratch_name;
use tether_sdk::{Backend, Harness, Result};

use crate::api::{READ_WRITE, create_project};
use crate::{Locator, NeonBackend};

/// Makes neon objects for `tether-conformance`.
#[derive(Debug, Default, Clone, Copy)]
pub struct NeonHarness;

impl NeonHarness {
    /// The backend as the host configured this call (the harness gets the
    /// same configuration).
    fn backend() -> NeonBackend {
        let mut b = NeonBackend::default();
        if let Some(config) = crate::harness_config() {
            let _ = b.configure(config);
        }
        b
    }
}

impl Harness for NeonHarness {
    type Locator = Locator;

    fn new_object(&self, _scratch_uri: &str) -> Result<Value> {
        let b = Self::backend();
        let (id, database, role) =
            create_project(b.api_url(), &scratch_name("tether-conformance")?)?;
        Ok(json!({"project_id": id, "database": database, "role": role, "branch": "main"}))
    }

    fn mutate(&self, loc: &Locator, working_ref: Option<&str>) -> Result<()> {
        let b = Self::backend();
        let p = b.project(loc)?;
        let branch = p.named(working_ref.unwrap_or(&loc.branch))?;
        let compute = b.compute(&p, loc, branch, READ_WRITE)?;
        compute.execute("CREATE TABLE IF NOT EXISTS tether_harness (n bigint)")?;
        compute.execute("INSERT INTO tether_harness VALUES (1)")?;
        Ok(())
    }

    fn fresh_locator(&self, _scratch_uri: &str) -> Result<Value> {
        Ok(json!({
            "project_id": scratch_name("prj-missing")?,
            "database": "neondb",
            "role": "neondb_owner",
        }))
    }
}
