//! The `icechunk` plugin against the real Icechunk library: Python
//! `icechunk` 2.3 and `zarr` (the pinned environment `cargo xtask setup`
//! makes) create repositories, write arrays and commit; tether pins, forks,
//! promotes, unpins and creates through the `tether` binary and the host's
//! plugin client; Python then reads back what tether wrote (tags, branches,
//! `tether.owner`, tombstones) and tether reads back what Python wrote.

use std::path::Path;
use std::sync::Arc;

use crate::support::{Dataset, describe, lines, stdout};
use serde_json::{Value, json};
use tether::plugin::{
    BackendError, Expected, ObjectClient, Plugin, Runtime, RuntimeConfig, Target, VerifyStatus,
};
use tether_testkit::{block_on, cache_dir, first_party_plugin};

/// Helpers every script starts with. Scripts print one JSON document.
const PRELUDE: &str = r#"
import json, sys
import icechunk, zarr
import numpy as np

def storage(path):
    return icechunk.local_filesystem_storage(path)

def open_repo(path):
    return icechunk.Repository.open(storage(path))

def read(session, name="temp"):
    return zarr.open_array(session.store, path=name, mode="r")[:].tolist()

def session_at(repo, ref):
    if ref in repo.list_branches():
        return repo.readonly_session(branch=ref)
    if ref in repo.list_tags():
        return repo.readonly_session(tag=ref)
    return repo.readonly_session(snapshot_id=ref)

def write(repo, branch, values, message, name="temp"):
    session = repo.writable_session(branch)
    zarr.open_array(session.store, path=name, mode="r+")[:] = values
    return session.commit(message)

def out(value):
    print(json.dumps(value))
"#;

/// After a script that finished: skip the interpreter's teardown, in which
/// icechunk's native threads once took the process down with a signal after
/// every line was printed (what Python read is the test, not its exit).
const EPILOGUE: &str = "\nsys.stdout.flush()\nimport os\nos._exit(0)\n";

