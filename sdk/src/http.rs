//! Outgoing HTTP requests (`wasi:http`): a small blocking client.
//!
//! The host grants a plugin the origins (scheme, host, port) its object's
//! locator and configuration name under the keys of its
//! `describe-net.http-grants` ([`crate::DescribeNet`]); any other request is
//! refused, and shows here as [`Error::Denied`]. The host adds the
//! credential itself (`authorization: Bearer ...`): a plugin never holds a
//! token, may not set `authorization` or `cookie`, and does not see them in
//! responses. Redirects are not followed: a 3xx comes back as it is, and
//! following its `location` is a new request, granted or not like any other.
//!
//! ```no_run
//! use tether_sdk::http;
//! # fn f(base: &str) -> tether_sdk::Result<()> {
//! let config: serde_json::Value = http::get(&format!("{base}/v1/config"))?.ok()?.json()?;
//! let reply = http::post_json(&format!("{base}/v1/namespaces"), &serde_json::json!({"namespace": ["ns"]}))?;
//! if reply.status == 409 { /* exists already */ }
//! # Ok(()) }
//! ```
//!
//! Built on the `wasip2` crate's bindings. Bodies are sent with
//! `content-length` (some servers cannot read a chunked request).

use std::time::Duration;

use serde::de::DeserializeOwned;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, HeaderError, IncomingBody, Method, OutgoingBody, OutgoingRequest,
    RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

use crate::error::{Error, Result};

/// A response: status, headers (names lowercase, in order) and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case), when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Error::Backend(format!(
                "the response (status {}) is not the JSON expected: {e}",
                self.status
            ))
        })
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Itself when the status is 2xx; otherwise [`Error::Backend`] with the
    /// status and the start of the body.
    pub fn ok(self) -> Result<Response> {
        if self.is_success() {
            return Ok(self);
        }
        let mut text = self.text();
        if text.len() > 512 {
            let mut end = 512;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push('…');
        }
        Err(Error::Backend(format!(
            "HTTP status {}: {}",
            self.status,
            text.trim()
        )))
    }
}

/// One request: build it, then [`Request::send`].
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Request {
    /// A request with `method` (`GET`, `POST`, ...) to the absolute `url`.
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_ascii_uppercase(),
            url: url.to_string(),
            headers: Vec::new(),
            body: None,
            timeout: None,
        }
    }

    /// Add a header (`authorization` and `cookie` are the host's: refused).
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Request {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The body, sent with its `content-length`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// A JSON body, with `content-type: application/json`.
    pub fn json(self, value: &serde_json::Value) -> Request {
        self.header("content-type", "application/json")
            .body(value.to_string())
    }

    /// Ask for shorter connect / first-byte / between-bytes timeouts than the
    /// host's (it never allows longer ones).
    pub fn timeout(mut self, each: Duration) -> Request {
        self.timeout = Some(each);
        self
    }

    /// Send it and read the whole response.
    pub fn send(self) -> Result<Response> {
        let what = format!("{} {}", self.method, shown(&self.url));
        let fail = |e: Error| match e {
            Error::Denied(m) => Error::Denied(format!("{what}: {m}")),
            Error::Backend(m) => Error::Backend(format!("{what}: {m}")),
            other => other,
        };
        self.send_inner().map_err(fail)
    }

    fn send_inner(self) -> Result<Response> {
        let url = Url::parse(&self.url)?;
        let mut headers = self.headers.clone();
        if let Some(body) = &self.body {
            headers.push(("content-length".into(), body.len().to_string().into_bytes()));
        }
        let fields = Fields::from_list(&headers).map_err(|e| header_error(e, &headers))?;
        let request = OutgoingRequest::new(fields);
        let method = match self.method.as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        };
        let invalid =
            |what: &str| Error::Invalid(format!("invalid {what} in {}", shown(&self.url)));
        request
            .set_method(&method)
            .map_err(|()| invalid("method"))?;
        request
            .set_scheme(Some(&url.scheme))
            .map_err(|()| invalid("scheme"))?;
        request
            .set_authority(Some(&url.authority))
            .map_err(|()| invalid("host"))?;
        request
            .set_path_with_query(Some(&url.path_with_query))
            .map_err(|()| invalid("path"))?;
        let outgoing = request
            .body()
            .map_err(|()| Error::Other("the request body was taken twice".into()))?;
        let options = self.timeout.map(|each| {
            let o = RequestOptions::new();
            let nanos = u64::try_from(each.as_nanos()).unwrap_or(u64::MAX);
            // Refusals only mean the host keeps its own timeout.
            let _ = o.set_connect_timeout(Some(nanos));
            let _ = o.set_first_byte_timeout(Some(nanos));
            let _ = o.set_between_bytes_timeout(Some(nanos));
            o
        });
        let pending = outgoing_handler::handle(request, options).map_err(code_error)?;
        if let Some(body) = &self.body {
            let stream = outgoing
                .write()
                .map_err(|()| Error::Other("the request body stream was taken twice".into()))?;
            // `blocking-write-and-flush` takes at most 4096 bytes at a time.
            for chunk in body.chunks(4096) {
                if let Err(e) = stream.blocking_write_and_flush(chunk) {
                    drop(stream);
                    // The request failed: its response says why.
                    return Err(wait(&pending).err().unwrap_or_else(|| stream_error(e)));
                }
            }
            drop(stream);
        }
        OutgoingBody::finish(outgoing, None).map_err(code_error)?;
        let response = wait(&pending)?;
        let status = response.status();
        let headers = response.headers().entries();
        let body = response
            .consume()
            .map_err(|()| Error::Other("the response body was taken twice".into()))?;
        let bytes = read_all(&body)?;
        drop(body);
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }
}

