//! `tether pull` end to end, through the binary, as spec/06 ("Positions, and
//! `tether pull`") and spec/09 (`pull`) tell it: on git, with a memory store
//! kept in a local directory (Forkable, standing in for Icechunk) and
//! directories of files (`file`). What pull wrote is read back with git and
//! with plain reads of the stores.

use crate::support::{Dataset, MemoryStore, is_hex, lines};
use serde_json::{Value, json};

/// A trunk dataset: a memory store and a versioned directory (which a pull
/// may move), committed once.
struct Trunk {
    d: Dataset,
    store: MemoryStore,
}

impl Trunk {
    fn new() -> Trunk {
        let d = Dataset::init();
        let store = d.memory_store("imaging");
        store.write(json!({"labels": "0"}), "empty labels");
        d.add_memory("zarr/imaging", &store);
        let raw = d.data().join("raw");
        std::fs::create_dir_all(&raw).unwrap();
        std::fs::write(raw.join("a.tif"), [1u8; 64]).unwrap();
        d.ok(&[
            "add",
            "raw",
            "--kind",
            "file",
            "--file",
            "versioned",
            "../data/raw",
        ]);
        d.ok(&["commit", "-m", "baseline"]);
        Trunk { d, store }
    }

    /// The snapshot the object's manifest records.
    fn recorded(&self, key: &str) -> Value {
        serde_json::to_value(&self.d.manifest(key)["state"]).unwrap()
    }
}

/// `pulled KEY FROM -> TO` lines, `up to date KEY` lines, and the commit line
/// (`skipped KEY: reason` lines are passed over).
fn parse(out: &str) -> (Vec<(String, String, String)>, Vec<String>, String) {
    let mut pulled = Vec::new();
    let mut up_to_date = Vec::new();
    let mut last = String::new();
    for l in lines(out) {
        if let Some(rest) = l.strip_prefix("pulled ") {
            let (key, change) = rest.split_once(' ').expect("pulled KEY CHANGE");
            let (from, to) = change.split_once(" -> ").expect("FROM -> TO");
            pulled.push((key.to_string(), from.to_string(), to.to_string()));
        } else if let Some(key) = l.strip_prefix("up to date ") {
            up_to_date.push(key.to_string());
        } else if l.starts_with("skipped ") {
            // `skipped KEY: reason`; the JSON tests read the reasons.
        } else {
            assert!(last.is_empty(), "one closing line only:\n{out}");
            last = l;
        }
    }
    (pulled, up_to_date, last)
}

