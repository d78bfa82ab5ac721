//! Bounds on what a clone or a store can make tether print or hold (issue
//! 29, point 6), through the `tether` binary: a syntax error in a 1 MB
//! one-line manifest is reported in a few hundred bytes, and a 50 MB one is
//! refused unread; control characters
//! in a manifest line or a locator are shown escaped, on stdout and stderr
//! alike, while `--json` still carries them exactly; and a store object
//! larger than the plugin's memory limit is refused by the host, with the
//! memory-limit message, before it is read, while the other object of the
//! same command gets its status.

use std::process::Output;

use crate::support::{Dataset, MemoryStore, describe, stderr, stdout};
use serde_json::{Value, json};

/// A dataset with one memory object, `imaging`, committed.
fn with_memory() -> (Dataset, MemoryStore) {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    d.ok(&["commit", "-m", "imaging"]);
    (d, store)
}

/// Bytes that act on a terminal: ESC, BEL, CR, the one-byte CSI, a bidi
/// override. None may reach the output as itself.
const RAW: [char; 5] = ['\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{202e}'];

fn assert_no_raw(text: &str, what: &str) {
    for c in RAW {
        assert!(!text.contains(c), "{what} holds a raw {c:?}:\n{text:?}");
    }
}

fn run_with(d: &Dataset, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args).output().expect("run tether")
}

#[test]
fn a_50_mb_one_line_manifest_gets_a_bounded_error() {
    let (d, _) = with_memory();
    let objects = d.root().join(".tether/objects");
    // Just under the 1 MiB a manifest may be (a bigger file is refused
    // unread, below).
    let line = "x".repeat(1000 << 10);
    // A syntax error far into the line; a line that is valid TOML but holds
    // a 1 MB kind (a name of lowercase letters, too long to be one); and a
    // kind of characters no kind has: each is reported with an excerpt.
    for (name, text, says) in [
        (
            "huge.toml",
            format!("kind = \"memory\" {line}\n"),
            "not valid TOML at line 1, column 17",
        ),
        (
            "wide.toml",
            format!("kind = \"{line}\"\n[locator]\n"),
            "is not a backend kind",
        ),
        (
            "upper.toml",
            format!("kind = \"X{line}\"\n[locator]\n"),
            "is not a backend kind",
        ),
    ] {
        std::fs::write(objects.join(name), text).unwrap();
        for (what, err) in refused_briefly(&d) {
            assert!(
                err.contains(name.trim_end_matches(".toml")),
                "{what}: {err}"
            );
            assert!(err.contains(says), "{what}: {err}");
            assert!(err.contains("more bytes)"), "{what}: {err}");
        }
        std::fs::remove_file(objects.join(name)).unwrap();
    }
    // 50 MB on one line is not read at all: refused by its size.
    std::fs::write(
        objects.join("giant.toml"),
        format!("kind = \"memory\" {}\n", "x".repeat(50 << 20)),
    )
    .unwrap();
    for (what, err) in refused_briefly(&d) {
        assert!(
            err.contains("giant.toml: is larger than 1048576 bytes"),
            "{what}: {err}"
        );
    }
    std::fs::remove_file(objects.join("giant.toml")).unwrap();
    d.ok(&["status"]);
}

/// `status`, `status --json` and `commit` each fail (exit 1) with under
/// 2 KiB on stderr and on stdout: each command line and its stderr.
fn refused_briefly(d: &Dataset) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["commit", "-m", "x"],
    ] {
        let run = d.tether(args);
        let what = format!("tether {}", args.join(" "));
        assert_eq!(run.status.code(), Some(1), "{what}: {}", run.status);
        let err = stderr(&run);
        assert!(
            err.len() < 2048,
            "{what}: {} bytes of stderr: {}",
            err.len(),
            &err[..err.len().min(600)]
        );
        assert!(run.stdout.len() < 2048, "{what}: stdout");
        out.push((what, err));
    }
    out
}

