//! Outgoing HTTP for plugins (`wasi:http`, DESIGN §4), gated per call.
//!
//! wasmtime-wasi-http is linked into every plugin's linker, and every request
//! a plugin makes passes through [`HttpPolicy`] (its `WasiHttpHooks`). What
//! one call may reach is decided by the host for each object
//! ([`HttpAccess::resolve`]) from the plugin's `describe-net.http-grants`
//! (since 0.1.3), the object's locator, the configuration and
//! `.tether/secrets.toml`, never by the plugin:
//!
//! - each grant's `url-key` names, in the locator first and then the
//!   configuration (which holds secrets.toml's values), a base URL, else its
//!   `default-url`; the host grants that URL's origin (scheme, host, port)
//!   and nothing else. Any other request is refused with
//!   `HTTP-request-denied` before a connection is made. wasi-http follows no
//!   redirect, and one the plugin follows by hand is a new request, checked
//!   again;
//! - `http://` only where secrets.toml sets `allow_http = true` beside the
//!   URL key (`catalog.allow_http` for `catalog.uri`): a clone cannot turn
//!   it on;
//! - the host adds `authorization: Bearer <token>` on requests to a granted
//!   origin, the token from `token-key` (secrets.toml or the configuration)
//!   or from the environment variable `token-env-key` names (else
//!   `default-token-env`, which must start with the plugin's kind, as
//!   `NEON_` for `neon`: a plugin cannot name another system's variable).
//!   The token goes only to an origin the user named: not to one that only
//!   the committed locator names (a clone could point it anywhere), unless
//!   the configuration or the `default-url` names the same origin. The
//!   plugin's configuration never holds the token ([`HttpAccess::strip`],
//!   before `configure`);
//! - without a token, a `credential = "id:secret"` beside the URL key
//!   (`catalog.credential`) is an OAuth2 client credential: the host
//!   exchanges it (`client_credentials`, a form POST) at `oauth2-server-uri`,
//!   else at the URL's `/v1/oauth/tokens` (the Iceberg REST catalog's
//!   endpoint), with `scope` (default `catalog`), and sends the
//!   `access_token` it gets as above; neither reaches the plugin. Tokens are
//!   kept for the process (one command);
//! - `auth_header = "X-Api-Key"` beside the URL key, from secrets.toml only,
//!   sends the token in that header as it is (no `Bearer `); the plugin may
//!   neither set nor read that header either;
//! - the host connects only to addresses it checked: a URL's IP literal, or
//!   its host name resolved once per request, every answer checked, the
//!   connection made to those addresses (no second lookup a rebinding DNS
//!   answer could change). Link-local addresses (169.254.0.0/16, fe80::/10),
//!   the cloud metadata services' addresses and host names are never
//!   reached; loopback and private addresses only when the URL names the
//!   address itself (`http://127.0.0.1:8181`), never through a name
//!   (`localhost` included): refused with `destination-IP-prohibited`
//!   before any connection;
//! - the plugin may not set `authorization`, `cookie` or the hop-by-hop
//!   headers itself, and never sees `authorization`, `cookie` or
//!   `set-cookie` in a response (wasi-http filters response headers with the
//!   same predicate). A response that repeats the token's bytes, in a header
//!   value or anywhere in its body, is cut off with an error: an origin that
//!   echoes the credential (an echo endpoint, an error message quoting it)
//!   cannot hand it to the plugin. One that transforms it (base64, say) can:
//!   the host cannot see that, and granting the origin is trusting it;
//! - a JSON response (`application/json`, `+json`) is read whole by the host
//!   and reaches the plugin without credentials: a URL's password and every
//!   `password` member are removed, and a PostgreSQL or MySQL address's
//!   password is kept for the process, for `sql`'s `open-uri`
//!   ([`super::sql::strip_credentials`]; a Neon connection URI). One the host
//!   cannot read (encoded, partial) is cut off when it shows a URL with a
//!   password; `accept-encoding` is never sent, so bodies come unencoded; and
//!   any later response repeating a kept password is cut off;
//! - connect, first-byte and between-bytes timeouts are clamped to the
//!   host's ([`HttpLimits`]), a response body over the size cap fails, and
//!   the per-call deadline holds while a plugin waits on the network (the
//!   client's outer timeout covers host waits, where epochs are not
//!   checked).
//!
//! Every request is logged at `-v` (method and URL without its query), and
//! every refusal at the default level with its reason.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, COOKIE,
    HeaderName, HeaderValue, SET_COOKIE,
};
use http_body_util::BodyExt;
use serde_json::{Map, Value};
use wasmtime_wasi_http::{
    DEFAULT_FORBIDDEN_HEADERS, Error as HttpError, ForbiddenHeaderFilter, RequestOptions, WasiBody,
    WasiHttpHooks,
};

use super::sql::dotted_get as lookup;
use super::types::HttpGrant;

/// Timeouts and the response cap for plugins' HTTP requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Longest wait for a connection (a plugin may ask for less).
    pub connect_timeout: Duration,
    /// Longest wait for the response head once connected.
    pub first_byte_timeout: Duration,
    /// Longest wait between two pieces of a response body.
    pub between_bytes_timeout: Duration,
    /// Largest response body a plugin may receive, in bytes.
    pub max_response_bytes: u64,
}

impl Default for HttpLimits {
    /// 30 s per phase and 64 MiB, overridable by `TETHER_HTTP_TIMEOUT`
    /// (seconds, each phase) and `TETHER_HTTP_MAX_RESPONSE` (bytes).
    fn default() -> Self {
        let timeout = std::env::var("TETHER_HTTP_TIMEOUT")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| *s > 0.0 && s.is_finite())
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(30));
        let max = std::env::var("TETHER_HTTP_MAX_RESPONSE")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|m| *m > 0)
            .unwrap_or(64 << 20);
        HttpLimits {
            connect_timeout: timeout,
            first_byte_timeout: timeout,
            between_bytes_timeout: timeout,
            max_response_bytes: max,
        }
    }
}

/// `http` or `https`: the only schemes a grant can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Scheme, host (lowercase, IPv6 in brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: Scheme,
    host: String,
    port: u16,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

impl Origin {
    /// The origin of an absolute `http(s)://` URL; `None` for anything else,
    /// and for a URL with user info (`user:pass@host`), which names
    /// credentials the host does not send.
    fn of_url(url: &str) -> Option<Origin> {
        let uri: http::Uri = url.trim().parse().ok()?;
        Origin::of_uri(&uri)
    }

    fn of_uri(uri: &http::Uri) -> Option<Origin> {
        let scheme = match uri.scheme_str()? {
            s if s.eq_ignore_ascii_case("https") => Scheme::Https,
            s if s.eq_ignore_ascii_case("http") => Scheme::Http,
            _ => return None,
        };
        let authority = uri.authority()?;
        if authority.as_str().contains('@') || authority.host().is_empty() {
            return None;
        }
        Some(Origin {
            scheme,
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(scheme.default_port()),
        })
    }
}

