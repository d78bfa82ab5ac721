//! `tether undo` end to end, through the `tether` binary on git with memory
//! stores kept in local directories: the undo table of spec/09 ("ops, undo,
//! repair"), spec/06 "Undo", and worked example 6 of spec/08 ("Recover").
//! What undo did to the stores is read back with plain file reads of the
//! stores, and what it did to the checkout with git itself.

use std::collections::BTreeSet;
use std::process::Output;

use crate::support::{Dataset, MemoryStore, describe, lines, stderr, stdout};
use serde_json::{Value, json};

/// A dataset with two memory objects, `db` and `zarr/imaging`, committed
/// once on `main`.
struct Story {
    d: Dataset,
    db: MemoryStore,
    img: MemoryStore,
}

impl Story {
    fn new() -> Story {
        let d = Dataset::init();
        let db = d.memory_store("db");
        db.write(json!({"rows": "1"}), "first rows");
        let img = d.memory_store("imaging");
        img.write(json!({"labels": "0"}), "empty labels");
        d.add_memory("db", &db);
        d.add_memory("zarr/imaging", &img);
        d.ok(&["commit", "-m", "baseline"]);
        Story { d, db, img }
    }

    /// The working branch of `bookmark` in every store.
    fn branch(&self, bookmark: &str) -> String {
        format!("tether.ws.{}.{bookmark}", self.d.dataset_id())
    }

    /// The id of the newest journal entry, checked to be `command`'s.
    fn newest(&self, command: &str) -> String {
        let ops = self.d.ops();
        assert_eq!(ops[0]["command"], json!(command), "{ops:?}");
        ops[0]["id"].as_str().unwrap().to_string()
    }

    fn undo(&self, args: &[&str]) -> Output {
        let mut all = vec!["undo"];
        all.extend_from_slice(args);
        self.d.tether(&all)
    }
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Worked example 6, "An unwanted `new`": on `sweep`, `new -b scratch
/// --eager` forks every branch; `undo` deletes exactly those branches, puts
/// the workspace file and the VCS working copy back, and the bookmark is
/// gone. A second `undo` takes back the `new` before it (newest first).
#[test]
fn undo_of_an_eager_new_deletes_its_branches_and_puts_the_checkout_back() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "sweep", "--eager"]);
    let sweep = s.branch("sweep");
    let sweep_heads = (s.db.branch(&sweep), s.img.branch(&sweep));
    assert!(sweep_heads.0.is_some() && sweep_heads.1.is_some());
    let ws_before = d.workspace_text();
    let head_before = d.rev("HEAD");

    d.ok(&["new", "-b", "scratch", "--eager"]);
    let scratch = s.branch("scratch");
    assert!(s.db.branch(&scratch).is_some());
    assert!(s.img.branch(&scratch).is_some());
    assert_eq!(d.git_branch(), "scratch");
    let new_id = s.newest("new");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {new_id} (new: forked db, zarr/imaging)"),
            format!("  restored   db: deleted {scratch}"),
            format!("  restored   zarr/imaging: deleted {scratch}"),
            "  restored   working copy: back on sweep".to_string(),
            "  restored   bookmark scratch deleted".to_string(),
            "  restored   workspace.toml restored".to_string(),
        ]
    );
    assert_eq!(s.db.branch(&scratch), None, "the created branch is deleted");
    assert_eq!(s.img.branch(&scratch), None);
    assert_eq!(
        (s.db.branch(&sweep), s.img.branch(&sweep)),
        sweep_heads,
        "sweep's own branches were never in play"
    );
    assert_eq!(d.workspace_text(), ws_before, "workspace.toml is put back");
    assert_eq!(d.git_branch(), "sweep");
    assert_eq!(d.rev("HEAD"), head_before);
    assert_eq!(d.git(&["branch", "--list", "scratch"]), "", "bookmark gone");

    // The log: the undo, and its target flagged.
    let ops = d.ops();
    let undo_id = ops[0]["id"].as_str().unwrap().to_string();
    assert_eq!(ops[0]["command"], json!("undo"));
    assert_eq!(ops[0]["undoes"], json!(new_id));
    assert_eq!(ops[1]["id"], json!(new_id));
    assert_eq!(ops[1]["undone_by"], json!(undo_id));
    let text = d.ok(&["ops"]);
    let line = text
        .lines()
        .find(|l| {
            l.split(' ')
                .next()
                .is_some_and(|short| new_id.starts_with(short))
        })
        .unwrap();
    assert!(line.ends_with(&format!("(undone by {undo_id})")), "{text}");

    // Several slips, several undos: the next one is `new -b sweep`.
    let sweep_id = ops[2]["id"].as_str().unwrap().to_string();
    assert_eq!(ops[2]["command"], json!("new"));
    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out)[0],
        format!("undid {sweep_id} (new: forked db, zarr/imaging)")
    );
    assert!(
        out.contains("restored   working copy: back on main"),
        "{out}"
    );
    assert!(out.contains("restored   bookmark sweep deleted"), "{out}");
    assert_eq!(s.db.branch(&sweep), None);
    assert_eq!(s.img.branch(&sweep), None);
    assert_eq!(d.git_branch(), "main");
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert!(ws.get("working_refs").is_none(), "{ws}");
    assert_eq!(
        ws["bookmark"].as_str(),
        Some("main"),
        "back as before any new: {ws}"
    );
}

