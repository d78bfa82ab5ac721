//! The read-side commands end to end: `open`, `verify`, `diff`, `log` and
//! `ops`, through the real `tether` binary in temp dirs with real git and jj
//! (each test runs once per VCS) and memory-plugin stores kept in local directories. A store is made, and
//! "written to", with plain file writes of the memory plugin's documented
//! layout (`plugins/memory/src/lib.rs`): `snapshots/<id>.json` and
//! `refs/branches/main.json`; pins are `refs/tags/tether.<pin_id>.json`.

use std::path::PathBuf;
use std::process::Output;

use crate::support::{Dataset, Vcs};
use serde_json::{Value, json};
use tether::model::{canonical, ids};

/// A dataset in a fresh git or jj repository, with its own identity.
struct Env {
    d: Dataset,
    root: PathBuf,
    ds: PathBuf,
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Env {
    fn new(vcs: Vcs) -> Env {
        let d = Dataset::init_in(vcs);
        let root = d.tmp().canonicalize().unwrap();
        let ds = d.root();
        Env { d, root, ds }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    fn run_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = self.d.command(env!("CARGO_BIN_EXE_tether"), &self.ds);
        cmd.args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("run tether")
    }

    /// The last dataset commit as the VCS's own revision syntax names it.
    fn head_rev(&self) -> &'static str {
        match self.d.vcs() {
            Vcs::Git => "HEAD",
            Vcs::Jj | Vcs::JjColocated => "@-",
        }
    }

    /// Make the last dataset commit vanish behind tether's back: `git reset
    /// --soft HEAD~1`, or `jj abandon` of it.
    fn drop_last_commit(&self, commit: &str) {
        match self.d.vcs() {
            Vcs::Git => {
                self.d.git(&["reset", "-q", "--soft", "HEAD~1"]);
            }
            Vcs::Jj | Vcs::JjColocated => {
                self.d.jj(&["abandon", commit]);
            }
        }
    }

    /// Run and require exit 0; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "tether {args:?}: {}", describe(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("tether {args:?}: {e}: {text}"))
    }

    /// Run and require exit `code`; (stdout, stderr).
    fn code(&self, code: i32, args: &[&str]) -> (String, String) {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tether {args:?}: {}",
            describe(&out)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// `tether commit -m MESSAGE --json`: (vcs commit, key → pin ref).
    fn commit(&self, message: &str) -> (String, Value) {
        let r = self.json(&["commit", "-m", message, "--json"]);
        (
            r["vcs_commit"].as_str().expect("a vcs commit").to_string(),
            r["pinned"].clone(),
        )
    }

    /// A memory store under the temp dir, at its initial snapshot.
    fn store(&self, name: &str) -> Store {
        let dir = self.root.join(name);
        let store = Store { dir };
        let id = store.write_snapshot("initial snapshot", &[], json!({}));
        store.set_ref("branches", "main", &id);
        store
    }
}

/// A memory store in a local directory, written with plain file writes.
struct Store {
    dir: PathBuf,
}

