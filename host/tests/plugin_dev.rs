//! The plugin author's path (issue 27, point 6), through the `tether`
//! binary:
//!
//! - `tether plugin dev PATH`: a checkout runs the component at PATH for its
//!   kind, read again by every command, compiled again only when its digest
//!   changed (counted from the runtime's own "loaded plugin component ...
//!   how=Compiled" record, not timed); shown as `dev: PATH` by `plugin list`,
//!   `backends` and `status`; refused by `plugin pin`, warned about by
//!   `commit`; never in a clone; `plugin dev --off KIND` ends it.
//! - `cargo xtask new-plugin` writes a crate that builds outside a tether
//!   checkout, taking the SDK by git (a `file://` clone of this repository
//!   at HEAD, tagged as a release would be), offline, and the component it
//!   builds is added to a dataset and runs a status.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn digest_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `wasm` with a custom section holding `nonce` appended: the same plugin
/// under a digest no other test (nor an earlier run) has compiled, as a
/// rebuild with a changed line would be.
fn rebuilt(wasm: &[u8], nonce: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"tether-test-build";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(nonce.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// A nonce unique to this run.
fn nonce(tag: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{t}", std::process::id())
}

/// Run `tether -vv ARGS` in the dataset; require exit `code`; return the
/// output and how many times the component with `hex` was compiled in it.
fn run_counting(d: &Dataset, args: &[&str], code: i32, hex: &str) -> (Output, usize) {
    let mut all = vec!["-vv"];
    all.extend_from_slice(args);
    let out = d.tether(&all);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tether {} should exit {code}:\n{}",
        args.join(" "),
        describe(&out)
    );
    let compiled = stderr(&out)
        .lines()
        .filter(|l| {
            l.contains("loaded plugin component")
                && l.contains(&format!("digest={hex}"))
                && l.contains("how=Compiled")
        })
        .count();
    (out, compiled)
}

fn secrets_dev(root: &Path) -> Option<toml::Value> {
    let text = std::fs::read_to_string(root.join(".tether/secrets.toml")).ok()?;
    let v: toml::Value = toml::from_str(&text).unwrap();
    v.get("plugins")?.get("dev").cloned()
}

fn list(d: &Dataset, dir: &Path) -> Vec<Value> {
    let out = d.tether_in(dir, &["plugin", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn a_dev_plugin_follows_its_path_and_stays_in_this_checkout() {
    let acme = std::fs::read(tether_testkit::test_plugin("acme")).unwrap();
    let d = Dataset::init();
    let root = d.root();
    let build_dir = d.tmp().join("my-acme/target/wasm32-wasip2/release");
    std::fs::create_dir_all(&build_dir).unwrap();
    let build = build_dir.join("tether_plugin_acme.wasm");
    let build_s = build.to_str().unwrap();
    let first = rebuilt(&acme, &nonce("first"));
    let (h1, d1) = (digest_hex(&first), format!("sha256:{}", digest_hex(&first)));
    std::fs::write(&build, &first).unwrap();
    let config_before = std::fs::read_to_string(root.join("tether.toml")).unwrap();

    // The wrong kind is refused, nothing written (the component was loaded,
    // so compiled: a digest never seen).
    let before = d.written();
    let (out, n) = run_counting(&d, &["plugin", "dev", build_s, "--kind", "memory"], 1, &h1);
    assert!(
        stderr(&out).contains("serves kind acme, not memory"),
        "{}",
        describe(&out)
    );
    assert_eq!(n, 1, "{}", describe(&out));
    assert_eq!(d.written(), before);

    // `plugin dev` loads it again (from the compiled cache now) and records
    // the path in this checkout's secrets.toml only.
    let (out, n) = run_counting(&d, &["plugin", "dev", build_s], 0, &h1);
    assert_eq!(n, 0, "{}", describe(&out));
    assert!(
        stdout(&out).contains(&format!(
            "kind acme runs the dev plugin {build_s} in this checkout (now {d1})"
        )),
        "{}",
        describe(&out)
    );
    let dev = secrets_dev(&root).expect("[plugins.dev]");
    assert_eq!(dev.get("acme").and_then(|v| v.as_str()), Some(build_s));
    assert_eq!(
        std::fs::read_to_string(root.join("tether.toml")).unwrap(),
        config_before,
        "tether.toml must not change"
    );
    assert!(
        crate::support::files_under(&root, &root.join(".tether/plugins")).is_empty(),
        "nothing is stored for a dev plugin"
    );

    // The dataset uses it; an unchanged build is not compiled again.
    let store = d.memory_store("acme-store");
    store.write(json!({"rows": 1}), "one row");
    let system = format!("system={}", store.root.display());
    d.ok(&["add", "things", "--kind", "acme", "--set", &system]);
    let (out, n) = run_counting(&d, &["status", "--snapshot"], 0, &h1);
    assert_eq!(n, 0, "an unchanged dev build was compiled again");
    let text = stdout(&out);
    assert!(
        text.contains(&format!("plugin acme: dev: {build_s}")),
        "{text}"
    );
    assert!(text.contains("things [acme/"), "{text}");
    let status: Value = serde_json::from_str(&d.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["dev_plugins"], json!({"acme": build_s}));

    // A rebuild is picked up by the next command, compiled once, then
    // loaded from the cache.
    let second = rebuilt(&acme, &nonce("second"));
    let (h2, d2) = (
        digest_hex(&second),
        format!("sha256:{}", digest_hex(&second)),
    );
    std::fs::write(&build, &second).unwrap();
    let (_, n) = run_counting(&d, &["status", "--snapshot"], 0, &h2);
    assert_eq!(n, 1, "the rebuild was not compiled exactly once");
    let (_, n) = run_counting(&d, &["status", "--snapshot"], 0, &h2);
    assert_eq!(n, 0, "the rebuild was compiled again");

    // Shown where plugins are shown.
    let rows = list(&d, &root);
    let row = rows.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["source"], json!(format!("dev: {build_s}")));
    assert_eq!(row["dev"], json!(build_s));
    assert_eq!(row["digest"], Value::Null, "acme is not pinned");
    let text = d.ok(&["plugin", "list"]);
    assert!(
        text.contains(&format!("acme  (not pinned)  dev: {build_s}")),
        "{text}"
    );
    let backends: Vec<Value> = serde_json::from_str(&d.ok(&["backends", "--json"])).unwrap();
    let row = backends.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["source"], json!(format!("dev: {build_s}")));
    assert_eq!(row["digest"], json!(d2));

    // Pinning would record a digest no teammate can get: refused.
    let out = d.fails(&["plugin", "pin", "acme"], 1);
    let err = stderr(&out);
    assert!(
        err.contains("runs the dev plugin") && err.contains("nothing was pinned"),
        "{err}"
    );
    assert!(
        err.contains(&format!("tether plugin add {build_s} --kind acme")),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("tether.toml")).unwrap(),
        config_before
    );

    // A commit goes ahead (it records states, no plugin digest), warning.
    let out = d.tether(&["commit", "-m", "things, through the dev build"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "warning: kind acme runs the dev plugin {build_s} in this checkout"
        )),
        "{err}"
    );

    // A clone never inherits it: secrets.toml is per checkout.
    let out = d
        .command("git", d.tmp())
        .args(["clone", "-q", "ds", "clone"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let clone = d.tmp().join("clone");
    assert_eq!(secrets_dev(&clone), None);
    let rows = list(&d, &clone);
    let row = rows.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["source"], json!("missing"), "{row}");
    assert_eq!(row.get("dev"), None);

    // A build that is gone names the way out, for its kind only.
    std::fs::remove_file(&build).unwrap();
    let out = d.tether(&["status", "--snapshot"]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains(&format!("runs the dev plugin {build_s}"))
            && text.contains("tether plugin dev --off acme"),
        "{text}"
    );

    // `--off` ends it; acme has no pin and no built-in, so nothing serves it.
    let out = d.ok(&["plugin", "dev", "--off", "acme"]);
    assert!(
        out.contains(&format!(
            "kind acme no longer runs the dev plugin {build_s}"
        )) && out.contains("no plugin serves kind acme now"),
        "{out}"
    );
    assert_eq!(secrets_dev(&root), None);
    let out = d.fails(&["plugin", "dev", "--off", "acme"], 1);
    assert!(
        stderr(&out).contains("runs no dev plugin for kind acme"),
        "{}",
        describe(&out)
    );
    let rows = list(&d, &root);
    let row = rows.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["source"], json!("missing"));
}

