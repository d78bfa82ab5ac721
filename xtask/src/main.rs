//! `cargo xtask`: the project's setup, build, demo, test and benchmark tasks.
//!
//! Deliberately free of heavy dependencies (it must run before the wasm target
//! is installed, and before anything else is built).
//!
//! - `setup`: install what building and testing need (idempotent).
//! - `build-plugins`: build the first-party and the test-only plugins.
//! - `demo`: set up, build, and run the main job.
//! - `test`: set up, then every check CI runs (fmt, clippy, docs, tests).
//! - `docs`: the user guide's link check (`docs.rs`): every relative link and
//!   anchor in README.md and docs/ resolves, every command and backend has
//!   its page; and the manual pages, written to `target/man/`.
//! - `bench`: the benchmarks, in release mode.
//! - `package [ARGS]`: `cargo package` of the publishable crates, with the
//!   first-party plugin components copied into `host/builtin-plugins/`.
//! - `new-plugin NAME [--dir DIR] [--sdk-git URL [--sdk-rev REV] | --sdk-path
//!   PATH]`: a new backend plugin crate from `xtask/templates/plugin/`, which
//!   builds outside a tether checkout (docs/plugin-authors.md walks through it).
//! - `fuzz [TARGET] [SECONDS]`: the `cargo fuzz` targets in `fuzz/`, one or
//!   each in turn (nightly and cargo-fuzz; not part of CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

mod azurite;
mod docs;
mod jj;
mod python;

const WASM_TARGET: &str = "wasm32-wasip2";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match task {
        "setup" => setup(),
        "build-plugins" => build_plugins(),
        "demo" => demo(),
        "test" => test(rest),
        "docs" => check_docs(),
        "bench" => bench(rest),
        "package" => package(rest),
        "new-plugin" => new_plugin(rest),
        "fuzz" => fuzz(rest),
        "help" | "--help" | "-h" => {
            println!(
                "usage: cargo xtask <setup | build-plugins | demo | test | docs | bench | package | new-plugin NAME [--dir DIR] [--sdk-git URL [--sdk-rev REV] | --sdk-path PATH] | fuzz [TARGET] [SECONDS]>"
            );
            Ok(())
        }
        other => bail!("unknown task {other:?}; try `cargo xtask help`"),
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent")
        .to_path_buf()
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("+ {}", describe(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", describe(cmd)))?;
    if !status.success() {
        bail!("{} failed ({status})", describe(cmd));
    }
    Ok(())
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    if let Some(dir) = cmd.get_current_dir() {
        s.push_str(&format!("  (in {})", dir.display()));
    }
    s
}

/// Install the wasm target (through rustup) if it is missing.
/// Everything the tests need: the build's wasm target, git, the Python
/// environment, jj, Azurite, PostgreSQL and sshd.
fn setup() -> Result<()> {
    setup_build()?;
    python::setup(&root())?;
    jj::setup(&root())?;
    azurite::setup(&root())?;
    postgres_setup()?;
    sshd_setup()?;
    Ok(())
}

/// What building tether needs beyond the toolchain: the wasm target its
/// plugins compile to, and git (the demo's VCS). The demo needs nothing more.
fn setup_build() -> Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("rustup is needed to install the wasm32-wasip2 target")?;
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == WASM_TARGET)
    {
        eprintln!("setup: {WASM_TARGET} target already installed");
    } else {
        run(Command::new("rustup").args(["target", "add", WASM_TARGET]))?;
    }
    let git = Command::new("git")
        .arg("--version")
        .output()
        .context("git is needed by the tests")?;
    eprintln!("setup: {}", String::from_utf8_lossy(&git.stdout).trim());
    Ok(())
}

/// PostgreSQL's server programs, for the tests that start their own cluster
/// (`testkit::Postgres`): Debian's `postgresql` package where they are missing.
fn postgres_setup() -> Result<()> {
    let installed = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin/initdb").is_file());
    if installed {
        eprintln!("setup: PostgreSQL server programs found");
        return Ok(());
    }
    apt_install("postgresql").context(
        "cannot install PostgreSQL (the SQL tests start their own cluster): \
         install Debian's `postgresql` package, then run `cargo xtask setup` again",
    )
}