/// Undoing a commit: `git reset --soft` to its parent, the manifests become
/// working-tree changes, the pins stay; refused once it is no longer the
/// working copy's parent, with nothing written.
#[test]
fn undo_of_a_commit_uncommits_it_and_the_pins_stay() {
    let s = Story::new();
    let d = &s.d;
    let c1 = d.rev("HEAD");
    s.db.write(json!({"rows": "2"}), "more rows");
    d.ok(&["commit", "-m", "more rows"]);
    let c2 = d.rev("HEAD");
    let pin = d.manifest("db")["pin"]["ref"].as_str().unwrap().to_string();
    let manifest = d.manifest("db");
    let commit_id = s.newest("commit");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!(
                "undid {commit_id} (commit: pinned db; committed {})",
                &c2[..12]
            ),
            format!(
                "  restored   uncommitted {}: the manifests are working-tree changes again (the pins stay)",
                &c2[..12]
            ),
        ]
    );
    assert_eq!(d.rev("HEAD"), c1, "HEAD is back on the parent");
    assert_eq!(d.git_branch(), "main");
    assert_eq!(
        d.git(&["diff", "--cached", "--name-only"]),
        ".tether/objects/db.toml\n",
        "the manifest is an edit again"
    );
    assert_eq!(d.manifest("db"), manifest, "the working tree keeps it");
    assert!(s.db.tag(&pin).is_some(), "the pin stays");
    let text = d.ok(&["ops"]);
    let line = text
        .lines()
        .find(|l| {
            l.split(' ')
                .next()
                .is_some_and(|short| commit_id.starts_with(short))
        })
        .unwrap();
    assert!(line.contains("(undone by "), "{text}");
    assert!(line.contains("(vcs commit gone)"), "{text}");

    // A commit the working copy moved on from is refused, nothing written.
    s.db.write(json!({"rows": "3"}), "even more rows");
    d.ok(&["commit", "-m", "rows 3"]);
    let tether_commit = s.newest("commit");
    std::fs::write(d.root().join("README"), "hello\n").unwrap();
    d.git(&["add", "README"]);
    d.git(&["commit", "-q", "-m", "readme on top"]);
    let head = d.rev("HEAD");
    let before = d.written();
    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot undo {tether_commit} (commit)")),
        "{err}"
    );
    assert!(err.contains("no longer the working copy's parent"), "{err}");
    assert_eq!(d.written(), before, "a refused undo writes nothing");
    assert_eq!(d.rev("HEAD"), head);
}