#[test]
fn a_dev_plugin_overrides_a_pin_until_it_is_turned_off() {
    let acme_path = tether_testkit::test_plugin("acme");
    let acme = std::fs::read(&acme_path).unwrap();
    let da = format!("sha256:{}", digest_hex(&acme));
    let d = Dataset::init();
    let root = d.root();
    d.ok(&[
        "plugin",
        "add",
        acme_path.to_str().unwrap(),
        "--kind",
        "acme",
    ]);
    let build = d.tmp().join("acme-dev.wasm");
    let dev = rebuilt(&acme, &nonce("pinned"));
    let dd = format!("sha256:{}", digest_hex(&dev));
    std::fs::write(&build, &dev).unwrap();
    let build_s = build.to_str().unwrap();
    d.ok(&["plugin", "dev", build_s]);

    let backends: Vec<Value> = serde_json::from_str(&d.ok(&["backends", "--json"])).unwrap();
    let row = backends.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["digest"], json!(dd), "the dev build serves acme");
    assert_eq!(row["pinned"], json!(true));
    let rows = list(&d, &root);
    let row = rows.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["digest"], json!(da), "the pin stays as it was");
    assert_eq!(row["source"], json!(format!("dev: {build_s}")));

    // The warning names what teammates run.
    let store = d.memory_store("s");
    let system = format!("system={}", store.root.display());
    d.ok(&["add", "things", "--kind", "acme", "--set", &system]);
    let out = d.tether(&["commit", "-m", "c", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("other checkouts run the pinned {da}"))
            && err.contains("--kind acme --replace"),
        "{err}"
    );

    let out = d.ok(&["plugin", "dev", "--off", "acme"]);
    assert!(out.contains(&format!("it runs {da} again")), "{out}");
    let backends: Vec<Value> = serde_json::from_str(&d.ok(&["backends", "--json"])).unwrap();
    let row = backends.iter().find(|r| r["kind"] == "acme").unwrap();
    assert_eq!(row["digest"], json!(da));
}