#[test]
fn a_trunk_pull_pins_and_commits_what_moved_and_nothing_else() {
    let t = Trunk::new();
    let d = &t.d;
    let base = d.rev("HEAD");

    // Nothing moved: nothing is committed, nothing journaled.
    let ops_before = d.json(&["ops"], 0);
    let written = d.written();
    let (out, _) = d.run(&["pull"], 0);
    let (pulled, up_to_date, last) = parse(&out);
    assert!(pulled.is_empty(), "{out}");
    assert_eq!(up_to_date, ["raw", "zarr/imaging"]);
    assert_eq!(last, "nothing moved; nothing committed on main");
    assert_eq!(d.rev("HEAD"), base);
    assert_eq!(
        d.written(),
        written,
        "a pull that took nothing writes nothing"
    );
    assert_eq!(d.json(&["ops"], 0), ops_before);

    // The world moves: the store's main and the directory's content.
    let old_snapshot = t.store.head();
    let new_snapshot = t.store.write(json!({"labels": "1"}), "relabel");
    std::fs::write(d.data().join("raw/a.tif"), [2u8; 64]).unwrap();
    let old_raw = t.recorded("raw");

    let (out, _) = d.run(&["pull"], 0);
    let (pulled, up_to_date, last) = parse(&out);
    assert!(up_to_date.is_empty(), "{out}");
    assert_eq!(pulled.len(), 2, "{out}");
    assert_eq!(
        pulled[1],
        (
            "zarr/imaging".to_string(),
            format!("snapshot_id={}", &old_snapshot[..12]),
            format!("snapshot_id={}", &new_snapshot[..12]),
        )
    );
    // Only the digest changed (same size, same count), shortened as the
    // spec prints it.
    let (key, from, to) = &pulled[0];
    assert_eq!(key, "raw");
    let old_digest = old_raw["digest"].as_str().unwrap();
    assert_eq!(from, &format!("digest={}…", &old_digest[..6]));
    let new_raw = t.recorded("raw");
    let new_digest = new_raw["digest"].as_str().unwrap();
    assert_ne!(old_digest, new_digest);
    assert_eq!(to, &format!("digest={}…", &new_digest[..6]));
    let short = last
        .strip_prefix("committed ")
        .and_then(|l| l.strip_suffix(" on main"))
        .unwrap_or_else(|| panic!("committed <12 hex> on main: {last:?}"));
    assert!(is_hex(short, 12));
    let head = d.rev("HEAD");
    assert_eq!(&head[..12], short);
    assert_eq!(d.rev("HEAD~1"), base, "one commit on the bookmark");
    assert_eq!(
        d.git(&["log", "-1", "--format=%s"]).trim(),
        "pull main: 2 objects"
    );

    // What it committed: exactly the two manifests and the directory's listing.
    let files = d.git(&["show", "--name-only", "--format=", "HEAD"]);
    let mut files: Vec<&str> = files.lines().collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0].starts_with(".tether/listings/"), "{files:?}");
    assert_eq!(
        &files[1..],
        [
            ".tether/objects/raw.toml",
            ".tether/objects/zarr/imaging.toml"
        ]
    );

    // The new state is pinned in the store, and the manifest names the pin.
    let m = d.manifest("zarr/imaging");
    assert_eq!(
        m["state"]["snapshot_id"].as_str(),
        Some(new_snapshot.as_str())
    );
    let pin_ref = m["pin"]["ref"].as_str().unwrap().to_string();
    assert_eq!(
        t.store.tag(&pin_ref).as_deref(),
        Some(new_snapshot.as_str())
    );
    assert_eq!(d.manifest("raw")["recoverable"].as_bool(), Some(false));
    d.ok(&["verify", "zarr/imaging"]);

    // Journaled as a `pull`, and the new pin is in the pinned index.
    let op = d.newest_op();
    assert_eq!(op["command"], "pull");
    assert_eq!(op["status"], "done");
    assert_eq!(op["result"]["vcs_commit"].as_str(), Some(head.as_str()));
    let index = std::fs::read_to_string(d.root().join(".git/tether-pinned.jsonl")).unwrap();
    assert!(index.contains(&pin_ref), "{index}");

    // --json: the spec's shape.
    let newest = t.store.write(json!({"labels": "2"}), "again");
    let r = d.json(&["pull"], 0);
    assert_eq!(r["bookmark"], "main");
    assert_eq!(r["unchanged"], json!(["raw"]));
    assert_eq!(r["skipped"], json!({}));
    assert_eq!(
        r["committed"]["zarr/imaging"],
        json!({"from": {"snapshot_id": new_snapshot}, "to": {"snapshot_id": newest}})
    );
    let pin_id = r["pinned"]["zarr/imaging"].as_str().unwrap();
    assert_eq!(
        d.manifest("zarr/imaging")["pin"]["id"].as_str(),
        Some(pin_id)
    );
    assert_eq!(r["vcs_commit"].as_str(), Some(d.rev("HEAD").as_str()));
    let r = d.json(&["pull"], 0);
    assert_eq!(r["vcs_commit"], Value::Null);
    assert_eq!(r["committed"], json!({}));
    assert_eq!(r["pinned"], json!({}));
}

#[test]
fn an_immutable_file_that_changed_refuses_the_pull() {
    let t = Trunk::new();
    let d = &t.d;
    let frozen = d.data().join("frozen");
    std::fs::create_dir_all(&frozen).unwrap();
    std::fs::write(frozen.join("x.csv"), "a,b\n").unwrap();
    d.ok(&["add", "frozen", "--kind", "file", "../data/frozen"]);
    d.ok(&["commit", "-m", "frozen"]);

    t.store.write(json!({"labels": "1"}), "relabel");
    std::fs::write(frozen.join("x.csv"), "a,b\n1,2\n").unwrap();
    let written = d.written();
    let tags = t.store.tags();
    let (_, err) = d.run(&["pull"], 1);
    assert!(err.contains("immutable object 'frozen' changed"), "{err}");
    assert_eq!(d.written(), written, "a refused pull writes nothing");
    assert_eq!(t.store.tags(), tags, "and pins nothing");

    // Naming the other objects pulls them; the immutable one stays as it was.
    let (out, _) = d.run(&["pull", "--key", "zarr/", "--key", "raw"], 0);
    let (pulled, up_to_date, last) = parse(&out);
    assert_eq!(pulled.len(), 1, "{out}");
    assert_eq!(pulled[0].0, "zarr/imaging");
    assert_eq!(up_to_date, ["raw"]);
    assert!(last.starts_with("committed "), "{out}");
    let files = d.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), ".tether/objects/zarr/imaging.toml");
}

#[test]
fn uncommitted_edits_a_foreign_bookmark_and_uncommitted_objects() {
    let t = Trunk::new();
    let d = &t.d;
    t.store.write(json!({"labels": "1"}), "relabel");

    // A manifest edited and not committed: refused, naming it.
    d.ok(&["set", "raw", "--file", "immutable"]);
    let written = d.written();
    let (_, err) = d.run(&["pull"], 1);
    assert!(err.contains("uncommitted manifest edits: raw"), "{err}");
    assert!(err.contains("--key"), "{err}");
    assert_eq!(d.written(), written);
    // With --key only the named objects' own edits count.
    let (_, err) = d.run(&["pull", "--key", "raw"], 1);
    assert!(err.contains("uncommitted manifest edits: raw"), "{err}");
    let (out, _) = d.run(&["pull", "--key", "zarr/imaging"], 0);
    assert!(out.starts_with("pulled zarr/imaging "), "{out}");
    d.ok(&["set", "raw", "--file", "versioned"]);

    // Pull fetches the bookmark this working copy is on, and no other.
    let written = d.written();
    let (_, err) = d.run(&["pull", "feature"], 1);
    assert!(
        err.contains("this working copy is on bookmark \"main\", not \"feature\""),
        "{err}"
    );
    assert_eq!(d.written(), written);
    d.ok(&["pull", "main"]);

    // An object added and never committed is skipped with the reason.
    let fresh = d.memory_store("fresh");
    d.add_memory("fresh", &fresh);
    let r = d.json(&["pull"], 0);
    assert_eq!(
        r["skipped"]["fresh"],
        "no commit yet: `tether commit` records it first"
    );
    assert_eq!(r["vcs_commit"], Value::Null);
}