/// OpenSSH's server, for the tests that push git pins to an ssh remote
/// (each runs its own `sshd` on a loopback port): Debian's
/// `openssh-server` package where it is missing. The tests start it
/// themselves; nothing is enabled as a service.
fn sshd_setup() -> Result<()> {
    if std::path::Path::new("/usr/sbin/sshd").is_file() {
        eprintln!("setup: sshd found");
        return Ok(());
    }
    apt_install("openssh-server").context(
        "cannot install OpenSSH's server (the ssh git remote tests run their own sshd): \
         install Debian's `openssh-server` package, then run `cargo xtask setup` again",
    )
}

/// `apt-get install -y PACKAGE`, through sudo unless this is root.
fn apt_install(package: &str) -> Result<()> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut apt = if root {
        Command::new("apt-get")
    } else {
        let mut c = Command::new("sudo");
        c.arg("apt-get");
        c
    };
    run(apt.env("DEBIAN_FRONTEND", "noninteractive").args([
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        package,
    ]))
}

/// The test-only plugins' workspace and where they are built.
fn test_plugins() -> (PathBuf, PathBuf) {
    let root = root();
    (
        root.join("tests").join("plugins"),
        root.join("target").join("test-plugins"),
    )
}

fn build_plugins() -> Result<()> {
    setup_build()?;
    let root = root();
    run(cargo()
        .current_dir(root.join("plugins"))
        .args(["build", "--release", "--workspace", "--target-dir"])
        .arg(root.join("target").join("wasm-plugins")))?;
    let (dir, target) = test_plugins();
    run(cargo()
        .current_dir(dir)
        .args(["build", "--release", "--workspace", "--target-dir"])
        .arg(target))
}

/// The main job: build, list the backends, run the conformance suite on the
/// reference plugin, then the tether loop on local stores (a memory-plugin
/// store in a directory and a directory of files) in a fresh git repository.
fn demo() -> Result<()> {
    // Neither Python nor jj: those are the tests' environment, not the demo's.
    setup_build()?;
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "--workspace", "--bins"]))?;
    let bin = root.join("target").join("debug");
    let tether = bin.join("tether");
    run(Command::new(&tether).arg("backends"))?;
    let memory = root
        .join("target/wasm-plugins")
        .join(WASM_TARGET)
        .join("release/tether_plugin_memory.wasm");
    run(Command::new(bin.join("tether-conformance")).arg(memory))?;
    demo_loop(&root, &tether)
}

/// The memory plugin's layout (documented in plugins/memory): an initial
/// empty snapshot on `main`, written with plain file writes.
const MEMORY_INITIAL: (&str, &str) = (
    "ac4ea90e032426a51d1d",
    r#"{"message":"initial snapshot","parents":[],"payload":{}}"#,
);