/// Block until the response head arrives.
fn wait(
    pending: &wasip2::http::types::FutureIncomingResponse,
) -> Result<wasip2::http::types::IncomingResponse> {
    loop {
        match pending.get() {
            None => pending.subscribe().block(),
            Some(Err(())) => return Err(Error::Other("the response was taken twice".into())),
            Some(Ok(Err(code))) => return Err(code_error(code)),
            Some(Ok(Ok(response))) => return Ok(response),
        }
    }
}

fn read_all(body: &IncomingBody) -> Result<Vec<u8>> {
    let stream = body
        .stream()
        .map_err(|()| Error::Other("the response stream was taken twice".into()))?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(stream_error(e)),
        }
    }
    Ok(out)
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response> {
    Request::new("GET", url).send()
}

/// `POST url` with a JSON body.
pub fn post_json(url: &str, body: &serde_json::Value) -> Result<Response> {
    Request::new("POST", url).json(body).send()
}

fn code_error(code: ErrorCode) -> Error {
    match code {
        ErrorCode::HttpRequestDenied => Error::Denied(
            "the host refused the request: its origin is not granted to this object \
             (see the plugin's describe-net http grants and the object's configuration)"
                .into(),
        ),
        ErrorCode::DestinationIpProhibited => Error::Denied(
            "the host refused to connect: the address is link-local or a cloud metadata \
             service, or a loopback or private one that the configured URL does not name \
             itself"
                .into(),
        ),
        other => Error::Backend(format!("{other}")),
    }
}

fn stream_error(e: StreamError) -> Error {
    match e {
        StreamError::Closed => Error::Backend("the connection closed early".into()),
        StreamError::LastOperationFailed(err) => match wasip2::http::types::http_error_code(&err) {
            Some(code) => code_error(code),
            None => Error::Backend(err.to_debug_string()),
        },
    }
}

fn header_error(e: HeaderError, headers: &[(String, Vec<u8>)]) -> Error {
    let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    match e {
        HeaderError::Forbidden => Error::Denied(format!(
            "one of the headers {} is the host's to set (authorization, cookie, host, ...)",
            names.join(", ")
        )),
        other => Error::Invalid(format!("bad header among {}: {other:?}", names.join(", "))),
    }
}

/// A URL without its query, for messages.
fn shown(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

/// What wasi:http needs of an absolute URL.
struct Url {
    scheme: Scheme,
    authority: String,
    path_with_query: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url> {
        let invalid = || Error::Invalid(format!("{} is not an absolute http(s) URL", shown(url)));
        let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            _ => return Err(invalid()),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() {
            return Err(invalid());
        }
        let path_with_query = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Url {
            scheme,
            authority: authority.to_string(),
            path_with_query,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_what_wasi_http_takes() {
        let u = Url::parse("https://cat.example:8443/v1/a?b=c#frag").unwrap();
        assert!(matches!(u.scheme, Scheme::Https));
        assert_eq!(u.authority, "cat.example:8443");
        assert_eq!(u.path_with_query, "/v1/a?b=c");
        let u = Url::parse("HTTP://127.0.0.1:9").unwrap();
        assert!(matches!(u.scheme, Scheme::Http));
        assert_eq!(u.path_with_query, "/");
        assert_eq!(Url::parse("http://h?x=1").unwrap().path_with_query, "/?x=1");
        for bad in ["ftp://x/", "no-scheme", "https:///path", ""] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn non_2xx_is_an_error_with_the_status() {
        let r = Response {
            status: 404,
            headers: vec![("content-type".into(), b"text/plain".to_vec())],
            body: b"no such table".to_vec(),
        };
        assert_eq!(r.header("Content-Type"), Some("text/plain"));
        assert_eq!(
            r.clone().ok().unwrap_err(),
            Error::Backend("HTTP status 404: no such table".into())
        );
        assert!(Response { status: 204, ..r }.ok().is_ok());
    }
}