/// A credential the host sends and no plugin may see: `Debug` never shows it.
#[derive(Clone)]
struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// How the host authenticates requests to one granted origin.
#[derive(Debug, Clone)]
enum Auth {
    /// A token it has (`token-key`, or the environment).
    Token(Token),
    /// An OAuth2 client credential it exchanges for a token first.
    Credential(Arc<ClientCredential>),
}

/// `credential = "id:secret"` beside a grant's URL key: exchanged by the
/// host (OAuth2 `client_credentials`, as Iceberg REST catalogs take it) for
/// the token it then sends. `Debug` shows neither part.
struct ClientCredential {
    /// The token endpoint: `oauth2-server-uri`, else `<url>/v1/oauth/tokens`.
    endpoint: http::Uri,
    origin: Origin,
    id: String,
    secret: Token,
    scope: String,
    /// `id:secret` as configured: a response may not repeat it either.
    whole: Token,
}

impl std::fmt::Debug for ClientCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientCredential({}, <redacted>)", shown(&self.endpoint))
    }
}

/// One granted origin of one object.
#[derive(Debug, Clone)]
struct Granted {
    origin: Origin,
    /// The grant's `url-key`, for log lines.
    key: String,
    auth: Option<Auth>,
    /// The header the credential goes in: `authorization` (as
    /// `Bearer <token>`) unless secrets.toml names another (`auth_header`,
    /// which gets the token as it is).
    header: HeaderName,
}

impl Granted {
    fn bearer(&self) -> bool {
        self.header == AUTHORIZATION
    }
}

/// Where the value under a grant's `url-key` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UrlSource {
    /// The committed locator: a clone chose it.
    Locator,
    /// The configuration (secrets.toml, or an allowlisted committed key).
    Config,
    /// The plugin's own `default-url`.
    Default,
}

/// The origins one object's calls may reach, with the credential each gets.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpAccess {
    granted: Vec<Granted>,
    /// Dotted keys of the tokens and the other host-only settings, removed
    /// from the plugin's configuration.
    token_keys: Vec<String>,
}

/// The host-only settings beside a grant's URL key (`catalog.credential`
/// beside `catalog.uri`), never passed to the plugin.
const HOST_ONLY: &[&str] = &[CREDENTIAL, OAUTH2_SERVER_URI, SCOPE, AUTH_HEADER];
/// An OAuth2 client credential, `id:secret` (pyiceberg's property name).
const CREDENTIAL: &str = "credential";
/// Where the credential is exchanged (pyiceberg's property name).
const OAUTH2_SERVER_URI: &str = "oauth2-server-uri";
/// The scope asked for (pyiceberg's default: `catalog`).
const SCOPE: &str = "scope";
/// A header to send the token in instead of `authorization` (secrets.toml only).
const AUTH_HEADER: &str = "auth_header";

impl HttpAccess {
    /// Nothing granted: every request is refused.
    pub(crate) fn none() -> Self {
        HttpAccess::default()
    }

    /// What the object at `locator` may reach: see the module docs.
    /// `config` is the configuration the plugin gets (committed and
    /// secrets.toml merged), `secret` what secrets.toml alone says for this
    /// object (the only place `allow_http` is read from), `env` the
    /// environment.
    pub(crate) fn resolve(
        kind: &str,
        grants: &[HttpGrant],
        locator: &Value,
        config: &Value,
        secret: &Map<String, Value>,
        env: impl Fn(&str) -> Option<String>,
    ) -> HttpAccess {
        let secret = Value::Object(secret.clone());
        let mut access = HttpAccess::default();
        for grant in grants {
            if let Some(key) = &grant.token_key {
                access.token_keys.push(key.clone());
            }
            access
                .token_keys
                .extend(HOST_ONLY.iter().map(|name| sibling(&grant.url_key, name)));
            // secrets.toml's own value first: it reaches the plugin in its
            // configuration too ([`HttpAccess::config_values`]).
            let from_config =
                lookup_str(&secret, &grant.url_key).or_else(|| lookup_str(config, &grant.url_key));
            let (url, source) = match (lookup_str(locator, &grant.url_key), from_config) {
                (Some(url), _) => (url, UrlSource::Locator),
                (None, Some(url)) => (url, UrlSource::Config),
                (None, None) => match &grant.default_url {
                    Some(url) => (url.as_str(), UrlSource::Default),
                    None => continue,
                },
            };
            let Some(origin) = Origin::of_url(url) else {
                // A key a plugin also reads as something else (an Iceberg
                // `catalog.uri` naming a SQL database) grants no HTTP, and
                // that is no news; an http(s) URL refused (user info, no
                // host) is.
                let lower = url.to_ascii_lowercase();
                if lower.starts_with("http://") || lower.starts_with("https://") {
                    tracing::warn!(
                        plugin = kind,
                        key = grant.url_key,
                        "no HTTP access granted: the value is not an http(s) URL without user info"
                    );
                } else {
                    tracing::debug!(
                        plugin = kind,
                        key = grant.url_key,
                        "no HTTP access granted: the value is not an http(s) URL"
                    );
                }
                continue;
            };
            let allow_http_key = sibling(&grant.url_key, "allow_http");
            if origin.scheme == Scheme::Http && !is_true(lookup(&secret, &allow_http_key)) {
                tracing::warn!(
                    plugin = kind,
                    key = grant.url_key,
                    "no HTTP access granted to {origin}: plain http:// needs `{allow_http_key} = true` \
                     in .tether/secrets.toml"
                );
                continue;
            }
            // The credential goes only where the user pointed it.
            let user_named =
                |url: Option<&str>| url.and_then(Origin::of_url) == Some(origin.clone());
            let trusted = source != UrlSource::Locator
                || user_named(from_config)
                || user_named(grant.default_url.as_deref());
            let auth = match token(kind, grant, &secret, config, &env) {
                Some(t) => Some(Auth::Token(t)),
                // Exchanged beside the URL the user configured (a
                // locator's may name a path on the same origin).
                None => credential(kind, grant, from_config.unwrap_or(url), &secret, config)
                    .map(|c| Auth::Credential(Arc::new(c))),
            };
            let auth = match (auth, trusted) {
                (Some(a), true) => Some(a),
                (Some(_), false) => {
                    tracing::warn!(
                        plugin = kind,
                        key = grant.url_key,
                        "not sending the configured token to {origin}: only the committed locator \
                         names that origin; name it in .tether/secrets.toml to send it"
                    );
                    None
                }
                (None, _) => None,
            };
            let header = match lookup_str(&secret, &sibling(&grant.url_key, AUTH_HEADER)) {
                None => AUTHORIZATION,
                Some(name) => match HeaderName::from_bytes(name.trim().as_bytes()) {
                    Ok(header) if header == AUTHORIZATION || !forbidden(&header) => header,
                    _ => {
                        tracing::warn!(
                            plugin = kind,
                            key = grant.url_key,
                            "`{}` is no header the host can send a credential in; \
                             sending it as `authorization: Bearer` instead",
                            sibling(&grant.url_key, AUTH_HEADER)
                        );
                        AUTHORIZATION
                    }
                },
            };
            tracing::debug!(
                plugin = kind,
                key = grant.url_key,
                with_token = auth.is_some(),
                header = header.as_str(),
                "HTTP access granted to {origin}"
            );
            access.granted.push(Granted {
                origin,
                key: grant.url_key.clone(),
                auth,
                header,
            });
        }
        access
    }