/// The first writable `open` of a lazily forked object made its branch;
/// undoing it deletes the branch and puts the pending fork back. Then the
/// `new` itself.
#[test]
fn undo_of_a_lazy_fork_deletes_the_branch_and_restores_the_pending_fork() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "lazy"]);
    let b = s.branch("lazy");
    assert_eq!(s.db.branch(&b), None, "lazy: nothing forked yet");
    let ws_after_new = d.workspace_text();
    let new_id = s.newest("new");

    let addr = d.ok(&["open", "db", "--writable"]);
    assert!(addr.trim().ends_with(&format!("#{b}")), "{addr}");
    assert!(s.db.branch(&b).is_some());
    let open_id = s.newest("open");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {open_id} (open: forked db)"),
            format!("  restored   db: deleted {b}"),
            "  restored   workspace.toml restored".to_string(),
        ]
    );
    assert_eq!(s.db.branch(&b), None);
    assert_eq!(
        d.workspace_text(),
        ws_after_new,
        "the fork is pending again"
    );
    assert_eq!(d.git_branch(), "lazy");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {new_id} (new: on lazy)"),
            "  restored   working copy: back on main".to_string(),
            "  restored   bookmark lazy deleted".to_string(),
            "  restored   workspace.toml restored".to_string(),
        ]
    );
    assert_eq!(d.git_branch(), "main");
    assert_eq!(d.git(&["branch", "--list", "lazy"]), "");
}

/// `undo ID` of an older operation: only the workspace fields it changed
/// that no later operation changed again come back; the rest are skipped.
#[test]
fn undo_of_an_older_new_skips_the_fields_a_later_operation_changed() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "lazy"]);
    let new_id = s.newest("new");
    d.ok(&["open", "db", "--writable"]);
    let b = s.branch("lazy");

    let out = d.ok(&["undo", &new_id]);
    let ls = lines(&out);
    assert_eq!(ls[0], format!("undid {new_id} (new: on lazy)"));
    assert!(
        ls.contains(&"  restored   working copy: back on main".to_string()),
        "{out}"
    );
    assert!(
        ls.contains(
            &"  skipped    workspace.toml pending_forks.db: changed since by a later operation; left as it is"
                .to_string()
        ),
        "{out}"
    );
    assert!(
        ls.iter()
            .any(|l| l.starts_with("  restored   workspace.toml: ")
                && l.contains("bookmark")
                && l.contains("pending_forks.zarr/imaging")),
        "{out}"
    );
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert_eq!(ws["bookmark"].as_str(), Some("main"), "{ws}");
    assert_eq!(
        ws["working_refs"]["db"].as_str(),
        Some(b.as_str()),
        "the open's working ref is not the new's to take back: {ws}"
    );
    assert!(s.db.branch(&b).is_some(), "the open made it, not the new");
}

/// `promote` is never undone; the refusal prints each base branch's head
/// before the move, and nothing changes.
#[test]
fn undo_of_a_promote_is_refused_with_the_old_base_heads() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "feat", "--eager"]);
    let main_before = s.db.head();
    s.db.write_on(&s.branch("feat"), json!({"rows": "feat"}), "feature rows");
    d.ok(&["commit", "-m", "feature"]);
    d.ok(&["promote"]);
    let promote_id = s.newest("promote");
    let main_after = s.db.head();
    assert_ne!(main_after, main_before, "the promote moved db's main");

    let before = d.written();
    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "operation {promote_id} (promote) cannot be undone"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("db: snapshot_id={main_before}")),
        "the old head is printed: {err}"
    );
    assert_eq!(stdout(&out), "");
    assert_eq!(d.written(), before);
    assert_eq!(s.db.head(), main_after, "a base never moves backwards");
    // Named by id, the same.
    let out = s.undo(&[&promote_id]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    assert_eq!(d.written(), before);
}

