//! `gs://bucket/prefix` (Google Cloud Storage) and `az://container/prefix` /
//! `abfs[s]://container@account.dfs.core.windows.net/prefix` (Azure Blob)
//! buckets, built by object_store's own builders.
//!
//! As for S3, the plugin names only the URI. The host resolves the rest from
//! the same `.tether/secrets.toml` entry (`[objects."KEY"]` over the longest
//! `[uris."gs://bucket/..."]` over `[backends.KIND]`), whose keys are
//! object_store's own spellings (`service_account_key`, `base_url`,
//! `account_name`, `access_key`, `sas_token`, `endpoint`, `use_emulator`,
//! `allow_http`, `timeout`, ... at the top level, in `storage_options` or in
//! `client_options`), then the environment (`GOOGLE_*`, `AZURE_*`, read by
//! the builders' `from_env`). A key object_store does not know is an error
//! inside `storage_options` / `client_options` and ignored at the top level
//! (entries also hold other settings).
//!
//! Without credentials the builders fall back to instance metadata (GCE's
//! metadata server, Azure's managed identity). `NO_GCE_CHECK=true` (the
//! Google libraries' switch) refuses that for GCS instead, so a test or a
//! machine off GCP fails at once rather than probing 169.254.169.254; Azure
//! goes there only with no key, SAS, token, client secret, federated token,
//! emulator or `skip_signature` set.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
use serde_json::{Map, Value};

use super::StorageError;

/// The two cloud families besides S3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Family {
    Gcs,
    Azure,
}

impl Family {
    pub(super) fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "gs" => Some(Self::Gcs),
            "az" | "abfs" | "abfss" => Some(Self::Azure),
            _ => None,
        }
    }

    fn knows(self, key: &str) -> bool {
        match self {
            Self::Gcs => GoogleConfigKey::from_str(key).is_ok(),
            Self::Azure => AzureConfigKey::from_str(key).is_ok(),
        }
    }
}

/// The committed `storage_options` keys that are S3's: a `gs://` or `az://`
/// store ignores them rather than failing on them.
const S3_ONLY: &[&str] = &[
    "region",
    "virtual_hosted_style_request",
    "conditional_put",
    "force_path_style",
];

/// Keys that carry a GCS or Azure credential or endpoint: kept out of a
/// plugin's configuration like the S3 ones.
pub(super) const SECRET_KEYS: &[&str] = &[
    "service_account",
    "service_account_path",
    "service_account_key",
    "application_credentials",
    "base_url",
    "bearer_token",
    "account_name",
    "access_key",
    "account_key",
    "master_key",
    "sas_key",
    "sas_token",
    "token",
    "client_id",
    "client_secret",
    "tenant_id",
    "authority_id",
    "federated_token_file",
    "msi_endpoint",
    "use_emulator",
    "endpoint",
];

/// The object_store configuration of one `gs://` or `az://` location, from
/// a merged secrets entry: `(key, value)` pairs object_store's builder for
/// `family` takes. Errors name keys, never values.
pub(super) fn resolve(
    family: Family,
    options: &Map<String, Value>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let text = |k: &str, v: &Value| -> Result<String, String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(format!(
                "storage setting `{k}` must be a string, number or boolean"
            )),
        }
    };
    for (k, v) in options {
        if family.knows(k) && !S3_ONLY.contains(&k.as_str()) {
            out.insert(k.clone(), text(k, v)?);
        }
    }
    for table in ["storage_options", "client_options"] {
        let Some(nested) = options.get(table).and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in nested {
            if S3_ONLY.contains(&k.as_str()) {
                continue;
            }
            if !family.knows(k) {
                return Err(format!(
                    "unknown {} setting `{k}` in `{table}` (object_store's \
                     {}ConfigKey has no such key)",
                    match family {
                        Family::Gcs => "GCS",
                        Family::Azure => "Azure",
                    },
                    match family {
                        Family::Gcs => "Google",
                        Family::Azure => "Azure",
                    }
                ));
            }
            // The top level (the more specific spelling) wins.
            if !out.contains_key(k) {
                out.insert(k.clone(), text(k, v)?);
            }
        }
    }
    Ok(out)
}

fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// Whether `pairs` (or the environment) name a credential, so no instance
/// metadata is consulted.
fn has_credential(family: Family, pairs: &BTreeMap<String, String>) -> bool {
    let set = |names: &[&str], env: &[&str]| {
        pairs.iter().any(|(k, v)| {
            let k = k
                .strip_prefix("google_")
                .or_else(|| k.strip_prefix("azure_storage_"))
                .or_else(|| k.strip_prefix("azure_"))
                .unwrap_or(k);
            names.contains(&k) && !v.is_empty()
        }) || env.iter().any(|e| std::env::var_os(e).is_some())
    };
    match family {
        Family::Gcs => set(
            &[
                "service_account",
                "service_account_path",
                "service_account_key",
                "application_credentials",
                "bearer_token",
            ],
            &[
                "GOOGLE_SERVICE_ACCOUNT",
                "GOOGLE_SERVICE_ACCOUNT_PATH",
                "GOOGLE_SERVICE_ACCOUNT_KEY",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_BEARER_TOKEN",
            ],
        ),
        Family::Azure => set(
            &[
                "account_key",
                "access_key",
                "master_key",
                "sas_key",
                "sas_token",
                "token",
                "client_secret",
                "federated_token_file",
                "use_emulator",
                "skip_signature",
            ],
            &[
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_ACCESS_KEY",
                "AZURE_STORAGE_SAS_KEY",
                "AZURE_STORAGE_SAS_TOKEN",
                "AZURE_STORAGE_TOKEN",
                "AZURE_CLIENT_SECRET",
                "AZURE_FEDERATED_TOKEN_FILE",
                "AZURE_STORAGE_USE_EMULATOR",
            ],
        ),
    }
}

