//! Flags and handles the spec documents that were missing or inert (issue 26):
//! `restore -f`, `add --port` validated as a port, `open` on a `file` object,
//! `status` `behind`, `add --pick`,
//! and no message sending the user to a command this build does not have.

use serde_json::{Value, json};

use crate::support::{Dataset, Vcs, describe, stderr};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

#[test]
fn restore_takes_f_for_from() {
    let d = Dataset::init_in(Vcs::Git);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "first"]);
    let first = d.head();
    let v1 = img.head();
    d.ok(&["new", "-b", "sweep", "--eager"]);
    let wr = d.working_ref("sweep");
    img.write_on(&wr, json!({"labels": "v2"}), "v2");
    d.ok(&["commit", "-m", "v2"]);

    let r = json_of(&d.ok(&["restore", "img", "-f", &first, "--json"]));
    assert_eq!(r["from"], json!(first));
    assert_eq!(img.branch(&wr), Some(v1));
}

#[test]
fn add_port_must_be_a_port() {
    let d = Dataset::init_in(Vcs::Git);
    let written = d.written();
    for bad in ["0", "65536", "http", "-1", "22.5"] {
        let port = format!("--port={bad}");
        let out = d.fails(
            &["add", "db", "--kind", "dolt", "--host", "127.0.0.1", &port],
            2,
        );
        let err = stderr(&out);
        assert!(err.contains("is not a port"), "{bad}: {}", describe(&out));
        assert!(err.contains("1 to 65535"), "{bad}: {err}");
    }
    assert_eq!(d.written(), written, "a usage error writes nothing");
}

#[test]
fn open_a_file_object_prints_its_path() {
    let d = Dataset::init_in(Vcs::Git);
    let plate = d.data().join("plate1");
    std::fs::create_dir_all(&plate).unwrap();
    std::fs::write(plate.join("a.csv"), "well,value\n").unwrap();
    d.ok(&["add", "raw/plate1", "--kind", "file", "../data/plate1"]);
    d.ok(&["commit", "-m", "plate1"]);
    let path = plate.canonicalize().unwrap();
    let path = path.to_str().unwrap();

    let out = d.ok(&["open", "raw/plate1"]);
    assert_eq!(out.trim_end(), path, "{out}");
    let v = json_of(&d.ok(&["open", "raw/plate1", "--json"]));
    assert_eq!(v["address"], json!(path), "{v}");
    assert_eq!(v["read_only"], json!(true), "{v}");
    assert_eq!(v["key"], json!("raw/plate1"), "{v}");

    // A revision of an Observed object still has no address.
    let head = d.head();
    let out = d.fails(&["open", "raw/plate1", "--rev", &head], 1);
    assert!(stderr(&out).contains("Observed"), "{}", describe(&out));
}

