//! Installing tether as a user does (issue 27): `cargo install --path host`
//! from the workspace, offline, then the installed binary on its own (no
//! checkout beside it): `--version`, `completion bash`, `man`, and `-C
//! DATASET status` on a dataset with an object.
//!
//! Ignored in a plain `cargo test`: it runs a second cargo, which would wait
//! for the outer one's target directory. `cargo xtask test` runs it as its own
//! step after the others (`cargo test -p tether --test runner -- --ignored
//! install::`). It reuses the workspace's `target/` (dev profile, `--debug`),
//! so it costs a link and a copy, not a rebuild of every dependency.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{Dataset, describe, stdout};

/// `cargo install --path host --root ROOT` as a user in this checkout
/// would run it, offline and with the lock file as committed.
fn cargo_install(root: &Path) -> Output {
    let repo = tether_testkit::repo_root();
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(&repo)
        .args([
            "install",
            "--path",
            "host",
            "--offline",
            "--locked",
            "--debug",
        ])
        .arg("--root")
        .arg(root)
        .env("CARGO_TARGET_DIR", repo.join("target"))
        // Nothing of the test run's own build leaks into this one.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("run cargo install")
}

#[test]
#[ignore = "runs cargo install; `cargo xtask test` runs it as its own step"]
fn cargo_install_gives_a_tether_that_works_on_its_own() {
    let d = Dataset::init();
    let root = d.tmp().join("installed");
    let out = cargo_install(&root);
    assert!(out.status.success(), "{}", describe(&out));
    let tether = root.join("bin").join("tether");
    assert!(tether.is_file(), "{} was not installed", tether.display());
    // Run from somewhere that is no checkout, with nothing of the
    // workspace on the path.
    let elsewhere = d.tmp();
    let run = |args: &[&str]| {
        let out = d
            .command(&tether, elsewhere)
            .args(args)
            .output()
            .expect("run the installed tether");
        assert_eq!(out.status.code(), Some(0), "{args:?}:\n{}", describe(&out));
        stdout(&out)
    };

    let version = run(&["--version"]);
    assert!(
        version.starts_with(&format!("tether {}\n", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    for field in ["commit: ", "built: ", "wasmtime: ", "plugin ABI: "] {
        assert!(version.contains(field), "no {field:?} in:\n{version}");
    }

    let completion = run(&["completion", "bash"]);
    assert!(completion.contains("_tether()"), "{completion}");
    assert!(completion.contains("status"), "{completion}");

    let man = d.tmp().join("man1");
    run(&["man", "--out", man.to_str().unwrap()]);
    for page in ["tether.1", "tether-status.1", "tether-plugin-update.1"] {
        let text =
            std::fs::read_to_string(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}:\n{text}"
        );
    }

    let store = d.memory_store("m");
    store.write(serde_json::json!({"v": 1}), "one");
    d.add_memory("m", &store);
    let dataset = d.root();
    let status = run(&["-C", dataset.to_str().unwrap(), "status"]);
    assert!(status.contains("m [memory/"), "{status}");
}