    /// Whether any origin is granted.
    pub(crate) fn is_empty(&self) -> bool {
        self.granted.is_empty()
    }

    /// The granted origins (`scheme://host:port`): the `sql` capability's
    /// `open-uri` opens only addresses learned from one of them.
    pub(crate) fn origins(&self) -> Vec<String> {
        self.granted.iter().map(|g| g.origin.to_string()).collect()
    }

    /// Remove every token key from the configuration a plugin is given.
    pub(crate) fn strip(&self, config: &mut Value) {
        for key in &self.token_keys {
            remove(config, key);
        }
    }

    /// The credentials the host holds, as bytes a response may not repeat
    /// (a token exchanged from a client credential is added per request).
    fn tokens(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = Vec::new();
        for auth in self.granted.iter().filter_map(|g| g.auth.as_ref()) {
            let held = match auth {
                Auth::Token(t) => vec![&t.0],
                Auth::Credential(c) => vec![&c.secret.0, &c.whole.0],
            };
            for t in held {
                if !t.is_empty() && !out.iter().any(|o| o == t) {
                    out.push(t.clone());
                }
            }
        }
        out
    }

    /// The headers the host sets besides `authorization`: a plugin may not
    /// set them nor see them in a response.
    fn credential_headers(&self) -> Vec<HeaderName> {
        self.granted
            .iter()
            .filter(|g| !g.bearer())
            .map(|g| g.header.clone())
            .collect()
    }
}

/// The client credential beside `grant`'s URL key, exchanged at
/// `oauth2-server-uri` (secrets.toml or the configuration), else at `url`'s
/// `/v1/oauth/tokens` (the Iceberg REST catalog's endpoint).
fn credential(
    kind: &str,
    grant: &HttpGrant,
    url: &str,
    secret: &Value,
    config: &Value,
) -> Option<ClientCredential> {
    let configured = |name: &str| {
        let key = sibling(&grant.url_key, name);
        lookup_str(secret, &key).or_else(|| lookup_str(config, &key))
    };
    let whole = configured(CREDENTIAL)?.trim();
    // pyiceberg's reading: `id:secret`, or a bare secret.
    let (id, secret_part) = whole.split_once(':').unwrap_or(("", whole));
    let endpoint = match configured(OAUTH2_SERVER_URI) {
        Some(uri) => uri.trim().to_string(),
        None => format!("{}/v1/oauth/tokens", url.trim().trim_end_matches('/')),
    };
    let parsed = endpoint
        .parse::<http::Uri>()
        .ok()
        .and_then(|uri| Origin::of_uri(&uri).map(|o| (uri, o)));
    let Some((endpoint, origin)) = parsed else {
        tracing::warn!(
            plugin = kind,
            key = grant.url_key,
            "the OAuth2 token endpoint is not an http(s) URL; the credential is not used"
        );
        return None;
    };
    let allow_http = is_true(lookup(secret, &sibling(&grant.url_key, "allow_http")));
    if origin.scheme == Scheme::Http && !allow_http {
        tracing::warn!(
            plugin = kind,
            key = grant.url_key,
            "not exchanging the credential at {origin}: plain http:// needs allow_http"
        );
        return None;
    }
    Some(ClientCredential {
        endpoint,
        origin,
        id: id.to_string(),
        secret: Token(Arc::from(secret_part)),
        scope: configured(SCOPE).unwrap_or("catalog").to_string(),
        whole: Token(Arc::from(whole)),
    })
}

/// The token of `grant`: `token-key`'s value (secrets.toml, then the
/// configuration), else the environment variable `token-env-key` names, else
/// `default-token-env` (only a variable of the plugin's own kind).
fn token(
    kind: &str,
    grant: &HttpGrant,
    secret: &Value,
    config: &Value,
    env: &impl Fn(&str) -> Option<String>,
) -> Option<Token> {
    let configured = |key: &str| lookup_str(secret, key).or_else(|| lookup_str(config, key));
    let literal = grant.token_key.as_deref().and_then(configured);
    let from_env = || {
        let var = match grant.token_env_key.as_deref().and_then(configured) {
            Some(var) => var.to_string(),
            None => {
                let var = grant.default_token_env.as_deref()?;
                let prefix = format!("{}_", kind.to_ascii_uppercase().replace('-', "_"));
                if !var.starts_with(&prefix) {
                    tracing::warn!(
                        plugin = kind,
                        "ignoring default-token-env {var}: a plugin's default variable must start with {prefix}"
                    );
                    return None;
                }
                var.to_string()
            }
        };
        env(&var)
    };
    let token = match literal {
        Some(t) => Some(t.to_string()),
        None => from_env(),
    }?;
    let token = token.trim();
    (!token.is_empty()).then(|| Token(Arc::from(token)))
}

/// `key`'s sibling `name`: `catalog.allow_http` beside `catalog.uri`.
fn sibling(key: &str, name: &str) -> String {
    match key.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.{name}"),
        None => name.to_string(),
    }
}

