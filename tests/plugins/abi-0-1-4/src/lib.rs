//! A plugin built against the frozen `tether:backend@0.1.4` contract
//! (`tests/fixtures/wit-0.1.4`), straight from `wit_bindgen` rather than
//! through `tether-sdk`, using what 0.1.4 added: `storage.bucket.head-version`.
//! It has no `describe-meta` (0.1.5). `host/tests/abi.rs` shows the current
//! host loads it and answers its `head-version` calls.

wit_bindgen::generate!({
    path: "../../fixtures/wit-0.1.4",
    inline: "
        package abi-test:old-0-1-4;
        world old {
            include tether:backend/backend-plugin@0.1.4;
            export tether:backend/describe-ext@0.1.4;
        }
    ",
    world: "abi-test:old-0-1-4/old",
    generate_all,
});

use exports::tether::backend::backend::Guest;
use exports::tether::backend::describe_ext::Guest as DescribeExt;
use tether::backend::storage::Bucket;
use tether::backend::types::{
    Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Target, VerifyReport,
};

struct Old;

fn unsupported<T>(member: &str) -> Result<T, Error> {
    Err(Error::Capability(format!(
        "the abi-old-4 backend does not support {member}"
    )))
}

/// A string field of the locator (`{"root": ...}`), without a JSON parser
/// the frozen contract would not need.
fn field(locator: &str, key: &str) -> Option<String> {
    let rest = locator.split(&format!("\"{key}\":\"")).nth(1)?;
    rest.split('"').next().map(String::from)
}

impl DescribeExt for Old {
    fn config_keys() -> Vec<String> {
        Vec::new()
    }
}

impl Guest for Old {
    fn describe() -> Descriptor {
        Descriptor {
            kind: "abi-old-4".into(),
            maturity: "experimental".into(),
            capabilities: vec!["FINGERPRINT".into()],
            volatile_keys: Vec::new(),
            local_path_keys: Vec::new(),
            local_path_prefixes: Vec::new(),
            storage_keys: vec!["root".into()],
            tree_keys: Vec::new(),
            promote_hint: String::new(),
            abi: "0.1.4".into(),
        }
    }

    fn configure(_config: String) -> Result<(), Error> {
        Ok(())
    }

    fn validate_locator(_locator: String) -> Result<(), Error> {
        Ok(())
    }

    fn identity(locator: String) -> Result<String, Error> {
        Ok(locator)
    }

    fn effective_capabilities(_locator: String, _policy: String) -> Result<Vec<String>, Error> {
        Ok(vec!["FINGERPRINT".into()])
    }

    /// `state.json` under the locator's `root`, through 0.1.4's
    /// `head-version`: its etag and version id (none on a local bucket), and
    /// whether a named past version (`version` in the locator) was found.
    fn fingerprint(locator: String, _working_ref: Option<String>) -> Result<String, Error> {
        let root = field(&locator, "root").ok_or_else(|| Error::Invalid("no root".into()))?;
        let bucket = Bucket::open(&root).map_err(|e| Error::Backend(format!("open: {e:?}")))?;
        let asked = field(&locator, "version");
        let head = bucket
            .head_version("state.json", asked.as_deref())
            .map_err(|e| Error::Backend(format!("head-version: {e:?}")))?;
        Ok(match head {
            None => "{\"found\":false}".to_string(),
            Some(v) => format!(
                "{{\"etag\":\"{}\",\"found\":true,\"size\":{},\"version\":{}}}",
                v.meta.etag,
                v.meta.size,
                v.version
                    .map_or("null".to_string(), |id| format!("\"{id}\""))
            ),
        })
    }

    fn pin(_: String, _: String, _: String) -> Result<PinRef, Error> {
        unsupported("pin")
    }

    fn unpin(_: String, _: PinRef) -> Result<(), Error> {
        unsupported("unpin")
    }

    fn list_pins(_: String) -> Result<Vec<String>, Error> {
        unsupported("list-pins")
    }

    fn verify(_: String, _: String, _: Option<PinRef>, _: bool) -> Result<VerifyReport, Error> {
        unsupported("verify")
    }

    fn fork(_: String, _: Target, _: String, _: Expected) -> Result<String, Error> {
        unsupported("fork")
    }

    fn delete_working_ref(_: String, _: String) -> Result<(), Error> {
        unsupported("delete-working-ref")
    }

    fn working_ref_blockers(_: String, _: String) -> Result<Option<String>, Error> {
        unsupported("working-ref-blockers")
    }

    fn list_working_refs(_: String) -> Result<Vec<String>, Error> {
        unsupported("list-working-refs")
    }

    fn rename_pin(_: String, _: PinRef, _: String, _: String) -> Result<PinRef, Error> {
        unsupported("rename-pin")
    }

    fn rename_working_ref(_: String, _: String, _: String) -> Result<String, Error> {
        unsupported("rename-working-ref")
    }

    fn promote(_: String, _: Target, _: Expected) -> Result<String, Error> {
        unsupported("promote")
    }

    fn merge(_: String, _: Target, _: String, _: Expected) -> Result<String, Error> {
        unsupported("merge")
    }

    fn ancestor_of(_: String, _: String, _: String) -> Result<Option<bool>, Error> {
        unsupported("ancestor-of")
    }

    fn open(_: String, _: Target, _: bool) -> Result<Handle, Error> {
        unsupported("open")
    }

    fn history(_: String, _: Option<String>, _: u32) -> Result<Vec<HistoryEntry>, Error> {
        unsupported("history")
    }

    fn diff(
        _: String,
        _: String,
        _: String,
        _: Option<String>,
        _: Option<String>,
    ) -> Result<ObjectDiff, Error> {
        unsupported("diff")
    }

    fn listing(_: String, _: String) -> Result<Option<String>, Error> {
        unsupported("listing")
    }

    fn create(_: String, _: String) -> Result<String, Error> {
        unsupported("create")
    }

    fn owner(_: String) -> Result<Option<String>, Error> {
        unsupported("owner")
    }

    fn is_ref_empty(_: String, _: Vec<String>) -> Result<Option<bool>, Error> {
        unsupported("is-ref-empty")
    }

    fn delete_store(_: String, _: String) -> Result<(), Error> {
        unsupported("delete-store")
    }

    fn check_quiescence(_: String, _: Option<String>) -> Result<(), Error> {
        unsupported("check-quiescence")
    }

    fn branch_scope(_: String) -> Result<String, Error> {
        unsupported("branch-scope")
    }

    fn ref_namespace(_: String) -> Result<String, Error> {
        unsupported("ref-namespace")
    }

    fn state_addressable(_: String, _: String) -> Result<bool, Error> {
        unsupported("state-addressable")
    }
}

export!(Old);
