//! Plugins' `wasi:http` requests, gated per call (issue 24, item 1): the
//! test plugin `http-probe` (tests/plugins/http-probe) fetches what its
//! locator says and reports everything it saw, against small Python servers
//! on 127.0.0.1 that log every request they get.
//!
//! "Nothing leaked" is checked where a leak would show: a refused request
//! never reaches the other server (its log stays empty: refused before any
//! connection); the token the host adds does reach the granted server (its
//! log shows it, so the checks below are not vacuous) but never the plugin's
//! configuration, its state, its errors nor tether's output. Reading the
//! credential back through an echo is defined as: the plugin gets a response
//! that holds the token's bytes. The host strips `authorization`,
//! `set-cookie` and `cookie` from every response, and cuts off a response
//! that repeats the token in any other header or in its body; an origin that
//! transforms the token before echoing it (base64) is beyond what the host
//! can see, which is why only origins the user named get it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tether::plugin::{BackendError, HttpLimits, Plugin, Runtime, RuntimeConfig};
use tether_testkit::{block_on, cache_dir, test_plugin};

use crate::support::{Dataset, describe, stderr, stdout};

const TOKEN: &str = "tok-9f2c61d0e7a4b835";

/// The servers' code: one stdlib `ThreadingHTTPServer`, each request
/// appended to a log (method, path, headers) before it is answered.
const SERVER: &str = r#"
import http.server, json, sys, time, urllib.parse

LOG = sys.argv[1]
CLIENT_SECRET = "cl1ent-s3cret-77"
EXCHANGED = "exchanged-tok-e41f"

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=(), length=True):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if length:
            self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.handle_any(b"")

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        self.handle_any(self.rfile.read(n))

    def handle_any(self, body):
        seen = {k.lower(): v for k, v in self.headers.items()}
        with open(LOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "headers": seen, "body": body.decode()}) + "\n")
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        auth = seen.get("authorization") or seen.get("x-api-key", "")
        if url.path == "/v1/oauth/tokens":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            if form.get("client_id") == "probe-client" and form.get("client_secret") == CLIENT_SECRET:
                self.reply(200, json.dumps({"access_token": EXCHANGED, "token_type": "bearer"}).encode())
            else:
                self.reply(401, json.dumps({"error": "invalid_client", "got": form}).encode())
        elif url.path == "/ok":
            self.reply(200, b'{"hello": "world"}', [("content-type", "application/json")])
        elif url.path == "/redirect":
            self.reply(302, b"", [("location", q["to"])])
        elif url.path == "/echo-in-credential-headers":
            self.reply(200, b"see the headers", [("authorization", auth), ("set-cookie", "session=" + auth),
                                                 ("x-seen", "yes")])
        elif url.path == "/echo-in-header":
            self.reply(200, b"see the headers", [("x-echo", auth)])
        elif url.path == "/echo-in-body":
            self.reply(200, json.dumps(seen).encode(), [("content-type", "application/json")])
        elif url.path == "/slow":
            time.sleep(float(q.get("s", "30")))
            self.reply(200, b"late")
        elif url.path == "/big":
            self.reply(200, b"x" * int(q["n"]), length=q.get("length") != "no")
        else:
            self.reply(404, b"no such path")

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("listening", server.server_address[1], flush=True)
server.serve_forever()
"#;

/// One server on 127.0.0.1, stopped on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(dir: &Path, name: &str) -> Server {
        let script = dir.join("server.py");
        std::fs::write(&script, SERVER).unwrap();
        let log = dir.join(format!("{name}.log"));
        std::fs::write(&log, "").unwrap();
        let mut child = Command::new(tether_testkit::python())
            .arg(&script)
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the server said {line:?}"));
        Server { child, port, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request it got, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    probe: Arc<Plugin>,
    /// The granted server.
    granted: Server,
    /// Another origin: nothing may reach it.
    other: Server,
}

fn setup_with(limits: HttpLimits, call_timeout: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout,
        http: limits,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let probe = block_on(rt.load_file(&test_plugin("http_probe"))).expect("load http-probe");
    let granted = Server::start(dir.path(), "granted");
    let other = Server::start(dir.path(), "other");
    Setup {
        _dir: dir,
        probe,
        granted,
        other,
    }
}

fn limits() -> HttpLimits {
    HttpLimits {
        connect_timeout: Duration::from_secs(10),
        first_byte_timeout: Duration::from_secs(10),
        between_bytes_timeout: Duration::from_secs(10),
        max_response_bytes: 1 << 20,
    }
}