fn is_true(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn lookup_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    lookup(v, key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// Remove the value at dotted `key` (both spellings `lookup` finds).
pub(crate) fn remove(v: &mut Value, key: &str) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    map.remove(key);
    if let Some((first, rest)) = key.split_once('.')
        && let Some(inner) = map.get_mut(first)
    {
        remove(inner, rest);
    }
}

/// The `wasi:http` hooks of one call: the object's grants and the host's
/// limits.
pub(crate) struct HttpPolicy {
    kind: Arc<str>,
    access: Arc<HttpAccess>,
    limits: HttpLimits,
}

impl HttpPolicy {
    pub(crate) fn new(kind: Arc<str>, access: Arc<HttpAccess>, limits: HttpLimits) -> Self {
        HttpPolicy {
            kind,
            access,
            limits,
        }
    }

    /// Nothing granted: what a call has until its object's grants are set.
    pub(crate) fn deny_all(kind: Arc<str>) -> Self {
        HttpPolicy {
            kind,
            access: Arc::new(HttpAccess::none()),
            limits: HttpLimits {
                connect_timeout: Duration::ZERO,
                first_byte_timeout: Duration::ZERO,
                between_bytes_timeout: Duration::ZERO,
                max_response_bytes: 0,
            },
        }
    }

    /// The grant `uri` falls under, or why it is refused.
    fn check(&self, uri: &http::Uri) -> Result<&Granted, String> {
        let Some(origin) = Origin::of_uri(uri) else {
            return Err("not an http(s) URL with a host (and no user info)".into());
        };
        if self.access.granted.is_empty() {
            return Err("this object grants no HTTP origin".into());
        }
        self.access
            .granted
            .iter()
            .find(|g| g.origin == origin)
            .ok_or_else(|| {
                let granted: Vec<String> = self
                    .access
                    .granted
                    .iter()
                    .map(|g| g.origin.to_string())
                    .collect();
                format!("{origin} is not granted (granted: {})", granted.join(", "))
            })
    }

    /// The plugin's timeouts, none longer than the host's.
    fn clamp(&self, options: Option<RequestOptions>) -> RequestOptions {
        let o = options.unwrap_or_default();
        let min = |asked: Option<Duration>, cap: Duration| Some(asked.map_or(cap, |a| a.min(cap)));
        RequestOptions {
            connect_timeout: min(o.connect_timeout, self.limits.connect_timeout),
            first_byte_timeout: min(o.first_byte_timeout, self.limits.first_byte_timeout),
            between_bytes_timeout: min(o.between_bytes_timeout, self.limits.between_bytes_timeout),
        }
    }
}

/// The headers a plugin may not set nor see in a response: wasi-http's own
/// (hop-by-hop, `host`) and the credentials.
fn forbidden(name: &HeaderName) -> bool {
    DEFAULT_FORBIDDEN_HEADERS.contains(name)
        || *name == AUTHORIZATION
        || *name == COOKIE
        || *name == SET_COOKIE
}

/// A URL for a log line: no query (it may hold a signature or a key).
fn shown(uri: &http::Uri) -> String {
    format!(
        "{}://{}{}",
        uri.scheme_str().unwrap_or("?"),
        uri.authority().map(|a| a.as_str()).unwrap_or(""),
        uri.path()
    )
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpPolicy {
    fn is_forbidden_header(&mut self, name: &HeaderName) -> bool {
        forbidden(name) || self.access.credential_headers().contains(name)
    }

    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        let configured = self.access.credential_headers();
        if configured.is_empty() {
            return Arc::new(forbidden);
        }
        Arc::new(move |name: &HeaderName| forbidden(name) || configured.contains(name))
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        let kind = &*self.kind;
        let method = request.method().clone();
        let url = shown(request.uri());
        let granted = match self.check(request.uri()) {
            Ok(granted) => granted,
            Err(reason) => {
                tracing::warn!(
                    plugin = kind,
                    "HTTP request refused: {method} {url}: {reason}"
                );
                return Box::new(async { Err(HttpError::HttpRequestDenied) });
            }
        };
        tracing::info!(plugin = kind, key = granted.key, "HTTP {method} {url}");
        let granted = granted.clone();
        let kind = self.kind.clone();
        let options = self.clamp(options);
        let max = self.limits.max_response_bytes;
        let mut tokens = self.access.tokens();
        // A plugin may not ask for an encoded body: the host reads JSON
        // bodies for credentials, which it cannot do in a compressed one.
        request.headers_mut().remove(ACCEPT_ENCODING);
        Box::new(async move {
            let addrs = match checked_addresses(&granted.origin, &options).await {
                Ok(addrs) => addrs,
                Err(refusal) => {
                    tracing::warn!(
                        plugin = &*kind,
                        "HTTP request refused: {method} {url}: {}",
                        refusal.reason
                    );
                    return Err(refusal.error);
                }
            };
            let token = match &granted.auth {
                None => None,
                Some(Auth::Token(t)) => Some(t.clone()),
                Some(Auth::Credential(c)) => match exchange(c, &options).await {
                    Ok(t) => {
                        tokens.push(t.0.clone());
                        Some(t)
                    }
                    Err(why) => {
                        tracing::warn!(
                            plugin = &*kind,
                            "HTTP request not sent: {method} {url}: {why}"
                        );
                        return Err(HttpError::InternalError(Some(why)));
                    }
                },
            };
            if let Some(token) = token {
                let value = if granted.bearer() {
                    format!("Bearer {}", token.0)
                } else {
                    token.0.to_string()
                };
                match HeaderValue::try_from(value) {
                    Ok(mut value) => {
                        value.set_sensitive(true);
                        request.headers_mut().insert(granted.header.clone(), value);
                    }
                    Err(_) => tracing::warn!(
                        plugin = &*kind,
                        "the token for {} cannot be sent as a header value; sent without it",
                        granted.origin
                    ),
                }
            }
            let (response, io) = send_to(request, &granted.origin, &addrs, &options).await?;
            let declared = response
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > max) {
                return Err(HttpError::HttpResponseBodySize(declared));
            }
            // Forbidden names never reach the plugin (wasi-http drops them),
            // so an `authorization` echoed back is stripped, not refused.
            let hidden = |name: &HeaderName| forbidden(name) || *name == granted.header;
            let learned = super::sql::learned_secrets();
            let repeats = response.headers().iter().any(|(name, value)| {
                !hidden(name)
                    && tokens
                        .iter()
                        .chain(&learned)
                        .any(|t| contains(value.as_bytes(), t.as_bytes()))
            });
            if repeats {
                return Err(echoed());
            }
            let json = is_json(response.headers());
            if !json {
                tokens.extend(learned);
            }
            let response = response.map(|body| {
                let limited =
                    http_body_util::Limited::new(body, usize::try_from(max).unwrap_or(usize::MAX))
                        .map_err(move |e| match e.downcast::<HttpError>() {
                            Ok(e) => *e,
                            Err(_) => HttpError::HttpResponseBodySize(Some(max)),
                        });
                Unechoed::new(limited, tokens).boxed_unsync()
            });
            if !json {
                return Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>));
            }
            let origin = granted.origin.to_string();
            let (response, io) = without_credentials(response, io, &kind, &origin).await?;
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// Whether a response says its body is JSON (`application/json`, `+json`).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| t == "application/json" || t.ends_with("+json"))
}

/// A JSON response read whole by the host and handed on without the
/// credentials it held ([`super::sql::strip_credentials`]: a database
/// URL's password, kept by the host for `open-uri`, and every `password`
/// member). One the host cannot read (encoded, partial, not JSON after
/// all) is refused where it holds what looks like a URL with a password.
/// The connection is driven while the body is read, and what is left of it
/// is returned.
async fn without_credentials(
    response: http::Response<WasiBody>,
    io: impl Future<Output = Result<(), HttpError>> + Send + 'static,
    kind: &str,
    origin: &str,
) -> Result<
    (
        http::Response<WasiBody>,
        impl Future<Output = Result<(), HttpError>> + Send + 'static,
    ),
    HttpError,
> {
    use futures::future::{Either, select};
    let (mut parts, body) = response.into_parts();
    let mut io = Box::pin(io);
    let collect = Box::pin(body.collect());
    let (collected, ended) = match select(collect, io.as_mut()).await {
        Either::Left((collected, _)) => (collected, false),
        Either::Right((ended, collect)) => {
            ended?;
            (collect.await, true)
        }
    };
    let io = (!ended).then_some(io);
    let raw = collected?.to_bytes();
    let encoded = parts
        .headers
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
    let refused = || {
        tracing::warn!(
            plugin = kind,
            "HTTP response from {origin} cut off: it holds what looks like a database \
             credential the host cannot take out"
        );
        HttpError::InternalError(Some(
            "the response holds a credential the host cannot remove; cut off".into(),
        ))
    };
    let parsed = (!encoded && parts.status != http::StatusCode::PARTIAL_CONTENT)
        .then(|| serde_json::from_slice::<Value>(&raw).ok())
        .flatten();
    let body = match parsed {
        Some(mut value) => {
            let stripped = super::sql::strip_credentials(&mut value, kind, origin);
            if stripped == Default::default() {
                raw
            } else {
                tracing::debug!(
                    plugin = kind,
                    learned = stripped.learned,
                    removed = stripped.removed,
                    "credentials taken out of a response from {origin}"
                );
                Bytes::from(serde_json::to_vec(&value).map_err(|_| refused())?)
            }
        }
        None if holds_credentials(&raw, encoded) => return Err(refused()),
        None => raw,
    };
    // The body must not repeat a password the host learned before either.
    let learned = super::sql::learned_secrets();
    if learned.iter().any(|t| contains(&body, t.as_bytes())) {
        return Err(echoed());
    }
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    parts.headers.remove(http::header::TRANSFER_ENCODING);
    let body = http_body_util::Full::new(body)
        .map_err(|never| match never {})
        .boxed_unsync();
    let io = async move {
        match io {
            Some(io) => io.await,
            None => Ok(()),
        }
    };
    Ok((http::Response::from_parts(parts, body), io))
}

/// Whether a JSON body the host could not parse may hold a credential: an
/// encoded one always may; a plain one when it shows a URL with a password.
fn holds_credentials(raw: &[u8], encoded: bool) -> bool {
    encoded || super::sql::holds_url_credentials(raw)
}

// ---------------------------------------------------------------------------
// Where the host connects: addresses checked once, then connected to.

/// Why a request is refused before any connection, and the code the
/// plugin gets.
struct Refusal {
    reason: String,
    error: HttpError,
}

/// Host names of cloud metadata services (resolved or not, never reached).
const METADATA_HOSTS: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
];

