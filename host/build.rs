//! Builds the first-party plugins (`../plugins`, a wasm32-wasip2 workspace) in
//! release mode and embeds each component in the `tether` binary.
//!
//! The inner cargo runs with its own target directory, so it never waits on the
//! outer build's lock, and with the outer build's flags and wrappers cleared
//! (clippy's `RUSTC_WORKSPACE_WRAPPER`, coverage `RUSTFLAGS`), so every host
//! profile embeds the same bytes. Paths are remapped so the components do not
//! depend on where the checkout or cargo home lives (DESIGN §5, reproducible).
//!
//! A packaged crate (`cargo package`) has no `../plugins`: it embeds the
//! components `cargo xtask package` copied into `builtin-plugins/` instead.
//!
//! It also links the binaries with packed relative relocations where the
//! linker and C library take them ([`pack_relative_relocs`]).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Where a packaged `tether` carries the first-party components: `plugins/` is
/// not part of the crate, so `cargo xtask package` builds the plugins and copies
/// each component here (listed in `include`, since `*.wasm` is git-ignored).
const SHIPPED: &str = "builtin-plugins";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .to_path_buf();
    let plugins_dir = root.join("plugins");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    pack_relative_relocs(&out_dir);

    // A packaged crate (`cargo package`, a registry download): no plugin
    // sources beside it, only the components shipped inside it.
    if !plugins_dir.join("Cargo.toml").is_file() {
        let shipped = manifest_dir.join(SHIPPED);
        println!("cargo:rerun-if-changed={}", shipped.display());
        version_info(&manifest_dir, &manifest_dir);
        let components = shipped_components(&shipped);
        embed(&out_dir, &components);
        println!(
            "cargo:rustc-env=TETHER_PLUGIN_WASM_DIR={}",
            shipped.display()
        );
        return;
    }

    let target_dir = root.join("target").join("wasm-plugins");
    for watched in ["plugins", "contract", "sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=TETHER_SKIP_PLUGIN_BUILD");
    version_info(&root, &manifest_dir);

    let crates = plugin_crates(&plugins_dir);
    if env::var_os("TETHER_SKIP_PLUGIN_BUILD").is_none() {
        build_plugins(&root, &plugins_dir, &target_dir);
    }

    let wasm_dir = target_dir.join("wasm32-wasip2").join("release");
    let mut components = Vec::new();
    for name in &crates {
        let file = wasm_dir.join(format!("{}.wasm", name.replace('-', "_")));
        if !file.exists() {
            if env::var_os("TETHER_SKIP_PLUGIN_BUILD").is_some() {
                println!("cargo:warning=plugin {name} is not built; it is left out of this binary");
                continue;
            }
            panic!(
                "plugin component {} was not built; run `cargo xtask build-plugins` to see why",
                file.display()
            );
        }
        components.push((name.clone(), file));
    }
    embed(&out_dir, &components);
    println!(
        "cargo:rustc-env=TETHER_PLUGIN_WASM_DIR={}",
        wasm_dir.display()
    );
}

/// Link the binaries with `-z pack-relative-relocs` (DT_RELR) when a probe
/// program linked that way builds and runs here.
///
/// Every command starts by relocating the binary: about 110,000 relative
/// relocations (vtables and static tables of wasmtime, the HTTP and cloud
/// stacks), 2.6 MB of `.rela.dyn` read and applied before `main`. Packed,
/// the table is about 26 KB and applying it is cheaper: `tether --version`
/// went from about 3.6 to 2.9 ms here, which every command pays. The binary
/// stays position-independent (ASLR): linking it non-PIE would save more,
/// but gives that up for a program that reads clone-controlled input.
///
/// The flag needs binutils 2.38 (or lld, mold) and glibc 2.36 to load the
/// result, so it is probed, not assumed; a cross build, another target or a
/// failed probe links as before.
fn pack_relative_relocs(out_dir: &Path) {
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let target = env::var("TARGET").unwrap_or_default();
    if !target.ends_with("-linux-gnu") || env::var("HOST").ok().as_ref() != Some(&target) {
        return;
    }
    const FLAG: &str = "-Wl,-z,pack-relative-relocs";
    // The linker cargo was told to use, else the default rustc uses here.
    let linker = env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let source = out_dir.join("relr_probe.c");
    let probe = out_dir.join("relr_probe");
    fs::write(&source, "int main(void) { return 0; }\n").expect("write the RELR probe");
    let linked = Command::new(&linker)
        .args(["-pie", "-fPIE", FLAG, "-o"])
        .arg(&probe)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    // Running it is what tells the C library's loader accepts DT_RELR.
    if linked && Command::new(&probe).status().is_ok_and(|s| s.success()) {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}

/// The components a packaged crate ships: `builtin-plugins/<crate_name>.wasm`
/// (underscores for dashes, as cargo names them).
fn shipped_components(dir: &Path) -> Vec<(String, PathBuf)> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| {
        panic!(
            "{} is missing ({e}): this tether crate has neither the plugins' sources \
             (../plugins) nor their built components; package it with `cargo xtask package`",
            dir.display()
        )
    });
    let mut components: Vec<(String, PathBuf)> = entries
        .map(|e| e.expect("read builtin-plugins/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .map(|p| {
            let stem = p.file_stem().expect("a file name").to_string_lossy();
            (stem.replace('_', "-"), p)
        })
        .collect();
    components.sort();
    if components.is_empty() {
        panic!("{} holds no plugin components", dir.display());
    }
    components
}

