//! A hostile plugin through the CLI (issue 29): the test-only plugins
//! `hostile` and `liar` are added to a dataset with `tether plugin add`
//! (which pins and trusts them), their objects sit beside a built-in
//! `memory` object and a well-behaved `hostile` one, and every attack is
//! contained: the attacker's object gets a clear error, in bounded time (the
//! runtime's deadline) and bounded memory and output, while the other
//! objects of the same command get their status as if nothing happened.
//!
//! The attacks are written into the manifests directly, as a hostile clone
//! would ship them; `sandbox.rs` runs the same plugins through the library.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::{Value, json};

struct Setup {
    d: Dataset,
    /// A directory the attackers' locators grant (`root`).
    granted: PathBuf,
    /// A directory no locator names, holding `secret.txt`.
    outside: PathBuf,
}

const SECRET: &str = "the contents of a file no plugin may read";

/// A dataset with a built-in `memory` object (`imaging`) and a calm
/// `hostile` object (`calm`), committed, the `hostile` plugin added (and
/// so pinned and trusted).
fn setup() -> Setup {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    let hostile = tether_testkit::test_plugin("hostile");
    let out = d.ok(&["plugin", "add", hostile.to_str().unwrap()]);
    assert!(out.starts_with("added plugin hostile sha256:"), "{out}");
    let granted = d.tmp().join("granted");
    let outside = d.tmp().join("outside");
    std::fs::create_dir_all(granted.join("calm")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    let root = format!("root={}", granted.join("calm").display());
    let out = d.ok(&[
        "add",
        "calm",
        "--kind",
        "hostile",
        "--set",
        &root,
        "--set",
        "attack=none",
    ]);
    assert_eq!(out, "added calm [hostile]\n");
    d.ok(&["commit", "-m", "imaging and calm"]);
    Setup {
        d,
        granted,
        outside,
    }
}

impl Setup {
    /// Register `key` as a `hostile` object whose locator is `locator` plus
    /// its own granted `root`, by writing its manifest.
    fn attacker(&self, key: &str, mut locator: Value) {
        let root = self.granted.join(key);
        std::fs::create_dir_all(&root).unwrap();
        locator["root"] = json!(root.to_str().unwrap());
        self.manifest(key, "hostile", &locator);
    }

    fn manifest(&self, key: &str, kind: &str, locator: &Value) {
        let mut text = format!("kind = \"{kind}\"\nrecoverable = true\n\n[locator]\n");
        for (k, v) in locator.as_object().unwrap() {
            text.push_str(&format!("{k} = {v}\n"));
        }
        let path = self.d.root().join(format!(".tether/objects/{key}.toml"));
        std::fs::write(path, text).unwrap();
    }

    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = self.d.command(env!("CARGO_BIN_EXE_tether"), &self.d.root());
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args).output().expect("run tether")
    }

    /// `status --snapshot` (and its `--json`): exit 1, each of `attackers`
    /// with an error, `imaging` and `calm` with their status and no error.
    /// Returns each attacker's error from the JSON report.
    fn contained(&self, env: &[(&str, &str)], attackers: &[&str]) -> Vec<String> {
        let out = self.run(env, &["status", "--snapshot"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let (text, err) = (stdout(&out), stderr(&out));
        assert!(
            err.len() < 64 * 1024,
            "stderr is bounded: {} bytes",
            err.len()
        );
        for key in attackers {
            assert!(err.contains(&format!("error: {key}: ")), "{key}: {err}");
        }
        for key in ["imaging", "calm"] {
            assert!(!err.contains(&format!("error: {key}")), "{key}: {err}");
            assert!(
                text.lines().any(|l| l.contains(&format!(" {key} ["))),
                "{key} has its status line: {text}"
            );
        }
        assert!(!text.contains("escaped"), "{text}");

        let out = self.run(env, &["status", "--snapshot", "--json"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(out.stdout.len() < 1 << 20, "{} bytes", out.stdout.len());
        let report: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let objects = report["objects"].as_array().unwrap();
        let of = |key: &str| objects.iter().find(|o| o["key"] == key).unwrap().clone();
        for key in ["imaging", "calm"] {
            let o = of(key);
            assert!(o["error"].is_null(), "{o}");
        }
        attackers
            .iter()
            .map(|key| {
                let o = of(key);
                assert!(!o.to_string().contains("escaped"), "{o}");
                o["error"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{key} has an error: {o}"))
                    .to_string()
            })
            .collect()
    }
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn escape_attempts_are_refused_and_the_other_objects_get_their_status() {
    let s = setup();
    let secret = s.outside.join("secret.txt");
    // A symlink inside each granted root, to a directory and a file outside.
    let linked = s.granted.join("link-dir");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&s.outside, linked.join("link")).unwrap();
    let linked_file = s.granted.join("link-file");
    std::fs::create_dir_all(&linked_file).unwrap();
    std::os::unix::fs::symlink(&secret, linked_file.join("secret")).unwrap();
    // A directory the plugin gets as a filesystem (`fsroot`), with a link out.
    let fsroot = s.d.tmp().join("fsroot");
    std::fs::create_dir_all(&fsroot).unwrap();
    std::os::unix::fs::symlink(&s.outside, fsroot.join("link")).unwrap();

    s.attacker(
        "passwd",
        json!({"attack": "read-host-file", "path": "/etc/passwd"}),
    );
    s.attacker(
        "secret",
        json!({"attack": "read-host-file", "path": path(&secret)}),
    );
    s.attacker(
        "ungranted",
        json!({"attack": "open-ungranted", "target": path(&s.outside)}),
    );
    s.attacker(
        "link-dir",
        json!({"attack": "symlink-escape", "key": "link/secret.txt"}),
    );
    s.attacker(
        "link-file",
        json!({"attack": "symlink-escape", "key": "secret"}),
    );
    s.attacker(
        "fs-outside",
        json!({"attack": "fs-read", "fsroot": path(&fsroot), "path": path(&secret)}),
    );
    s.attacker(
        "fs-link",
        json!({"attack": "fs-read", "fsroot": path(&fsroot),
               "path": format!("{}/link/secret.txt", path(&fsroot))}),
    );
    s.attacker(
        "fs-dotdot",
        json!({"attack": "fs-read", "fsroot": path(&fsroot),
               "path": format!("{}/../outside/secret.txt", path(&fsroot))}),
    );
    let before = std::fs::read_dir(&s.outside).unwrap().count();
    let errors = s.contained(
        &[],
        &[
            "passwd",
            "secret",
            "ungranted",
            "link-dir",
            "link-file",
            "fs-outside",
            "fs-link",
            "fs-dotdot",
        ],
    );
    for e in &errors {
        assert!(
            e.contains("refused") || e.contains("denied") || e.contains("not found"),
            "a refusal, not a crash: {e}"
        );
        assert!(!e.contains("crashed"), "{e}");
        assert!(!e.contains(SECRET), "{e}");
    }
    assert!(errors[2].contains("not granted"), "{}", errors[2]);
    assert!(
        errors[3].contains("outside the granted directory"),
        "{}",
        errors[3]
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET);
    assert_eq!(std::fs::read_dir(&s.outside).unwrap().count(), before);
}

#[test]
fn an_endless_loop_and_a_memory_hog_are_stopped_and_the_rest_goes_on() {
    let s = setup();
    s.attacker("spin", json!({"attack": "loop"}));
    s.attacker("hog", json!({"attack": "oom"}));
    let errors = s.contained(
        &[
            ("TETHER_PLUGIN_TIMEOUT", "2"),
            ("TETHER_PLUGIN_MEMORY", "128"),
        ],
        &["spin", "hog"],
    );
    assert!(
        errors[0].contains("the hostile plugin ran past its deadline of 2s and was stopped"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains(&format!(
            "the hostile plugin tried to use more than {} bytes of memory and was stopped",
            128 << 20
        )),
        "{}",
        errors[1]
    );
    // A commit records the others and names the two it could not read.
    let out = s.run(
        &[
            ("TETHER_PLUGIN_TIMEOUT", "2"),
            ("TETHER_PLUGIN_MEMORY", "128"),
        ],
        &["commit", "-m", "with a spinner and a hog"],
    );
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("spin") || err.contains("hog"), "{err}");
}

#[test]
fn huge_outputs_are_refused_without_being_stored_or_echoed() {
    let s = setup();
    // Past what wasmtime copies out of a guest in one call (its hostcall
    // fuel), and below it, past what the host takes as a state.
    s.attacker("blob", json!({"attack": "huge-output", "mib": 200}));
    s.attacker("wide", json!({"attack": "huge-output", "mib": 32}));
    s.attacker("shout", json!({"attack": "huge-error", "mib": 32}));
    let errors = s.contained(&[], &["blob", "wide", "shout"]);
    assert!(
        errors[0].contains("too much data is being copied between the host and the guest"),
        "{}",
        &errors[0][..errors[0].len().min(500)]
    );
    assert!(
        errors[1].contains(&format!("returned a state of {} bytes", (32 << 20) + 11))
            && errors[1].contains("more than the 4194304 bytes the host accepts"),
        "{}",
        &errors[1][..errors[1].len().min(500)]
    );
    for e in &errors[..2] {
        assert!(e.len() < 1024, "{} bytes", e.len());
    }
    assert!(errors[2].len() <= 17 * 1024, "{} bytes", errors[2].len());
    assert!(errors[2].contains("more bytes not shown"), "bounded");
    // The escape sequence it opened with is shown escaped on the terminal.
    let out = s.run(&[], &["status", "--snapshot"]);
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}'), "stderr holds a raw ESC");
    assert!(
        err.contains("error: shout: \\u001b[2J"),
        "{}",
        &err[..err.len().min(2000)]
    );

    // A commit stores none of it.
    let out = s.run(&[], &["commit", "-m", "with a blob"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(out.stderr.len() < 64 * 1024, "{} bytes", out.stderr.len());
    for key in ["blob", "wide", "shout"] {
        let len = std::fs::metadata(s.d.root().join(format!(".tether/objects/{key}.toml")))
            .unwrap()
            .len();
        assert!(len < 1024, "{key}'s manifest is {len} bytes");
    }
}

#[test]
fn a_lying_describe_is_caught_per_object() {
    let s = setup();
    let liar = tether_testkit::test_plugin("liar");
    let liar = liar.to_str().unwrap();
    // Added under a kind it does not serve: refused, nothing written.
    let before = s.d.written();
    let out = s.run(&[], &["plugin", "add", liar, "--kind", "memory"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("serves kind liar, not memory"),
        "{}",
        describe(&out)
    );
    assert_eq!(s.d.written(), before);
    let out = s.d.ok(&["plugin", "add", liar]);
    assert!(out.starts_with("added plugin liar sha256:"), "{out}");
    let root = s.granted.join("lie");
    std::fs::create_dir_all(&root).unwrap();
    let set = format!("root={}", root.display());
    s.d.ok(&["add", "lie", "--kind", "liar", "--set", &set]);

    // It fingerprints, so status is fine for everyone.
    s.d.ok(&["status", "--snapshot"]);
    // It claims PIN: the commit asks it to pin, it cannot, and the commit
    // says so for `lie`.
    let out = s.run(&[], &["commit", "-m", "with a liar"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("lie"), "{err}");
    assert!(err.contains("not supported"), "{err}");
    assert!(!err.contains("crashed"), "{err}");
    // It claims HISTORY: `log` asks, and gets a clear refusal.
    let out = s.run(&[], &["log", "lie"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("not supported"), "{}", describe(&out));
    // The others are unaffected: a commit of them alone goes through.
    s.d.ok(&["commit", "-m", "the honest ones", "imaging", "calm"]);
}