/// Why the host never connects to `ip`, if it doesn't. `literal`: the URL
/// names this address itself (`http://127.0.0.1:8181`), which is the only
/// way to reach a loopback or private address: a host name resolving to
/// one is refused, so a name whose DNS answer changes (rebinding) cannot
/// turn a granted origin into one on the user's own network.
fn refused_address(ip: std::net::IpAddr, literal: bool) -> Option<&'static str> {
    use std::net::IpAddr;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let private = match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_link_local() {
                return Some("a link-local address (where cloud metadata services answer)");
            }
            if v4 == std::net::Ipv4Addr::new(100, 100, 100, 200) {
                return Some("a cloud metadata service's address");
            }
            if v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast() || a == 0 {
                return Some("not a unicast host address");
            }
            v4.is_loopback() || v4.is_private() || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if first & 0xffc0 == 0xfe80 {
                return Some("a link-local address (where cloud metadata services answer)");
            }
            if v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                return Some("a cloud metadata service's address");
            }
            if v6.is_unspecified() || v6.is_multicast() {
                return Some("not a unicast host address");
            }
            v6.is_loopback() || first & 0xfe00 == 0xfc00
        }
    };
    (private && !literal).then_some(
        "a loopback or private address, reached only when the configured URL names the \
         address itself (not a host name resolving to it)",
    )
}

/// The addresses a request to `origin` may connect to: its IP literal, or
/// its host name resolved once here, every answer checked
/// ([`refused_address`]). The connection goes to these, never to a second
/// lookup.
async fn checked_addresses(
    origin: &Origin,
    options: &RequestOptions,
) -> Result<Vec<std::net::SocketAddr>, Refusal> {
    use std::net::{IpAddr, SocketAddr};
    let prohibited = |reason: String| Refusal {
        reason,
        error: HttpError::DestinationIpProhibited,
    };
    let host = origin.host.trim_start_matches('[').trim_end_matches(']');
    let name = host.trim_end_matches('.');
    if METADATA_HOSTS.iter().any(|m| name.eq_ignore_ascii_case(m)) {
        return Err(prohibited(format!(
            "{name} is a cloud metadata service; never connected to"
        )));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return match refused_address(ip, true) {
            Some(why) => Err(prohibited(format!("{ip} is {why}; never connected to"))),
            None => Ok(vec![SocketAddr::new(ip, origin.port)]),
        };
    }
    let timeout = options.connect_timeout.unwrap_or(Duration::from_secs(30));
    let found = tokio::time::timeout(timeout, tokio::net::lookup_host((host, origin.port)))
        .await
        .map_err(|_| Refusal {
            reason: format!("resolving {host} timed out"),
            error: HttpError::DnsTimeout,
        })?
        .map_err(|e| Refusal {
            reason: format!("cannot resolve {host}: {e}"),
            error: HttpError::DnsError {
                rcode: None,
                info_code: None,
            },
        })?;
    let addrs: Vec<SocketAddr> = found.collect();
    if addrs.is_empty() {
        return Err(Refusal {
            reason: format!("{host} resolves to no address"),
            error: HttpError::DestinationNotFound,
        });
    }
    for addr in &addrs {
        if let Some(why) = refused_address(addr.ip(), false) {
            return Err(prohibited(format!(
                "{host} resolves to {}, {why}; never connected to",
                addr.ip()
            )));
        }
    }
    Ok(addrs)
}