fn demo_loop(root: &Path, tether: &Path) -> Result<()> {
    let dir = root.join("target").join("demo");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let store = dir.join("stores").join("labels");
    let raw = dir.join("stores").join("raw").join("plate1");
    std::fs::create_dir_all(store.join("snapshots"))?;
    std::fs::create_dir_all(store.join("refs").join("branches"))?;
    std::fs::write(
        store
            .join("snapshots")
            .join(format!("{}.json", MEMORY_INITIAL.0)),
        MEMORY_INITIAL.1,
    )?;
    std::fs::write(
        store.join("refs").join("branches").join("main.json"),
        format!(r#"{{"snapshot_id":"{}"}}"#, MEMORY_INITIAL.0),
    )?;
    std::fs::create_dir_all(&raw)?;
    for i in 0..3 {
        std::fs::write(raw.join(format!("well_{i}.tif")), vec![i as u8; 64])?;
    }
    let ds = dir.join("my-dataset");
    std::fs::create_dir_all(&ds)?;
    let git = |args: &[&str]| run(Command::new("git").current_dir(&ds).args(args));
    git(&["init", "-q", "-b", "main"])?;
    git(&["config", "user.name", "tether demo"])?;
    git(&["config", "user.email", "demo@example.invalid"])?;
    let t = |args: &[&str]| -> Result<()> {
        eprintln!();
        let mut cmd = Command::new(tether);
        cmd.current_dir(&ds)
            .args(args)
            .env("TETHER_CACHE_DIR", root.join("target").join("test-cache"));
        // Show the command as a user would type it; a non-zero exit is part
        // of the story where the demo says so.
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(' ') {
                    format!("{a:?}")
                } else {
                    a.to_string()
                }
            })
            .collect();
        eprintln!("$ tether {}", shown.join(" "));
        let status = cmd
            .status()
            .with_context(|| format!("cannot run {}", tether.display()))?;
        if !status.success() {
            bail!("tether {} failed ({status})", args.join(" "));
        }
        Ok(())
    };
    t(&["init"])?;
    t(&[
        "add",
        "zarr/labels",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", store.display()),
    ])?;
    t(&[
        "add",
        "raw/plate1",
        "--kind",
        "file",
        &format!("{}/", raw.display()),
    ])?;
    t(&["status"])?;
    t(&["commit", "-m", "Baseline: plate1 labels and raw files"])?;
    t(&["status"])?;
    // The labels store moves on (a new snapshot on main, as a writer would
    // make it), and one raw file is only touched.
    // Canonical JSON (keys sorted, no spaces); the id is the first 20 hex of
    // its sha256, as the memory plugin's layout documents.
    let v2 = memory_write(
        &store,
        "main",
        MEMORY_INITIAL.0,
        "relabel",
        r#"{"labels":"v2"}"#,
    )?;
    let f = std::fs::File::options()
        .append(true)
        .open(raw.join("well_0.tif"))?;
    f.set_modified(std::time::SystemTime::now())?;
    t(&["status", "--snapshot"])?;
    t(&["commit", "-m", "Relabelled plate1"])?;
    t(&["verify", "--all-history"])?;
    t(&["diff", "HEAD~1", "HEAD", "--content"])?;
    t(&["open", "zarr/labels", "--rev", "HEAD~1"])?;
    t(&["ops"])?;

    // A bookmark: a branch in every system that has branches, forked lazily
    // on the first writable open, committed, compared, and landed.
    t(&["new", "-b", "relabel-v3"])?;
    t(&["open", "zarr/labels"])?;
    let config = std::fs::read_to_string(ds.join("tether.toml"))?;
    let dataset_id = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("id = "))
        .and_then(|v| v.split('"').nth(1))
        .map(str::to_string)
        .context("tether.toml names the dataset id")?;
    let branch = format!("tether.ws.{dataset_id}.relabel-v3");
    memory_write(
        &store,
        &branch,
        &v2,
        "relabel with model v3",
        r#"{"labels":"v3"}"#,
    )?;
    t(&["status", "--snapshot"])?;
    t(&["commit", "-m", "Relabel plate1 with model v3"])?;
    t(&["diff", "main", "relabel-v3", "--content"])?;
    t(&["promote", "--dry-run"])?;
    t(&["promote"])?;
    // The line of work is over: back on the trunk, throw the bookmark away.
    t(&["new", "main"])?;
    t(&["drop", "relabel-v3"])?;
    t(&["drop", "relabel-v3", "--no-dry-run"])?;
    t(&["gc"])?;
    t(&["ops"])?;
    eprintln!("\ndemo dataset left in {}", ds.display());
    Ok(())
}