impl Store {
    fn system(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// Write a snapshot; its id is the first 20 hex of sha256 over the
    /// canonical JSON of `{"message", "parents", "payload"}`.
    fn write_snapshot(&self, message: &str, parents: &[&str], payload: Value) -> String {
        let snap = json!({"message": message, "parents": parents, "payload": payload});
        let text = canonical::to_string(&snap);
        let id = ids::sha256_hex(text.as_bytes())[..20].to_string();
        let path = self.dir.join("snapshots").join(format!("{id}.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        id
    }

    fn ref_path(&self, kind: &str, name: &str) -> PathBuf {
        self.dir
            .join("refs")
            .join(kind)
            .join(format!("{name}.json"))
    }

    fn set_ref(&self, kind: &str, name: &str, id: &str) {
        let path = self.ref_path(kind, name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, json!({"snapshot_id": id}).to_string()).unwrap();
    }

    fn head(&self) -> String {
        let text = std::fs::read_to_string(self.ref_path("branches", "main")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        v["snapshot_id"].as_str().unwrap().to_string()
    }

    /// A new snapshot on `main` with `payload`, as a writer would make it.
    fn write(&self, message: &str, payload: Value) -> String {
        let head = self.head();
        let id = self.write_snapshot(message, &[&head], payload);
        self.set_ref("branches", "main", &id);
        id
    }
}

for_each_vcs!(
    open_at_head_and_at_an_older_commit_gives_the_pin,
    open_of_a_deleted_pin_falls_back_and_a_moved_pin_is_refused,
    verify_reports_ok_missing_and_drifted,
    verify_all_history_checks_each_distinct_pin_once_per_label,
    a_recorded_state_is_unknown_without_deep_and_opens_at_its_state,
    diff_between_two_commits_with_content,
    log_lists_newest_first_and_ids_are_at_values,
    ops_lists_commits_newest_first_and_flags_an_incomplete_entry,
);

/// A dataset with one memory object `data`, committed twice: (env, store,
/// (commit 1, pin ref 1, snapshot 1), (commit 2, pin ref 2, snapshot 2)).
struct TwoCommits {
    env: Env,
    store: Store,
    c1: String,
    pin1: String,
    s1: String,
    c2: String,
    pin2: String,
    s2: String,
}

fn two_commits(vcs: Vcs) -> TwoCommits {
    let env = Env::new(vcs);
    let store = env.store("store");
    let s1 = store.write("plate1: labels", json!({"labels": "zeros", "raw": "r1"}));
    env.ok(&[
        "add",
        "data",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", store.system()),
    ]);
    let (c1, pinned) = env.commit("baseline");
    let pin1 = pinned["data"].as_str().unwrap().to_string();
    let s2 = store.write("relabel", json!({"labels": "ones", "raw": "r1"}));
    let (c2, pinned) = env.commit("relabelled");
    let pin2 = pinned["data"].as_str().unwrap().to_string();
    assert_ne!(pin1, pin2);
    assert_ne!(c1, c2);
    TwoCommits {
        env,
        store,
        c1,
        pin1,
        s1,
        c2,
        pin2,
        s2,
    }
}

fn open_at_head_and_at_an_older_commit_gives_the_pin(vcs: Vcs) {
    let t = two_commits(vcs);
    let sys = t.store.system();
    // At a revision: read-only at that commit's pin.
    assert_eq!(
        t.env.ok(&["open", "data", "-r", &t.c1]).trim(),
        format!("{sys}#{}", t.pin1)
    );
    assert_eq!(
        t.env.ok(&["open", "data", "-r", t.env.head_rev()]).trim(),
        format!("{sys}#{}", t.pin2)
    );
    let h = t.env.json(&["open", "data", "-r", &t.c1[..12], "--json"]);
    assert_eq!(
        h,
        json!({
            "key": "data",
            "read_only": true,
            "address": format!("{sys}#{}", t.pin1),
            "type": "MemoryHandle",
            // The handle's typed fields, as the plugin gave them.
            "fields": {"system": sys.to_string(), "ref": t.pin1, "snapshot_id": h["fields"]["snapshot_id"]},
        })
    );
    // TETHER_REV is the default revision.
    let out = t.env.run_env(&["open", "data"], &[("TETHER_REV", &t.c1)]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{sys}#{}", t.pin1)
    );
    // Without one: a Forkable object opens writable at its working ref (the
    // upstream branch on the trunk).
    let h = t.env.json(&["open", "data", "--json"]);
    assert_eq!(h["address"], json!(format!("{sys}#main")));
    assert_eq!(h["read_only"], json!(false));
    let h = t.env.json(&["open", "data", "--read-only", "--json"]);
    assert_eq!(h["read_only"], json!(true));
    // A revision's state is never writable.
    let (_, err) = t.env.code(1, &["open", "data", "-r", &t.c1, "--writable"]);
    assert!(err.contains("read-only"), "{err}");
    // Unknown key, unknown revision: errors, exit 1.
    t.env.code(1, &["open", "nope"]);
    t.env.code(1, &["open", "data", "-r", "no-such-rev"]);
    // Usage errors exit 2.
    t.env.code(2, &["open"]);
}

fn open_of_a_deleted_pin_falls_back_and_a_moved_pin_is_refused(vcs: Vcs) {
    let t = two_commits(vcs);
    let sys = t.store.system();
    let tag1 = t.store.ref_path("tags", &t.pin1);
    assert!(tag1.exists(), "{} was not created", tag1.display());
    // Deleted: the recorded state is addressable, so open falls back to it.
    std::fs::remove_file(&tag1).unwrap();
    let out = t.env.run(&["open", "data", "-r", &t.c1]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{sys}#{}", t.s1)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning:") && err.contains("repair"), "{err}");
    // Moved: the tag now names another snapshot; refused.
    t.store.set_ref("tags", &t.pin1, &t.s2);
    let (out, err) = t.env.code(1, &["open", "data", "-r", &t.c1]);
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with("error: ") && err.contains("moved"), "{err}");
    assert!(err.contains(&t.pin1), "{err}");
}

fn verify_reports_ok_missing_and_drifted(vcs: Vcs) {
    let t = two_commits(vcs);
    let c1 = &t.c1[..12];
    let c2 = &t.c2[..12];
    assert_eq!(t.env.ok(&["verify"]), "ok data\n");
    let v = t.env.json(&["verify", "--json"]);
    assert_eq!(v["data"]["status"], json!("ok"));
    assert!(v["data"]["message"].is_string());
    // -r: that commit's manifests, labelled with the commit.
    assert_eq!(
        t.env.ok(&["verify", "-r", &t.c1]),
        format!("ok {c1}:data\n")
    );
    // --all-history: every commit, each labelled, in label order (as the
    // spec's examples print them).
    let mut want = [format!("ok {c1}:data"), format!("ok {c2}:data")];
    want.sort();
    assert_eq!(
        t.env.ok(&["verify", "--all-history"]),
        format!("{}\n", want.join("\n"))
    );
    // Selection: an unknown key is an error naming it.
    let (_, err) = t.env.code(1, &["verify", "nope"]);
    assert!(err.contains("nope"), "{err}");

    // Someone deletes the newest pin behind tether's back.
    let tag2 = t.store.ref_path("tags", &t.pin2);
    std::fs::remove_file(&tag2).unwrap();
    let (out, _) = t.env.code(1, &["verify"]);
    assert!(out.starts_with("missing data"), "{out}");
    let (out, _) = t.env.code(1, &["verify", "--all-history", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[format!("{c1}:data")]["status"], json!("ok"));
    assert_eq!(v[format!("{c2}:data")]["status"], json!("missing"));
    // ... and then points it at another snapshot.
    t.store.set_ref("tags", &t.pin2, &t.s1);
    let (out, _) = t.env.code(1, &["verify"]);
    assert!(out.starts_with("drifted data"), "{out}");
    // The older commit is still fine on its own.
    t.env.ok(&["verify", "-r", &t.c1]);
}

fn verify_all_history_checks_each_distinct_pin_once_per_label(vcs: Vcs) {
    let t = two_commits(vcs);
    // A commit that changes nothing of `data` but adds a second object.
    let other = t.env.store("other");
    t.env.ok(&[
        "add",
        "more",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", other.system()),
    ]);
    let (c3, _) = t.env.commit("add more");
    let v = t.env.json(&["verify", "--all-history", "--json"]);
    let labels: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let (c1, c2, c3) = (&t.c1[..12], &t.c2[..12], &c3[..12]);
    let mut want = vec![
        format!("{c1}:data"),
        format!("{c2}:data"),
        format!("{c3}:data"),
        format!("{c3}:more"),
    ];
    want.sort();
    assert_eq!(labels, want);
    // KEY selects from every key history has had.
    let v = t.env.json(&["verify", "--all-history", "more", "--json"]);
    assert_eq!(v.as_object().unwrap().len(), 1);
    assert_eq!(v[format!("{c3}:more")]["status"], json!("ok"));
}

fn a_recorded_state_is_unknown_without_deep_and_opens_at_its_state(vcs: Vcs) {
    let env = Env::new(vcs);
    let store = env.store("store");
    let s1 = store.write("one", json!({"k": "v1"}));
    env.ok(&[
        "add",
        "rec",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", store.system()),
        "--pin",
        "record",
    ]);
    let (c1, pinned) = env.commit("recorded");
    assert_eq!(pinned["rec"], Value::Null);
    let (out, _) = env.code(1, &["verify"]);
    assert!(out.starts_with("unknown rec"), "{out}");
    assert_eq!(env.ok(&["verify", "--deep"]), "ok rec\n");
    // Addressable: a revision opens at the recorded state itself.
    assert_eq!(
        env.ok(&["open", "rec", "-r", &c1]).trim(),
        format!("{}#{s1}", store.system())
    );
    // The state goes away: --deep says so.
    std::fs::remove_file(store.dir.join("snapshots").join(format!("{s1}.json"))).unwrap();
    let (out, _) = env.code(1, &["verify", "--deep", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rec"]["status"], json!("missing"));
}

fn diff_between_two_commits_with_content(vcs: Vcs) {
    let t = two_commits(vcs);
    // Nothing changed since the last commit.
    assert_eq!(t.env.ok(&["diff"]), "no object changed\n");
    assert_eq!(t.env.json(&["diff", "--json"]), json!([]));
    let out = t.env.ok(&["diff", &t.c1, &t.c2, "--content"]);
    assert_eq!(out, "changed data [+0 -0 ~1 keys]\n  modified labels\n");
    let d = t.env.json(&["diff", &t.c1, &t.c2, "--content", "--json"]);
    let pin_id = |r: &str| r.strip_prefix("tether.").unwrap().to_string();
    assert_eq!(
        d,
        json!([{
            "key": "data",
            "change": "changed",
            "why": ["state", "pin"],
            "a": pin_id(&t.pin1),
            "b": pin_id(&t.pin2),
            "detail": {
                "summary": "+0 -0 ~1 keys",
                "unit": "keys",
                "added": 0, "removed": 0, "modified": 1,
                "truncated": false,
                "note": "",
                "entries": [{"path": "labels", "change": "modified", "detail": ""}],
            },
            "detail_error": null,
        }])
    );
    // Without --content: no detail. Reversed: the same change.
    assert_eq!(t.env.ok(&["diff", &t.c2, &t.c1]), "changed data\n");
    // --limit caps the entries shown.
    t.store
        .write("more", json!({"labels": "twos", "raw": "r2", "new": "n"}));
    let (c3, _) = t.env.commit("third");
    let out = t.env.ok(&["diff", &t.c2, &c3, "--content", "--limit", "1"]);
    assert_eq!(
        out,
        "changed data [+1 -0 ~2 keys]\n  modified labels\n  ... 2 more\n"
    );
    // One revision: against the working tree; a new object is `added`.
    let other = t.env.store("other");
    t.env.ok(&[
        "add",
        "more",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", other.system()),
    ]);
    assert_eq!(t.env.ok(&["diff", &t.c1]), "changed data\nadded more\n");
    assert_eq!(t.env.ok(&["diff", &t.c1, "--key", "more"]), "added more\n");
    let (_, err) = t.env.code(1, &["diff", "--key", "nope"]);
    assert!(err.contains("nope"), "{err}");
}

fn log_lists_newest_first_and_ids_are_at_values(vcs: Vcs) {
    let t = two_commits(vcs);
    let out = t.env.ok(&["log", "data"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with(&format!("{}  ", t.s2)), "{out}");
    assert!(lines[0].contains("relabel"), "{out}");
    assert!(
        lines[0].contains("main") && lines[0].contains(&t.pin2),
        "{out}"
    );
    assert!(lines[1].starts_with(&format!("{}  ", t.s1)), "{out}");
    assert!(lines[1].contains(&t.pin1), "{out}");
    assert!(lines[2].contains("initial snapshot"), "{out}");
    let j = t.env.json(&["log", "data", "-n", "2", "--json"]);
    let entries = j.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["id"], json!(t.s2));
    assert!(
        entries[0]["refs"]
            .as_array()
            .unwrap()
            .contains(&json!("main"))
    );
    for field in ["id", "when", "message", "refs"] {
        assert!(entries[0].get(field).is_some(), "{field}: {j}");
    }
    // --ref starts elsewhere (a pin, here).
    let j = t.env.json(&["log", "data", "--ref", &t.pin1, "--json"]);
    assert_eq!(j[0]["id"], json!(t.s1));
    // An unregistered object by its locator.
    let j = t
        .env
        .json(&["log", t.store.system(), "--kind", "memory", "--json"]);
    assert_eq!(j[0]["id"], json!(t.s2));
    // An entry id is a valid `add --at`.
    t.env.ok(&[
        "add",
        "old",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", t.store.system()),
        "--at",
        &t.s1,
    ]);
    let snap = t.env.json(&["snapshot", "old", "--json"]);
    assert_eq!(snap["old"]["snapshot_id"], json!(t.s1));
}

fn ops_lists_commits_newest_first_and_flags_an_incomplete_entry(vcs: Vcs) {
    let t = two_commits(vcs);
    let j = t.env.json(&["ops", "--json"]);
    let entries = j.as_array().unwrap();
    // The two commits, and the `add` before them (journaled so `undo` can
    // take it back).
    assert_eq!(entries.len(), 3, "{j}");
    assert_eq!(entries[2]["command"], json!("add"));
    let entries = &entries[..2];
    for e in entries {
        assert_eq!(e["command"], json!("commit"));
        assert_eq!(e["status"], json!("done"));
        for field in [
            "id",
            "at",
            "command",
            "plan",
            "result",
            "pre",
            "undoes",
            "undone_by",
            "status",
            "parent",
            "progress",
            "vcs_commit_gone",
        ] {
            assert!(e.get(field).is_some(), "{field}: {e}");
        }
    }
    assert_eq!(entries[0]["result"]["vcs_commit"], json!(t.c2));
    assert_eq!(entries[1]["result"]["vcs_commit"], json!(t.c1));
    assert_eq!(entries[0]["vcs_commit_gone"], json!(false));
    let out = t.env.ok(&["ops"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[2].contains("add  added data [memory]"), "{out}");
    assert!(
        lines[0].contains("commit") && lines[0].contains(&t.c2[..12]),
        "{out}"
    );
    assert!(!out.contains("INCOMPLETE"), "{out}");

    // An operation that started and never finished (a crash).
    let ops = t.env.ds.join(".tether/ops.jsonl");
    let mut text = std::fs::read_to_string(&ops).unwrap();
    text.push_str(
        &json!({
            "record": "started", "id": "ffffffff0000", "at": "2099-01-01T00:00:00.000Z",
            "command": "commit", "plan": null, "pre": {}, "parent": null, "undoes": null,
        })
        .to_string(),
    );
    text.push('\n');
    std::fs::write(&ops, text).unwrap();
    let out = t.env.ok(&["ops"]);
    let first = out.lines().next().unwrap();
    assert!(
        "ffffffff0000".starts_with(first.split(' ').next().unwrap())
            && first.ends_with("INCOMPLETE"),
        "{out}"
    );
    let j = t.env.json(&["ops", "-n", "1", "--json"]);
    assert_eq!(j.as_array().unwrap().len(), 1);
    assert_eq!(j[0]["status"], json!("started"));

    // A dataset commit the VCS no longer has is flagged.
    t.env.drop_last_commit(&t.c2);
    let out = t.env.ok(&["ops"]);
    let line = out.lines().find(|l| l.contains(&t.c2[..12])).unwrap();
    assert!(line.contains("(vcs commit gone)"), "{out}");
}

/// A reader that goes away (`tether verify --json | head -1`) ends the
/// output quietly: no panic on stderr, and the exit code still says how the
/// command went.
#[test]
fn a_closed_stdout_ends_the_output_not_the_command() {
    let t = two_commits(Vcs::Git);
    let closed = |args: &[&str]| {
        let mut child = t
            .env
            .d
            .command(env!("CARGO_BIN_EXE_tether"), &t.env.ds)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before the command writes anything.
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    };
    for args in [
        &["verify", "--all-history", "--json"][..],
        &["log", "data"],
        &["ops"],
        &["status"],
    ] {
        let out = closed(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
        assert!(out.stderr.is_empty(), "{args:?}: {}", describe(&out));
    }
    // A pin gone: verify still exits 1.
    std::fs::remove_file(t.store.ref_path("tags", &t.pin2)).unwrap();
    let out = closed(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(out.stderr.is_empty(), "{}", describe(&out));
}