/// A created branch that gained writes stops the undo (nothing changes)
/// until `--discard`, which deletes it with its writes.
#[test]
fn a_created_branch_with_writes_is_kept_unless_discard() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "scratch", "--eager"]);
    let b = s.branch("scratch");
    let written =
        s.db.write_on(&b, json!({"rows": "scratch"}), "scratch rows");
    let new_id = s.newest("new");

    let before = d.written();
    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "db: {b} gained writes since it was forked (snapshot_id={written})"
        )),
        "{err}"
    );
    assert!(err.contains("--discard"), "{err}");
    assert_eq!(d.written(), before, "nothing changed");
    assert_eq!(s.db.branch(&b).as_deref(), Some(written.as_str()));
    assert!(s.img.branch(&b).is_some());

    let out = d.ok(&["undo", "--discard", "--json"]);
    let j: Value = serde_json::from_str(&out).unwrap();
    let keys: BTreeSet<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "undone",
            "command",
            "undo_id",
            "restored",
            "irreversible",
            "skipped"
        ]),
        "the JSON shape of spec/09: {j}"
    );
    assert_eq!(j["undone"], json!(new_id));
    assert_eq!(j["command"], json!("new"));
    assert_eq!(j["undo_id"], d.ops()[0]["id"]);
    assert_eq!(
        j["restored"],
        json!([
            format!("db: deleted {b} (its writes discarded)"),
            format!("zarr/imaging: deleted {b}"),
            "working copy: back on main",
            "bookmark scratch deleted",
            "workspace.toml restored",
        ])
    );
    assert_eq!(j["irreversible"], json!([]));
    assert_eq!(j["skipped"], json!([]));
    assert_eq!(s.db.branch(&b), None);
    assert_eq!(s.img.branch(&b), None);
}

/// A branch an operation *reset* cannot be put back: reported IRREVERSIBLE
/// with its old head, exit 3; the undo of the `new` before it then deletes
/// the branch it created (back at its fork point).
#[test]
fn a_reset_branch_is_irreversible_with_its_old_head() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "x", "--eager"]);
    let first = s.newest("new");
    let b = s.branch("x");
    let fork_point = s.db.branch(&b).unwrap();
    let writes = s.db.write_on(&b, json!({"rows": "x"}), "x rows");
    d.ok(&["new", "--eager", "--discard"]);
    let second = s.newest("new");
    assert_eq!(
        s.db.branch(&b),
        Some(fork_point.clone()),
        "reset onto the pin"
    );

    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(3), "{}", describe(&out));
    let ls = lines(&stdout(&out));
    assert_eq!(ls[0], format!("undid {second} (new: forked db)"));
    assert!(
        ls.contains(&format!(
            "  IRREVERSIBLE db: {b} was reset and stays where it is; its head before was \
             snapshot_id={writes} (`tether restore` or `tether new --discard` puts it where you want)"
        )),
        "{ls:?}"
    );
    assert_eq!(
        s.db.branch(&b),
        Some(fork_point),
        "left where the reset put it"
    );
    let j = d.ops();
    assert_eq!(j[1]["undone_by"], j[0]["id"], "undone, though partly");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out)[0],
        format!("undid {first} (new: forked db, zarr/imaging)")
    );
    assert_eq!(s.db.branch(&b), None);
    assert_eq!(s.img.branch(&b), None);
    assert_eq!(d.git_branch(), "main");
}

/// `set`, `remove` and `add` are journaled with the manifests they replaced,
/// and each undo restores exactly those.
#[test]
fn undo_of_set_remove_and_add_restores_the_manifests() {
    let d = Dataset::init();
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    let add_id = d.ops()[0]["id"].as_str().unwrap().to_string();
    let path = d.root().join(".tether/objects/s.toml");
    let added = std::fs::read_to_string(&path).unwrap();

    d.ok(&["set", "s", "--pin", "record"]);
    let set_id = d.ops()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(d.manifest("s")["policy"]["pin"].as_str(), Some("record"));
    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {set_id} (set)"),
            "  restored   s: pin back to native".to_string()
        ]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), added);

    d.ok(&["remove", "s"]);
    let remove_id = d.ops()[0]["id"].as_str().unwrap().to_string();
    assert!(!path.exists());
    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {remove_id} (remove: removed s)"),
            "  restored   s: manifest restored".to_string()
        ]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), added);

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {add_id} (add: added s [memory])"),
            "  restored   s: manifest removed".to_string()
        ]
    );
    assert!(!path.exists());

    let before = d.written();
    let out = d.tether(&["undo"]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("nothing to undo"),
        "{}",
        describe(&out)
    );
    assert_eq!(d.written(), before);

    // An add whose manifest a commit changed since is left alone.
    d.add_memory("s", &store);
    let add_again = d.ops()[0]["id"].as_str().unwrap().to_string();
    d.ok(&["commit", "-m", "s"]);
    let committed = std::fs::read_to_string(&path).unwrap();
    let out = d.ok(&["undo", &add_again]);
    assert_eq!(
        lines(&out),
        [
            format!("undid {add_again} (add: added s [memory])"),
            format!("  skipped    s: its manifest changed since add {add_again}; left as it is"),
        ]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), committed);
}