/// Run `script` (after the prelude) with `args` as `sys.argv[1:]`; its JSON.
fn py(script: &str, args: &[&str]) -> Value {
    let out = std::process::Command::new(tether_testkit::python())
        .arg("-c")
        .arg(format!("{PRELUDE}\n{script}{EPILOGUE}"))
        .args(args)
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

/// A repository with array `temp` = [1, 2, 3, 4] committed on `main`; the
/// commit's snapshot id.
fn python_repository(path: &Path) -> String {
    let made = py(
        r#"
repo = icechunk.Repository.create(storage(sys.argv[1]))
session = repo.writable_session("main")
group = zarr.group(store=session.store)
array = group.create_array("temp", shape=(4,), chunks=(2,), dtype="i4")
array[:] = [1, 2, 3, 4]
out(session.commit("first values"))
"#,
        &[s(path)],
    );
    made.as_str().expect("a snapshot id").to_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

async fn plugin() -> Arc<Plugin> {
    let rt = Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    rt.load_file(&first_party_plugin("tether_plugin_icechunk"))
        .await
        .expect("load the icechunk plugin")
}

fn object(plugin: &Arc<Plugin>, path: &Path) -> ObjectClient {
    plugin.object(&json!({ "uri": s(path) }), &json!({}))
}

fn snapshot_of(state: &Value) -> &str {
    state["snapshot_id"].as_str().expect("snapshot_id")
}

/// The tags of a repository as Python lists them, with their snapshots.
fn python_tags(path: &Path) -> Value {
    py(
        r#"
repo = open_repo(sys.argv[1])
out({t: repo.lookup_tag(t) for t in sorted(repo.list_tags())})
"#,
        &[s(path)],
    )
}

/// The story of the CLI: add, commit (pin), Python reads the pin; Python
/// commits, status sees the drift, commit pins again; `diff --content`
/// between the two commits names the node; `open --json` gives an address
/// Python opens.
#[test]
fn cli_pins_what_python_wrote_and_python_reads_the_pins() {
    let d = Dataset::init();
    let cube = d.data().join("cube.icechunk");
    let first = python_repository(&cube);
    let added = d.ok(&[
        "add",
        "zarr/cube",
        "../data/cube.icechunk",
        "--kind",
        "icechunk",
    ]);
    assert_eq!(added, "added zarr/cube [icechunk]\n");
    let m = d.manifest("zarr/cube");
    assert_eq!(
        m["locator"]["uri"].as_str(),
        Some(s(&cube)),
        "the relative uri is stored absolute: {m:?}"
    );

    d.ok(&["commit", "-m", "first"]);
    let first_commit = d.rev("HEAD");
    let tags = python_tags(&cube);
    let tags = tags.as_object().unwrap();
    assert_eq!(tags.len(), 1, "one pin: {tags:?}");
    let (tag, at) = tags.iter().next().unwrap();
    let pin_id = format!("{}.", d.dataset_id());
    assert!(
        tag.starts_with(&format!("tether.{pin_id}")),
        "the pin is tether.<dataset>.<hash>: {tag}"
    );
    assert_eq!(at.as_str(), Some(first.as_str()), "the tag holds the head");
    let read = py(
        "out(read(open_repo(sys.argv[1]).readonly_session(tag=sys.argv[2])))",
        &[s(&cube), tag],
    );
    assert_eq!(read, json!([1, 2, 3, 4]));

    // Python commits more: the object drifts from the recorded state.
    let second = py(
        r#"out(write(open_repo(sys.argv[1]), "main", [5, 6, 7, 8], "second values"))"#,
        &[s(&cube)],
    );
    // `--snapshot`: ask the store now rather than read the last status snapshot.
    let status = d.ok(&["status", "--snapshot"]);
    assert!(
        lines(&status)
            .iter()
            .any(|l| l.starts_with("modified zarr/cube [icechunk/forkable]")),
        "status shows the drift:\n{status}"
    );
    d.ok(&["commit", "-m", "second"]);
    let tags = python_tags(&cube);
    let tags = tags.as_object().unwrap();
    assert_eq!(tags.len(), 2, "a second pin: {tags:?}");
    assert!(
        tags.values().any(|v| *v == second),
        "a tag holds Python's second commit: {tags:?}"
    );
    let status = d.ok(&["status", "--snapshot"]);
    assert!(
        status.contains("clean zarr/cube"),
        "clean after commit:\n{status}"
    );

    // The native diff between the two commits, from metadata.
    let diff = d.ok(&["diff", &first_commit, "HEAD", "--content", "--json"]);
    let diff: Value = serde_json::from_str(&diff).unwrap();
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "zarr/cube")
        .unwrap_or_else(|| panic!("zarr/cube changed: {diff}"));
    let detail = &change["detail"];
    assert_eq!(detail["unit"], "nodes", "{diff}");
    let entries = detail["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["path"] == "/temp"
            && e["change"] == "modified"
            && e["detail"] == "2 chunks"),
        "the array's two chunks changed: {diff}"
    );
    assert_eq!(detail["added"], 0, "{diff}");
    assert_eq!(detail["removed"], 0, "{diff}");

    // `open --json` at the first commit: an address Python opens.
    let opened = d.ok(&["open", "zarr/cube", "--rev", &first_commit, "--json"]);
    let opened: Value = serde_json::from_str(&opened).unwrap();
    let address = opened["address"].as_str().unwrap();
    let (uri, reference) = address.split_once('#').expect("uri#ref");
    assert_eq!(uri, s(&cube));
    let read = py(
        "out(read(session_at(open_repo(sys.argv[1]), sys.argv[2])))",
        &[uri, reference],
    );
    assert_eq!(read, json!([1, 2, 3, 4]), "{opened}");
    // And the trunk, where Python's second commit is.
    let opened = d.ok(&["open", "zarr/cube", "--json"]);
    let opened: Value = serde_json::from_str(&opened).unwrap();
    let (uri, reference) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(reference, "main", "{opened}");
    let read = py(
        "out(read(session_at(open_repo(sys.argv[1]), sys.argv[2])))",
        &[uri, reference],
    );
    assert_eq!(read, json!([5, 6, 7, 8]));
}

