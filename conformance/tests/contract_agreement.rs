//! Host and SDK compute the same content state, pin id and listing name for
//! the same state: the SDK's side runs as wasm (the `contract-probe` test
//! plugin answers `listing` with what `tether_sdk` computes), the host's side
//! is `tether::model::ids`. States with and without `null` members, and with
//! non-ASCII keys, included.

mod common;

use serde_json::{Value, json};
use tether::model::{canonical, ids};
use tether::plugin::{Runtime, RuntimeConfig};

const KIND: &str = "contract-probe";
const DATASET: &str = "0a1b2c3d";

/// What the host computes: (canonical content state, pin id, listing name).
fn host_side(identity: &Value, state: &Value) -> (String, String, String) {
    let content = Value::Object(ids::content_state(state.as_object().unwrap(), &["lsn"]));
    (
        canonical::to_string(&content),
        ids::pin_id(DATASET, KIND, identity, &content),
        ids::listing_name(KIND, identity, &content),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_sdk_agree_on_pin_ids_and_listing_names() {
    let config = RuntimeConfig {
        cache_root: common::cache_dir(),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config).unwrap();
    let plugin = runtime
        .load_file(&common::test_plugin("contract_probe"))
        .await
        .unwrap();

    let identity = json!({"uri": "/données/日本", "region": null});
    // Each row: a state, and the same content without nulls or volatile keys.
    let cases = [
        (
            json!({"snapshot_id": "K3F7"}),
            json!({"snapshot_id": "K3F7"}),
        ),
        (
            json!({"snapshot_id": "K3F7", "gone": null, "lsn": 7,
                   "nested": {"x": null, "y": [null, 1]}}),
            json!({"snapshot_id": "K3F7", "nested": {"y": [null, 1]}}),
        ),
        (
            json!({"clé": "é", "ß": {"日本": null, "z": "ü"}, "\u{1F600}": 1, "\u{FF61}": null,
                   "Zebra": true, "a": 1.5}),
            json!({"clé": "é", "ß": {"z": "ü"}, "\u{1F600}": 1, "Zebra": true, "a": 1.5}),
        ),
    ];
    for (state, without_nulls) in &cases {
        let locator = json!({"dataset": DATASET, "identity": identity, "state": state});
        let object = plugin.object(&locator, &json!({}));
        let answer = object
            .listing(state)
            .await
            .unwrap()
            .expect("the probe lists");
        let sdk: Value = serde_json::from_str(&answer).unwrap();
        let (content, pin_id, listing) = host_side(&identity, state);
        assert_eq!(sdk["content_state"], json!(content), "content of {state}");
        assert_eq!(sdk["pin_id"], json!(pin_id), "pin id of {state}");
        assert_eq!(
            sdk["listing_name"],
            json!(listing),
            "listing name of {state}"
        );
        assert!(pin_id.ends_with(&listing[..16]), "{pin_id} {listing}");

        // Nulls do not count, on either side.
        let bare = host_side(&identity, without_nulls);
        assert_eq!(
            bare,
            (content, pin_id, listing),
            "{state} vs {without_nulls}"
        );
        let locator = json!({"dataset": DATASET, "identity": identity, "state": without_nulls});
        let answer = plugin
            .object(&locator, &json!({}))
            .listing(without_nulls)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), sdk);
    }

    // A locator that does not fit the plugin's `Locator` type is refused by
    // the SDK's glue as invalid, before the method runs.
    let err = plugin
        .object(&json!({"identity": {}}), &json!({}))
        .fingerprint(None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, tether::plugin::BackendError::Invalid(m) if m.contains("invalid locator")),
        "{err}"
    );
}