#[test]
fn control_characters_in_a_manifest_line_are_escaped() {
    let (d, _) = with_memory();
    let path = d.root().join(".tether/objects/evil.toml");
    std::fs::write(
        &path,
        "kind = \"memory\"\n[locator]\nsystem = \"/x\"\n\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}\n",
    )
    .unwrap();
    let out = d.tether(&["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert_no_raw(&err, "stderr");
    assert!(err.contains("evil.toml"), "{err}");
    assert!(err.contains("not valid TOML at line 4, column "), "{err}");
    assert!(
        err.contains("\\u001b]0;pwned\\u0007\\u001b[2J\\u000d"),
        "{err}"
    );
}

#[test]
fn a_locator_with_control_characters_is_echoed_escaped() {
    let d = Dataset::init();
    // The store's directory name carries the bytes; the locator names it.
    let evil = "evil\u{1b}[2J\u{1b}]0;title\u{7}\u{9b}31m\u{202e}";
    let store = d.memory_store(evil);
    let plain = d.memory_store("plain");
    d.add_memory("evil", &store);
    d.add_memory("plain", &plain);
    d.ok(&["commit", "-m", "two objects"]);
    let locator = d.manifest("evil")["locator"]["system"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(locator.contains('\u{1b}'), "the locator holds the bytes");

    // The store goes away: status names the locator in its error.
    std::fs::rename(&store.root, d.data().join("moved")).unwrap();
    let out = d.tether(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let (text, err) = (stdout(&out), stderr(&out));
    assert_no_raw(&text, "stdout");
    assert_no_raw(&err, "stderr");
    assert!(err.contains("error: evil: "), "{err}");
    assert!(
        err.contains("evil\\u001b[2J\\u001b]0;title\\u0007\\u009b31m\\u202e"),
        "{err}"
    );
    // The other object of the same command is unaffected.
    assert!(!err.contains("error: plain"), "{err}");
    assert!(
        text.lines().any(|l| l.contains(" plain [memory/")),
        "{text}"
    );

    // `--json` is still JSON, and carries the locator's characters exactly.
    let out = d.tether(&["status", "--snapshot", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_no_raw(&stdout(&out), "stdout");
    let report: Value = serde_json::from_str(&stdout(&out)).expect("status --json is JSON");
    let objects = report["objects"].as_array().unwrap();
    let bad = objects.iter().find(|o| o["key"] == "evil").unwrap();
    assert!(
        bad["error"].as_str().unwrap().contains(evil),
        "the JSON error holds the locator as it is: {bad}"
    );
    let ok = objects.iter().find(|o| o["key"] == "plain").unwrap();
    assert!(ok["error"].is_null(), "{ok}");
}

#[test]
fn a_store_object_over_the_plugin_memory_limit_is_refused_before_it_is_read() {
    let (d, store) = with_memory();
    let small = d.memory_store("small");
    d.add_memory("small", &small);
    d.ok(&["commit", "-m", "small too"]);
    // The branch ref the memory plugin reads for a fingerprint, grown past
    // a 32 MiB limit (valid JSON, so only its size is wrong).
    let head = store.head();
    let padding = " ".repeat(48 << 20);
    std::fs::write(
        store.root.join("refs/branches/main.json"),
        format!("{{\"snapshot_id\": \"{head}\"{padding}}}"),
    )
    .unwrap();
    let out = run_with(
        &d,
        &[("TETHER_PLUGIN_MEMORY", "32")],
        &["status", "--snapshot"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("error: imaging: "), "{err}");
    assert!(err.contains("refs/branches/main.json"), "{err}");
    assert!(
        err.contains(&format!(
            "the object is {} bytes, more than the plugin's memory limit of {} bytes",
            (48 << 20) + head.len() + 19,
            32 << 20
        )),
        "{err}"
    );
    assert!(err.contains("TETHER_PLUGIN_MEMORY"), "{err}");
    assert!(!err.contains("crashed"), "{err}");
    // The other object of the same command got its status.
    assert!(!err.contains("error: small"), "{err}");
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.contains(" small [memory/")),
        "{text}"
    );
    // With the default limit the same object is read.
    d.ok(&["status", "--snapshot"]);
}