fn setup() -> Setup {
    setup_with(limits(), Duration::from_secs(60))
}

impl Setup {
    /// What `.tether/secrets.toml` says for the probe: the granted server
    /// (the user names it there, so it gets the token), plain http allowed
    /// beside `url` (every test server is http://127.0.0.1), and the token.
    fn secret(&self) -> Map<String, Value> {
        json!({"url": self.granted.url("/"), "allow_http": true, "token": TOKEN})
            .as_object()
            .unwrap()
            .clone()
    }
}

impl Setup {
    /// The probe's fingerprint of `locator`, configured as tether would:
    /// the committed `[backends]` table merged with secrets.toml's, and
    /// secrets.toml's own entry.
    fn fetch(&self, locator: Value, secret: &Map<String, Value>) -> Result<Value, BackendError> {
        let config = Value::Object(secret.clone());
        block_on(
            self.probe
                .object_with_secrets(&locator, &config, secret)
                .fingerprint(None),
        )
    }

    fn denied(&self, locator: Value, secret: &Map<String, Value>) -> String {
        match self.fetch(locator.clone(), secret) {
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.contains(TOKEN), "{msg}");
                msg
            }
            Ok(state) => panic!("{locator} should be refused, got {state}"),
        }
    }
}

fn assert_no_token(what: &str, text: &str) {
    assert!(!text.contains(TOKEN), "the token is in {what}: {text}");
}

#[test]
fn a_granted_get_gets_the_token_added_and_the_plugin_never_sees_it() {
    let s = setup();
    let state = s
        .fetch(json!({"url": s.granted.url("/ok")}), &s.secret())
        .expect("a granted GET");
    assert_eq!(state["response"]["status"], 200);
    assert_eq!(state["response"]["body"], r#"{"hello": "world"}"#);
    // The plugin's configuration kept the rest, not the token.
    assert_eq!(
        state["config"],
        json!({"allow_http": true, "url": s.granted.url("/")})
    );
    assert_no_token("the plugin's state", &state.to_string());
    // The host did send it, to the granted origin.
    let got = s.granted.requests();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {TOKEN}")
    );
    assert!(s.other.requests().is_empty());
}