#[test]
fn an_old_dataset_is_told_what_works_today() {
    let d = Dataset::init_in(Vcs::Git);
    let toml = d.root().join("tether.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let old = text.replacen("version = 5", "version = 4", 1);
    assert_ne!(old, text, "tether.toml names its version:\n{text}");
    std::fs::write(&toml, old).unwrap();
    let out = d.fails(&["status"], 1);
    let err = stderr(&out);
    assert!(!err.contains("tether upgrade"), "{err}");
    assert!(
        err.contains("the tether release that writes version 4"),
        "{err}"
    );
    assert!(!text.contains("tether upgrade"), "{text}");
}

#[test]
fn a_deferred_record_object_is_warned_about_until_it_forks() {
    let d = Dataset::init_in(Vcs::Git);
    let img = d.memory_store("img");
    let system = format!("system={}", img.root.display());
    d.ok(&[
        "add", "img", "--kind", "memory", "--set", &system, "--pin", "record",
    ]);
    d.ok(&["commit", "-m", "first"]);
    let warning = "img has pin = \"record\" and is not forked on this bookmark yet";

    // Forked at once by default: nothing to warn about.
    let out = d.tether(&["new", "-b", "eager"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!stderr(&out).contains(warning), "{}", describe(&out));
    assert!(!d.ok(&["status"]).contains(warning));

    d.ok(&["new", "main"]);
    let out = d.tether(&["new", "-b", "preview", "--defer-record"]);
    assert!(out.status.success(), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains(warning), "{}", describe(&out));
    assert!(err.contains("retention"), "{err}");
    // status repeats it until the fork.
    let out = d.ok(&["status"]);
    assert!(out.contains(&format!("warning: {warning}")), "{out}");
    d.ok(&["open", "img", "--writable"]);
    let out = d.ok(&["status"]);
    assert!(!out.contains(warning), "{out}");
}

#[test]
fn commit_refuses_a_store_with_active_writers_unless_forced() {
    // `busy` is memory declaring NEEDS_QUIESCENCE; a branch `writers` stands
    // in for a live writer.
    let busy = tether_testkit::test_plugin("busy");
    let d = Dataset::init_in(Vcs::Git);
    d.ok(&["plugin", "add", busy.to_str().unwrap(), "--kind", "busy"]);
    let store = d.memory_store("db");
    let system = format!("system={}", store.root.display());
    d.ok(&["add", "db", "--kind", "busy", "--set", &system]);
    d.ok(&["commit", "-m", "first"]);

    let two = store.write(json!({"rows": 2}), "two rows");
    store.set_branch("writers", &two);
    let plan = d.tmp().join("plan.json");
    d.ok(&["commit", "-m", "planned", "--plan", plan.to_str().unwrap()]);
    // The refused commit still refreshes the snapshot cache, as its
    // fingerprinting step does; the manifests and the journal stay.
    let journal = || std::fs::read(d.root().join(".tether/ops.jsonl")).unwrap_or_default();
    let (manifest, ops) = (d.manifest("db"), journal());
    let (history, uncommitted) = (d.history(), d.uncommitted());
    for args in [
        &["commit", "-m", "mid-write"][..],
        &["commit", "--from-plan", plan.to_str().unwrap()],
    ] {
        let out = d.fails(args, 1);
        let err = stderr(&out);
        assert!(
            err.contains("db is not quiescent: 1 active writer"),
            "{args:?}: {}",
            describe(&out)
        );
        assert!(err.contains("--force"), "{err}");
        assert_eq!(d.manifest("db"), manifest, "{args:?} wrote no manifest");
        assert_eq!(journal(), ops, "{args:?} journaled nothing");
        assert_eq!(d.history(), history, "{args:?} made no commit");
        assert_eq!(d.uncommitted(), uncommitted, "{args:?} staged nothing");
        assert_eq!(store.tags().len(), 1, "{args:?} pinned nothing");
    }
    let out = d.ok(&["commit", "-m", "forced", "--force"]);
    assert!(out.contains("pinned db"), "{out}");
    assert_eq!(store.tags().len(), 2);

    // Once the writer is gone, no --force is needed.
    store.write(json!({"rows": 3}), "three rows");
    store.delete_branch("writers");
    let out = d.ok(&["commit", "-m", "quiet"]);
    assert!(out.contains("pinned db"), "{out}");
}

#[test]
fn storage_options_conditional_put_is_honoured_or_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let server = tether_testkit::S3Server::start("tether-conditional-put");
    let d = Dataset::init_in(Vcs::Git);
    let secrets = d.root().join(".tether/secrets.toml");
    std::fs::write(&secrets, server.secrets_toml()).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let toml = d.root().join("tether.toml");
    let config = std::fs::read_to_string(&toml).unwrap();
    let uri = format!("s3://{}/", server.bucket());

    // A mode tether does not have is refused, not silently replaced.
    std::fs::write(
        &toml,
        format!("{config}\n[backends.file.storage_options]\nconditional_put = \"dynamo:locks\"\n"),
    )
    .unwrap();
    d.ok(&["add", "bucket", &uri, "--kind", "file"]);
    let out = d.fails(&["commit", "-m", "bucket"], 1);
    assert!(
        stderr(&out).contains("`conditional_put` must be \"etag\""),
        "{}",
        describe(&out)
    );
    // The mode it uses is accepted.
    std::fs::write(
        &toml,
        format!("{config}\n[backends.file.storage_options]\nconditional_put = \"etag\"\n"),
    )
    .unwrap();
    d.ok(&["commit", "-m", "bucket"]);
    assert!(d.ok(&["status", "--snapshot"]).contains("clean bucket"));
}

/// `[verify] on_status = true` adds each committed object's cheap verify to
/// `status` as `verify=`: `ok` while its pin holds, `missing` once the pin is
/// gone; an object never committed gets no mark.
#[test]
fn verify_on_status_marks_each_committed_object() {
    let d = Dataset::init();
    let db = d.memory_store("db");
    db.write(json!({"rows": "1"}), "rows");
    d.add_memory("db", &db);
    d.ok(&["commit", "-m", "db"]);
    let config = d.root().join("tether.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("on_status = false"), "{text}");
    std::fs::write(
        &config,
        text.replace("on_status = false", "on_status = true"),
    )
    .unwrap();
    let other = d.memory_store("other");
    other.write(json!({"rows": "2"}), "rows");
    d.add_memory("other", &other);

    let out = d.ok(&["status"]);
    let line = out.lines().find(|l| l.contains(" db")).unwrap_or_default();
    assert!(line.contains("verify=ok"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains(" other"))
        .unwrap_or_default();
    assert!(!line.contains("verify="), "{out}");
    let report = d.json(&["status"], 0);
    let objects = report["objects"].as_array().unwrap();
    assert_eq!(
        objects.iter().find(|o| o["key"] == "db").unwrap()["verify"],
        json!("ok")
    );

    for tag in db.tags() {
        db.delete_tag(&tag);
    }
    let out = d.ok(&["status"]);
    let line = out.lines().find(|l| l.contains(" db")).unwrap_or_default();
    assert!(line.contains("verify=missing"), "{out}");
}

/// spec/09: on the trunk, an object added `--at` a state shows `behind` once
/// its system moved past the pin, from a fresh snapshot and from the cached
/// one; `commit` leaves it at its pin (the spec: `behind` until `pull`), and
/// a trunk `pull` moves it on.
#[test]
fn an_at_object_on_the_trunk_is_behind_once_its_system_moves() {
    let d = Dataset::init_in(Vcs::Git);
    let labels = d.memory_store("labels");
    let v1 = labels.write(json!({"n": 1}), "v1");
    let system = format!("system={}", labels.root.display());
    d.ok(&[
        "add", "labels", "--kind", "memory", "--set", &system, "--at", &v1,
    ]);
    let other = d.memory_store("other");
    d.add_memory("other", &other);
    d.ok(&["commit", "-m", "first"]);
    let state = |report: &Value, key: &str| {
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["key"] == key)
            .unwrap_or_else(|| panic!("{key} in {report}"))["state"]
            .clone()
    };
    let report = d.json(&["status", "--snapshot"], 0);
    assert_eq!(state(&report, "labels"), json!("clean"), "{report}");

    let v2 = labels.write(json!({"n": 2}), "v2");
    other.write(json!({"n": 2}), "v2");
    let out = d.ok(&["status", "--snapshot"]);
    assert!(out.contains("behind labels"), "{out}");
    // A moved branch of an object without `at` is `modified`, as before.
    assert!(out.contains("modified other"), "{out}");
    let report = d.json(&["status", "--no-snapshot"], 0);
    assert_eq!(state(&report, "labels"), json!("behind"), "{report}");

    // commit pins what moved on its branch and leaves the `--at` object.
    let pinned = labels.tags();
    let manifest = d.manifest("labels");
    d.ok(&["commit", "-m", "second"]);
    assert_eq!(d.manifest("labels"), manifest);
    assert_eq!(labels.tags(), pinned);
    let report = d.json(&["status", "--snapshot"], 0);
    assert_eq!(state(&report, "labels"), json!("behind"), "{report}");
    assert_eq!(state(&report, "other"), json!("clean"), "{report}");

    // pull takes it: `at` goes, the head is pinned, and it is clean.
    d.ok(&["pull"]);
    let m = d.manifest("labels");
    assert!(m["locator"].get("at").is_none(), "{m}");
    assert_eq!(m["state"]["snapshot_id"].as_str(), Some(v2.as_str()), "{m}");
    let report = d.json(&["status", "--snapshot"], 0);
    assert_eq!(state(&report, "labels"), json!("clean"), "{report}");
}

/// `add --pick` on a terminal: the store's history, numbered newest first;
/// the number typed (after one that is not on the list) becomes `--at`.
#[test]
fn add_pick_chooses_the_base_state_on_a_terminal() {
    use std::io::Write as _;
    let d = Dataset::init_in(Vcs::Git);
    let labels = d.memory_store("labels");
    let v1 = labels.write(json!({"n": 1}), "first labels");
    let v2 = labels.write(json!({"n": 2}), "second labels");
    let line = format!(
        "{} add labels --kind memory --set system={} --pick",
        env!("CARGO_BIN_EXE_tether"),
        labels.root.display()
    );
    // `script` runs it on a pseudo-terminal fed from this pipe.
    let mut child = d
        .command("script", &d.root())
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run script");
    child.stdin.as_mut().unwrap().write_all(b"9\n2\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = text.find(&v2).unwrap_or_else(|| panic!("{text}"));
    let second = text.find(&v1).unwrap_or_else(|| panic!("{text}"));
    assert!(first < second, "newest first:\n{text}");
    assert!(text.contains("  1  "), "numbered:\n{text}");
    assert!(text.contains("\"9\" is not one of them"), "{text}");
    assert!(text.contains("added labels [memory]"), "{text}");
    let m = d.manifest("labels");
    assert_eq!(m["locator"]["at"].as_str(), Some(v1.as_str()), "{m}");
}

/// `add --pick` with no terminal to ask on: a usage error (exit 2) that says
/// what to do instead, and nothing written.
#[test]
fn add_pick_without_a_terminal_is_a_usage_error() {
    let d = Dataset::init_in(Vcs::Git);
    let labels = d.memory_store("labels");
    let system = format!("system={}", labels.root.display());
    let written = d.written();
    let out = d.fails(
        &[
            "add", "labels", "--kind", "memory", "--set", &system, "--pick",
        ],
        2,
    );
    let err = stderr(&out);
    assert!(
        err.contains("stdin is not a terminal"),
        "{}",
        describe(&out)
    );
    assert!(err.contains("--at"), "{err}");
    assert_eq!(d.written(), written, "a refused pick writes nothing");
    // --pick and --at are one choice.
    d.fails(
        &[
            "add", "labels", "--kind", "memory", "--set", &system, "--pick", "--at", "x",
        ],
        2,
    );
}