/// A response body read with the between-bytes timeout.
struct Paced {
    inner: hyper::body::Incoming,
    each: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Paced {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let deadline = tokio::time::Instant::now() + this.each;
                this.timer.as_mut().reset(deadline);
                Poll::Ready(frame.map(|f| f.map_err(HttpError::from)))
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response as the host's client reads it.
type Sent = http::Response<http_body_util::combinators::UnsyncBoxBody<Bytes, HttpError>>;

/// Send `request` over a new connection to the first of `addrs` that
/// answers (TLS for `https`, verified against `origin`'s host name), with
/// the clamped timeouts. Returns the response and the connection's future.
async fn send_to<B>(
    mut request: http::Request<B>,
    origin: &Origin,
    addrs: &[std::net::SocketAddr],
    options: &RequestOptions,
) -> Result<
    (
        Sent,
        impl Future<Output = Result<(), HttpError>> + Send + 'static,
    ),
    HttpError,
>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use futures::future::{Either, select};
    use wasmtime_wasi_http::io::TokioIo;
    let connect_timeout = options.connect_timeout.unwrap_or(Duration::from_secs(30));
    let first_byte = options
        .first_byte_timeout
        .unwrap_or(Duration::from_secs(30));
    let between = options
        .between_bytes_timeout
        .unwrap_or(Duration::from_secs(30))
        .max(Duration::from_millis(1));
    let connect = async {
        let mut last = None;
        for addr in addrs {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no address to connect to")))
    };
    let tcp = tokio::time::timeout(connect_timeout, connect)
        .await
        .map_err(|_| HttpError::ConnectionTimeout)?
        .map_err(HttpError::Connect)?;
    type Stream = Box<dyn Io>;
    let stream: Stream = match origin.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let host = origin.host.trim_start_matches('[').trim_end_matches(']');
            let name = match host.parse::<std::net::IpAddr>() {
                Ok(ip) => rustls::pki_types::ServerName::from(ip),
                Err(_) => rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|_| HttpError::HttpRequestUriInvalid)?,
            };
            let tls = tokio::time::timeout(connect_timeout, tls_connector().connect(name, tcp))
                .await
                .map_err(|_| HttpError::ConnectionTimeout)?
                .map_err(HttpError::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    // On the wire, the path only: the authority is in the Host header.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    *request.uri_mut() = path;
    let send = Box::pin(tokio::time::timeout(
        first_byte,
        sender.send_request(request),
    ));
    let mut conn = Box::pin(conn);
    // The connection must be driven while the response is awaited.
    let (response, ended) = match select(send, conn.as_mut()).await {
        Either::Left((sent, _)) => (sent, false),
        Either::Right((done, send)) => {
            done?;
            (send.await, true)
        }
    };
    let conn = (!ended).then_some(conn);
    let response = response.map_err(|_| HttpError::ConnectionReadTimeout)??;
    let response = response.map(|inner| {
        Paced {
            inner,
            each: between,
            timer: Box::pin(tokio::time::sleep(between)),
        }
        .boxed_unsync()
    });
    let io = async move {
        match conn {
            Some(conn) => conn.await.map_err(HttpError::from),
            None => Ok(()),
        }
    };
    Ok((response, io))
}

/// A connection hyper can speak over: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

/// TLS with the Web PKI roots (what wasi-http's own client trusts).
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Arc::new(config)
    });
    tokio_rustls::TlsConnector::from(config.clone())
}

// ---------------------------------------------------------------------------
// OAuth2 client credentials

/// Tokens the host got for a client credential, by endpoint and credential.
type TokenCache = std::sync::Mutex<std::collections::HashMap<(String, String), Token>>;

/// The [`TokenCache`] for the life of the process (one tether command).
fn exchanged() -> &'static TokenCache {
    static CACHE: std::sync::OnceLock<TokenCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The token `credential` is exchanged for (OAuth2 `client_credentials`, a
/// form POST to its endpoint; the `access_token` of the JSON answer). The
/// error names the endpoint and the status, never the answer's body (it
/// may quote the secret).
async fn exchange(
    credential: &ClientCredential,
    options: &RequestOptions,
) -> Result<Token, String> {
    let key = (
        credential.endpoint.to_string(),
        credential.whole.0.to_string(),
    );
    if let Some(token) = exchanged().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(token);
    }
    let endpoint = shown(&credential.endpoint);
    let addrs = checked_addresses(&credential.origin, options)
        .await
        .map_err(|r| {
            format!(
                "the OAuth2 token endpoint {endpoint} is refused: {}",
                r.reason
            )
        })?;
    let form: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", &credential.id)
        .append_pair("client_secret", &credential.secret.0)
        .append_pair("scope", &credential.scope)
        .finish();
    let authority = credential
        .endpoint
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    let request = http::Request::post(credential.endpoint.clone())
        .header(http::header::HOST, authority)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(http::header::ACCEPT, "application/json")
        .header(CONTENT_LENGTH, form.len())
        .body(http_body_util::Full::new(Bytes::from(form)))
        .map_err(|e| format!("cannot build the OAuth2 token request: {e}"))?;
    let (response, io) = send_to(request, &credential.origin, &addrs, options)
        .await
        .map_err(|e| format!("the OAuth2 token endpoint {endpoint} failed: {e}"))?;
    let status = response.status();
    // The connection ends with the body: read both.
    let (body, _) = futures::future::join(
        http_body_util::Limited::new(response.into_body(), 64 << 10).collect(),
        io,
    )
    .await;
    let body = body
        .map_err(|_| format!("the OAuth2 token endpoint {endpoint} sent no whole answer"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "the OAuth2 token endpoint {endpoint} refused the credential (HTTP {status})"
        ));
    }
    let token = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("access_token")?.as_str().map(str::to_string))
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| format!("the OAuth2 token endpoint {endpoint} sent no access_token"))?;
    let token = Token(Arc::from(token.trim()));
    if let Ok(mut cache) = exchanged().lock() {
        cache.insert(key, token.clone());
    }
    Ok(token)
}

