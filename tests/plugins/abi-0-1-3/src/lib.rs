//! A plugin built against the frozen `tether:backend@0.1.3` contract
//! (`tests/fixtures/wit-0.1.3`), straight from `wit_bindgen` rather than
//! through `tether-sdk`, using what 0.1.3 added: it imports `sql` and exports
//! `describe-net` (one HTTP grant, one SQL key), and has no `describe-meta`
//! (0.1.5). `host/tests/abi.rs` shows the current host loads it, answers its
//! `describe-net`, and serves its SQL connection.

wit_bindgen::generate!({
    path: "../../fixtures/wit-0.1.3",
    inline: "
        package abi-test:old-0-1-3;
        world old {
            include tether:backend/backend-plugin@0.1.3;
            export tether:backend/describe-ext@0.1.3;
            export tether:backend/describe-net@0.1.3;
        }
    ",
    world: "abi-test:old-0-1-3/old",
    generate_all,
});

use exports::tether::backend::backend::Guest;
use exports::tether::backend::describe_ext::Guest as DescribeExt;
use exports::tether::backend::describe_net::{Guest as DescribeNet, HttpGrant};
use tether::backend::sql::{Connection, Dialect, Value};
use tether::backend::types::{
    Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Target, VerifyReport,
};

struct Old;

fn unsupported<T>(member: &str) -> Result<T, Error> {
    Err(Error::Capability(format!(
        "the abi-old-3 backend does not support {member}"
    )))
}

impl DescribeExt for Old {
    fn config_keys() -> Vec<String> {
        vec!["region".into()]
    }
}

impl DescribeNet for Old {
    fn http_grants() -> Vec<HttpGrant> {
        vec![HttpGrant {
            url_key: "api".into(),
            default_url: Some("https://api.example.invalid".into()),
            token_key: None,
            token_env_key: None,
            default_token_env: None,
        }]
    }

    fn sql_keys() -> Vec<String> {
        vec!["db".into()]
    }
}

impl Guest for Old {
    fn describe() -> Descriptor {
        Descriptor {
            kind: "abi-old-3".into(),
            maturity: "experimental".into(),
            capabilities: vec!["FINGERPRINT".into()],
            volatile_keys: Vec::new(),
            local_path_keys: Vec::new(),
            local_path_prefixes: Vec::new(),
            storage_keys: Vec::new(),
            tree_keys: Vec::new(),
            promote_hint: String::new(),
            abi: "0.1.3".into(),
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

    /// One query on the connection the host opened for key `db`, through
    /// the 0.1.3 `sql` import: the answer and the dialect.
    fn fingerprint(_locator: String, _working_ref: Option<String>) -> Result<String, Error> {
        let conn = Connection::open("db").map_err(|e| Error::Backend(format!("open: {e:?}")))?;
        let dialect = match conn.dialect() {
            Dialect::Postgres => "postgres",
            Dialect::Sqlite => "sqlite",
            Dialect::Mysql => "mysql",
        };
        let rows = conn
            .query("SELECT ? + 1 AS answer", &[Value::Integer(41)])
            .map_err(|e| Error::Backend(format!("query: {e:?}")))?;
        let answer = match rows.rows.first().and_then(|r| r.first()) {
            Some(Value::Integer(i)) => *i,
            other => return Err(Error::Backend(format!("unexpected cell {other:?}"))),
        };
        Ok(format!(
            "{{\"answer\":{answer},\"column\":\"{}\",\"dialect\":\"{dialect}\"}}",
            rows.columns.join(",")
        ))
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
