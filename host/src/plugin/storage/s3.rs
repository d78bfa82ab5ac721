//! `s3://bucket/prefix` buckets: the settings the host resolves for them and
//! the object_store client built from those settings.
//!
//! Credentials and endpoints never enter the sandbox: the plugin names only
//! the URI (its locator's storage key), and the host resolves the rest from
//! `.tether/secrets.toml` (`[objects."KEY"]` over the longest
//! `[uris."s3://bucket/..."]` over `[backends.KIND]`, merged per field, see
//! `model::secrets`) and then the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` /
//! `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`), each field
//! filled from the first source that sets it.
//!
//! Without literal keys the AWS SDK's own credential chain resolves them
//! (`aws-config`, see `aws_chain.rs`): a `profile` of the shared config and
//! credentials files (`AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`; its
//! `role_arn` / `source_profile`, SSO and `credential_process` included),
//! `AWS_PROFILE`, web identity
//! (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, or `role_arn` +
//! `web_identity_token_file` in the entry), a `role_arn` assumed from those,
//! then ECS and instance metadata (`AWS_EC2_METADATA_DISABLED=true` skips
//! the latter, as the tests do). STS is reached at `AWS_ENDPOINT_URL_STS`
//! when set. The keys stay in the host.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use serde_json::{Map, Value};

use super::StorageError;

/// The per-object settings fields tether reads for S3, in secrets.toml
/// spelling. They are the host's business: [`strip_settings`] keeps them out
/// of the configuration a plugin sees.
pub const FIELDS: &[&str] = &[
    "access_key_id",
    "secret_access_key",
    "session_token",
    "region",
    "endpoint_url",
    "allow_http",
    "force_path_style",
    "profile",
    "role_arn",
    "role_session_name",
    "web_identity_token_file",
];

/// Where an unset field is looked up in the environment, in order.
const ENV: &[(&str, &[&str])] = &[
    ("access_key_id", &["AWS_ACCESS_KEY_ID"]),
    ("secret_access_key", &["AWS_SECRET_ACCESS_KEY"]),
    ("session_token", &["AWS_SESSION_TOKEN"]),
    ("region", &["AWS_REGION", "AWS_DEFAULT_REGION"]),
    ("endpoint_url", &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]),
    ("allow_http", &["AWS_ALLOW_HTTP"]),
];