/// Write a snapshot on `branch` of a memory-plugin store with plain file
/// writes (canonical JSON: keys sorted, no spaces; the id is the first 20
/// hex of its sha256, as plugins/memory documents), as a writer holding a
/// handle would. Returns the snapshot id.
fn memory_write(
    store: &Path,
    branch: &str,
    parent: &str,
    message: &str,
    payload: &str,
) -> Result<String> {
    let snap = format!(r#"{{"message":"{message}","parents":["{parent}"],"payload":{payload}}}"#);
    let id = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(snap.as_bytes()))[..20].to_string();
    std::fs::write(store.join("snapshots").join(format!("{id}.json")), snap)?;
    std::fs::write(
        store
            .join("refs")
            .join("branches")
            .join(format!("{branch}.json")),
        format!(r#"{{"snapshot_id":"{id}"}}"#),
    )?;
    Ok(id)
}

/// Everything CI checks: formatting, lints in every workspace, the host's
/// docs (no broken or private links), every test, then the install test.
fn test(extra: &[String]) -> Result<()> {
    setup()?;
    let root = root();
    for dir in [
        root.clone(),
        root.join("plugins"),
        root.join("tests").join("plugins"),
    ] {
        run(cargo()
            .current_dir(&dir)
            .args(["fmt", "--all", "--", "--check"]))?;
    }
    run(cargo().current_dir(&root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The API docs a newcomer opens: a link to a private or renamed item
    // fails here instead of rendering dead.
    run(cargo()
        .current_dir(&root)
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--workspace", "--no-deps"]))?;
    check_docs()?;
    run(cargo()
        .current_dir(root.join("plugins"))
        .args(["clippy", "--workspace", "--all-targets", "--target-dir"])
        .arg(root.join("target").join("wasm-plugins"))
        .args(["--", "-D", "warnings"]))?;
    let (dir, target) = test_plugins();
    run(cargo()
        .current_dir(dir)
        .args(["clippy", "--workspace", "--all-targets", "--target-dir"])
        .arg(target)
        .args(["--", "-D", "warnings"]))?;
    run_tests(
        cargo()
            .current_dir(&root)
            .args(["test", "--workspace"])
            .args(extra),
    )?;
    // `cargo install --path host` and the installed binary on its own: a
    // second cargo, so not inside the run above (it would wait for that
    // run's target directory); it reuses what that run built.
    run_tests(cargo().current_dir(&root).args([
        "test",
        "-p",
        "tether",
        "--test",
        "runner",
        "--",
        "--ignored",
        "install::",
    ]))
}

/// The user guide's link check, against the commands and backends of a
/// freshly built `tether`.
fn check_docs() -> Result<()> {
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "-p", "tether", "--bin", "tether"]))?;
    docs::run(&root, &root.join("target").join("debug").join("tether"))
}

/// Run `cargo test`, passing its output through, and end with one line that
/// totals every test binary's `test result:` line (`N passed, N failed,
/// N skipped`): cargo's own last line is only the last binary's, often a
/// crate with no doc-tests, which reads as if nothing ran.
fn run_tests(cmd: &mut Command) -> Result<()> {
    use std::io::{BufRead, BufReader};
    eprintln!("+ {}", describe(cmd));
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", describe(cmd)))?;
    let (mut passed, mut failed, mut skipped) = (0u64, 0u64, 0u64);
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            for part in rest.split(['.', ';']) {
                let mut words = part.split_whitespace();
                if let (Some(n), Some(what)) = (words.next(), words.next())
                    && let Ok(n) = n.parse::<u64>()
                {
                    match what {
                        "passed" => passed += n,
                        "failed" => failed += n,
                        "ignored" => skipped += n,
                        _ => {}
                    }
                }
            }
        }
    }
    let status = child.wait()?;
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if !status.success() {
        bail!("{} failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Benchmarks run in release mode; targets are printed beside the numbers:
/// the plugin runtime, then whole `tether` commands.
fn bench(extra: &[String]) -> Result<()> {
    setup()?;
    run(cargo()
        .current_dir(root())
        .args([
            "bench",
            "-p",
            "tether",
            "--bench",
            "plugin_runtime",
            "--bench",
            "commands",
        ])
        .args(extra))
}

/// The crates a registry would get, packaged (and verified unless ARGS say
/// `--no-verify`): `cargo package` of contract, SDK, host and conformance.
/// The host crate has no `../plugins` once packaged, so the components its
/// build embedded are copied into `host/builtin-plugins/` first (git-ignored;
/// `host/Cargo.toml` includes them), the same bytes `tether backends` names.
fn package(extra: &[String]) -> Result<()> {
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "-p", "tether", "--bin", "tether"]))?;
    let built = root
        .join("target")
        .join("wasm-plugins")
        .join(WASM_TARGET)
        .join("release");
    let shipped = root.join("host").join("builtin-plugins");
    if shipped.exists() {
        std::fs::remove_dir_all(&shipped)
            .with_context(|| format!("clearing {}", shipped.display()))?;
    }
    std::fs::create_dir_all(&shipped)?;
    let mut copied = 0;
    for entry in std::fs::read_dir(root.join("plugins"))? {
        let manifest = entry?.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        // The plugins' package names, as host/build.rs reads them.
        let Some(name) = text
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| l.trim().strip_prefix("name"))
            .map(|rest| {
                rest.trim_start()
                    .trim_start_matches('=')
                    .trim()
                    .trim_matches('"')
            })
        else {
            continue;
        };
        let file = format!("{}.wasm", name.replace('-', "_"));
        std::fs::copy(built.join(&file), shipped.join(&file))
            .with_context(|| format!("copying {file} from {}", built.display()))?;
        copied += 1;
    }
    eprintln!(
        "package: {copied} plugin components in {}",
        shipped.display()
    );
    run(cargo()
        .current_dir(&root)
        .args([
            "package",
            "-p",
            "tether-contract",
            "-p",
            "tether-sdk",
            "-p",
            "tether",
            "-p",
            "tether-conformance",
        ])
        .args(extra))
}

