//! A plugin built against the frozen `tether:backend@0.1.0` contract
//! (`tests/fixtures/wit-0.1.0`), straight from `wit_bindgen` rather than
//! through `tether-sdk`: the SDK follows the live contract, and this plugin
//! must stay what an old third-party plugin is, so `host/tests/abi.rs` can show
//! the current host still loads and serves it.
//!
//! It has a real `describe`, `identity` and `fingerprint`: with a `root`
//! locator key, the etag of `state.json` there, read through the 0.1.0
//! `storage` import (so the host's newer imports are linked to an old plugin
//! too), else a constant state; it logs through the 0.1.0 `log` import. Every
//! other member refuses with `error::capability`, as an old plugin that
//! declares only FINGERPRINT would.

wit_bindgen::generate!({
    world: "backend-plugin",
    path: "../../fixtures/wit-0.1.0",
});

use exports::tether::backend::backend::Guest;
use tether::backend::log::{Level, log};
use tether::backend::storage::Bucket;
use tether::backend::types::{
    Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Target, VerifyReport,
};

/// The state reported without a `root`: that system never changes.
pub const STATE: &str = r#"{"state":"frozen"}"#;

struct Old;

fn unsupported<T>(member: &str) -> Result<T, Error> {
    Err(Error::Capability(format!(
        "the abi-old backend does not support {member}"
    )))
}

impl Guest for Old {
    fn describe() -> Descriptor {
        Descriptor {
            kind: "abi-old".into(),
            maturity: "experimental".into(),
            capabilities: vec!["FINGERPRINT".into()],
            volatile_keys: Vec::new(),
            local_path_keys: Vec::new(),
            local_path_prefixes: Vec::new(),
            storage_keys: vec!["root".into()],
            tree_keys: Vec::new(),
            promote_hint: String::new(),
            abi: "0.1.0".into(),
        }
    }

    fn configure(_config: String) -> Result<(), Error> {
        Ok(())
    }

    fn validate_locator(_locator: String) -> Result<(), Error> {
        Ok(())
    }

    // The host hands the locator over as canonical JSON, and all of it names
    // the (imaginary) system, so it is its own identity.
    fn identity(locator: String) -> Result<String, Error> {
        Ok(locator)
    }

    fn effective_capabilities(_locator: String, _policy: String) -> Result<Vec<String>, Error> {
        Ok(vec!["FINGERPRINT".into()])
    }

    fn fingerprint(locator: String, working_ref: Option<String>) -> Result<String, Error> {
        if working_ref.is_some() {
            return unsupported("working refs");
        }
        let locator: serde_json::Value =
            serde_json::from_str(&locator).map_err(|e| Error::Invalid(format!("locator: {e}")))?;
        let Some(root) = locator.get("root").and_then(|r| r.as_str()) else {
            return Ok(STATE.into());
        };
        let storage = |e| Error::Backend(format!("{e:?}"));
        let meta = Bucket::open(root)
            .map_err(storage)?
            .head("state.json")
            .map_err(storage)?
            .ok_or_else(|| Error::NotFound(format!("no state.json under {root}")))?;
        log(
            Level::Debug,
            &format!("abi-old: state.json at {}", meta.etag),
        );
        // One key, so this is canonical JSON.
        Ok(serde_json::json!({ "etag": meta.etag }).to_string())
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
