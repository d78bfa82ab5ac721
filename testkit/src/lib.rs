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
