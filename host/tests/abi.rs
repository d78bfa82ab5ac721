//! The contract's compatibility guarantee (DESIGN §3, "Growth without
//! breakage"): a plugin built against the oldest supported contract — the
//! frozen `tests/fixtures/wit-0.1.0`, built fresh into
//! `tests/plugins/abi-0-1-0` — loads in this host and every call reaches it,
//! while a plugin declaring an incompatible contract is refused.

use std::future::Future;
use std::time::Duration;

use serde_json::json;
use tether::plugin::{BackendError, HOST_ABI, PluginError, Runtime, RuntimeConfig};
use tether_testkit::{cache_dir, test_plugin};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout: Duration::from_secs(10),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_0_contract_loads_and_serves_calls() {
    block_on(async {
        let rt = runtime();
        let old = rt
            .load_file(&test_plugin("abi_0_1_0"))
            .await
            .expect("the 0.1.0 plugin loads in this host");
        let d = old.descriptor();
        assert_eq!(d.kind, "abi-old");
        assert_eq!(d.abi, "0.1.0");
        assert_eq!(d.capabilities, vec!["FINGERPRINT".to_string()]);
        assert!(!old.has_harness());

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