type Clients = Mutex<HashMap<(String, BTreeMap<String, String>), Arc<dyn ObjectStore>>>;

fn client_registry() -> &'static Clients {
    static REGISTRY: OnceLock<Clients> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The object_store client for the bucket or container at `root`
/// (`gs://bucket`, `az://container`, `abfs://container@account...`), built
/// with `pairs` over the environment. One per root and settings per process.
pub(super) fn client(
    uri: &str,
    family: Family,
    root: &str,
    pairs: &BTreeMap<String, String>,
) -> Result<Arc<dyn ObjectStore>, StorageError> {
    let key = (root.to_string(), pairs.clone());
    let mut registry = client_registry()
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(c) = registry.get(&key) {
        return Ok(c.clone());
    }
    // A wrong endpoint should fail in seconds, not after object_store's
    // default three minutes of retries.
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(30),
    };
    let connect = ClientConfigKey::ConnectTimeout;
    let invalid = |e: object_store::Error| {
        StorageError::Invalid(format!(
            "{uri}: cannot set up the {} client from the resolved settings: {}",
            match family {
                Family::Gcs => "GCS",
                Family::Azure => "Azure",
            },
            redact(&e.to_string(), pairs)
        ))
    };
    let store: Arc<dyn ObjectStore> = match family {
        Family::Gcs => {
            if !has_credential(family, pairs) && truthy(std::env::var("NO_GCE_CHECK").ok()) {
                return Err(StorageError::Denied(format!(
                    "{uri}: no GCS credentials, and NO_GCE_CHECK forbids asking the metadata \
                     server: set `service_account_key` (or `service_account_path`) for this \
                     bucket in .tether/secrets.toml ([uris.\"gs://BUCKET/\"] or \
                     [objects.\"KEY\"]), or GOOGLE_APPLICATION_CREDENTIALS in the environment"
                )));
            }
            let mut b = GoogleCloudStorageBuilder::from_env()
                .with_url(root)
                .with_retry(retry)
                .with_config(GoogleConfigKey::Client(connect), "10 seconds");
            for (k, v) in pairs {
                let key = GoogleConfigKey::from_str(k).map_err(invalid)?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(invalid)?)
        }
        Family::Azure => {
            let mut b = MicrosoftAzureBuilder::from_env()
                .with_url(root)
                .with_retry(retry)
                .with_config(AzureConfigKey::Client(connect), "10 seconds");
            for (k, v) in pairs {
                let key = AzureConfigKey::from_str(k).map_err(invalid)?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(invalid)?)
        }
    };
    registry.insert(key, store.clone());
    Ok(store)
}

/// `text` with every configured value that may be a secret blanked out.
pub(super) fn redact(text: &str, pairs: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in pairs {
        let bare = k
            .strip_prefix("google_")
            .or_else(|| k.strip_prefix("azure_storage_"))
            .or_else(|| k.strip_prefix("azure_"))
            .unwrap_or(k);
        if SECRET_KEYS.contains(&bare) && v.len() >= 4 && !matches!(bare, "endpoint" | "base_url") {
            out = out.replace(v.as_str(), "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(v: Value) -> Map<String, Value> {
        let Value::Object(m) = v else { panic!() };
        m
    }

    #[test]
    fn keys_are_object_stores_own() {
        let gcs = resolve(
            Family::Gcs,
            &opts(json!({
                "service_account_key": "{}", "profile": "ignored", "region": "x",
                "storage_options": {"base_url": "http://127.0.0.1:9", "allow_http": true,
                    "region": "ignored too"},
            })),
        )
        .unwrap();
        assert_eq!(
            gcs.keys().map(String::as_str).collect::<Vec<_>>(),
            ["allow_http", "base_url", "service_account_key"]
        );
        assert_eq!(gcs["allow_http"], "true");
        let e = resolve(
            Family::Azure,
            &opts(json!({"storage_options": {"acount_name": "typo"}})),
        )
        .unwrap_err();
        assert!(e.contains("`acount_name`") && !e.contains("typo\""), "{e}");
        let az = resolve(
            Family::Azure,
            &opts(json!({"account_name": "a", "access_key": "k", "endpoint": "http://e"})),
        )
        .unwrap();
        assert_eq!(az.len(), 3);
    }

    #[test]
    fn secrets_are_redacted_from_messages() {
        let pairs: BTreeMap<String, String> =
            [("access_key".to_string(), "SECRETKEY".to_string())].into();
        assert_eq!(
            redact("bad key SECRETKEY here", &pairs),
            "bad key <redacted> here"
        );
    }
}