/// Write `builtin_plugins.rs`: each component copied into `OUT_DIR` and
/// embedded with its sha256.
fn embed(out_dir: &Path, components: &[(String, PathBuf)]) {
    let mut code = String::from(
        "/// The first-party plugins, built from `plugins/` and embedded at build time.\n\
         pub static BUILTIN_PLUGINS: &[BuiltinPlugin] = &[\n",
    );
    for (name, file) in components {
        // Embed a private copy: another build may rebuild the shared plugin
        // directory between this hash and rustc's include_bytes!.
        let bytes = fs::read(file).expect("read a built plugin component");
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let embedded = out_dir.join(format!("{}.wasm", name.replace('-', "_")));
        fs::write(&embedded, &bytes).expect("copy a plugin component into OUT_DIR");
        writeln!(
            code,
            "    BuiltinPlugin {{ crate_name: {name:?}, wasm: include_bytes!({:?}), sha256: {sha256:?} }},",
            embedded.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = out_dir.join("builtin_plugins.rs");
    fs::write(out, code).expect("write builtin_plugins.rs");
}

/// Package names of the plugin crates: every member directory of `plugins/`.
fn plugin_crates(plugins_dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let entries = fs::read_dir(plugins_dir).expect("read plugins/");
    for entry in entries {
        let path = entry.expect("read plugins/ entry").path();
        let manifest = path.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = fs::read_to_string(&manifest).expect("read plugin Cargo.toml");
        let name = text
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| {
                let l = l.trim();
                l.strip_prefix("name").map(|rest| {
                    rest.trim_start()
                        .trim_start_matches('=')
                        .trim()
                        .trim_matches('"')
                        .to_string()
                })
            })
            .unwrap_or_else(|| panic!("{} has no [package] name", manifest.display()));
        names.push(name);
    }
    names.sort();
    names
}

fn build_plugins(root: &Path, plugins_dir: &Path, target_dir: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let home = env::var("CARGO_HOME")
        .map(PathBuf::from)
        .ok()
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let mut remaps = vec![format!("--remap-path-prefix={}=/tether", root.display())];
    if let Some(home) = home {
        remaps.push(format!("--remap-path-prefix={}=/cargo", home.display()));
    }
    let mut cmd = Command::new(cargo);
    cmd.current_dir(plugins_dir)
        .args(["build", "--release", "--workspace", "--target-dir"])
        .arg(target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", remaps.join("\u{1f}"));
    for var in [
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_CFG_")
            || key.starts_with("CARGO_FEATURE_")
        {
            cmd.env_remove(&key);
        }
    }
    let status = cmd.status().expect("run cargo for plugins/");
    if !status.success() {
        panic!(
            "building the plugins in {} failed (see the output above)",
            plugins_dir.display()
        );
    }
}

/// What `tether --version` says besides the package version: the git commit
/// built (`unknown` outside a checkout), the build date (`SOURCE_DATE_EPOCH`
/// when set, for reproducible builds) and the wasmtime version, read from the
/// workspace's lock file (a packaged crate's own, and its commit from the
/// `.cargo_vcs_info.json` that `cargo package` writes).
fn version_info(root: &Path, manifest_dir: &Path) {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let packaged_commit = fs::read_to_string(manifest_dir.join(".cargo_vcs_info.json"))
        .ok()
        .and_then(|text| {
            let rest = &text[text.find("\"sha1\"")? + 6..];
            let start = rest.find('"')? + 1;
            let sha = &rest[start..start + rest[start..].find('"')?];
            Some(sha.chars().take(12).collect::<String>())
        });
    let commit = packaged_commit
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // Rebuilt when HEAD moves: HEAD itself, the branch it names, packed refs.
    // Only files that exist are watched: cargo takes a missing one as changed,
    // which rebuilt the crate on every build where refs were not packed. A
    // branch with no loose file yet is watched through its directory, where
    // the next commit creates it.
    let watch = |p: &Path| {
        let exists = p.exists();
        if exists {
            println!("cargo:rerun-if-changed={}", p.display());
        }
        exists
    };
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
            watch(Path::new(&p));
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &branch])
        && !watch(Path::new(&p))
        && let Some(dir) = Path::new(&p).parent()
    {
        watch(dir);
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let date = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .map(|secs| {
            Command::new("date")
                .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d"])
                .output()
        })
        .unwrap_or_else(|| Command::new("date").args(["-u", "+%Y-%m-%d"]).output())
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let lock = [root, manifest_dir]
        .map(|dir| dir.join("Cargo.lock"))
        .into_iter()
        .find(|lock| lock.is_file())
        .unwrap_or_else(|| root.join("Cargo.lock"));
    println!("cargo:rerun-if-changed={}", lock.display());
    let wasmtime = fs::read_to_string(&lock)
        .ok()
        .and_then(|text| {
            let mut lines = text.lines();
            while let Some(line) = lines.next() {
                if line == "name = \"wasmtime\"" {
                    let version = lines.next()?.strip_prefix("version = \"")?;
                    return Some(version.trim_end_matches('"').to_string());
                }
            }
            None
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TETHER_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=TETHER_BUILD_DATE={date}");
    println!("cargo:rustc-env=TETHER_WASMTIME_VERSION={wasmtime}");
}