#[test]
fn a_post_with_a_json_body_arrives_whole() {
    let s = setup();
    let body = json!({"namespace": ["ns"], "n": 12345678901234567_i64});
    let state = s
        .fetch(
            json!({"url": s.granted.url("/ok"), "post": body}),
            &s.secret(),
        )
        .expect("a granted POST");
    assert_eq!(state["response"]["status"], 200);
    let got = s.granted.requests();
    assert_eq!(got[0]["method"], "POST");
    assert_eq!(got[0]["headers"]["content-type"], "application/json");
    let sent: Value = serde_json::from_str(got[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(sent, body);
}

#[test]
fn an_origin_not_granted_is_refused_before_any_connection() {
    let s = setup();
    // Same host, another port: another origin.
    let msg = s.denied(
        json!({"url": s.granted.url("/ok"), "fetch": s.other.url("/ok")}),
        &s.secret(),
    );
    assert!(msg.contains("refused"), "{msg}");
    // Same port, another scheme: another origin too.
    let https = format!("https://127.0.0.1:{}/ok", s.granted.port);
    s.denied(
        json!({"url": s.granted.url("/ok"), "fetch": https}),
        &s.secret(),
    );
    assert!(s.other.requests().is_empty());
    assert!(s.granted.requests().is_empty());
}

#[test]
fn a_redirect_is_not_followed_and_following_it_by_hand_is_refused() {
    let s = setup();
    let off = s.other.url("/ok");
    let redirect = s.granted.url(&format!("/redirect?to={off}"));
    let state = s
        .fetch(json!({"url": redirect.clone()}), &s.secret())
        .expect("the 3xx itself");
    assert_eq!(state["response"]["status"], 302);
    assert_eq!(state["response"]["headers"]["location"], off);
    assert!(s.other.requests().is_empty());

    let msg = s.denied(json!({"url": redirect, "follow": true}), &s.secret());
    assert!(msg.contains("refused"), "{msg}");
    assert!(
        s.other.requests().is_empty(),
        "the redirect's target was reached"
    );

    // Following one to the granted origin is just another granted request.
    let back = s
        .granted
        .url(&format!("/redirect?to={}", s.granted.url("/ok")));
    let state = s
        .fetch(json!({"url": back, "follow": true}), &s.secret())
        .expect("a redirect within the origin");
    assert_eq!(state["followed"]["status"], 200);
}

#[test]
fn plain_http_needs_allow_http_from_secrets() {
    let s = setup();
    let mut without = s.secret();
    without.remove("allow_http");
    let url = s.granted.url("/ok");
    s.denied(json!({"url": url.clone()}), &without);
    // A committed locator cannot allow it.
    s.denied(json!({"url": url.clone(), "allow_http": true}), &without);
    // Nor a configuration table secrets.toml did not write (the committed
    // `[backends]`).
    let config = json!({"allow_http": true, "token": TOKEN});
    let got = block_on(
        s.probe
            .object_with_secrets(&json!({"url": url}), &config, &without)
            .fingerprint(None),
    );
    assert!(got.is_err(), "{got:?}");
    assert!(s.granted.requests().is_empty());
}

#[test]
fn the_token_goes_only_to_an_origin_the_user_named() {
    let s = setup();
    // secrets.toml names the catalog; the committed locator points the
    // probe's `url` at another server: granted, without the token.
    let secret = s.secret();
    let state = s
        .fetch(json!({"url": s.other.url("/ok")}), &secret)
        .expect("the locator's origin is granted");
    assert_eq!(state["response"]["status"], 200);
    let got = s.other.requests();
    assert_eq!(got.len(), 1);
    assert!(got[0]["headers"].get("authorization").is_none(), "{got:?}");
    // The same origin as secrets.toml names: with it.
    s.fetch(json!({"url": s.granted.url("/ok")}), &secret)
        .unwrap();
    assert_eq!(
        s.granted.requests()[0]["headers"]["authorization"],
        format!("Bearer {TOKEN}")
    );
}

#[test]
fn the_plugin_cannot_set_credential_headers() {
    let s = setup();
    for header in ["authorization", "cookie", "host"] {
        let msg = s.denied(
            json!({"url": s.granted.url("/ok"), "set_header": header}),
            &s.secret(),
        );
        assert!(msg.contains("host's to set"), "{header}: {msg}");
    }
    assert!(s.granted.requests().is_empty());
}

#[test]
fn the_credential_cannot_be_read_back_through_an_echo() {
    let s = setup();
    // Echoed in `authorization` and `set-cookie`: the response arrives
    // without them.
    let state = s
        .fetch(
            json!({"url": s.granted.url("/echo-in-credential-headers")}),
            &s.secret(),
        )
        .expect("the response, stripped");
    let headers = state["response"]["headers"].as_object().unwrap();
    assert_eq!(headers["x-seen"], "yes");
    assert!(!headers.contains_key("authorization"), "{headers:?}");
    assert!(!headers.contains_key("set-cookie"), "{headers:?}");
    assert_no_token("the plugin's state", &state.to_string());
    // Echoed in another header or in the body: cut off.
    for path in ["/echo-in-header", "/echo-in-body"] {
        let msg = s.denied(json!({"url": s.granted.url(path)}), &s.secret());
        assert!(msg.contains("repeated the credential"), "{path}: {msg}");
    }
    // Every one of them did get the token: what the plugin saw was
    // filtered, not the request.
    let got = s.granted.requests();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r["headers"]["authorization"], format!("Bearer {TOKEN}"));
    }
}

/// The same secret and token the server script knows.
const CLIENT_SECRET: &str = "cl1ent-s3cret-77";
const EXCHANGED: &str = "exchanged-tok-e41f";

