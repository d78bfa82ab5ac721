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
//! - the plugin may not set `authorization`, `cookie` or the hop-by-hop
//!   headers itself, and never sees `authorization`, `cookie` or
//!   `set-cookie` in a response (wasi-http filters response headers with the
//!   same predicate). A response that repeats the token's bytes, in a header
//!   value or anywhere in its body, is cut off with an error: an origin that
//!   echoes the credential (an echo endpoint, an error message quoting it)
//!   cannot hand it to the plugin. One that transforms it (base64, say) can:
//!   the host cannot see that, and granting the origin is trusting it;
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
use http::header::{AUTHORIZATION, CONTENT_LENGTH, COOKIE, HeaderName, HeaderValue, SET_COOKIE};
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

/// One granted origin of one object.
#[derive(Debug, Clone)]
struct Granted {
    origin: Origin,
    /// The grant's `url-key`, for log lines.
    key: String,
    token: Option<Token>,
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
    /// Dotted keys of the tokens, removed from the plugin's configuration.
    token_keys: Vec<String>,
}

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
            let token = token(kind, grant, &secret, config, &env);
            let token = match (token, trusted) {
                (Some(t), true) => Some(t),
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
            tracing::debug!(
                plugin = kind,
                key = grant.url_key,
                with_token = token.is_some(),
                "HTTP access granted to {origin}"
            );
            access.granted.push(Granted {
                origin,
                key: grant.url_key.clone(),
                token,
            });
        }
        access
    }

    /// Whether any origin is granted.
    pub(crate) fn is_empty(&self) -> bool {
        self.granted.is_empty()
    }

    /// Remove every token key from the configuration a plugin is given.
    pub(crate) fn strip(&self, config: &mut Value) {
        for key in &self.token_keys {
            remove(config, key);
        }
    }

    /// The tokens the host sends, as bytes a response may not repeat.
    fn tokens(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = Vec::new();
        for t in self.granted.iter().filter_map(|g| g.token.as_ref()) {
            if !out.iter().any(|o| o == &t.0) {
                out.push(t.0.clone());
            }
        }
        out
    }
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
        forbidden(name)
    }

    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        Arc::new(forbidden)
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
        if let Some(token) = &granted.token {
            match HeaderValue::try_from(format!("Bearer {}", token.0)) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request.headers_mut().insert(AUTHORIZATION, value);
                }
                Err(_) => tracing::warn!(
                    plugin = kind,
                    "the token for {} cannot be sent as a header value; sent without it",
                    granted.origin
                ),
            }
        }
        let options = self.clamp(options);
        let max = self.limits.max_response_bytes;
        let tokens = self.access.tokens();
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
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
            let repeats = response.headers().iter().any(|(name, value)| {
                !forbidden(name)
                    && tokens
                        .iter()
                        .any(|t| contains(value.as_bytes(), t.as_bytes()))
            });
            if repeats {
                return Err(echoed());
            }
            let response = response.map(|body| {
                let limited = http_body_util::Limited::new(
                    body.boxed_unsync(),
                    usize::try_from(max).unwrap_or(usize::MAX),
                )
                .map_err(move |e| match e.downcast::<HttpError>() {
                    Ok(e) => *e,
                    Err(_) => HttpError::HttpResponseBodySize(Some(max)),
                });
                Unechoed::new(limited, tokens).boxed_unsync()
            });
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
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
            .map(|g| g.token.as_ref().map(|t| t.0.to_string()))
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