/// The plugin template's files: (path in the new crate, template text).
/// `{{name}}` is the kind, `{{crate_name}}` the package, `{{lib_name}}` the
/// component's file stem, `{{type_name}}` the backend type, `{{sdk_dep}}`
/// the `tether-sdk` dependency ([`SdkSource`]).
const PLUGIN_TEMPLATE: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../templates/plugin/Cargo.toml.tmpl"),
    ),
    (
        ".cargo/config.toml",
        include_str!("../templates/plugin/cargo/config.toml"),
    ),
    (
        "rust-toolchain.toml",
        include_str!("../templates/plugin/rust-toolchain.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/plugin/src/lib.rs.tmpl"),
    ),
    (
        "README.md",
        include_str!("../templates/plugin/README.md.tmpl"),
    ),
];

const NEW_PLUGIN_USAGE: &str = "usage: cargo xtask new-plugin NAME [--dir DIR] \
     [--sdk-git URL [--sdk-rev REV] | --sdk-path PATH]";

/// Where a generated plugin takes `tether-sdk` from.
#[derive(Debug, PartialEq, Eq)]
enum SdkSource {
    /// The tether repository by git, at a tag or a commit. The default is
    /// the public repository at the release tag of this checkout's SDK
    /// version, so the crate builds anywhere, with no checkout of tether.
    Git {
        url: String,
        /// `tag = "v<version>"`, or `rev = "<REV>"` with `--sdk-rev`.
        tag: Option<String>,
        rev: Option<String>,
    },
    /// A directory holding the SDK (`sdk/` of a checkout): for CI and
    /// offline work against a checkout's own SDK.
    Path(PathBuf),
}

impl SdkSource {
    /// The dependency's inline table in the generated `Cargo.toml`.
    fn dependency(&self) -> String {
        let quote = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        match self {
            SdkSource::Git { url, tag, rev } => {
                let mut out = format!("{{ git = {}", quote(url));
                if let Some(t) = tag {
                    out.push_str(&format!(", tag = {}", quote(t)));
                }
                if let Some(r) = rev {
                    out.push_str(&format!(", rev = {}", quote(r)));
                }
                out + " }"
            }
            SdkSource::Path(p) => format!(
                "{{ path = {} }}",
                quote(&p.to_string_lossy().replace('\\', "/"))
            ),
        }
    }
}

