//! jj for the tests: `cargo xtask setup` installs jj-cli from crates.io into
//! `target/tools/` (its `bin/jj` is what `tether_testkit::jj()` hands the tests),
//! once, and reuses it while it is the pinned version.
//!
//! The version is pinned because it must build with this repository's toolchain
//! (jj-cli 0.45.1 does, in about six minutes on two cores; 0.46 needs a newer
//! rustc) and because the spec's floor is jj 0.43. `--locked` builds it with the
//! dependency versions jj released with.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The jj-cli version installed for the tests (keep `tether_testkit::JJ_VERSION` in step).
pub const JJ_VERSION: &str = "0.45.1";

/// `target/tools`: the install root (`bin/jj` under it).
pub fn tools_root(root: &Path) -> PathBuf {
    root.join("target").join("tools")
}

/// The installed executable.
pub fn jj_exe(root: &Path) -> PathBuf {
    tools_root(root)
        .join("bin")
        .join(format!("jj{}", std::env::consts::EXE_SUFFIX))
}

/// The version an installed jj reports, `None` when there is none or it does not run.
fn installed_version(exe: &Path) -> Option<String> {
    let out = Command::new(exe).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    // `jj 0.45.1` (a build from git appends `-<commit>`).
    let text = String::from_utf8_lossy(&out.stdout);
    let token = text.trim().strip_prefix("jj ")?.split_whitespace().next()?;
    Some(token.split('-').next().unwrap_or(token).to_string())
}

/// Install jj-cli [`JJ_VERSION`] into `target/tools` unless that version is there.
pub fn setup(root: &Path) -> Result<()> {
    let exe = jj_exe(root);
    if installed_version(&exe).as_deref() == Some(JJ_VERSION) {
        eprintln!(
            "setup: jj {JJ_VERSION} already installed at {}",
            exe.display()
        );
        return Ok(());
    }
    eprintln!(
        "setup: installing jj-cli {JJ_VERSION} into {} (a few minutes, once)",
        tools_root(root).display()
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["install", "--locked", "--force", "--root"])
        .arg(tools_root(root))
        .args([
            "jj-cli",
            "--version",
            &format!("={JJ_VERSION}"),
            "--bin",
            "jj",
        ])
        // The outer build's settings must not reach jj's build, and cargo install
        // builds in a temporary directory it removes afterwards.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER");
    crate::run(&mut cmd).context("installing jj-cli for the tests")?;
    match installed_version(&exe) {
        Some(v) if v == JJ_VERSION => Ok(()),
        other => anyhow::bail!(
            "after installing jj-cli {JJ_VERSION}, {} reports {other:?}",
            exe.display()
        ),
    }
}
