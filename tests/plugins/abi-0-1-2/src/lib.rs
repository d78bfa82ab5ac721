//! A plugin built against the frozen `tether:backend@0.1.2` contract
//! (`tests/fixtures/wit-0.1.2`), straight from `wit_bindgen` rather than
//! through `tether-sdk`, exporting the optional `describe-ext` and
//! `describe-fs` but not `describe-net` (0.1.3), and importing no `sql`:
//! `host/tests/abi.rs` shows the current host loads it, still preopens its
//! directory, and grants it no network; and, since it has no `verify-many`
//! (0.1.5), that the host asks it pin by pin.

wit_bindgen::generate!({
    path: "../../fixtures/wit-0.1.2",
    inline: "
        package abi-test:old-0-1-2;
        world old {
            include tether:backend/backend-plugin@0.1.2;
            export tether:backend/describe-ext@0.1.2;
            export tether:backend/describe-fs@0.1.2;
        }
    ",
    world: "abi-test:old-0-1-2/old",
    generate_all,
});

use exports::tether::backend::backend::Guest;
use exports::tether::backend::describe_ext::Guest as DescribeExt;
use exports::tether::backend::describe_fs::Guest as DescribeFs;
use tether::backend::types::{
    Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Target, VerifyReport,
    VerifyStatus,
};

struct Old;

/// The locator's `path` (`/` when it has none).
fn path_of(locator: &str) -> &str {
    locator
        .split("\"path\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("/")
}

fn unsupported<T>(member: &str) -> Result<T, Error> {
    Err(Error::Capability(format!(
        "the abi-old-2 backend does not support {member}"
    )))
}

impl DescribeExt for Old {
    fn config_keys() -> Vec<String> {
        vec!["region".into()]
    }
}

impl DescribeFs for Old {
    fn filesystem_keys() -> Vec<String> {
        vec!["path".into()]
    }
}

impl Guest for Old {
    fn describe() -> Descriptor {
        Descriptor {
            kind: "abi-old-2".into(),
            maturity: "experimental".into(),
            capabilities: vec!["FINGERPRINT".into()],
            volatile_keys: Vec::new(),
            local_path_keys: vec!["path".into()],
            local_path_prefixes: Vec::new(),
            storage_keys: Vec::new(),
            tree_keys: Vec::new(),
            promote_hint: String::new(),
            abi: "0.1.2".into(),
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

    /// Whether the locator's `path` is visible: it is, since this plugin
    /// asked for it through `describe-fs`.
    fn fingerprint(locator: String, _working_ref: Option<String>) -> Result<String, Error> {
        let visible = std::fs::metadata(path_of(&locator)).is_ok();
        Ok(format!("{{\"visible\":{visible}}}"))
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

    /// A pin is the file `<path>/<pin ref>` holding the state's JSON: ok
    /// when it holds `state`, drifted when another, missing when absent.
    fn verify(
        locator: String,
        state: String,
        pin: Option<PinRef>,
        _deep: bool,
    ) -> Result<VerifyReport, Error> {
        let Some(pin) = pin else {
            return unsupported("verify without a pin");
        };
        let file = format!("{}/{}", path_of(&locator), pin.ref_);
        let (status, message) = match std::fs::read_to_string(&file) {
            Ok(held) if held == state => (VerifyStatus::Ok, format!("{} holds it", pin.ref_)),
            Ok(held) => (VerifyStatus::Drifted, format!("{} holds {held}", pin.ref_)),
            Err(_) => (VerifyStatus::Missing, format!("{} is gone", pin.ref_)),
        };
        Ok(VerifyReport { status, message })
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
