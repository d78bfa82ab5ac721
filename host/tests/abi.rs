//! The contract's compatibility guarantee (DESIGN §3, "Growth without
//! breakage"): a plugin built against the oldest supported contract — the
//! frozen `tests/fixtures/wit-0.1.0`, built fresh into
//! `tests/plugins/abi-0-1-0` — loads in this host and every call reaches it;
//! so does one built against the frozen 0.1.1 (`abi-0-1-1`), whose optional
//! `describe-ext` keeps answering; while a plugin declaring an incompatible
//! contract is refused. A plugin without `verify-many` (0.1.5) is asked pin
//! by pin, with the answers each pin gets alone.

use std::time::Duration;

use serde_json::json;
use tether::plugin::{
    BackendError, HOST_ABI, PinRef, PluginError, Runtime, RuntimeConfig, VerifyStatus,
};
use tether_testkit::{block_on, cache_dir, first_party_plugin, test_plugin};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout: Duration::from_secs(10),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_0_contract_loads_and_serves_calls() {
    block_on(async {
        let path = test_plugin("abi_0_1_0");
        // Not vacuous: the component really carries 0.1.0 names, while this
        // host's bindings are newer.
        let bytes = std::fs::read(&path).expect("read the fixture");
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("tether:backend/backend@0.1.0"));
        assert!(!has("@0.1.1"));
        assert_ne!(HOST_ABI, "0.1.0");

        let rt = runtime();
        let old = rt
            .load_file(&path)
            .await
            .expect("the 0.1.0 plugin loads in this host");
        let d = old.descriptor();
        assert_eq!(d.kind, "abi-old");
        assert_eq!(d.abi, "0.1.0");
        assert_eq!(d.capabilities, vec!["FINGERPRINT".to_string()]);
        assert!(!old.has_harness());
        // describe-ext came in 0.1.1: this plugin says nothing.
        assert_eq!(old.config_keys().await.expect("config keys"), None);

        let locator = json!({"name": "old-system"});
        let obj = old.object(&locator, &json!({}));
        obj.validate_locator().await.expect("validate-locator");
        assert_eq!(obj.identity().await.expect("identity"), locator);
        assert_eq!(
            obj.fingerprint(None).await.expect("fingerprint"),
            json!({"state": "frozen"})
        );
        // Twice: each call is a fresh instance of the same old component.
        assert_eq!(
            obj.fingerprint(None).await.expect("fingerprint again"),
            json!({"state": "frozen"})
        );
        // Through the old plugin's `storage` import, linked to this host's
        // newer `storage` interface.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("state.json"), b"{}").expect("write state.json");
        let stored = old.object(&json!({"root": dir.path().to_str().unwrap()}), &json!({}));
        let state = stored
            .fingerprint(None)
            .await
            .expect("fingerprint of a stored state");
        assert!(
            state["etag"].as_str().is_some_and(|e| !e.is_empty()),
            "{state}"
        );
        std::fs::remove_file(dir.path().join("state.json")).expect("remove state.json");
        match stored.fingerprint(None).await {
            Err(BackendError::NotFound(m)) => assert!(m.contains("state.json"), "{m}"),
            other => panic!("fingerprint without state.json: {other:?}"),
        }
        match obj.list_pins().await {
            Err(BackendError::Capability(m)) => assert!(m.contains("list-pins"), "{m}"),
            other => panic!("list-pins on a FINGERPRINT-only 0.1.0 plugin: {other:?}"),
        }
        match obj.fingerprint(Some("tether.ws.x.y")).await {
            Err(BackendError::Capability(_)) => {}
            other => panic!("fingerprint at a working ref: {other:?}"),
        }
    });
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_1_contract_keeps_its_describe_ext() {
    block_on(async {
        let path = test_plugin("abi_0_1_1");
        let bytes = std::fs::read(&path).expect("read the fixture");
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("tether:backend/backend@0.1.1"));
        assert!(has("tether:backend/describe-ext@0.1.1"));
        assert!(!has("describe-fs"));
        assert_ne!(HOST_ABI, "0.1.1");

        let old = runtime()
            .load_file(&path)
            .await
            .expect("the 0.1.1 plugin loads in this host");
        assert_eq!(old.descriptor().abi, "0.1.1");
        assert_eq!(
            old.config_keys().await.expect("config keys"),
            Some(vec!["region".to_string()])
        );
        // describe-fs came in 0.1.2: no directory is preopened for it, even
        // one its locator names and that exists.
        assert!(old.filesystem_keys().is_empty());
        let dir = tempfile::tempdir().expect("tempdir");
        let obj = old.object(&json!({"path": dir.path().to_str().unwrap()}), &json!({}));
        assert_eq!(
            obj.fingerprint(None).await.expect("fingerprint"),
            json!({"visible": false})
        );
    });
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_2_contract_keeps_its_directory_and_gets_no_network() {
    block_on(async {
        let path = test_plugin("abi_0_1_2");
        let bytes = std::fs::read(&path).expect("read the fixture");
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("tether:backend/backend@0.1.2"));
        assert!(has("tether:backend/describe-fs@0.1.2"));
        assert!(!has("describe-net") && !has("tether:backend/sql"));
        assert_ne!(HOST_ABI, "0.1.2");

        let old = runtime()
            .load_file(&path)
            .await
            .expect("the 0.1.2 plugin loads in this host");
        assert_eq!(old.descriptor().abi, "0.1.2");
        assert_eq!(
            old.config_keys().await.expect("config keys"),
            Some(vec!["region".to_string()])
        );
        assert_eq!(old.filesystem_keys(), ["path"]);
        // describe-net came in 0.1.3: no SQL key, no HTTP origin.
        assert!(old.sql_keys().is_empty());
        assert!(old.http_grants().is_empty());
        let dir = tempfile::tempdir().expect("tempdir");
        let obj = old.object(&json!({"path": dir.path().to_str().unwrap()}), &json!({}));
        assert_eq!(
            obj.fingerprint(None).await.expect("fingerprint"),
            json!({"visible": true})
        );
    });
}