#[test]
fn a_client_credential_is_exchanged_by_the_host_and_never_seen() {
    let s = setup();
    let mut secret = s.secret();
    secret.remove("token");
    secret.insert(
        "credential".into(),
        json!(format!("probe-client:{CLIENT_SECRET}")),
    );
    let state = s
        .fetch(json!({"url": s.granted.url("/ok")}), &secret)
        .expect("a GET with an exchanged token");
    assert_eq!(state["response"]["status"], 200);
    // The plugin saw neither the credential nor the token.
    assert_eq!(
        state["config"],
        json!({"allow_http": true, "url": s.granted.url("/")})
    );
    let text = state.to_string();
    assert!(
        !text.contains(CLIENT_SECRET) && !text.contains(EXCHANGED),
        "{text}"
    );
    // The host exchanged it at `<url>/v1/oauth/tokens`, then sent the token.
    let got = s.granted.requests();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["method"], "POST");
    assert_eq!(got[0]["path"], "/v1/oauth/tokens");
    assert_eq!(
        got[0]["headers"]["content-type"],
        "application/x-www-form-urlencoded"
    );
    let body = got[0]["body"].as_str().unwrap();
    assert!(body.contains("grant_type=client_credentials"), "{body}");
    assert!(body.contains("scope=catalog"), "{body}");
    assert_eq!(got[1]["path"], "/ok");
    assert_eq!(
        got[1]["headers"]["authorization"],
        format!("Bearer {EXCHANGED}")
    );
    // A response echoing the exchanged token is cut off like any other.
    let msg = s.denied(json!({"url": s.granted.url("/echo-in-body")}), &secret);
    assert!(msg.contains("repeated the credential"), "{msg}");
    assert!(!msg.contains(EXCHANGED), "{msg}");

    // A wrong secret: refused by the endpoint, whose answer (which quotes
    // the form back) never reaches the plugin nor the error.
    secret.insert("credential".into(), json!("probe-client:wr0ng"));
    let msg = s.denied(json!({"url": s.granted.url("/ok")}), &secret);
    assert!(msg.contains("refused the credential"), "{msg}");
    assert!(!msg.contains("wr0ng"), "{msg}");
    assert!(s.other.requests().is_empty());
}

#[test]
fn a_configured_header_carries_the_token_as_it_is() {
    let s = setup();
    let mut secret = s.secret();
    secret.insert("auth_header".into(), json!("X-Api-Key"));
    let state = s
        .fetch(json!({"url": s.granted.url("/ok")}), &secret)
        .expect("a granted GET");
    assert_eq!(state["response"]["status"], 200);
    assert!(
        state["config"].get("auth_header").is_none(),
        "{}",
        state["config"]
    );
    let got = s.granted.requests();
    assert_eq!(got[0]["headers"]["x-api-key"], TOKEN, "no `Bearer `");
    assert!(got[0]["headers"].get("authorization").is_none(), "{got:?}");
    // The plugin may not set that header, and a response repeating the
    // token in another header is cut off.
    let msg = s.denied(
        json!({"url": s.granted.url("/ok"), "set_header": "x-api-key"}),
        &secret,
    );
    assert!(msg.contains("host's to set"), "{msg}");
    let msg = s.denied(json!({"url": s.granted.url("/echo-in-header")}), &secret);
    assert!(msg.contains("repeated the credential"), "{msg}");
    // Only secrets.toml names the header: from the configuration (which a
    // committed [backends] table feeds), it is ignored.
    let mut config_only = s.secret();
    config_only.remove("token");
    let config = json!({"url": s.granted.url("/"), "token": TOKEN, "auth_header": "X-Api-Key"});
    block_on(
        s.probe
            .object_with_secrets(&json!({"url": s.granted.url("/ok")}), &config, &config_only)
            .fingerprint(None),
    )
    .expect("a granted GET");
    let last = s.granted.requests().pop().unwrap();
    assert_eq!(last["headers"]["authorization"], format!("Bearer {TOKEN}"));
}

#[test]
fn link_local_metadata_and_named_loopback_addresses_are_refused_before_connecting() {
    let s = setup();
    for url in [
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fe80::1]:8080/".to_string(),
        "http://metadata.google.internal/computeMetadata/v1/".to_string(),
        // A host name that resolves to loopback: only the literal address
        // reaches it (the granted server listens right there).
        format!("http://localhost:{}/ok", s.granted.port),
    ] {
        let mut secret = s.secret();
        secret.insert("url".into(), json!(url));
        let msg = s.denied(json!({"url": url}), &secret);
        assert!(msg.contains("refused to connect"), "{url}: {msg}");
    }
    assert!(
        s.granted.requests().is_empty(),
        "the loopback server was reached through a name"
    );
    // The same server by its literal address: reached.
    s.fetch(json!({"url": s.granted.url("/ok")}), &s.secret())
        .expect("a literal loopback address");
    assert_eq!(s.granted.requests().len(), 1);
}

#[test]
fn a_slow_server_runs_into_the_timeout() {
    let short = HttpLimits {
        first_byte_timeout: Duration::from_millis(500),
        ..limits()
    };
    let s = setup_with(short, Duration::from_secs(60));
    let msg = s.denied(json!({"url": s.granted.url("/slow?s=30")}), &s.secret());
    assert!(msg.to_lowercase().contains("timeout"), "{msg}");
}