/// Forks, promote, unpin and re-pin through the host's plugin client, each
/// checked from Python, and Python's commits on our branch read back.
#[test]
fn forks_promote_and_tag_generations_interoperate_with_python() {
    let tmp = tempfile::tempdir().unwrap();
    let cube = tmp.path().join("cube.icechunk");
    let first = python_repository(&cube);
    block_on(async {
        let p = plugin().await;
        let o = object(&p, &cube);
        let state = o.fingerprint(None).await.unwrap();
        assert_eq!(snapshot_of(&state), first);
        let pin = o.pin(&state, "ds.0123456789abcdef").await.unwrap();
        assert_eq!(pin.ref_name, "tether.ds.0123456789abcdef");
        assert!(pin.created);

        // A working branch from the pin; Python sees it and commits on it.
        let branch = "tether.ws.ds.feature";
        let wr = o
            .fork(&Target::Pinned(pin.clone()), branch, &Expected::Absent)
            .await
            .unwrap();
        assert_eq!(wr, branch);
        let python_commit = py(
            r#"
repo = open_repo(sys.argv[1])
assert sys.argv[2] in repo.list_branches(), repo.list_branches()
assert repo.lookup_branch(sys.argv[2]) == sys.argv[3]
out(write(repo, sys.argv[2], [10, 20, 30, 40], "written by python on our branch"))
"#,
            &[s(&cube), branch, &first],
        );
        let head = o.fingerprint(Some(branch)).await.unwrap();
        assert_eq!(
            json!(snapshot_of(&head)),
            python_commit,
            "tether reads Python's commit"
        );
        let history = o.history(Some(branch), 10).await.unwrap();
        assert_eq!(history[0].message, "written by python on our branch");
        assert_eq!(history[1].id, first);
        assert!(history[0].refs.contains(&branch.to_string()), "{history:?}");
        assert_eq!(o.ancestor_of(&state, &head).await.unwrap(), Some(true));
        assert_eq!(o.ancestor_of(&head, &state).await.unwrap(), Some(false));

        // A stale review is refused; the right one promotes main.
        let refused = o
            .promote(
                &Target::WorkingRef(branch.into()),
                &Expected::At(head.clone()),
            )
            .await;
        assert!(
            matches!(refused, Err(BackendError::RefMoved(_))),
            "{refused:?}"
        );
        let promoted = o
            .promote(
                &Target::WorkingRef(branch.into()),
                &Expected::At(state.clone()),
            )
            .await
            .unwrap();
        assert_eq!(promoted, head);
        let main = py(
            r#"
repo = open_repo(sys.argv[1])
out({"main": repo.lookup_branch("main"), "values": read(repo.readonly_session(branch="main"))})
"#,
            &[s(&cube)],
        );
        assert_eq!(main["main"], python_commit);
        assert_eq!(main["values"], json!([10, 20, 30, 40]));

        // Python moves main on; a promote of the (now behind) fork is refused
        // with the hint, and main stays where Python put it.
        let python_main = py(
            r#"out(write(open_repo(sys.argv[1]), "main", [0, 0, 0, 0], "python on main"))"#,
            &[s(&cube)],
        );
        o.fork(
            &Target::Recorded(state.clone()),
            branch,
            &Expected::At(head.clone()),
        )
        .await
        .unwrap();
        let base = o.fingerprint(None).await.unwrap();
        let refused = o
            .promote(
                &Target::WorkingRef(branch.into()),
                &Expected::At(base.clone()),
            )
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("fork again"),
            "the promote hint: {refused}"
        );
        assert_eq!(
            json!(snapshot_of(&o.fingerprint(None).await.unwrap())),
            python_main
        );

        // Unpin tombstones the tag: Python cannot recreate it, and the next
        // pin of the id is generation 2, which Python lists.
        o.unpin(&pin).await.unwrap();
        let recreate = py(
            r#"
repo = open_repo(sys.argv[1])
try:
    repo.create_tag(sys.argv[2], snapshot_id=sys.argv[3])
    out({"created": True})
except Exception as e:
    out({"created": False, "error": f"{type(e).__name__}: {e}"})
"#,
            &[s(&cube), &pin.ref_name, &first],
        );
        assert_eq!(recreate["created"], false, "{recreate}");
        let again = o.pin(&state, "ds.0123456789abcdef").await.unwrap();
        assert_eq!(again.ref_name, "tether.ds.0123456789abcdef.2");
        assert!(again.created);
        let report = o.verify(&state, Some(&pin), false).await.unwrap();
        assert_eq!(report.status, VerifyStatus::Ok, "{report:?}");
        assert!(
            report
                .message
                .contains("pinned as tether.ds.0123456789abcdef.2"),
            "{report:?}"
        );
        let tags = python_tags(&cube);
        assert_eq!(tags, json!({ "tether.ds.0123456789abcdef.2": first }));
        assert_eq!(
            o.list_pins().await.unwrap(),
            vec!["ds.0123456789abcdef".to_string()]
        );
        // A pin tag deleted by hand (Python) reads as missing; pinning again
        // moves to the next generation.
        py(
            "open_repo(sys.argv[1]).delete_tag(sys.argv[2]); out(True)",
            &[s(&cube), &again.ref_name],
        );
        let report = o.verify(&state, Some(&again), true).await.unwrap();
        assert_eq!(report.status, VerifyStatus::Missing, "{report:?}");
        let third = o.pin(&state, "ds.0123456789abcdef").await.unwrap();
        assert_eq!(third.ref_name, "tether.ds.0123456789abcdef.3");
        let report = o.verify(&state, Some(&again), true).await.unwrap();
        assert_eq!(report.message, "pinned as tether.ds.0123456789abcdef.3");
        o.pin(&state, "ds.0123456789abcdef")
            .await
            .map(|p| assert!(!p.created))
            .unwrap();

        // Python's ops log lists our updates, newest first.
        let ops = py(
            r#"
repo = open_repo(sys.argv[1])
out([type(u.kind).__name__ for u in repo.ops_log()][:3])
"#,
            &[s(&cube)],
        );
        assert_eq!(
            ops[0].as_str().map(|k| k.contains("TagCreated")),
            Some(true),
            "{ops}"
        );
        assert_eq!(
            ops[1].as_str().map(|k| k.contains("TagDeleted")),
            Some(true),
            "{ops}"
        );
    });
}

