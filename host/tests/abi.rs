//! The contract's compatibility guarantee (DESIGN §3, "Growth without
//! breakage"): a plugin built against the oldest supported contract — the
//! frozen `tests/fixtures/wit-0.1.0`, built fresh into
//! `tests/plugins/abi-0-1-0` — loads in this host and every call reaches it;
//! so does one built against the frozen 0.1.1 (`abi-0-1-1`), whose optional
//! `describe-ext` keeps answering; and so on for every frozen 0.1.x
//! (`abi-0-1-2` .. `abi-0-1-4`, each using what its version added: the
//! directory grant, `describe-net` and `sql`, `storage.bucket.head-version`);
//! none of them has `describe-meta` (0.1.5), and each loads without
//! metadata; while a plugin declaring an incompatible contract is refused.
//! A plugin without `verify-many` (0.1.5) is asked pin by pin, with the
//! answers each pin gets alone.

use std::time::Duration;

use serde_json::json;
use tether::plugin::{
    BackendError, HOST_ABI, PinRef, PluginError, PluginMeta, Runtime, RuntimeConfig, VerifyStatus,
};
use tether_testkit::{block_on, cache_dir, first_party_plugin, test_plugin};

/// Whether the component's bytes hold `s` (an interface name it imports or
/// exports).
fn holds(path: &std::path::Path, s: &str) -> bool {
    let bytes = std::fs::read(path).expect("read the fixture");
    bytes.windows(s.len()).any(|w| w == s.as_bytes())
}

/// The plugin built against the frozen contract `version` (`abi_0_1_2` for
/// 0.1.2), loaded into `rt`. Not vacuous: its bytes are checked to carry the
/// names in `has` and none in `lacks`, while this host's bindings are newer.
async fn load_frozen(
    rt: &Runtime,
    version: &str,
    has: &[&str],
    lacks: &[&str],
) -> std::sync::Arc<tether::plugin::Plugin> {
    let path = test_plugin(&format!("abi_{}", version.replace('.', "_")));
    for name in has {
        assert!(holds(&path, name), "the {version} plugin holds {name}");
    }
    for name in lacks {
        assert!(!holds(&path, name), "the {version} plugin lacks {name}");
    }
    assert_ne!(HOST_ABI, version);
    let old = rt
        .load_file(&path)
        .await
        .unwrap_or_else(|e| panic!("the {version} plugin loads in this host: {e}"));
    assert_eq!(old.descriptor().abi, version);
    old
}

fn runtime() -> Runtime {
    runtime_caching_in(cache_dir())
}