/// Resolved settings of one S3 location. `Debug` says which fields are set,
/// never a value.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct S3Settings {
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
    region: Option<String>,
    endpoint_url: Option<String>,
    allow_http: Option<bool>,
    force_path_style: Option<bool>,
    /// Without literal keys: the shared-config profile the chain starts from.
    profile: Option<String>,
    /// A role the chain's keys assume (or, with `web_identity_token_file`,
    /// the role of a web identity).
    role_arn: Option<String>,
    role_session_name: Option<String>,
    web_identity_token_file: Option<String>,
    /// For a `gs://` or `az://` location instead: object_store's own
    /// configuration pairs ([`S3Settings::resolve_cloud`]); the S3 fields
    /// are unset then.
    pub(super) cloud: BTreeMap<String, String>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |o: bool| if o { "<set>" } else { "<unset>" };
        f.debug_struct("S3Settings")
            .field("access_key_id", &set(self.access_key_id.is_some()))
            .field("secret_access_key", &set(self.secret_access_key.is_some()))
            .field("session_token", &set(self.session_token.is_some()))
            .field("region", &self.region)
            .field("endpoint_url", &set(self.endpoint_url.is_some()))
            .field("allow_http", &self.allow_http)
            .field("force_path_style", &self.force_path_style)
            .field("profile", &set(self.profile.is_some()))
            .field("role_arn", &set(self.role_arn.is_some()))
            .field(
                "web_identity_token_file",
                &set(self.web_identity_token_file.is_some()),
            )
            .field("cloud", &self.cloud.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What a storage grant carries for `s3://` URIs: the settings, or why they
/// could not be resolved (reported when the plugin opens the bucket, so an
/// object that never touches S3 is not failed by it).
pub type S3Resolution = Arc<Result<S3Settings, String>>;

impl S3Settings {
    /// Settings from a merged secrets entry, then the environment (`env`
    /// looks a variable up; [`std::env::var`] outside tests). A `storage_options`
    /// table (the `file` backend's spelling) fills what the entry's top level
    /// leaves unset. Errors name fields, never values.
    pub fn resolve(
        options: &Map<String, Value>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let nested = options.get("storage_options").and_then(Value::as_object);
        let mut s = Self::default();
        // tether moves refs with If-Match / If-None-Match (the ETag mode); it
        // has no other, so any other mode is refused rather than ignored.
        let conditional_put = options
            .get("conditional_put")
            .or_else(|| nested.and_then(|n| n.get("conditional_put")));
        if conditional_put.is_some_and(|v| v.as_str() != Some("etag")) {
            return Err(
                "S3 setting `conditional_put` must be \"etag\": tether moves refs with \
                 If-Match / If-None-Match and supports no other mode (remove it, or set \"etag\")"
                    .to_string(),
            );
        }
        for field in FIELDS {
            let value = options
                .get(*field)
                .or_else(|| nested.and_then(|n| n.get(*field)))
                .or_else(|| {
                    // obstore's spelling in `storage_options`.
                    (*field == "endpoint_url")
                        .then(|| nested.and_then(|n| n.get("endpoint")))
                        .flatten()
                });
            let from_env = || {
                ENV.iter()
                    .find(|(f, _)| f == field)
                    .and_then(|(_, vars)| vars.iter().find_map(|v| env(v)))
                    .filter(|v| !v.is_empty())
            };
            match *field {
                "allow_http" | "force_path_style" => {
                    let b = match value {
                        Some(v) => Some(parse_bool(v).ok_or_else(|| {
                            format!("S3 setting `{field}` must be true or false")
                        })?),
                        None => match from_env() {
                            Some(v) => Some(parse_bool(&Value::String(v)).ok_or_else(|| {
                                format!("the environment's S3 `{field}` must be true or false")
                            })?),
                            None => None,
                        },
                    };
                    if *field == "allow_http" {
                        s.allow_http = b;
                    } else {
                        s.force_path_style = b;
                    }
                }
                _ => {
                    let v = match value {
                        Some(Value::String(v)) if !v.is_empty() => Some(v.clone()),
                        Some(Value::String(_)) | None => from_env(),
                        Some(_) => return Err(format!("S3 setting `{field}` must be a string")),
                    };
                    let slot = match *field {
                        "access_key_id" => &mut s.access_key_id,
                        "secret_access_key" => &mut s.secret_access_key,
                        "session_token" => &mut s.session_token,
                        "region" => &mut s.region,
                        "profile" => &mut s.profile,
                        "role_arn" => &mut s.role_arn,
                        "role_session_name" => &mut s.role_session_name,
                        "web_identity_token_file" => &mut s.web_identity_token_file,
                        _ => &mut s.endpoint_url,
                    };
                    *slot = v;
                }
            }
        }
        // obstore's spelling (committable for `file`): virtual-hosted is the
        // opposite of path style.
        if s.force_path_style.is_none() {
            let v = options
                .get("virtual_hosted_style_request")
                .or_else(|| nested.and_then(|n| n.get("virtual_hosted_style_request")));
            if let Some(v) = v {
                let b = parse_bool(v).ok_or_else(|| {
                    "S3 setting `virtual_hosted_style_request` must be true or false".to_string()
                })?;
                s.force_path_style = Some(!b);
            }
        }
        match (&s.access_key_id, &s.secret_access_key) {
            (Some(_), Some(_)) => {
                if s.profile.is_some() || s.role_arn.is_some() {
                    return Err(
                        "this S3 location has literal keys (access_key_id / secret_access_key, \
                         in .tether/secrets.toml or AWS_* in the environment) and a `profile` \
                         or `role_arn`: give one source of credentials"
                            .into(),
                    );
                }
            }
            // The SDK's chain finds them (profile, web identity, role, ...).
            (None, None) => {
                if s.web_identity_token_file.is_some() && s.role_arn.is_none() {
                    return Err(
                        "S3 setting `web_identity_token_file` needs `role_arn` (the role the \
                         token is exchanged for) in the same entry"
                            .into(),
                    );
                }
            }
            (Some(_), None) | (None, Some(_)) => {
                let missing = if s.access_key_id.is_none() {
                    "access_key_id (AWS_ACCESS_KEY_ID)"
                } else {
                    "secret_access_key (AWS_SECRET_ACCESS_KEY)"
                };
                return Err(format!(
                    "incomplete S3 credentials: {missing} is not set; set it in \
                     .tether/secrets.toml or the environment"
                ));
            }
        }
        if let Some(e) = &s.endpoint_url {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                return Err("S3 `endpoint_url` must start with http:// or https://".to_string());
            }
            if e.starts_with("http://") && s.allow_http != Some(true) {
                return Err(
                    "the S3 `endpoint_url` is plain http://: set `allow_http = true` in the same \
                     .tether/secrets.toml entry to allow unencrypted requests to it"
                        .to_string(),
                );
            }
        }
        Ok(s)
    }

    /// The settings of a `gs://` or `az://` / `abfs://` location (by the
    /// URI's scheme) from a merged secrets entry: object_store's own keys
    /// (see `cloud.rs`); the builders read the environment themselves.
    pub fn resolve_cloud(scheme: &str, options: &Map<String, Value>) -> Result<Self, String> {
        let family = super::cloud::Family::of_scheme(scheme)
            .ok_or_else(|| format!("{scheme}:// is not a GCS or Azure scheme"))?;
        Ok(Self {
            cloud: super::cloud::resolve(family, options)?,
            ..Self::default()
        })
    }

    /// The settings from the environment alone (the conformance runner's
    /// source, and the last level of the chain).
    pub fn from_env() -> S3Resolution {
        Arc::new(Self::resolve(&Map::new(), |v| std::env::var(v).ok()))
    }
}

fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Remove the S3 settings (credential sources included) from a
/// configuration table handed to a plugin, at the top level and inside
/// `storage_options`: credentials never enter the sandbox.
pub fn strip_settings(config: &mut Map<String, Value>) {
    for f in FIELDS {
        if !matches!(*f, "region" | "allow_http") {
            config.remove(*f);
        }
    }
    // GCS and Azure credentials and endpoints (object_store's spellings,
    // with or without their `google_` / `azure_storage_` prefixes).
    let cloud_secret = |k: &str| {
        let bare = k
            .strip_prefix("google_")
            .or_else(|| k.strip_prefix("azure_storage_"))
            .or_else(|| k.strip_prefix("azure_"))
            .unwrap_or(k);
        super::cloud::SECRET_KEYS.contains(&bare)
    };
    config.retain(|k, _| !cloud_secret(k));
    if let Some(Value::Object(nested)) = config.get_mut("storage_options") {
        for f in FIELDS.iter().chain(&["endpoint"]) {
            if !matches!(*f, "region" | "allow_http") {
                nested.remove(*f);
            }
        }
        nested.retain(|k, _| !cloud_secret(k));
    }
}

/// One client per bucket and settings for the whole process: building one
/// sets up a connection pool, and every plugin call opens its buckets anew.
type Clients = Mutex<HashMap<(String, S3Settings), Arc<AmazonS3>>>;

fn client_registry() -> &'static Clients {
    static REGISTRY: OnceLock<Clients> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The object_store client for `bucket` with `settings`.
pub(super) fn client(
    uri: &str,
    bucket: &str,
    settings: &S3Resolution,
) -> Result<Arc<AmazonS3>, StorageError> {
    let settings = settings
        .as_ref()
        .as_ref()
        .map_err(|why| StorageError::Denied(format!("{uri}: {why}")))?;
    let key = (bucket.to_string(), settings.clone());
    let mut registry = client_registry()
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(c) = registry.get(&key) {
        return Ok(c.clone());
    }
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(settings.region.as_deref().unwrap_or("us-east-1"))
        // Conditional puts (If-None-Match / If-Match) are what makes ref
        // moves atomic; S3 and the S3-compatible servers tether supports
        // honour them.
        .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(settings.allow_http == Some(true))
                .with_connect_timeout(Duration::from_secs(10)),
        )
        // A wrong endpoint should fail in seconds, not after object_store's
        // default three minutes of retries.
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
        });
    if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
        b = b.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(t) = &settings.session_token {
            b = b.with_token(t);
        }
    } else {
        // Never object_store's own chain: it would go to instance metadata
        // without the profile, SSO and role sources users have.
        b = b.with_credentials(Arc::new(super::aws_chain::SdkChain::new(
            super::aws_chain::Source {
                region: settings.region.clone(),
                profile: settings.profile.clone(),
                role_arn: settings.role_arn.clone(),
                role_session_name: settings.role_session_name.clone(),
                web_identity_token_file: settings.web_identity_token_file.clone(),
            },
        )));
    }
    if let Some(e) = &settings.endpoint_url {
        b = b.with_endpoint(e);
    }
    // object_store puts the bucket in the path unless told otherwise;
    // `force_path_style = false` asks for virtual-hosted requests.
    if settings.force_path_style == Some(false) {
        b = b.with_virtual_hosted_style_request(true);
    }
    let store = Arc::new(b.build().map_err(|e| {
        StorageError::Invalid(format!(
            "{uri}: cannot set up the S3 client from the resolved settings: {}",
            redact(&e.to_string(), settings)
        ))
    })?);
    registry.insert(key, store.clone());
    Ok(store)
}