/// A repository tether creates: Python opens it, reads `tether.owner`,
/// commits to it; tether then sees it is no longer empty and refuses to
/// delete it. A v1 repository is refused with a clear error.
#[test]
fn created_stores_and_refused_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("made-by-tether");
    block_on(async {
        let p = plugin().await;
        let o = object(&p, &fresh);
        let state = o.create("ds-owner").await.unwrap();
        assert_eq!(snapshot_of(&state), "1CECHNKREP0F1RSTCMT0");
        assert_eq!(o.owner().await.unwrap().as_deref(), Some("ds-owner"));
        assert_eq!(o.is_ref_empty(&[]).await.unwrap(), Some(true));
        let seen = py(
            r#"
st = storage(sys.argv[1])
assert icechunk.Repository.exists(st)
repo = icechunk.Repository.open(st)
meta = repo.get_metadata()
session = repo.writable_session("main")
group = zarr.group(store=session.store)
group.create_array("temp", shape=(2,), chunks=(2,), dtype="i4")[:] = [7, 8]
sid = session.commit("python writes into a store tether made")
out({"metadata": meta, "commit": sid, "spec": int(icechunk.Repository.fetch_spec_version(st))})
"#,
            &[s(&fresh)],
        );
        assert_eq!(
            seen["metadata"],
            json!({ "tether.owner": "ds-owner" }),
            "{seen}"
        );
        assert_eq!(seen["spec"], 2, "{seen}");
        let head = o.fingerprint(None).await.unwrap();
        assert_eq!(json!(snapshot_of(&head)), seen["commit"]);
        assert_eq!(o.is_ref_empty(&[]).await.unwrap(), Some(false));
        assert!(o.delete_store("ds-owner").await.is_err());
        assert!(
            fresh.join("repo").is_file(),
            "a refused delete keeps the store"
        );

        // An empty store tether made is deleted, and nothing of it is left.
        let other = tmp.path().join("deleted");
        let o2 = object(&p, &other);
        o2.create("ds-owner").await.unwrap();
        assert!(o2.delete_store("someone-else").await.is_err());
        o2.delete_store("ds-owner").await.unwrap();
        assert!(!other.exists(), "delete_store removed the repository");

        // Commits written the way the conformance harness writes them
        // (snapshot file, transaction log, `NewCommit`) are commits Python
        // reads, diffs and builds on.
        let scratch = tmp.path().join("scratch");
        let harness = p.harness(s(&scratch), &json!({})).unwrap();
        let locator = harness.new_object().await.unwrap();
        harness.mutate(&locator, None).await.unwrap();
        harness.mutate(&locator, None).await.unwrap();
        let written = harness.object(&locator).fingerprint(None).await.unwrap();
        let uri = locator["uri"].as_str().unwrap();
        let seen = py(
            r#"
repo = open_repo(sys.argv[1])
group = zarr.open_group(repo.readonly_session(branch="main").store, mode="r")
history = [s.message for s in repo.ancestry(branch="main")]
parent = list(repo.ancestry(branch="main"))[1].id
diff = repo.diff(from_snapshot_id=parent, to_branch="main")
session = repo.writable_session("main")
zarr.open_group(session.store, mode="r+").attrs["python"] = 1
out({"head": repo.lookup_branch("main"), "attrs": sorted(group.attrs.keys()),
     "history": history, "updated_groups": sorted(diff.updated_groups),
     "commit": session.commit("python after the harness")})
"#,
            &[uri],
        );
        assert_eq!(json!(snapshot_of(&written)), seen["head"], "{seen}");
        assert_eq!(seen["attrs"], json!(["tether_conformance"]), "{seen}");
        assert_eq!(
            seen["history"],
            json!([
                "tether conformance write",
                "tether conformance write",
                "Repository initialized"
            ])
        );
        assert_eq!(seen["updated_groups"], json!(["/"]), "{seen}");
        let after = harness.object(&locator).fingerprint(None).await.unwrap();
        assert_eq!(json!(snapshot_of(&after)), seen["commit"]);

        // Spec version 1 (icechunk 1.x's layout) is refused, saying so.
        let v1 = tmp.path().join("v1");
        py(
            r#"
icechunk.Repository.create(storage(sys.argv[1]), spec_version=1)
out(True)
"#,
            &[s(&v1)],
        );
        let err = object(&p, &v1).fingerprint(None).await.unwrap_err();
        assert!(
            matches!(&err, BackendError::Capability(m) if m.contains("spec version 1")),
            "{err:?}"
        );

        // A file declaring a spec version above 2 is refused too.
        let v3 = tmp.path().join("v3");
        python_repository(&v3);
        let mut bytes = std::fs::read(v3.join("repo")).unwrap();
        assert_eq!(bytes[36], 2, "the header's spec version byte");
        bytes[36] = 3;
        std::fs::write(v3.join("repo"), bytes).unwrap();
        let err = object(&p, &v3).fingerprint(None).await.unwrap_err();
        assert!(
            matches!(&err, BackendError::Capability(m) if m.contains("spec version 3")),
            "{err:?}"
        );
    });
}

