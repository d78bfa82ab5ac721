//! Kind `http-probe`: fetches what its locator says over `wasi:http` and
//! reports what it got, for the host's HTTP gating tests
//! (host/tests/net_http.rs).
//!
//! It asks for two grants: the origin of `url` (token from `token`, or the
//! variable `token_env` names, or `HTTP_PROBE_TOKEN`) and the origin of
//! `catalog.uri` (token `catalog.token`). Its `fingerprint` GETs `fetch`
//! (default `url`); with `follow`, it follows a redirect by hand, as a
//! plugin could; with `set_header`, it tries to send that header itself;
//! with `open_uri` (addresses separated by spaces, `$uri` standing for the
//! `uri` member of the JSON response), it opens each over the host's `sql`
//! (`open-uri`, since 0.1.5) and asks for `current_user`. The state it
//! returns holds the status, the response headers, the body, what each
//! open gave and the configuration it was given, so the tests see
//! everything it saw.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tether_sdk::http::{self, Request, Response};
use tether_sdk::{Backend, DescribeNet, Descriptor, Error, HttpGrant, Result, cap, descriptor};

#[derive(Deserialize)]
pub struct Locator {
    url: String,
    #[serde(default)]
    fetch: Option<String>,
    #[serde(default)]
    follow: bool,
    #[serde(default)]
    set_header: Option<String>,
    #[serde(default)]
    post: Option<Value>,
    #[serde(default)]
    open_uri: Option<String>,
}

/// Open `uri` over `sql` and ask who we are: the user, or the error.
fn open_uri(uri: &str) -> Value {
    let who = tether_sdk::sql::Connection::open_uri(uri).and_then(|db| {
        let rows = db.query("SELECT current_user::text AS u", &[])?;
        rows.first().map(|row| row.get::<String>("u")).transpose()
    });
    match who {
        Ok(user) => json!({"uri": uri, "user": user}),
        Err(e) => json!({"uri": uri, "error": e.to_string()}),
    }
}

#[derive(Default)]
pub struct Probe {
    config: Value,
}

fn report(r: &Response) -> Value {
    let headers: Map<String, Value> = r
        .headers
        .iter()
        // The ones that change with every response: a state is compared.
        .filter(|(n, _)| n != "date" && n != "server")
        .map(|(n, v)| (n.clone(), json!(String::from_utf8_lossy(v))))
        .collect();
    json!({"status": r.status, "headers": headers, "body": r.text()})
}

impl Backend for Probe {
    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        descriptor("http-probe", &[cap::FINGERPRINT])
    }

    fn configure(&mut self, config: Value) -> Result<()> {
        self.config = config;
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        Ok(json!({ "url": loc.url }))
    }

    fn fingerprint(&self, loc: &Locator, _: Option<&str>) -> Result<Value> {
        let target = loc.fetch.clone().unwrap_or_else(|| loc.url.clone());
        let mut request = match &loc.post {
            Some(body) => Request::new("POST", &target).json(body),
            None => Request::new("GET", &target),
        };
        if let Some(name) = &loc.set_header {
            request = request.header(name, "set-by-the-plugin");
        }
        let first = request.send()?;
        let mut state = json!({ "response": report(&first), "config": self.config });
        if loc.follow && (300..400).contains(&first.status) {
            let location = first
                .header("location")
                .ok_or_else(|| Error::backend("a redirect without a location"))?
                .to_string();
            let second = http::get(&location)?;
            state["followed"] = report(&second);
        }
        if let Some(list) = &loc.open_uri {
            let given = first
                .json::<Value>()
                .ok()
                .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            let opened: Vec<Value> = list
                .split_whitespace()
                .map(|u| open_uri(if u == "$uri" { &given } else { u }))
                .collect();
            state["opened"] = json!(opened);
        }
        Ok(state)
    }
}

impl DescribeNet for Probe {
    fn http_grants(&self) -> Vec<HttpGrant> {
        vec![
            HttpGrant {
                token_key: Some("token".into()),
                token_env_key: Some("token_env".into()),
                default_token_env: Some("HTTP_PROBE_TOKEN".into()),
                ..HttpGrant::url("url")
            },
            HttpGrant {
                token_key: Some("catalog.token".into()),
                ..HttpGrant::url("catalog.uri")
            },
        ]
    }
}

tether_sdk::export!(Probe, [describe_net]);