/// `text` with any secret of `settings` blanked out, for messages built from
/// a library's error.
pub(super) fn redact(text: &str, settings: &S3Settings) -> String {
    let mut out = text.to_string();
    for secret in [&settings.secret_access_key, &settings.session_token]
        .into_iter()
        .flatten()
    {
        if !secret.is_empty() {
            out = out.replace(secret.as_str(), "<redacted>");
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

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn entry_then_environment_per_field() {
        let env = |v: &str| match v {
            "AWS_SECRET_ACCESS_KEY" => Some("env-secret".to_string()),
            "AWS_REGION" => Some("eu-west-1".to_string()),
            "AWS_DEFAULT_REGION" => Some("ignored".to_string()),
            _ => None,
        };
        let s = S3Settings::resolve(
            &opts(json!({"access_key_id": "AK", "endpoint_url": "https://s3.local"})),
            env,
        )
        .unwrap();
        assert_eq!(s.access_key_id.as_deref(), Some("AK"));
        assert_eq!(s.secret_access_key.as_deref(), Some("env-secret"));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.endpoint_url.as_deref(), Some("https://s3.local"));
        let dbg = format!("{s:?}");
        assert!(
            !dbg.contains("env-secret") && !dbg.contains("AK\""),
            "{dbg}"
        );
    }

    #[test]
    fn refusals_name_fields_never_values() {
        for (o, needle) in [
            (
                json!({"access_key_id": "AK", "secret_access_key": "SSS", "profile": "lab"}),
                "one source of credentials",
            ),
            (json!({"web_identity_token_file": "/t"}), "needs `role_arn`"),
            (json!({"access_key_id": "AK"}), "secret_access_key"),
            (
                json!({"access_key_id": "AK", "secret_access_key": "SSS", "endpoint_url": "http://x"}),
                "allow_http",
            ),
            (
                json!({"access_key_id": "AK", "secret_access_key": "SSS", "allow_http": "maybe"}),
                "allow_http",
            ),
        ] {
            let e = S3Settings::resolve(&opts(o.clone()), no_env).unwrap_err();
            assert!(e.contains(needle), "{o}: {e}");
            assert!(!e.contains("SSS") && !e.contains("arn:x"), "{e}");
        }
        let s = S3Settings::resolve(
            &opts(
                json!({"storage_options": {"access_key_id": "A", "secret_access_key": "S",
                "endpoint": "http://127.0.0.1:9", "allow_http": "true"}}),
            ),
            no_env,
        )
        .unwrap();
        assert_eq!(s.endpoint_url.as_deref(), Some("http://127.0.0.1:9"));
        // No literal keys: the SDK chain, from a profile or role.
        for o in [
            json!({}),
            json!({"profile": "lab"}),
            json!({"role_arn": "arn:x"}),
        ] {
            let s = S3Settings::resolve(&opts(o.clone()), no_env).unwrap();
            assert!(s.access_key_id.is_none(), "{o}");
        }
        assert_eq!(s.allow_http, Some(true));
        assert_eq!(s.force_path_style, None);
        let s = S3Settings::resolve(
            &opts(json!({"access_key_id": "A", "secret_access_key": "S",
                "storage_options": {"virtual_hosted_style_request": true}})),
            no_env,
        )
        .unwrap();
        assert_eq!(s.force_path_style, Some(false));
        // conditional_put: the ETag mode tether uses is accepted, any other refused.
        let with = |v: Value| {
            S3Settings::resolve(
                &opts(json!({"access_key_id": "A", "secret_access_key": "S",
                    "storage_options": {"conditional_put": v}})),
                no_env,
            )
        };
        assert!(with(json!("etag")).is_ok());
        for bad in [json!("dynamo:locks"), json!("disabled"), json!(true)] {
            let e = with(bad.clone()).unwrap_err();
            assert!(
                e.contains("`conditional_put` must be \"etag\""),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn stripped_from_plugin_config() {
        let mut c = opts(json!({
            "secret_access_key": "S", "endpoint_url": "E", "region": "r", "other": 1,
            "profile": "p", "role_arn": "a", "google_service_account_key": "K",
            "storage_options": {"endpoint": "E", "region": "r", "session_token": "T",
                "access_key": "A", "sas_token": "S"}
        }));
        strip_settings(&mut c);
        assert_eq!(
            Value::Object(c),
            json!({"region": "r", "other": 1, "storage_options": {"region": "r"}})
        );
    }
}