#[test]
fn the_call_deadline_holds_while_the_plugin_waits_on_the_network() {
    let s = setup_with(limits(), Duration::from_millis(1500));
    match s.fetch(json!({"url": s.granted.url("/slow?s=30")}), &s.secret()) {
        Err(BackendError::Deadline { .. }) => {}
        other => panic!("expected the call's deadline, got {other:?}"),
    }
}

#[test]
fn an_oversized_response_is_refused() {
    let s = setup();
    let n = (1 << 20) + 1;
    for length in ["yes", "no"] {
        let url = s.granted.url(&format!("/big?n={n}&length={length}"));
        let msg = s.denied(json!({"url": url}), &s.secret());
        assert!(
            msg.to_lowercase().contains("size"),
            "content-length {length}: {msg}"
        );
    }
    let url = s.granted.url(&format!("/big?n={}", 1 << 20));
    let state = s
        .fetch(json!({"url": url}), &s.secret())
        .expect("at the cap");
    assert_eq!(state["response"]["body"].as_str().unwrap().len(), 1 << 20);
}

#[test]
fn through_the_cli_the_token_comes_from_the_environment_and_never_shows() {
    let d = Dataset::init();
    let dir = tempfile::tempdir().unwrap();
    let granted = Server::start(dir.path(), "granted");
    let other = Server::start(dir.path(), "other");
    let probe = test_plugin("http_probe");
    d.ok(&["plugin", "add", probe.to_str().unwrap()]);
    // `tether backends` says which plugins may ask for the network.
    let rows: Vec<Value> = serde_json::from_str(&d.ok(&["backends", "--json"])).unwrap();
    let imports = |kind: &str| -> Vec<String> {
        let row = rows.iter().find(|r| r["kind"] == kind).unwrap();
        serde_json::from_value(row["imports"].clone()).unwrap()
    };
    assert!(
        imports("http-probe").contains(&"wasi:http".to_string()),
        "{rows:?}"
    );
    assert!(
        !imports("memory").contains(&"wasi:http".to_string()),
        "{rows:?}"
    );
    // Beside the trust `plugin add` wrote: the server, plain http allowed
    // for it, and the variable holding the token.
    let secrets = d.root().join(".tether/secrets.toml");
    let mut text = std::fs::read_to_string(&secrets).unwrap();
    text.push_str(&format!(
        "\n[backends.http-probe]\nurl = \"{}\"\nallow_http = true\ntoken_env = \"PROBE_SECRET\"\n",
        granted.url("/")
    ));
    std::fs::write(&secrets, text).unwrap();
    std::fs::set_permissions(
        &secrets,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let tether = |args: &[&str]| {
        d.command(env!("CARGO_BIN_EXE_tether"), &d.root())
            .env("PROBE_SECRET", TOKEN)
            .args(args)
            .output()
            .expect("run tether")
    };
    let url = format!("url={}", granted.url("/echo-in-credential-headers"));
    let out = tether(&["add", "web", "--kind", "http-probe", "--set", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // `commit` fingerprints it: the request is logged at -v, without the
    // token.
    let out = tether(&["-v", "commit", "-m", "web"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let log = stderr(&out);
    assert!(
        log.contains(&format!(
            "HTTP GET {}",
            granted.url("/echo-in-credential-headers")
        )),
        "{log}"
    );
    assert_no_token("tether's output", &format!("{}{log}", stdout(&out)));
    let got = granted.requests();
    assert!(!got.is_empty());
    for r in &got {
        assert_eq!(r["headers"]["authorization"], format!("Bearer {TOKEN}"));
    }
    // Nothing tether wrote holds it.
    for file in crate::support::files_under(&d.root(), &d.root()) {
        if file.starts_with(".git/") || file == ".tether/secrets.toml" {
            continue;
        }
        let bytes = std::fs::read(d.root().join(&file)).unwrap_or_default();
        assert_no_token(&file, &String::from_utf8_lossy(&bytes));
    }

    // A clone's locator fetching elsewhere: refused, named in the error,
    // and the other server never reached.
    let fetch = format!("fetch={}", other.url("/ok"));
    let out = tether(&[
        "add",
        "evil",
        "--kind",
        "http-probe",
        "--set",
        &url,
        "--set",
        &fetch,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = tether(&["commit", "-m", "evil"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("refused"), "{text}");
    assert_no_token("tether's output", &text);
    assert!(other.requests().is_empty());
}