/// The error a response gets that repeats a credential the host sent.
fn echoed() -> HttpError {
    HttpError::InternalError(Some(
        "the response repeated the credential the host sent; cut off".into(),
    ))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// A response body that fails where it would repeat one of `tokens`. It
/// holds back the last `longest - 1` bytes of each frame until the next
/// frame (or the end) shows they do not begin a token, so no prefix of a
/// token reaches the plugin either.
struct Unechoed<B> {
    inner: B,
    tokens: Vec<Arc<str>>,
    held: Vec<u8>,
    done: bool,
}

impl<B> Unechoed<B> {
    fn new(inner: B, tokens: Vec<Arc<str>>) -> Self {
        Unechoed {
            inner,
            tokens,
            held: Vec::new(),
            done: false,
        }
    }

    fn keep(&self) -> usize {
        self.tokens
            .iter()
            .map(|t| t.len())
            .max()
            .unwrap_or(0)
            .saturating_sub(1)
    }
}

impl<B> http_body::Body for Unechoed<B>
where
    B: http_body::Body<Data = Bytes, Error = HttpError> + Unpin,
{
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        if this.tokens.is_empty() {
            return Pin::new(&mut this.inner).poll_frame(cx);
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    if this.held.is_empty() {
                        return Poll::Ready(None);
                    }
                    let rest = std::mem::take(&mut this.held);
                    return Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(rest)))));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let data = match frame.into_data() {
                        Ok(data) => data,
                        // Trailers: wasi-http filters their names like
                        // headers; their values are checked here.
                        Err(frame) => {
                            if let Some(t) = frame.trailers_ref()
                                && t.values().any(|v| {
                                    this.tokens
                                        .iter()
                                        .any(|tok| contains(v.as_bytes(), tok.as_bytes()))
                                })
                            {
                                this.done = true;
                                return Poll::Ready(Some(Err(echoed())));
                            }
                            return Poll::Ready(Some(Ok(frame)));
                        }
                    };
                    this.held.extend_from_slice(&data);
                    if this
                        .tokens
                        .iter()
                        .any(|t| contains(&this.held, t.as_bytes()))
                    {
                        this.done = true;
                        this.held.clear();
                        return Poll::Ready(Some(Err(echoed())));
                    }
                    let keep = this.keep();
                    if this.held.len() > keep {
                        let tail = this.held.split_off(this.held.len() - keep);
                        let out = std::mem::replace(&mut this.held, tail);
                        return Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(out)))));
                    }
                    // All held back: read on.
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.tokens.is_empty() && self.inner.is_end_stream())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grant(url_key: &str) -> HttpGrant {
        HttpGrant {
            url_key: url_key.into(),
            default_url: None,
            token_key: None,
            token_env_key: None,
            default_token_env: None,
        }
    }

    fn resolve(grants: &[HttpGrant], locator: Value, config: Value, secret: Value) -> HttpAccess {
        let secret = secret.as_object().unwrap().clone();
        HttpAccess::resolve("probe", grants, &locator, &config, &secret, |v| {
            (v == "PROBE_TOKEN").then(|| "from-env".to_string())
        })
    }

    fn origins(a: &HttpAccess) -> Vec<String> {
        a.granted.iter().map(|g| g.origin.to_string()).collect()
    }

    fn tokens(a: &HttpAccess) -> Vec<Option<String>> {
        a.granted
            .iter()
            .map(|g| match &g.auth {
                Some(Auth::Token(t)) => Some(t.0.to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn origins_come_from_the_locator_then_the_config_then_the_default() {
        let g = [
            grant("catalog.uri"),
            HttpGrant {
                default_url: Some("https://api.example.invalid/v2".into()),
                ..grant("api_url")
            },
        ];
        let a = resolve(
            &g,
            json!({"catalog": {"uri": "https://Cat.Example.invalid/v1/"}}),
            json!({"catalog": {"uri": "https://other.invalid"}}),
            json!({}),
        );
        assert_eq!(
            origins(&a),
            [
                "https://cat.example.invalid:443",
                "https://api.example.invalid:443"
            ]
        );
        let a = resolve(
            &g,
            json!({}),
            json!({"catalog.uri": "https://flat.invalid:8443/x"}),
            json!({}),
        );
        assert_eq!(origins(&a)[0], "https://flat.invalid:8443");
        for bad in [
            "ftp://x.invalid/",
            "https://user:pw@x.invalid/",
            "relative/path",
            "https://",
        ] {
            let a = resolve(&[grant("u")], json!({"u": bad}), json!({}), json!({}));
            assert!(a.is_empty(), "{bad}");
        }
    }

    #[test]
    fn plain_http_needs_allow_http_from_secrets_alone() {
        let g = [grant("catalog.uri")];
        let loc = json!({"catalog": {"uri": "http://127.0.0.1:8181"}});
        assert!(resolve(&g, loc.clone(), json!({}), json!({})).is_empty());
        // Not from the locator nor the (committed) configuration.
        let with = json!({"catalog": {"uri": "http://127.0.0.1:8181", "allow_http": true}});
        assert!(resolve(&g, with.clone(), with.clone(), json!({})).is_empty());
        let a = resolve(&g, loc, json!({}), json!({"catalog": {"allow_http": true}}));
        assert_eq!(origins(&a), ["http://127.0.0.1:8181"]);
    }

    #[test]
    fn the_token_goes_only_to_an_origin_the_user_named() {
        let g = [HttpGrant {
            token_key: Some("catalog.token".into()),
            ..grant("catalog.uri")
        }];
        let secret = json!({"catalog": {"uri": "https://cat.invalid/v1", "token": "s3cr3t"}});
        // Named in secrets.toml: sent.
        let a = resolve(&g, json!({}), secret.clone(), secret.clone());
        assert_eq!(tokens(&a), [Some("s3cr3t".to_string())]);
        // The locator names the same origin: sent.
        let a = resolve(
            &g,
            json!({"catalog": {"uri": "https://CAT.invalid:443/other"}}),
            secret.clone(),
            secret.clone(),
        );
        assert_eq!(tokens(&a), [Some("s3cr3t".to_string())]);
        // The locator (a clone) names another: granted, but without it.
        let a = resolve(
            &g,
            json!({"catalog": {"uri": "https://evil.invalid"}}),
            secret.clone(),
            secret.clone(),
        );
        assert_eq!(origins(&a), ["https://evil.invalid:443"]);
        assert_eq!(tokens(&a), [None]);
        // The configuration the plugin gets holds no token.
        let mut config = secret.clone();
        a.strip(&mut config);
        assert_eq!(
            config,
            json!({"catalog": {"uri": "https://cat.invalid/v1"}})
        );
    }

    #[test]
    fn a_client_credential_and_a_configured_header_stay_with_the_host() {
        let g = [HttpGrant {
            token_key: Some("catalog.token".into()),
            ..grant("catalog.uri")
        }];
        let secret = json!({"catalog": {"uri": "https://cat.invalid/api/", "credential": "id-1:s3cr3t",
                            "auth_header": "X-Api-Key", "scope": "PRINCIPAL_ROLE:ALL"}});
        let a = resolve(&g, json!({}), secret.clone(), secret.clone());
        let Some(Auth::Credential(c)) = &a.granted[0].auth else {
            panic!("{a:?}");
        };
        assert_eq!(
            c.endpoint.to_string(),
            "https://cat.invalid/api/v1/oauth/tokens"
        );
        assert_eq!((c.id.as_str(), &*c.secret.0), ("id-1", "s3cr3t"));
        assert_eq!(c.scope, "PRINCIPAL_ROLE:ALL");
        assert!(!format!("{a:?}").contains("s3cr3t"), "{a:?}");
        // A response may not repeat the secret, nor the whole credential.
        assert_eq!(
            a.tokens().iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            ["s3cr3t", "id-1:s3cr3t"]
        );
        // The token goes in the configured header, which the plugin may
        // neither set nor read.
        assert_eq!(a.granted[0].header.as_str(), "x-api-key");
        assert!(!a.granted[0].bearer());
        let mut p = HttpPolicy::new(
            Arc::from("probe"),
            Arc::new(a.clone()),
            HttpLimits::default(),
        );
        assert!(p.is_forbidden_header(&HeaderName::from_static("x-api-key")));
        assert!((p.forbidden_header_filter())(&HeaderName::from_static(
            "x-api-key"
        )));
        assert!(!p.is_forbidden_header(&HeaderName::from_static("x-other")));
        // None of it reaches the plugin's configuration.
        let mut config = secret.clone();
        a.strip(&mut config);
        assert_eq!(
            config,
            json!({"catalog": {"uri": "https://cat.invalid/api/"}})
        );
        // An explicit endpoint; the header only from secrets.toml.
        let config = json!({"catalog": {"uri": "https://cat.invalid", "credential": "bare",
                            "oauth2-server-uri": "https://auth.invalid/token", "auth_header": "X-Api-Key"}});
        let a = resolve(&g, json!({}), config, json!({}));
        let Some(Auth::Credential(c)) = &a.granted[0].auth else {
            panic!("{a:?}");
        };
        assert_eq!(c.endpoint.to_string(), "https://auth.invalid/token");
        assert_eq!((c.id.as_str(), &*c.secret.0), ("", "bare"));
        assert!(a.granted[0].bearer());
        // A token, where both are set, wins; a header the host owns is no
        // place for it.
        let secret = json!({"catalog": {"uri": "https://cat.invalid", "credential": "a:b",
                            "token": "t0k", "auth_header": "cookie"}});
        let a = resolve(&g, json!({}), secret.clone(), secret);
        assert_eq!(tokens(&a), [Some("t0k".to_string())]);
        assert!(a.granted[0].bearer());
    }

    #[test]
    fn link_local_metadata_and_unnamed_private_addresses_are_refused() {
        let refused = |ip: &str, literal: bool| refused_address(ip.parse().unwrap(), literal);
        for ip in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "0.0.0.0",
            "::",
            "224.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(refused(ip, true).is_some(), "{ip}");
            assert!(refused(ip, false).is_some(), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "::1",
            "fd12::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(refused(ip, true).is_none(), "{ip} named literally");
            assert!(refused(ip, false).is_some(), "{ip} behind a name");
        }
        for ip in [
            "93.184.215.14",
            "2606:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
        ] {
            assert!(refused(ip, false).is_none(), "{ip}");
        }
    }

    #[test]
    fn names_are_resolved_once_and_checked() {
        let options = RequestOptions::default();
        let check = |url: &str| {
            let origin = Origin::of_url(url).unwrap();
            // lookup_host needs a tokio runtime.
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(checked_addresses(&origin, &options))
        };
        let ok = check("http://127.0.0.1:8181/").ok().unwrap();
        assert_eq!(
            ok,
            ["127.0.0.1:8181".parse::<std::net::SocketAddr>().unwrap()]
        );
        let err = check("http://169.254.169.254/latest/meta-data")
            .err()
            .unwrap();
        assert!(err.reason.contains("link-local"), "{}", err.reason);
        let err = check("http://metadata.google.internal/").err().unwrap();
        assert!(err.reason.contains("metadata"), "{}", err.reason);
        // `localhost` is a name: what it resolves to is loopback, which only
        // a literal address reaches.
        let err = check("http://localhost:8181/").err().unwrap();
        assert!(err.reason.contains("resolves to"), "{}", err.reason);
    }

    #[test]
    fn tokens_from_the_environment() {
        let env_grant = HttpGrant {
            token_env_key: Some("api_key_env".into()),
            default_token_env: Some("PROBE_TOKEN".into()),
            default_url: Some("https://api.invalid".into()),
            ..grant("api_url")
        };
        let a = resolve(
            std::slice::from_ref(&env_grant),
            json!({}),
            json!({}),
            json!({}),
        );
        assert_eq!(tokens(&a), [Some("from-env".to_string())]);
        let a = resolve(
            std::slice::from_ref(&env_grant),
            json!({}),
            json!({"api_key_env": "UNSET"}),
            json!({}),
        );
        assert_eq!(tokens(&a), [None]);
        // A plugin's default may only name a variable of its own kind.
        let greedy = HttpGrant {
            default_token_env: Some("AWS_SECRET_ACCESS_KEY".into()),
            ..env_grant
        };
        let a = HttpAccess::resolve(
            "probe",
            &[greedy],
            &json!({}),
            &json!({}),
            &Map::new(),
            |_| Some("aws".into()),
        );
        assert_eq!(tokens(&a), [None]);
    }

    #[test]
    fn requests_are_checked_against_the_granted_origins() {
        let a = resolve(
            &[grant("u")],
            json!({"u": "https://cat.invalid/v1"}),
            json!({}),
            json!({}),
        );
        let p = HttpPolicy::new(Arc::from("probe"), Arc::new(a), HttpLimits::default());
        let ok = |u: &str| p.check(&u.parse().unwrap()).is_ok();
        assert!(ok("https://cat.invalid/v1/config"));
        assert!(ok("https://CAT.invalid:443/elsewhere?x=1"));
        assert!(!ok("http://cat.invalid/v1"));
        assert!(!ok("https://cat.invalid:8443/v1"));
        assert!(!ok("https://evil.invalid/"));
        assert!(!ok("https://x@cat.invalid/"));
    }

    #[test]
    fn timeouts_are_clamped() {
        let limits = HttpLimits {
            connect_timeout: Duration::from_secs(2),
            first_byte_timeout: Duration::from_secs(3),
            between_bytes_timeout: Duration::from_secs(4),
            max_response_bytes: 10,
        };
        let p = HttpPolicy::new(Arc::from("probe"), Arc::new(HttpAccess::none()), limits);
        let asked = RequestOptions {
            connect_timeout: Some(Duration::from_secs(60)),
            first_byte_timeout: Some(Duration::from_secs(1)),
            between_bytes_timeout: None,
        };
        let got = p.clamp(Some(asked));
        assert_eq!(got.connect_timeout, Some(Duration::from_secs(2)));
        assert_eq!(got.first_byte_timeout, Some(Duration::from_secs(1)));
        assert_eq!(got.between_bytes_timeout, Some(Duration::from_secs(4)));
    }

    #[test]
    fn credential_headers_are_forbidden() {
        for name in [
            "authorization",
            "cookie",
            "set-cookie",
            "host",
            "proxy-authorization",
        ] {
            assert!(forbidden(&HeaderName::from_static(name)), "{name}");
        }
        assert!(!forbidden(&HeaderName::from_static("content-type")));
    }

    /// A body of these frames, read through [`Unechoed`].
    fn read_unechoed(frames: &[&str], token: &str) -> Result<String, String> {
        let chunks: Vec<Result<http_body::Frame<Bytes>, HttpError>> = frames
            .iter()
            .map(|f| Ok(http_body::Frame::data(Bytes::from(f.to_string()))))
            .collect();
        let body = http_body_util::StreamBody::new(futures::stream::iter(chunks));
        let body = Unechoed::new(body, vec![Arc::from(token)]);
        let collected = futures::executor::block_on(body.collect());
        collected
            .map(|c| String::from_utf8(c.to_bytes().to_vec()).unwrap())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_body_repeating_the_token_is_cut_off_even_across_frames() {
        assert_eq!(
            read_unechoed(&["hello ", "world"], "s3cr3t").unwrap(),
            "hello world"
        );
        assert_eq!(
            read_unechoed(&["a", "s3", "cr", "3", "t!"], "zzz").unwrap(),
            "as3cr3t!"
        );
        assert!(read_unechoed(&["x s3cr3t y"], "s3cr3t").is_err());
        assert!(read_unechoed(&["x s3c", "r3t y"], "s3cr3t").is_err());
        assert!(read_unechoed(&["s", "3", "c", "r", "3", "t"], "s3cr3t").is_err());
        // A prefix alone at the end is released.
        assert_eq!(read_unechoed(&["abc s3cr"], "s3cr3t").unwrap(), "abc s3cr");
    }

    #[test]
    fn dotted_keys_nested_and_flat() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "x.y": 3});
        assert_eq!(lookup(&v, "a.b"), Some(&json!(1)));
        assert_eq!(lookup(&v, "x.y"), Some(&json!(3)));
        remove(&mut v, "a.b");
        remove(&mut v, "x.y");
        assert_eq!(v, json!({"a": {"c": 2}}));
    }
}