/// The branching loop through the CLI, with an Icechunk repository and a
/// directory: commit, `new -b` (an eager fork Python sees as a branch),
/// Python writes on the working branch it got from `open --json`, commit
/// pins it, `promote` fast-forwards Icechunk's `main` (checked from Python),
/// and `verify --all-history` is ok.
#[test]
fn cli_branch_write_promote_story() {
    let d = Dataset::init();
    let cube = d.data().join("cube.icechunk");
    let first = python_repository(&cube);
    let raw = d.data().join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    std::fs::write(raw.join("well_0.tif"), [0u8; 64]).unwrap();
    d.ok(&["add", "../data/cube.icechunk", "--kind", "icechunk"]);
    d.ok(&["add", "raw", "../data/raw", "--kind", "file"]);
    d.ok(&["commit", "-m", "first"]);

    let out = d.ok(&["new", "-b", "feat", "--eager"]);
    let working = format!("tether.ws.{}.feat", d.dataset_id());
    assert!(out.contains(&working), "{out}");
    let branches = py(
        "out(sorted(open_repo(sys.argv[1]).list_branches()))",
        &[s(&cube)],
    );
    assert_eq!(branches, json!(["main", working]));

    let opened = d.ok(&["open", "cube", "--json"]);
    let opened: Value = serde_json::from_str(&opened).unwrap();
    assert_eq!(opened["read_only"], false, "{opened}");
    let (uri, branch) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(branch, working, "{opened}");
    let written = py(
        r#"out(write(open_repo(sys.argv[1]), sys.argv[2], [9, 9, 9, 9], "feature values"))"#,
        &[uri, branch],
    );
    d.ok(&["commit", "-m", "feature values"]);
    let promoted = d.ok(&["promote"]);
    assert!(
        promoted.contains(&format!(
            "fast-forwarded cube -> snapshot_id={}",
            written.as_str().unwrap()
        )),
        "{promoted}"
    );
    let main = py(
        r#"
repo = open_repo(sys.argv[1])
out({"main": repo.lookup_branch("main"), "values": read(repo.readonly_session(branch="main")),
     "first": [s.id for s in repo.ancestry(branch="main")][-2]})
"#,
        &[s(&cube)],
    );
    assert_eq!(
        main["main"], written,
        "Icechunk's main is at the promoted snapshot"
    );
    assert_eq!(main["values"], json!([9, 9, 9, 9]));
    assert_eq!(main["first"], json!(first));

    let verified = d.ok(&["verify", "--all-history"]);
    let cube_lines: Vec<String> = lines(&verified)
        .into_iter()
        .filter(|l| l.contains(":cube:"))
        .collect();
    assert_eq!(cube_lines.len(), 2, "{verified}");
    assert!(
        cube_lines
            .iter()
            .all(|l| l.starts_with("ok ") && l.contains("pinned as tether.")),
        "{verified}"
    );
}

