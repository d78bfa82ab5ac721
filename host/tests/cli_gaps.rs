//! Flags and handles the spec documents that were missing or inert (issue 26):
//! `restore -f`, `add --port` validated as a port, `open` on a `file` object,
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
