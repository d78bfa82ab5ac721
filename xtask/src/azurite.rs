//! Azurite, Microsoft's Azure Blob emulator, for the `az://` tests: `cargo
//! xtask setup` installs it from npm into `target/tools/azurite` (its
//! `node_modules/.bin/azurite-blob` is what `tether_testkit::Azurite` runs),
//! once, and reuses it while it is the pinned version.
//!
//! Pinned to 3.35.0: the later releases need Node 21 or 22, and this is the
//! one the tests were run against. Without `node` and `npm` the step says so
//! and is skipped (the Azure tests then skip with the same message).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The Azurite version installed for the tests (keep
/// `tether_testkit::AZURITE_VERSION` in step).
pub const AZURITE_VERSION: &str = "3.35.0";

/// `target/tools/azurite`: the npm prefix.
pub fn azurite_root(root: &Path) -> PathBuf {
    crate::jj::tools_root(root).join("azurite")
}

/// The version of the installed package, from its `package.json`.
fn installed_version(prefix: &Path) -> Option<String> {
    let text = std::fs::read_to_string(
        prefix
            .join("node_modules")
            .join("azurite")
            .join("package.json"),
    )
    .ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_string)
}

/// Install azurite [`AZURITE_VERSION`] into `target/tools/azurite` unless it
/// is there; a machine without npm is told and skipped.
pub fn setup(root: &Path) -> Result<()> {
    let prefix = azurite_root(root);
    if installed_version(&prefix).as_deref() == Some(AZURITE_VERSION) {
        eprintln!(
            "setup: azurite {AZURITE_VERSION} already installed at {}",
            prefix.display()
        );
        return Ok(());
    }
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!(
            "setup: WARNING: npm (Node.js) is not installed, so azurite is not: the Azure \
             (az://) tests will skip. Install Node.js 20 and rerun `cargo xtask setup`."
        );
        return Ok(());
    }
    eprintln!(
        "setup: installing azurite {AZURITE_VERSION} into {} (npm, once)",
        prefix.display()
    );
    std::fs::create_dir_all(&prefix).with_context(|| format!("creating {}", prefix.display()))?;
    let mut cmd = Command::new("npm");
    cmd.args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(format!("azurite@{AZURITE_VERSION}"));
    crate::run(&mut cmd).context("installing azurite for the tests")?;
    match installed_version(&prefix) {
        Some(v) if v == AZURITE_VERSION => Ok(()),
        other => anyhow::bail!(
            "after installing azurite {AZURITE_VERSION}, {} holds {other:?}",
            prefix.display()
        ),
    }
}