/// `gc` unpins a pin no commit references: Icechunk tombstones the tag, so
/// Python cannot create it again, and the next commit of that state pins
/// the next generation, which `verify` names.
#[test]
fn gc_unpin_tombstones_and_the_next_pin_is_a_new_generation() {
    let d = Dataset::init();
    let cube = d.data().join("cube.icechunk");
    python_repository(&cube);
    d.ok(&["add", "../data/cube.icechunk", "--kind", "icechunk"]);
    d.ok(&["commit", "-m", "first"]);
    let second = py(
        r#"out(write(open_repo(sys.argv[1]), "main", [5, 6, 7, 8], "second values"))"#,
        &[s(&cube)],
    );
    let out = d.ok(&["commit", "-m", "second"]);
    let tag = out
        .lines()
        .find_map(|l| l.strip_prefix("pinned cube -> "))
        .unwrap_or_else(|| panic!("the commit pins cube:\n{out}"))
        .to_string();
    // Forget the second commit: its pin is referenced by no manifest.
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let applied = d.ok(&["gc", "--no-dry-run"]);
    assert!(
        applied.contains(tag.strip_prefix("tether.").unwrap()),
        "{applied}"
    );
    let after = py(
        r#"
repo = open_repo(sys.argv[1])
tags = sorted(repo.list_tags())
try:
    repo.create_tag(sys.argv[2], snapshot_id=sys.argv[3])
    recreated = True
except Exception:
    recreated = False
out({"tags": tags, "recreated": recreated})
"#,
        &[s(&cube), &tag, second.as_str().unwrap()],
    );
    assert_eq!(after["recreated"], false, "{after}");
    assert!(
        !after["tags"].as_array().unwrap().contains(&json!(tag)),
        "{after}"
    );

    // The base is still at Python's second commit: committing it again
    // pins the same id, as generation 2.
    let out = d.ok(&["commit", "-m", "second again"]);
    assert!(out.contains(&format!("pinned cube -> {tag}.2")), "{out}");
    let verified = d.ok(&["verify"]);
    assert!(
        verified.contains(&format!("ok cube: pinned as {tag}.2")),
        "{verified}"
    );
    let tags = python_tags(&cube);
    assert_eq!(tags[format!("{tag}.2")], second, "{tags}");
}

/// Worked example 4's repair on Icechunk: Python deletes our pin's tag by
/// hand; `verify` reports it missing, `repair` recreates the pin under the
/// next generation (Icechunk never reuses a deleted tag's name), `verify`
/// says `pinned as ….2`, and Python reads the same values through it.
#[test]
fn repair_recreates_a_deleted_tag_as_the_next_generation() {
    let d = Dataset::init();
    let cube = d.data().join("cube.icechunk");
    let first = python_repository(&cube);
    d.ok(&["add", "../data/cube.icechunk", "--kind", "icechunk"]);
    let out = d.ok(&["commit", "-m", "first"]);
    let tag = out
        .lines()
        .find_map(|l| l.strip_prefix("pinned cube -> "))
        .unwrap_or_else(|| panic!("the commit pins cube:\n{out}"))
        .to_string();
    py(
        "open_repo(sys.argv[1]).delete_tag(sys.argv[2]); out(True)",
        &[s(&cube), &tag],
    );
    let out = d.tether(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stdout(&out).contains("missing"), "{}", describe(&out));

    let plan = d.ok(&["repair", "--dry-run"]);
    assert!(plan.contains("repin cube"), "{plan}");
    d.ok(&["repair"]);
    let verified = d.ok(&["verify"]);
    assert!(
        verified.contains(&format!("ok cube: pinned as {tag}.2")),
        "{verified}"
    );
    let tags = python_tags(&cube);
    assert_eq!(tags[format!("{tag}.2")], json!(first), "{tags}");
    let values = py(
        r#"
repo = open_repo(sys.argv[1])
session = repo.readonly_session(tag=sys.argv[2])
out([int(v) for v in zarr.open_array(session.store, path="temp", mode="r")[:]])
"#,
        &[s(&cube), &format!("{tag}.2")],
    );
    assert_eq!(values, json!([1, 2, 3, 4]));
}