#[test]
fn a_trunk_pull_moves_an_at_object_onto_its_branch() {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    let old = store.write(json!({"labels": "0"}), "old");
    let newer = store.write(json!({"labels": "1"}), "newer");
    let system = format!("system={}", store.root.display());
    d.ok(&[
        "add",
        "zarr/imaging",
        "--kind",
        "memory",
        "--set",
        &system,
        "--at",
        &old,
    ]);
    d.ok(&["commit", "-m", "adopt the old state"]);
    let m = d.manifest("zarr/imaging");
    assert_eq!(m["locator"]["at"].as_str(), Some(old.as_str()));
    assert_eq!(m["state"]["snapshot_id"].as_str(), Some(old.as_str()));

    let (out, _) = d.run(&["pull"], 0);
    assert_eq!(
        lines(&out)[0],
        format!(
            "pulled zarr/imaging snapshot_id={} -> snapshot_id={}",
            &old[..12],
            &newer[..12]
        )
    );
    let m = d.manifest("zarr/imaging");
    assert!(m["locator"].get("at").is_none(), "`at` is dropped: {m}");
    assert_eq!(m["state"]["snapshot_id"].as_str(), Some(newer.as_str()));
    // From now on the object follows its branch.
    let next = store.write(json!({"labels": "2"}), "next");
    let r = d.json(&["pull"], 0);
    assert_eq!(r["committed"]["zarr/imaging"]["to"]["snapshot_id"], next);
}

#[test]
fn a_bookmark_pull_reads_its_working_branches_and_skips_the_rest() {
    let t = Trunk::new();
    let d = &t.d;
    let branch = d.fork_bookmark("relabel", "zarr/imaging");
    assert_eq!(branch, format!("tether.ws.{}.relabel", d.dataset_id()));
    let fork_point = t.store.branch(&branch).unwrap();

    // Upstream moves; the bookmark's own branch does not yet.
    t.store
        .write(json!({"labels": "upstream"}), "upstream moved");
    std::fs::write(d.data().join("raw/a.tif"), [9u8; 64]).unwrap();
    let r = d.json(&["pull"], 0);
    assert_eq!(r["bookmark"], "relabel");
    assert_eq!(r["unchanged"], json!(["zarr/imaging"]));
    assert!(
        r["skipped"]["raw"]
            .as_str()
            .unwrap()
            .starts_with("its system has no branches"),
        "{r}"
    );
    assert_eq!(r["vcs_commit"], Value::Null);

    // A write on the branch is what a pull on the bookmark commits.
    let written_state = t
        .store
        .write_on(&branch, json!({"labels": "relabelled"}), "relabel");
    let written = written_state.clone();
    let (out, _) = d.run(&["pull"], 0);
    let (pulled, _, last) = parse(&out);
    assert_eq!(
        pulled,
        [(
            "zarr/imaging".to_string(),
            format!("snapshot_id={}", &fork_point[..12]),
            format!("snapshot_id={}", &written[..12]),
        )]
    );
    assert!(last.ends_with(" on relabel"), "{last}");
    assert_eq!(d.git(&["branch", "--show-current"]).trim(), "relabel");
    let m = d.manifest("zarr/imaging");
    assert_eq!(m["state"]["snapshot_id"].as_str(), Some(written.as_str()));
    assert_eq!(
        t.store.tag(m["pin"]["ref"].as_str().unwrap()).as_deref(),
        Some(written.as_str())
    );
    // main did not move.
    assert_ne!(d.rev("main"), d.rev("relabel"));
    assert_eq!(d.rev("main"), d.rev("relabel~1"));

    // A working branch the store lost stops the pull, which says what
    // brings it back; after `repair` the pull is up to date.
    t.store.delete_branch(&branch);
    let written = d.written();
    let (_, err) = d.run(&["pull"], 1);
    assert!(
        err.contains(&format!(
            "its working branch {branch} is gone: `tether repair zarr/imaging` forks it again"
        )),
        "{err}"
    );
    assert_eq!(d.written(), written);
    d.ok(&["repair", "zarr/imaging"]);
    assert_eq!(t.store.branch(&branch), Some(written_state));
    let r = d.json(&["pull"], 0);
    assert_eq!(r["unchanged"], json!(["zarr/imaging"]));
}