#[test]
fn undo_help_says_what_it_does_and_exit_3() {
    let d = Dataset::new();
    let out = d.tether(&["undo", "--help"]);
    assert_eq!(code(&out), Some(0));
    let help = stdout(&out);
    for part in [
        "Reverse an operation where the stores still allow it.",
        "--discard",
        "Delete the branches the operation created even if they gained writes",
        "Exit code 3 when part of the work could not be reversed; the rest was.",
        "promote: refused",
    ] {
        assert!(help.contains(part), "{part:?} in:\n{help}");
    }
}

/// A `new` whose bookmark this checkout still works on, under a working
/// copy that moved on since (a commit on it), is refused: undoing it would
/// leave that commit behind. Nothing changes.
#[test]
fn undo_of_a_new_whose_working_copy_moved_on_is_refused() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "x", "--eager"]);
    let new_id = s.newest("new");
    let b = s.branch("x");
    s.db.write_on(&b, json!({"rows": "x"}), "x rows");
    d.ok(&["commit", "-m", "x rows"]);

    let before = d.written();
    let out = s.undo(&[&new_id]);
    assert_eq!(code(&out), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot undo {new_id} (new): this checkout still works on x and its working copy moved on since"
        )),
        "{err}"
    );
    assert_eq!(d.written(), before, "nothing changed");
    assert!(s.db.branch(&b).is_some() && s.img.branch(&b).is_some());
}

/// A lazily forked branch whose writes a commit pinned can go: the pin
/// keeps the state, so undoing the fork loses nothing.
#[test]
fn a_created_branch_whose_writes_are_pinned_is_deleted() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "lazy"]);
    d.ok(&["open", "db", "--writable"]);
    let open_id = s.newest("open");
    let b = s.branch("lazy");
    let head = s.db.write_on(&b, json!({"rows": "lazy"}), "lazy rows");
    d.ok(&["commit", "-m", "lazy rows"]);
    assert_eq!(
        s.db.tag(d.manifest("db")["pin"]["ref"].as_str().unwrap()),
        Some(head),
        "the commit pinned the branch's writes"
    );

    let out = d.ok(&["undo", &open_id]);
    assert_eq!(
        lines(&out)[..2],
        [
            format!("undid {open_id} (open: forked db)"),
            format!("  restored   db: deleted {b}"),
        ]
    );
    assert_eq!(s.db.branch(&b), None);
}

/// `gc`: the working refs it forgot come back; the pins it released are
/// IRREVERSIBLE (exit 3).
#[test]
fn undo_of_gc_remembers_forgotten_refs_and_reports_released_pins() {
    let s = Story::new();
    let d = &s.d;
    d.ok(&["new", "-b", "x"]);
    d.ok(&["open", "db", "--writable"]);
    let b = s.branch("x");
    let before: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    d.ok(&["remove", "db"]);
    d.ok(&["gc", "--no-dry-run"]);
    let gc_id = s.newest("gc");
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert!(ws.get("working_refs").is_none(), "gc forgot it: {ws}");

    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out)[1..],
        [format!("  restored   db: working ref {b} remembered again")],
        "{out}"
    );
    assert!(
        lines(&out)[0].starts_with(&format!("undid {gc_id} (gc: ")),
        "{out}"
    );
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert_eq!(ws["working_refs"]["db"].as_str(), Some(b.as_str()), "{ws}");
    // ... with the fork point `promote` compares against and the base state
    // the stale check reads, exactly as before gc forgot them.
    for table in ["fork_points", "base_states"] {
        assert!(before[table].get("db").is_some(), "{table}: {before}");
        assert_eq!(
            ws[table].get("db"),
            before[table].get("db"),
            "{table}: {ws}"
        );
    }

    // A pin only a commit git no longer has referenced is released by gc;
    // undo cannot bring it back.
    let s = Story::new();
    let d = &s.d;
    s.db.write(json!({"rows": "2"}), "more rows");
    d.ok(&["commit", "-m", "more rows"]);
    let pin = d.manifest("db")["pin"]["ref"].as_str().unwrap().to_string();
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(s.db.tag(&pin), None, "gc released it");
    let gc_id = s.newest("gc");
    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(3), "{}", describe(&out));
    let ls = lines(&stdout(&out));
    assert!(ls[0].starts_with(&format!("undid {gc_id} (gc: ")), "{ls:?}");
    assert!(
        ls.contains(&format!(
            "  IRREVERSIBLE db: pin {pin} released (`tether repair` recreates a pin a manifest still names)"
        )),
        "{ls:?}"
    );
    assert_eq!(d.ops()[1]["undone_by"], d.ops()[0]["id"]);
}