fn runtime_caching_in(cache_root: std::path::PathBuf) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root,
        call_timeout: Duration::from_secs(10),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_0_contract_loads_and_serves_calls() {
    block_on(async {
        let rt = runtime();
        let old = load_frozen(&rt, "0.1.0", &["tether:backend/backend@0.1.0"], &["@0.1.1"]).await;
        let d = old.descriptor();
        assert_eq!(d.kind, "abi-old");
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
        let old = load_frozen(
            &runtime(),
            "0.1.1",
            &[
                "tether:backend/backend@0.1.1",
                "tether:backend/describe-ext@0.1.1",
            ],
            &["describe-fs"],
        )
        .await;
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
        let old = load_frozen(
            &runtime(),
            "0.1.2",
            &[
                "tether:backend/backend@0.1.2",
                "tether:backend/describe-fs@0.1.2",
            ],
            &["describe-net", "tether:backend/sql"],
        )
        .await;
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
fn a_plugin_built_against_the_frozen_0_1_3_contract_keeps_its_net_grants_and_sql() {
    block_on(async {
        let old = load_frozen(
            &runtime(),
            "0.1.3",
            &[
                "tether:backend/backend@0.1.3",
                "tether:backend/describe-net@0.1.3",
                "tether:backend/sql@0.1.3",
            ],
            &["describe-meta"],
        )
        .await;
        assert_eq!(
            old.config_keys().await.expect("config keys"),
            Some(vec!["region".to_string()])
        );
        // Its describe-net answered at load.
        assert_eq!(old.sql_keys(), ["db"]);
        let grants = old.http_grants();
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert_eq!(grants[0].url_key, "api");
        assert_eq!(
            grants[0].default_url.as_deref(),
            Some("https://api.example.invalid")
        );
        assert!(
            old.host_imports().contains(&"sql"),
            "{:?}",
            old.host_imports()
        );
        // describe-meta came in 0.1.5.
        assert_eq!(old.meta(), None);
        assert_eq!(old.meta_as_given().await.expect("describe-meta"), None);

        // Its 0.1.3 `sql` import, linked to this host's `sql`: a zero-length
        // file is an empty SQLite database.
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("empty.db");
        std::fs::write(&db, b"").expect("create the database file");
        let obj = old.object(
            &json!({"db": format!("sqlite://{}", db.display())}),
            &json!({}),
        );
        assert_eq!(
            obj.fingerprint(None)
                .await
                .expect("fingerprint through sql"),
            json!({"answer": 42, "column": "answer", "dialect": "sqlite"})
        );
        // A key it did not declare grants nothing: no `db`, no connection.
        let ungranted = old.object(&json!({"other": "sqlite:///nowhere.db"}), &json!({}));
        match ungranted.fingerprint(None).await {
            Err(BackendError::Backend(m)) => assert!(m.contains("open"), "{m}"),
            other => panic!("fingerprint without a granted db: {other:?}"),
        }
    });
}

#[test]
fn a_plugin_built_against_the_frozen_0_1_4_contract_reads_head_version() {
    block_on(async {
        let old = load_frozen(
            &runtime(),
            "0.1.4",
            &[
                "tether:backend/backend@0.1.4",
                "tether:backend/storage@0.1.4",
                "head-version",
            ],
            &["describe-meta"],
        )
        .await;
        assert_eq!(
            old.config_keys().await.expect("config keys"),
            Some(Vec::new())
        );
        assert_eq!(old.meta(), None);
        assert_eq!(old.meta_as_given().await.expect("describe-meta"), None);

        // Its 0.1.4 `head-version` answers through this host's storage: the
        // current object with no version id (a local bucket keeps none)...
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("state.json"), b"{}").expect("write state.json");
        let root = dir.path().to_str().unwrap();
        let state = old
            .object(&json!({"root": root}), &json!({}))
            .fingerprint(None)
            .await
            .expect("fingerprint through head-version");
        assert_eq!(state["found"], json!(true), "{state}");
        assert_eq!(state["size"], json!(2), "{state}");
        assert_eq!(state["version"], json!(null), "{state}");
        assert!(
            state["etag"].as_str().is_some_and(|e| !e.is_empty()),
            "{state}"
        );
        // ...no past version of it, and nothing once it is gone.
        let past = old
            .object(&json!({"root": root, "version": "v1"}), &json!({}))
            .fingerprint(None)
            .await
            .expect("fingerprint of a past version");
        assert_eq!(past, json!({"found": false}));
        std::fs::remove_file(dir.path().join("state.json")).expect("remove state.json");
        let gone = old
            .object(&json!({"root": root}), &json!({}))
            .fingerprint(None)
            .await
            .expect("fingerprint without state.json");
        assert_eq!(gone, json!({"found": false}));
    });
}

#[test]
fn no_plugin_built_before_0_1_5_has_metadata() {
    block_on(async {
        let rt = runtime();
        for stem in [
            "abi_0_1_0",
            "abi_0_1_1",
            "abi_0_1_2",
            "abi_0_1_3",
            "abi_0_1_4",
        ] {
            let path = test_plugin(stem);
            assert!(!holds(&path, "describe-meta"), "{stem}");
            let old = rt.load_file(&path).await.expect(stem);
            assert_eq!(old.meta(), None, "{stem}");
            assert_eq!(
                old.meta_as_given().await.expect("describe-meta"),
                None,
                "{stem}"
            );
        }
    });
}

#[test]
fn every_sdk_plugin_exports_describe_meta_from_its_cargo_metadata() {
    block_on(async {
        let rt = runtime();
        let memory = rt
            .load_file(&first_party_plugin("tether_plugin_memory"))
            .await
            .expect("load memory");
        assert_eq!(
            memory.meta(),
            Some(&PluginMeta {
                name: "tether-plugin-memory".into(),
                version: "0.1.0".into(),
                authors: vec!["The tether developers".into()],
                description: memory.meta().and_then(|m| m.description.clone()),
                homepage: Some("https://example.invalid/tether".into()),
                license: Some("Apache-2.0".into()),
                tested_against: None,
            })
        );
        let description = memory.meta().unwrap().description.clone().unwrap();
        assert!(
            description.starts_with("tether's reference backend"),
            "{description}"
        );
        // A built-in adds what it was tested against.
        let neon = rt
            .load_file(&first_party_plugin("tether_plugin_neon"))
            .await
            .expect("load neon");
        let tested = neon.meta().unwrap().tested_against.clone().unwrap();
        assert!(tested.contains("Neon API v2"), "{tested}");
        // A third-party plugin of the test workspace, without opting in to
        // anything: its own crate's name and version.
        let acme = rt.load_file(&test_plugin("acme")).await.expect("load acme");
        let meta = acme.meta().expect("acme has metadata");
        assert_eq!(
            (meta.name.as_str(), meta.version.as_str()),
            ("acme", "0.0.0")
        );
        assert_eq!(acme.meta_as_given().await.unwrap().as_ref(), Some(meta));
    });
}

#[test]
fn describe_meta_is_asked_once_per_component_and_cached_with_its_descriptor() {
    block_on(async {
        let cache = tempfile::tempdir().expect("tempdir");
        let acme = test_plugin("acme");
        let first = runtime_caching_in(cache.path().to_path_buf());
        let loaded = first.load_file(&acme).await.expect("load acme");
        // describe, then describe-meta, in one instance.
        assert_eq!(first.stats().instantiated, 1);
        let meta = loaded.meta().cloned().expect("acme has metadata");
        // Another process with the same cache starts no instance to load it.
        let second = runtime_caching_in(cache.path().to_path_buf());
        let again = second.load_file(&acme).await.expect("load acme again");
        assert_eq!(second.stats().instantiated, 0);
        assert_eq!(again.meta(), Some(&meta));
    });
}

#[test]
fn hostile_metadata_is_bounded_and_stripped_at_load() {
    block_on(async {
        let hostile = runtime()
            .load_file(&test_plugin("hostile"))
            .await
            .expect("load hostile");
        let given = hostile
            .meta_as_given()
            .await
            .expect("describe-meta")
            .expect("hostile has metadata");
        // Not vacuous: the plugin really says all that.
        assert!(given.name.len() > 100_000 && given.name.contains('\x1b'));
        assert_eq!(given.authors.len(), 1000);
        let meta = hostile.meta().expect("kept, bounded");
        assert!(meta.name.starts_with("evil[2JNNN"), "{}", meta.name);
        assert!(meta.name.chars().count() <= 64, "{}", meta.name);
        assert_eq!(meta.version, "6.6.6 FAKE-KIND  sha256:0000  built-in");
        assert_eq!(meta.authors.len(), 16);
        assert_eq!(meta.authors[0], "author0");
        let tested = meta.tested_against.as_deref().unwrap();
        assert!(
            tested.chars().count() <= 256 && tested.starts_with("31m"),
            "{tested}"
        );
        let every = serde_json::to_string(meta).unwrap();
        assert!(every.len() < 8 * 1024, "{} bytes", every.len());
        for field in [
            &meta.name,
            &meta.version,
            &meta.authors[0],
            &tested.to_string(),
        ] {
            assert!(
                !field
                    .chars()
                    .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
                "{field:?}"
            );
        }
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
