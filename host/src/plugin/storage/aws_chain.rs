//! S3 credentials from the AWS SDK's own chain (`aws-config`), for an S3
//! location with no literal keys: a shared-config `profile` (with its
//! `role_arn` / `source_profile`, SSO or `credential_process`), the environment's
//! `AWS_PROFILE`, web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` and
//! `AWS_ROLE_ARN`), ECS and instance metadata; then, when the entry names a
//! `role_arn`, that role assumed with those keys (or, with
//! `web_identity_token_file`, exchanged for that token).
//!
//! The chain runs in the host and hands object_store keys through
//! [`CredentialProvider`], cached until shortly before they expire, so a
//! long command keeps working across a rotation. Nothing here reaches a
//! plugin.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_config::meta::region::RegionProviderChain;
use aws_config::sts::AssumeRoleProvider;
use aws_config::web_identity_token::{StaticConfiguration, WebIdentityTokenCredentialsProvider};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use object_store::CredentialProvider;
use object_store::aws::AwsCredential;
use tokio::sync::{Mutex, OnceCell};

/// Where the chain starts, from the host-resolved settings.
#[derive(Debug, Clone, Default)]
pub(super) struct Source {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub role_arn: Option<String>,
    pub role_session_name: Option<String>,
    pub web_identity_token_file: Option<String>,
}

/// Keys are renewed this long before they expire.
const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

/// An object_store credential provider backed by the SDK chain.
pub(super) struct SdkChain {
    source: Source,
    provider: OnceCell<SharedCredentialsProvider>,
    cached: Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>,
}

impl std::fmt::Debug for SdkChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Which sources are configured, never a value.
        f.debug_struct("SdkChain")
            .field("profile", &self.source.profile.is_some())
            .field("role_arn", &self.source.role_arn.is_some())
            .finish()
    }
}

impl SdkChain {
    pub(super) fn new(source: Source) -> Self {
        Self {
            source,
            provider: OnceCell::new(),
            cached: Mutex::new(None),
        }
    }

    async fn provider(&self) -> SharedCredentialsProvider {
        self.provider
            .get_or_init(|| async {
                let s = &self.source;
                let region = RegionProviderChain::first_try(
                    s.region.clone().map(aws_config::Region::new),
                )
                .or_default_provider()
                .or_else(aws_config::Region::from_static("us-east-1"));
                let session = s
                    .role_session_name
                    .clone()
                    .unwrap_or_else(|| "tether".to_string());
                if let (Some(token_file), Some(role)) = (&s.web_identity_token_file, &s.role_arn)
                {
                    let conf = aws_config::provider_config::ProviderConfig::default()
                        .with_region(region.region().await);
                    let provider = WebIdentityTokenCredentialsProvider::builder()
                        .configure(&conf)
                        .static_configuration(StaticConfiguration {
                            web_identity_token_file: token_file.into(),
                            role_arn: role.clone(),
                            session_name: session,
                        })
                        .build();
                    return SharedCredentialsProvider::new(provider);
                }
                let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(region);
                if let Some(p) = &s.profile {
                    loader = loader.profile_name(p);
                }
                let config = loader.load().await;
                let base = config.credentials_provider();
                match (&s.role_arn, base) {
                    (Some(role), Some(_)) => SharedCredentialsProvider::new(
                        AssumeRoleProvider::builder(role.clone())
                            .session_name(session)
                            .configure(&config)
                            .build()
                            .await,
                    ),
                    (_, Some(base)) => base,
                    // `load` always sets the default chain; an empty one
                    // answers "no credentials" when asked.
                    (_, None) => SharedCredentialsProvider::new(
                        aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                            .build()
                            .await,
                    ),
                }
            })
            .await
            .clone()
    }

    /// What the user can set, after the chain's own reason (which names
    /// sources and files, never a key).
    fn no_credentials(&self, why: &str) -> object_store::Error {
        let from = match (&self.source.profile, &self.source.role_arn) {
            (Some(p), _) => {
                format!("profile `{p}` (AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE)")
            }
            (None, Some(_)) => "the AWS chain, then `role_arn`".to_string(),
            (None, None) => "the AWS chain (environment, AWS_PROFILE, web identity, \
                             container and instance metadata)"
                .to_string(),
        };
        object_store::Error::Generic {
            store: "S3",
            source: format!(
                "no S3 credentials from {from}: {why}. Set `access_key_id` and \
                 `secret_access_key`, or a `profile`, for this bucket in .tether/secrets.toml \
                 (under [uris.\"s3://BUCKET/\"], [objects.\"KEY\"] or [backends.KIND]), or \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            )
            .into(),
        }
    }
}

#[async_trait::async_trait]
impl CredentialProvider for SdkChain {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        if let Some((credential, expiry)) = cached.as_ref() {
            let fresh = expiry.is_none_or(|at| {
                at.duration_since(SystemTime::now())
                    .is_ok_and(|left| left > RENEW_BEFORE)
            });
            if fresh {
                return Ok(credential.clone());
            }
        }
        let provider = self.provider().await;
        let keys = provider
            .provide_credentials()
            .await
            .map_err(|e| self.no_credentials(&error_chain(&e)))?;
        let credential = Arc::new(AwsCredential {
            key_id: keys.access_key_id().to_string(),
            secret_key: keys.secret_access_key().to_string(),
            token: keys.session_token().map(str::to_string),
        });
        *cached = Some((credential.clone(), keys.expiry()));
        Ok(credential)
    }
}

/// An error and its sources on one line: the SDK's top-level messages alone
/// ("an error occurred while loading credentials") do not say which.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