/// `[workspace.package] KEY = "..."` of this checkout's `Cargo.toml` (the
/// repository URL and the version every crate, the SDK included, shares).
fn workspace_package_value(key: &str) -> Result<String> {
    let path = root().join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut in_section = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t == "[workspace.package]";
            continue;
        }
        if let Some(rest) = t.strip_prefix(key).map(str::trim_start)
            && in_section
            && let Some(v) = rest.strip_prefix('=')
        {
            let v = v.trim();
            if let Some(v) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                return Ok(v.to_string());
            }
        }
    }
    bail!("{} has no [workspace.package] {key}", path.display())
}

/// `new-plugin NAME [--dir DIR] [--sdk-git URL [--sdk-rev REV] | --sdk-path
/// PATH]`: write a plugin crate for kind NAME into DIR (default `./NAME`),
/// which must not exist yet. The crate is self-contained (its own
/// workspace, wasm32-wasip2 by default) and takes the SDK from the tether
/// repository by git at the tag of this SDK's version (`--sdk-git` another
/// clone, `--sdk-rev` a commit, `--sdk-path` a directory instead). It starts
/// from the first-party plugins' `Cargo.lock`, so its other dependencies are
/// the versions tether is tested with and, once downloaded, build offline.
fn new_plugin(args: &[String]) -> Result<()> {
    let mut name = None;
    let mut dir = None;
    let mut sdk_git = None;
    let mut sdk_rev = None;
    let mut sdk_path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = Some(PathBuf::from(it.next().context("--dir needs a path")?)),
            "--sdk-git" => sdk_git = Some(it.next().context("--sdk-git needs a URL")?.clone()),
            "--sdk-rev" => sdk_rev = Some(it.next().context("--sdk-rev needs a commit")?.clone()),
            "--sdk-path" => {
                sdk_path = Some(PathBuf::from(
                    it.next().context("--sdk-path needs a directory")?,
                ))
            }
            other if other.starts_with('-') => {
                bail!("unknown option {other:?}\n{NEW_PLUGIN_USAGE}")
            }
            other if name.is_none() => name = Some(other.to_string()),
            other => bail!("unexpected argument {other:?}\n{NEW_PLUGIN_USAGE}"),
        }
    }
    let Some(name) = name else {
        bail!("{NEW_PLUGIN_USAGE}");
    };
    let sdk = match (sdk_path, sdk_git, sdk_rev) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            bail!("--sdk-path and --sdk-git/--sdk-rev exclude each other\n{NEW_PLUGIN_USAGE}")
        }
        (Some(p), None, None) => {
            let p = std::path::absolute(&p)?;
            if !p.join("Cargo.toml").is_file() {
                bail!(
                    "--sdk-path {}: no Cargo.toml there (give tether's sdk/ directory)",
                    p.display()
                );
            }
            SdkSource::Path(p)
        }
        (None, url, rev) => {
            let url = match url {
                Some(u) => u,
                None => workspace_package_value("repository")?,
            };
            let tag = rev
                .is_none()
                .then(|| workspace_package_value("version").map(|v| format!("v{v}")))
                .transpose()?;
            SdkSource::Git { url, tag, rev }
        }
    };
    let valid = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!(
            "plugin name {name:?} must start with a lowercase letter and hold only lowercase letters, digits and '-' (it is the kind)"
        );
    }
    let dir = match dir {
        Some(d) => d,
        None => std::env::current_dir()?.join(&name),
    };
    if dir.exists() {
        bail!("{} already exists; choose another --dir", dir.display());
    }
    let crate_name = format!("tether-plugin-{name}");
    let lib_name = crate_name.replace('-', "_");
    let type_name: String = name
        .split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    let type_name = if type_name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("Backend{type_name}")
    } else {
        type_name
    };
    let sdk_dep = sdk.dependency();
    for (rel, text) in PLUGIN_TEMPLATE {
        let out = text
            .replace("{{name}}", &name)
            .replace("{{crate_name}}", &crate_name)
            .replace("{{lib_name}}", &lib_name)
            .replace("{{type_name}}", &type_name)
            .replace("{{sdk_dep}}", &sdk_dep);
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("template paths have a parent"))?;
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let lock = root().join("plugins").join("Cargo.lock");
    if lock.is_file() {
        std::fs::copy(&lock, dir.join("Cargo.lock"))?;
    }
    eprintln!(
        "new-plugin: wrote {} (kind {name}; tether-sdk = {sdk_dep}); next:\n  \
         cd {} && cargo build --release\n  \
         tether-conformance target/wasm32-wasip2/release/{lib_name}.wasm\n  \
         tether plugin dev target/wasm32-wasip2/release/{lib_name}.wasm   # in a dataset",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// The `cargo fuzz` targets in `fuzz/`: one per parser of bytes a clone, a
/// store or a checkout's cache can hold.
const FUZZ_TARGETS: &[&str] = &[
    "manifest",
    "tether_toml",
    "workspace_toml",
    "secrets_toml",
    "ops_jsonl",
    "plan",
    "listing",
    "history_memo",
    "descriptor",
];

/// `fuzz [TARGET] [SECONDS]`: run TARGET (default: each in turn) for
/// SECONDS each (default 600), one process at a time, then print the
/// executions per target. Needs a nightly toolchain and cargo-fuzz; says
/// how to get them when they are missing. A crash stops the run, with
/// cargo-fuzz's report and the input under `fuzz/artifacts/`.
fn fuzz(args: &[String]) -> Result<()> {
    let mut targets: Vec<&str> = Vec::new();
    let mut seconds: u64 = 600;
    for a in args {
        if let Ok(n) = a.parse::<u64>() {
            seconds = n;
        } else if FUZZ_TARGETS.contains(&a.as_str()) {
            targets.push(a);
        } else {
            bail!(
                "unknown fuzz target {a:?}; the targets are {}",
                FUZZ_TARGETS.join(", ")
            );
        }
    }
    if targets.is_empty() {
        targets = FUZZ_TARGETS.to_vec();
    }
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output();
    if !nightly.as_ref().is_ok_and(|o| o.status.success()) {
        bail!(
            "`cargo xtask fuzz` needs a nightly Rust toolchain (cargo-fuzz builds with \
             -Zsanitizer and libFuzzer's coverage flags): run \
             `rustup toolchain install nightly --profile minimal`, then try again"
        );
    }
    let cargo_fuzz = fuzz_cargo().args(["fuzz", "--version"]).output();
    if !cargo_fuzz.as_ref().is_ok_and(|o| o.status.success()) {
        bail!(
            "`cargo xtask fuzz` needs cargo-fuzz: run `cargo install cargo-fuzz`, then try again"
        );
    }
    let dir = root().join("fuzz");
    // Build every target once, then run the built binaries: `cargo fuzz run`
    // rebuilds the `tether` crate per target (its build script re-runs
    // between build and run), which tripled a full run's time.
    let mut build = fuzz_cargo();
    build
        .current_dir(&dir)
        // No sanitizer: the parsers are safe Rust, where libFuzzer finds
        // panics and hangs without one, and an ASan build of wasmtime and
        // libgit2 takes far longer for nothing.
        .args(["fuzz", "build", "--sanitizer", "none"]);
    if targets.len() == 1 {
        build.arg(targets[0]);
    }
    run(&mut build)?;
    let bin_dir = dir
        .join("target")
        .join(nightly_host_triple()?)
        .join("release");
    let mut ran = Vec::new();
    for target in targets {
        let corpus = dir.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)
            .with_context(|| format!("cannot create {}", corpus.display()))?;
        let mut cmd = Command::new(bin_dir.join(target));
        cmd.current_dir(&dir).arg(&corpus);
        let seeds = dir.join("seeds").join(target);
        if seeds.is_dir() {
            cmd.arg(&seeds);
        }
        // libFuzzer writes crashing inputs to -artifact_prefix, which
        // `cargo fuzz run` sets to artifacts/<target>/.
        let artifacts = dir.join("artifacts").join(target);
        std::fs::create_dir_all(&artifacts)
            .with_context(|| format!("cannot create {}", artifacts.display()))?;
        cmd.args([
            format!("-artifact_prefix={}/", artifacts.display()),
            format!("-max_total_time={seconds}"),
            "-print_final_stats=1".into(),
            "-timeout=10".into(),
            "-rss_limit_mb=2048".into(),
        ]);
        eprintln!("+ {}", describe(&cmd));
        let out = cmd
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", describe(&cmd)))?;
        let (status, executions) = pass_through_stats(out)?;
        if !status.success() {
            bail!(
                "fuzz target {target} failed ({status}): see its report above and fuzz/artifacts/{target}/"
            );
        }
        ran.push((target, executions));
    }
    eprintln!("fuzzed {seconds} s per target, no crash:");
    for (target, executions) in ran {
        eprintln!(
            "  {target:<16} {} executions",
            executions.map_or("?".into(), |n| n.to_string())
        );
    }
    Ok(())
}