/// Worked example 6, "One object's branch on the wrong state" and "Several
/// things in a row": undoing a `restore` reports a branch it reset as
/// IRREVERSIBLE with its old head, and deletes one it created.
#[test]
fn undo_of_restore_reports_a_reset_branch_and_deletes_a_created_one() {
    let s = Story::new();
    let d = &s.d;
    let c1 = d.rev("HEAD");
    s.db.write(json!({"rows": "2"}), "more rows");
    d.ok(&["commit", "-m", "more rows"]);
    d.ok(&["new", "-b", "sweep"]);
    d.ok(&["open", "db", "--writable"]);
    let b = s.branch("sweep");
    let db_head = s.db.branch(&b).unwrap();

    d.ok(&["restore", "db", "--from", &c1]);
    let restore_id = s.newest("restore");
    assert_ne!(
        s.db.branch(&b),
        Some(db_head.clone()),
        "reset onto c1's pin"
    );
    let out = s.undo(&[]);
    assert_eq!(code(&out), Some(3), "{}", describe(&out));
    let ls = lines(&stdout(&out));
    assert_eq!(ls[0], format!("undid {restore_id} (restore: forked db)"));
    assert!(
        ls.contains(&format!(
            "  IRREVERSIBLE db: {b} was reset and stays where it is; its head before was \
             snapshot_id={db_head} (`tether restore` or `tether new --discard` puts it where you want)"
        )),
        "{ls:?}"
    );

    // zarr/imaging had no branch on sweep yet: the restore creates it, and
    // its undo deletes it again.
    assert_eq!(s.img.branch(&b), None);
    d.ok(&["restore", "zarr/imaging", "--from", &c1]);
    let restore_id = s.newest("restore");
    assert!(s.img.branch(&b).is_some());
    let ws_before = d.workspace_text();
    let out = d.ok(&["undo"]);
    assert_eq!(
        lines(&out)[..2],
        [
            format!("undid {restore_id} (restore: forked zarr/imaging)"),
            format!("  restored   zarr/imaging: deleted {b}"),
        ],
        "{out}"
    );
    assert_eq!(
        s.img.branch(&b),
        None,
        "sweep has exactly the branches it had"
    );
    assert_ne!(
        d.workspace_text(),
        ws_before,
        "its working ref is gone again"
    );
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert!(ws["working_refs"].get("zarr/imaging").is_none(), "{ws}");
}

/// spec/06, "Undo": an undone commit leaves its manifests as edits, and
/// committing again records them (the pins were never released); a removed
/// object is committed the same way.
#[test]
fn commit_again_after_undo_and_after_remove() {
    let d = crate::support::Dataset::init();
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    img.write(serde_json::json!({"v": 2}), "v2");
    d.ok(&["commit", "-m", "v2"]);
    let v2 = d.rev("HEAD");
    d.ok(&["undo"]);
    assert_ne!(d.rev("HEAD"), v2, "uncommitted");
    let out = d.ok(&["commit", "-m", "v2 again"]);
    assert!(out.contains("committed"), "{out}");
    assert_eq!(
        d.git(&["show", "HEAD:.tether/objects/img.toml"]),
        d.git(&["show", &format!("{v2}:.tether/objects/img.toml")]),
        "the same manifest, committed again"
    );
    d.ok(&["remove", "img"]);
    let out = d.ok(&["commit", "-m", "drop img"]);
    assert!(out.contains("committed"), "{out}");
    assert!(d.git(&["ls-files", ".tether/objects"]).trim().is_empty());
}