/// The real `CARGO_HOME` (its registry holds every crate the template
/// needs, downloaded when the workspace was built).
fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| dirs::home_dir().expect("a home directory").join(".cargo"))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", describe(&out));
    stdout(&out).trim().to_string()
}

/// `[workspace.package] KEY` of the repository's Cargo.toml.
fn workspace_package(key: &str) -> String {
    let text = std::fs::read_to_string(tether_testkit::repo_root().join("Cargo.toml")).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    v["workspace"]["package"][key].as_str().unwrap().to_string()
}

#[test]
fn new_plugin_builds_outside_a_checkout_with_the_sdk_by_git() {
    let root = tether_testkit::repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let tmp = tempfile::tempdir().unwrap();
    let clean = |c: &mut Command| {
        // The outer build's flags and wrappers must not reach these builds.
        c.env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CARGO_TARGET_DIR");
    };

    // "The tether repository": a clone of this one at HEAD, tagged as the
    // release of the SDK's version would be.
    let head = git(&root, &["rev-parse", "HEAD"]);
    let repo = tmp.path().join("tether.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &format!("file://{}", root.display()),
            repo.to_str().unwrap(),
        ],
    );
    let version = workspace_package("version");
    git(&repo, &["tag", "-f", &format!("v{version}"), &head]);
    let url = format!("file://{}", repo.display());

    let generate = |name: &str, dir: &Path, extra: &[&str]| {
        let mut c = Command::new(&cargo);
        c.current_dir(&root)
            .args([
                "run",
                "-q",
                "-p",
                "xtask",
                "--",
                "new-plugin",
                name,
                "--dir",
            ])
            .arg(dir)
            .args(extra);
        clean(&mut c);
        let out = c.output().unwrap();
        assert!(out.status.success(), "new-plugin: {}", describe(&out));
    };

    // The default: the public repository at the version's tag.
    let default_dir = tmp.path().join("default-kv");
    generate("default-kv", &default_dir, &[]);
    let manifest = std::fs::read_to_string(default_dir.join("Cargo.toml")).unwrap();
    let want = format!(
        "tether-sdk = {{ git = \"{}\", tag = \"v{version}\" }}",
        workspace_package("repository")
    );
    assert!(manifest.contains(&want), "{manifest}");

    // The crate to build, outside the checkout, from the clone.
    let dir = tmp.path().join("dev-kv");
    assert!(!dir.starts_with(&root));
    generate("dev-kv", &dir, &["--sdk-git", &url]);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "tether-sdk = {{ git = \"{url}\", tag = \"v{version}\" }}"
        )),
        "{manifest}"
    );
    assert!(!manifest.contains("path ="), "{manifest}");
    assert!(manifest.contains("\n[workspace]\n"), "{manifest}");
    let config = std::fs::read_to_string(dir.join(".cargo/config.toml")).unwrap();
    assert!(config.contains("target = \"wasm32-wasip2\""), "{config}");
    let toolchain = std::fs::read_to_string(dir.join("rust-toolchain.toml")).unwrap();
    assert!(toolchain.contains("wasm32-wasip2"), "{toolchain}");

    // A cargo home of this test's own, sharing the real one's registry:
    // the git checkout of the SDK lands here, not in the user's, and the
    // registry's crates are those the workspace build downloaded. A fixed
    // place, so the dependencies compile once across runs.
    let target = root.join("target").join("template-plugin");
    let home = target.join("cargo-home");
    let _ = std::fs::remove_dir_all(home.join("git"));
    std::fs::create_dir_all(&home).unwrap();
    let registry = home.join("registry");
    if std::fs::symlink_metadata(&registry).is_err() {
        std::os::unix::fs::symlink(cargo_home().join("registry"), &registry).unwrap();
    }
    let cargo_in = |args: &[&str]| {
        let mut c = Command::new(&cargo);
        c.current_dir(&dir)
            .args(args)
            .env("CARGO_HOME", &home)
            // Nothing may download: a request to a registry fails at once.
            .env("CARGO_HTTP_PROXY", "http://127.0.0.1:9")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("https_proxy", "http://127.0.0.1:9")
            .env("CARGO_NET_RETRY", "0");
        clean(&mut c);
        c.output().unwrap()
    };
    // `--offline` never fetches a git dependency, even a `file://` one, so
    // the SDK's repository is fetched first (a local copy; the registry is
    // not asked, or the dead proxy above would fail this).
    let out = cargo_in(&["fetch", "--target", "wasm32-wasip2"]);
    assert!(out.status.success(), "fetch: {}", describe(&out));
    let target_s = target.to_str().unwrap();
    let out = cargo_in(&[
        "build",
        "--release",
        "--offline",
        "--target",
        "wasm32-wasip2",
        "--target-dir",
        target_s,
    ]);
    assert!(out.status.success(), "build: {}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("tether-sdk v{version} ({url}?tag=v{version}#"))
            || !err.contains("Compiling tether-sdk"),
        "the SDK did not come from the clone: {err}"
    );
    let lock = std::fs::read_to_string(dir.join("Cargo.lock")).unwrap();
    assert!(
        lock.contains(&format!("source = \"git+{url}?tag=v{version}#{head}\"")),
        "the lock does not name the clone at HEAD:\n{lock}"
    );
    let wasm = target.join("wasm32-wasip2/release/tether_plugin_dev_kv.wasm");
    assert!(wasm.is_file(), "{} was not built", wasm.display());

    // A dataset adds it and runs a status through it.
    let d = Dataset::init();
    let out = d.ok(&["plugin", "add", wasm.to_str().unwrap(), "--kind", "dev-kv"]);
    assert!(out.contains("added plugin dev-kv sha256:"), "{out}");
    let data = d.data().join("kv");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.txt"), "one").unwrap();
    let set = format!("root={}", data.display());
    d.ok(&["add", "kv", "--kind", "dev-kv", "--set", &set]);
    let status: Value = serde_json::from_str(&d.ok(&["status", "--snapshot", "--json"])).unwrap();
    let obj = &status["objects"][0];
    assert_eq!(obj["key"], json!("kv"), "{status}");
    assert_eq!(obj["kind"], json!("dev-kv"), "{status}");
    assert_eq!(obj["state"], json!("new"), "{status}");
    assert!(obj["error"].is_null(), "{status}");
    // The template's fingerprint, from the plugin itself.
    let state: Value =
        serde_json::from_str(&d.ok(&["plugin", "call", "dev-kv", "fingerprint", "--key", "kv"]))
            .unwrap();
    assert_eq!(state["keys"], json!(1), "{state}");
}