/// The nightly toolchain's host triple: cargo-fuzz builds into
/// `fuzz/target/<triple>/release/`.
fn nightly_host_triple() -> Result<String> {
    let out = Command::new("rustup")
        .args(["run", "nightly", "rustc", "-vV"])
        .output()
        .context("cannot run `rustup run nightly rustc -vV`")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .context("`rustc -vV` printed no host triple")
}

/// `cargo` on the nightly toolchain, with nothing of the outer cargo's
/// environment (its toolchain, wrappers, flags, target directory).
fn fuzz_cargo() -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo"]);
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "RUSTUP_TOOLCHAIN",
    ] {
        cmd.env_remove(var);
    }
    // tether's build script would build the first-party plugins with this
    // toolchain; the parsers fuzzed here do not need them.
    cmd.env("TETHER_SKIP_PLUGIN_BUILD", "1");
    cmd
}

/// Copy a fuzz run's stderr to ours, and take libFuzzer's final count of
/// executions from it (`stat::number_of_executed_units: N`).
fn pass_through_stats(
    mut child: std::process::Child,
) -> Result<(std::process::ExitStatus, Option<u64>)> {
    use std::io::{BufRead, BufReader};
    let mut executions = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            let line = line.context("reading the fuzzer's output")?;
            if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
                executions = n.trim().parse().ok();
            }
            eprintln!("{line}");
        }
    }
    Ok((child.wait()?, executions))
}

#[cfg(test)]
mod new_plugin_tests {
    use super::*;

    #[test]
    fn sdk_dependency_forms() {
        let git = SdkSource::Git {
            url: "https://example.org/tether".into(),
            tag: Some("v0.1.0".into()),
            rev: None,
        };
        assert_eq!(
            git.dependency(),
            r#"{ git = "https://example.org/tether", tag = "v0.1.0" }"#
        );
        let rev = SdkSource::Git {
            url: "file:///tmp/t".into(),
            tag: None,
            rev: Some("abc123".into()),
        };
        assert_eq!(
            rev.dependency(),
            r#"{ git = "file:///tmp/t", rev = "abc123" }"#
        );
        let path = SdkSource::Path(PathBuf::from("/src/tether/sdk"));
        assert_eq!(path.dependency(), r#"{ path = "/src/tether/sdk" }"#);
    }

    #[test]
    fn the_default_is_the_repository_at_the_version_tag() {
        let url = workspace_package_value("repository").unwrap();
        let version = workspace_package_value("version").unwrap();
        assert!(url.contains("://"), "{url}");
        assert!(version.split('.').count() == 3, "{version}");
    }
}