#[test]
fn a_plugin_declaring_an_incompatible_contract_is_refused_naming_both_versions() {
    block_on(async {
        let err = runtime()
            .load_file(&test_plugin("abi_declares_0_2_0"))
            .await
            .expect_err("a plugin built for 0.2.0 must not load");
        assert!(matches!(err, PluginError::Describe { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("0.2.0"), "{msg}");
        assert!(msg.contains(HOST_ABI), "{msg}");
    });
}

#[test]
fn a_plugin_built_against_the_live_contract_exports_describe_ext() {
    block_on(async {
        let memory = runtime()
            .load_file(&first_party_plugin("tether_plugin_memory"))
            .await
            .expect("load memory");
        assert_eq!(memory.descriptor().abi, HOST_ABI);
        // The memory backend takes no settings, and says so.
        assert_eq!(
            memory.config_keys().await.expect("config keys"),
            Some(Vec::new())
        );
    });
}

#[test]
fn an_sdk_plugin_that_does_not_opt_in_has_no_describe_ext() {
    block_on(async {
        // Built with the live SDK's `export!(.., harness: ..)`, without
        // `describe_ext`: no export, so nothing said, as for an old plugin.
        let acme = runtime()
            .load_file(&test_plugin("acme"))
            .await
            .expect("load acme");
        assert_eq!(acme.descriptor().abi, HOST_ABI);
        assert!(acme.has_harness());
        assert_eq!(acme.config_keys().await.expect("config keys"), None);
    });
}

#[test]
fn a_plugin_without_verify_many_is_asked_pin_by_pin_with_the_same_answers() {
    block_on(async {
        let rt = runtime();
        // Every plugin built with the live SDK exports it (its default asks
        // `verify` item by item); one built from the frozen 0.1.2 cannot.
        let memory = rt
            .load_file(&first_party_plugin("tether_plugin_memory"))
            .await
            .expect("load memory");
        assert!(memory.has_verify_many());
        let old = rt
            .load_file(&test_plugin("abi_0_1_2"))
            .await
            .expect("the 0.1.2 plugin loads");
        assert!(!old.has_verify_many());

        // Its pins are files in its directory holding the state they pin.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("tether.kept"), r#"{"n":1}"#).unwrap();
        std::fs::write(dir.path().join("tether.moved"), r#"{"n":2}"#).unwrap();
        let obj = old.object(&json!({"path": dir.path().to_str().unwrap()}), &json!({}));
        let state = json!({"n": 1});
        let state = state.as_object().unwrap();
        let pin = |name: &str| PinRef {
            id: format!("ds.{name}"),
            ref_name: format!("tether.{name}"),
            created: false,
        };
        let items: Vec<_> = ["kept", "moved", "gone", "kept"]
            .iter()
            .map(|name| (state, Some(pin(name))))
            .collect();
        let answers = obj.verify_batch(&items, false).await.expect("verify");
        let statuses: Vec<VerifyStatus> = answers
            .iter()
            .map(|a| a.as_ref().expect("an answer").status)
            .collect();
        assert_eq!(
            statuses,
            [
                VerifyStatus::Ok,
                VerifyStatus::Drifted,
                VerifyStatus::Missing,
                VerifyStatus::Ok
            ]
        );
        for ((state, pin), answer) in items.iter().zip(&answers) {
            let alone = obj
                .verify(
                    &serde_json::Value::Object((*state).clone()),
                    pin.as_ref(),
                    false,
                )
                .await
                .expect("verify alone");
            assert_eq!(answer.as_ref().unwrap(), &alone);
        }
    });
}
