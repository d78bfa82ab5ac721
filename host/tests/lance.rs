//! The `lance` plugin against the real Lance library: Python `pylance`
//! 14.0.2 (the pinned environment `cargo xtask setup` makes) writes and
//! reads datasets; tether pins, forks, commits, diffs, drops and collects
//! through the `tether` binary; Python then checks out what tether wrote
//! (tags, branches), appends on our branches, and runs
//! `cleanup_old_versions` against our pins.

use std::path::Path;

use crate::support::{Dataset, describe};
use serde_json::{Value, json};

/// Helpers every script starts with. Scripts print one JSON document last.
const PRELUDE: &str = r#"
import json, os, sys, datetime
import lance
import pyarrow as pa

# Storage options for an s3:// dataset (the local S3 server), else none.
OPTS = json.loads(os.environ.get("TETHER_TEST_LANCE_OPTS", "null"))

def table(ids, label="x"):
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "label": pa.array([label] * len(ids), pa.string())})

def open_ds(uri, version=None):
    return lance.dataset(uri, version=version, storage_options=OPTS)

def rows(ds):
    return sorted(ds.to_table(columns=["id"])["id"].to_pylist())

def branch(uri, name):
    # A branch head, as pylance opens a branch by name.
    return open_ds(uri).checkout_version((name, None))

def append(target, ids, label="x"):
    return lance.write_dataset(table(ids, label), target, mode="append",
                               storage_options=OPTS).version

def tags(uri):
    return {n: {"branch": t["branch"], "version": t["version"]}
            for n, t in open_ds(uri).tags.list().items()}

def branches(uri):
    return sorted(open_ds(uri).branches.list().keys())

def out(value):
    print(json.dumps(value))
"#;

/// Run `script` (after the prelude) with `args` as `sys.argv[1:]`; the JSON
/// it printed last.
fn py(script: &str, args: &[&str]) -> Value {
    py_on(None, script, args)
}

/// [`py`] with `storage_options` for an `s3://` dataset.
fn py_on(options: Option<&Value>, script: &str, args: &[&str]) -> Value {
    let mut cmd = std::process::Command::new(tether_testkit::python());
    if let Some(o) = options {
        cmd.env("TETHER_TEST_LANCE_OPTS", o.to_string());
    }
    let out = cmd
        .arg("-c")
        .arg(format!("{PRELUDE}\n{script}\nsys.stdout.flush()\n"))
        .args(args)
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A dataset Python wrote: `id` 1..=3 (v1), then 4 (v2).
fn python_dataset(path: &Path) {
    py(
        "lance.write_dataset(table([1, 2, 3]), sys.argv[1]); out(append(sys.argv[1], [4]))",
        &[s(path)],
    );
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// The pin tag the manifest of `key` records.
fn pin_tag(d: &Dataset, key: &str) -> String {
    d.manifest(key)["pin"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not pinned"))
        .to_string()
}

/// A Lance dataset registered as `features` and committed.
fn committed(d: &Dataset) -> std::path::PathBuf {
    let uri = d.data().join("features.lance");
    python_dataset(&uri);
    let added = d.ok(&[
        "add",
        "features",
        "../data/features.lance",
        "--kind",
        "lance",
    ]);
    assert_eq!(added, "added features [lance]\n");
    d.ok(&["commit", "-m", "features v2"]);
    uri
}

/// Python lists our tag, reads the pinned rows through it, and
/// `cleanup_old_versions(older_than=0)` keeps every pinned version while it
/// deletes an unpinned one. `diff --content` names the fragment a later
/// append added, and `open --rev` gives an address Python opens.
#[test]
fn python_reads_our_pins_and_cleanup_keeps_them() {
    let d = Dataset::init();
    let uri = committed(&d);
    let m = d.manifest("features");
    assert_eq!(m["locator"]["uri"].as_str(), Some(s(&uri)), "{m:?}");
    assert_eq!(m["state"]["branch"].as_str(), Some("main"), "{m:?}");
    assert_eq!(m["state"]["version"].as_integer(), Some(2), "{m:?}");
    let first = d.rev("HEAD");
    let tag = pin_tag(&d, "features");
    assert!(
        tag.starts_with(&format!("tether.{}.", d.dataset_id())),
        "{tag}"
    );

    let seen = py(
        r#"
uri, tag = sys.argv[1], sys.argv[2]
v3 = append(uri, [5])
out({"tags": tags(uri), "rows": rows(lance.dataset(uri, version=tag)), "v3": v3,
     "raw": json.load(open(f"{uri}/_refs/tags/{tag}.json"))})
"#,
        &[s(&uri), &tag],
    );
    assert_eq!(
        seen["tags"],
        json!({ tag.clone(): {"branch": null, "version": 2} })
    );
    assert_eq!(seen["rows"], json!([1, 2, 3, 4]));
    let raw = &seen["raw"];
    assert!(raw["manifestSize"].as_u64().unwrap() > 0, "{raw}");
    assert!(raw["createdAt"].as_str().unwrap().ends_with('Z'), "{raw}");
    assert_eq!(raw["metadata"], json!({}));

    // Python's append is drift; commit pins it.
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("modified features"), "{status}");
    d.ok(&["commit", "-m", "features v3"]);
    let second_tag = pin_tag(&d, "features");
    assert_ne!(second_tag, tag);
    let diff = json_of(&d.ok(&["diff", &first, "HEAD", "--content", "--json"]));
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "features")
        .unwrap_or_else(|| panic!("features changed: {diff}"));
    let detail = &change["detail"];
    assert_eq!(detail["unit"], "fragments", "{diff}");
    assert_eq!(detail["added"], 1, "{diff}");
    assert_eq!(
        detail["entries"][0],
        json!({"path": "fragment 2", "change": "added", "detail": "+1 rows"}),
        "{diff}"
    );

    // Another append, then cleanup of everything older than now.
    let cleaned = py(
        r#"
uri = sys.argv[1]
append(uri, [6])
ds = lance.dataset(uri)
ds.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True,
                        error_if_tagged_old_versions=False)
ds = lance.dataset(uri)
out({"versions": sorted(v["version"] for v in ds.versions()),
     "pinned": rows(lance.dataset(uri, version=sys.argv[2]))})
"#,
        &[s(&uri), &tag],
    );
    assert_eq!(
        cleaned["versions"],
        json!([2, 3, 4]),
        "v1 (unpinned) went, v2 and v3 (pinned) stayed"
    );
    assert_eq!(cleaned["pinned"], json!([1, 2, 3, 4]));
    let verified = d.ok(&["verify", "--all-history", "--deep"]);
    assert!(!verified.contains("missing"), "{verified}");

    // `open --rev` of the first commit: the tag, which Python opens.
    let opened = json_of(&d.ok(&["open", "features", "--rev", &first, "--json"]));
    assert_eq!(opened["type"], "LanceHandle", "{opened}");
    let address = opened["address"].as_str().unwrap();
    let (at_uri, reference) = address.split_once('#').expect("uri#ref");
    assert_eq!(at_uri, s(&uri));
    assert_eq!(reference, tag, "{opened}");
    let read = py(
        "out(rows(lance.dataset(sys.argv[1], version=sys.argv[2])))",
        &[at_uri, reference],
    );
    assert_eq!(read, json!([1, 2, 3, 4]));
}

/// The bookmark story: `tether new -b relabel` and a writable `open` make a
/// Lance branch that Python opens by name and appends to; `commit` pins the
/// branch's new version; `diff main relabel --content` names the fragment
/// added; `drop relabel` removes the branch and its pin, and Python no
/// longer lists either.
#[test]
fn a_bookmark_is_a_branch_python_writes_and_drop_removes() {
    let d = Dataset::init();
    let uri = committed(&d);
    let main_tag = pin_tag(&d, "features");
    d.ok(&["new", "-b", "relabel"]);
    let opened = json_of(&d.ok(&["open", "features", "--json"]));
    let (at_uri, branch) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(at_uri, s(&uri));
    let branch = branch.to_owned();
    assert_eq!(
        branch,
        format!("tether.ws.{}.relabel", d.dataset_id()),
        "{opened}"
    );
    assert_eq!(opened["read_only"], false, "{opened}");
    // An untouched fork is the pinned state: nothing to commit.
    let status = d.ok(&["status", "--snapshot"]);
    assert!(!status.contains("modified features"), "{status}");

    let written = py(
        r#"
uri, name = sys.argv[1], sys.argv[2]
assert name in branches(uri), branches(uri)
before = rows(branch(uri, name))
v = append(branch(uri, name), [10], "relabelled")
out({"before": before, "version": v, "after": rows(branch(uri, name)),
     "main": rows(lance.dataset(uri))})
"#,
        &[s(&uri), &branch],
    );
    assert_eq!(written["before"], json!([1, 2, 3, 4]));
    assert_eq!(written["version"], 3, "the branch's first own version");
    assert_eq!(written["after"], json!([1, 2, 3, 4, 10]));
    assert_eq!(written["main"], json!([1, 2, 3, 4]), "main untouched");

    d.ok(&["commit", "-m", "relabel"]);
    let m = d.manifest("features");
    assert_eq!(
        m["state"]["branch"].as_str(),
        Some(branch.as_str()),
        "{m:?}"
    );
    assert_eq!(m["state"]["version"].as_integer(), Some(3), "{m:?}");
    assert!(
        m["state"]["branch_id"].as_str().unwrap().starts_with("2:"),
        "{m:?}"
    );
    let branch_tag = pin_tag(&d, "features");
    let listed = py("out(tags(sys.argv[1]))", &[s(&uri)]);
    assert_eq!(
        listed[&branch_tag],
        json!({"branch": branch, "version": 3}),
        "{listed}"
    );
    let read = py(
        "out(rows(lance.dataset(sys.argv[1], version=sys.argv[2])))",
        &[s(&uri), &branch_tag],
    );
    assert_eq!(read, json!([1, 2, 3, 4, 10]));

    let diff = json_of(&d.ok(&["diff", "main", "relabel", "--content", "--json"]));
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "features")
        .unwrap_or_else(|| panic!("features changed: {diff}"));
    assert_eq!(
        change["detail"]["entries"],
        json!([{"path": "fragment 2", "change": "added", "detail": "+1 rows"}]),
        "{diff}"
    );
    let log = d.ok(&["log", "features"]);
    assert!(log.contains(&branch_tag) || log.contains('3'), "{log}");

    d.ok(&["drop", "relabel", "--no-dry-run"]);
    let after = py(
        "out({'branches': branches(sys.argv[1]), 'tags': sorted(tags(sys.argv[1])), \
              'rows': rows(lance.dataset(sys.argv[1]))})",
        &[s(&uri)],
    );
    assert_eq!(after["branches"], json!([]), "{after}");
    assert_eq!(after["tags"], json!([main_tag]), "{after}");
    assert_eq!(after["rows"], json!([1, 2, 3, 4]));
    assert!(
        !uri.join("tree").join(&branch).join("_versions").exists(),
        "the branch's tree is gone"
    );
    d.ok(&["verify", "--all-history"]);
}

/// `gc` after an abandoned commit deletes exactly the tag only that commit
/// named, and Python sees the rest.
#[test]
fn gc_after_abandon_deletes_only_the_abandoned_tag() {
    let d = Dataset::init();
    let uri = committed(&d);
    let mut tags = vec![pin_tag(&d, "features")];
    let mut commits = vec![d.head()];
    for i in 0..2 {
        py(
            "out(append(sys.argv[1], [int(sys.argv[2])]))",
            &[s(&uri), &(20 + i).to_string()],
        );
        d.ok(&["commit", "-m", &format!("append {i}")]);
        tags.push(pin_tag(&d, "features"));
        commits.push(d.head());
    }
    let out = d.ok(&["abandon", &commits[1]]);
    assert!(
        out.contains(&format!("unpin features [lance] {}", tags[1])),
        "{out}"
    );
    let r = json_of(&d.ok(&["gc", "--no-dry-run", "--json"]));
    let released: Vec<&str> = r["unpinned"]["lance"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(released.len(), 1, "{r}");
    assert_eq!(format!("tether.{}", released[0]), tags[1]);
    let listed = py("out(sorted(tags(sys.argv[1])))", &[s(&uri)]);
    let mut kept = vec![tags[0].clone(), tags[2].clone()];
    kept.sort();
    assert_eq!(listed, json!(kept));
    d.ok(&["verify", "--all-history", "--deep"]);
}

/// A pin tag deleted by hand is `missing` in `verify` and comes back under
/// the same name with `repair`; a manifest with a reader feature flag the
/// plugin does not know is refused, naming the flag.
#[test]
fn a_deleted_tag_is_repaired_and_an_unknown_reader_flag_is_refused() {
    let d = Dataset::init();
    let uri = committed(&d);
    let tag = pin_tag(&d, "features");
    py(
        "lance.dataset(sys.argv[1]).tags.delete(sys.argv[2]); out(True)",
        &[s(&uri), &tag],
    );
    let out = d.fails(&["verify"], 1);
    let text = describe(&out);
    assert!(text.contains("missing"), "{text}");
    d.ok(&["repair"]);
    let listed = py("out(tags(sys.argv[1]))", &[s(&uri)]);
    assert_eq!(
        listed,
        json!({ tag.clone(): {"branch": null, "version": 2} })
    );
    d.ok(&["verify", "--deep"]);

    // Version 3: pylance's v2 manifest with reader flag 4096 added (a later
    // scalar field wins in protobuf), framed as Lance frames a manifest.
    let versions = uri.join("_versions");
    let v2 = std::fs::read(versions.join(format!("{:020}.manifest", u64::MAX - 2))).unwrap();
    let n = v2.len();
    let pos = i64::from_le_bytes(v2[n - 16..n - 8].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(v2[pos..pos + 4].try_into().unwrap()) as usize;
    let mut message = v2[pos + 4..pos + 4 + len].to_vec();
    message.extend_from_slice(&[0x18, 3]); // field 3 (version) = 3
    message.extend_from_slice(&[0x48, 0x80, 0x20]); // field 9 (reader flags) = 4096
    let mut file = v2[..pos].to_vec();
    file.extend_from_slice(&(message.len() as u32).to_le_bytes());
    file.extend_from_slice(&message);
    file.extend_from_slice(&(pos as i64).to_le_bytes());
    file.extend_from_slice(&v2[n - 8..]);
    std::fs::write(
        versions.join(format!("{:020}.manifest", u64::MAX - 3)),
        file,
    )
    .unwrap();
    let out = d.tether(&["status", "--snapshot"]);
    let text = describe(&out);
    assert!(
        text.contains("unknown feature flag 4096"),
        "the refusal names the flag:\n{text}"
    );
    let out = d.tether(&["commit", "-m", "flagged"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
}

/// Icechunk helpers for the worked example, which keeps a Lance table beside
/// an Icechunk store.
const ICECHUNK: &str = r#"
import icechunk, zarr, os

def ic_repo(path):
    return icechunk.Repository.open(icechunk.local_filesystem_storage(path))

def ic_write(path, branch, values, message):
    session = ic_repo(path).writable_session(branch)
    zarr.open_array(session.store, path="temp", mode="r+")[:] = values
    return session.commit(message)

def ic_create(path, values):
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
    session = repo.writable_session("main")
    group = zarr.group(store=session.store)
    group.create_array("temp", shape=(len(values),), chunks=(2,), dtype="i4")[:] = values
    return session.commit("first values")

def ic_done(value):
    # icechunk's native threads have taken the interpreter down at teardown.
    out(value); sys.stdout.flush(); os._exit(0)
"#;

/// spec/08's Lance story end to end: a labels table beside an Icechunk
/// store and a directory; commit and reproduce; relabel on a bookmark (the
/// Lance branch Python appends to), promote refused for Lance and landed for
/// Icechunk, the Lance half finished on the trunk, the bookmark dropped;
/// pins deleted by hand, `verify` missing, `repair`; upstream appends seen
/// as drift and pulled; `verify --all-history` ok at the end.
#[test]
fn worked_example_lance_story() {
    let d = Dataset::init();
    let imaging = d.data().join("imaging.icechunk");
    let features = d.data().join("features.lance");
    let plate = d.data().join("plate1");
    let ic = |script: &str, args: &[&str]| py(&format!("{ICECHUNK}\n{script}"), args);
    ic(
        "ic_done(ic_create(sys.argv[1], [1, 2, 3, 4]))",
        &[s(&imaging)],
    );
    python_dataset(&features);
    std::fs::create_dir_all(&plate).unwrap();
    std::fs::write(plate.join("A01.csv"), "well,value\nA01,1\n").unwrap();
    d.ok(&[
        "add",
        "zarr/imaging",
        "../data/imaging.icechunk",
        "--kind",
        "icechunk",
    ]);
    d.ok(&[
        "add",
        "features",
        "../data/features.lance",
        "--kind",
        "lance",
    ]);
    d.ok(&["add", "raw/plate1", "../data/plate1", "--kind", "file"]);

    // 1. Reproduce an analysis months later.
    d.ok(&["commit", "-m", "inputs of the report"]);
    let report_commit = d.head();
    let features_pin = pin_tag(&d, "features");
    py("out(append(sys.argv[1], [5]))", &[s(&features)]);
    let opened = json_of(&d.ok(&["open", "features", "--rev", &report_commit, "--json"]));
    let (uri, reference) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(
        py(
            "out(rows(lance.dataset(sys.argv[1], version=sys.argv[2])))",
            &[uri, reference]
        ),
        json!([1, 2, 3, 4])
    );
    d.ok(&["verify"]);

    // 2. Reprocess on a branch, then land it.
    d.ok(&["new", "-b", "relabel-v3"]);
    let img = json_of(&d.ok(&["open", "zarr/imaging", "--json"]));
    let (_, img_branch) = img["address"].as_str().unwrap().split_once('#').unwrap();
    ic(
        "ic_done(ic_write(sys.argv[1], sys.argv[2], [9, 9, 9, 9], 'relabel'))",
        &[s(&imaging), img_branch],
    );
    let feat = json_of(&d.ok(&["open", "features", "--json"]));
    let (_, feat_branch) = feat["address"].as_str().unwrap().split_once('#').unwrap();
    let feat_branch = feat_branch.to_owned();
    py(
        "out(append(branch(sys.argv[1], sys.argv[2]), [100], 'v3'))",
        &[s(&features), &feat_branch],
    );
    let committed = d.ok(&["commit", "-m", "relabel v3"]);
    assert!(
        committed.contains("features") && committed.contains("zarr/imaging"),
        "{committed}"
    );
    let diff = d.ok(&["diff", "main", "relabel-v3", "--content"]);
    assert!(diff.contains("fragment"), "{diff}");

    let refused = d.tether(&["promote"]);
    let text = describe(&refused);
    assert!(text.contains("Lance cannot move a branch head"), "{text}");
    d.ok(&["promote", "zarr/imaging"]);
    d.ok(&["new", "main"]);
    // The Lance half, finished on the trunk: the same rows written on main.
    py("out(append(sys.argv[1], [100], 'v3'))", &[s(&features)]);
    d.ok(&["commit", "-m", "features relabelled on main"]);
    d.ok(&["drop", "relabel-v3", "--no-dry-run"]);
    let left = py("out(branches(sys.argv[1]))", &[s(&features)]);
    assert_eq!(left, json!([]), "the Lance branch went with the bookmark");

    // 4. Pins deleted by hand; verify says missing; repair.
    let pin_now = pin_tag(&d, "features");
    py(
        "lance.dataset(sys.argv[1]).tags.delete(sys.argv[2]); out(True)",
        &[s(&features), &pin_now],
    );
    let out = d.fails(&["verify"], 1);
    assert!(describe(&out).contains("missing"), "{}", describe(&out));
    d.ok(&["repair"]);
    let listed = py("out(sorted(tags(sys.argv[1])))", &[s(&features)]);
    assert!(
        listed.as_array().unwrap().contains(&json!(pin_now)),
        "the tag is back under its name: {listed}"
    );
    d.ok(&["verify"]);

    // Upstream moves on its own: an append on main is drift; pull commits it.
    py("out(append(sys.argv[1], [200]))", &[s(&features)]);
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("modified features"), "{status}");
    d.ok(&["pull"]);
    assert_ne!(pin_tag(&d, "features"), pin_now);
    assert!(
        py("out(sorted(tags(sys.argv[1])))", &[s(&features)])
            .as_array()
            .unwrap()
            .contains(&json!(features_pin)),
        "the first commit's pin is still there"
    );
    d.ok(&["verify", "--all-history"]);
}

async fn plugin() -> std::sync::Arc<tether::plugin::Plugin> {
    let rt = tether::plugin::Runtime::new(tether::plugin::RuntimeConfig {
        cache_root: tether_testkit::cache_dir(),
        ..tether::plugin::RuntimeConfig::default()
    })
    .expect("runtime");
    rt.load_file(&tether_testkit::first_party_plugin("tether_plugin_lance"))
        .await
        .expect("load the lance plugin")
}

/// Through the host's plugin client: a branch of a branch (a second base
/// path) that pylance reads and appends to; a reset of a branch a tag
/// references forks the next generation, which pylance lists; deleting the
/// tagged branch is refused with Lance's reason, and only a foreign tag
/// blocks it for `gc`; `history` names the operations and tags.
#[test]
fn branches_of_branches_generations_and_blockers_with_python() {
    use tether::plugin::{BackendError, Expected, Target};
    let tmp = tempfile::tempdir().unwrap();
    let uri = tmp.path().join("t.lance");
    python_dataset(&uri);
    tether_testkit::block_on(async {
        let p = plugin().await;
        let o = p.object(&json!({ "uri": s(&uri) }), &json!({}));
        let main = o.fingerprint(None).await.unwrap();
        assert_eq!(main, json!({"branch": "main", "version": 2}));
        let pin = o.pin(&main, "ds.0123456789abcdef").await.unwrap();
        assert_eq!(pin.ref_name, "tether.ds.0123456789abcdef");

        let a = "tether.ws.ds.a";
        assert_eq!(
            o.fork(&Target::Pinned(pin.clone()), a, &Expected::Absent)
                .await
                .unwrap(),
            a
        );
        assert_eq!(
            o.fingerprint(Some(a)).await.unwrap(),
            main,
            "untouched fork"
        );
        py(
            "out(append(branch(sys.argv[1], sys.argv[2]), [7]))",
            &[s(&uri), a],
        );
        let on_a = o.fingerprint(Some(a)).await.unwrap();
        assert_eq!(on_a["branch"], a);
        assert_eq!(on_a["version"], 3);
        let a_pin = o.pin(&on_a, "ds.1111111111111111").await.unwrap();

        // A branch of the branch: its data comes from main and from a.
        let b = "tether.ws.ds.b";
        o.fork(&Target::Recorded(on_a.clone()), b, &Expected::Absent)
            .await
            .unwrap();
        let seen = py(
            r#"
uri, b = sys.argv[1], sys.argv[2]
before = rows(branch(uri, b))
append(branch(uri, b), [8])
out({"before": before, "after": rows(branch(uri, b)), "branches": branches(uri)})
"#,
            &[s(&uri), b],
        );
        assert_eq!(seen["before"], json!([1, 2, 3, 4, 7]));
        assert_eq!(seen["after"], json!([1, 2, 3, 4, 7, 8]));
        assert_eq!(seen["branches"], json!([a, b]));
        let on_b = o.fingerprint(Some(b)).await.unwrap();
        assert_eq!(o.ancestor_of(&main, &on_b).await.unwrap(), Some(true));
        assert_eq!(o.ancestor_of(&on_a, &on_b).await.unwrap(), Some(true));
        assert_eq!(o.ancestor_of(&on_b, &main).await.unwrap(), Some(false));
        let report = o.verify(&on_b, None, true).await.unwrap();
        assert_eq!(
            report.status,
            tether::plugin::VerifyStatus::Ok,
            "{report:?}"
        );

        // `a` is referenced by our tag and by `b`: Lance cannot delete it.
        let refused = o.delete_working_ref(a).await.unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("referenced by tags tether.ds.1111111111111111"),
            "{refused}"
        );
        assert!(refused.to_string().contains(b), "{refused}");
        o.delete_working_ref(b).await.unwrap();
        // Only what tether cannot release blocks a gc: our pin does not.
        assert_eq!(o.working_ref_blockers(a).await.unwrap(), None);
        py(
            "lance.dataset(sys.argv[1]).tags.create('theirs', (sys.argv[2], 3)); out(True)",
            &[s(&uri), a],
        );
        let blocker = o
            .working_ref_blockers(a)
            .await
            .unwrap()
            .expect("a foreign tag blocks");
        assert!(blocker.contains("theirs"), "{blocker}");

        // Resetting `a` to main: it cannot be deleted, so `a.2` is made.
        let made = o
            .fork(&Target::Pinned(pin.clone()), a, &Expected::At(on_a.clone()))
            .await
            .unwrap();
        assert_eq!(made, format!("{a}.2"));
        assert_eq!(o.fingerprint(Some(&made)).await.unwrap(), main);
        assert_eq!(o.fingerprint(Some(a)).await.unwrap(), on_a, "a is kept");
        let listed = py("out(branches(sys.argv[1]))", &[s(&uri)]);
        assert_eq!(listed, json!([a, made.clone()]));
        let stale = o
            .fork(&Target::Pinned(pin.clone()), a, &Expected::Absent)
            .await;
        assert!(matches!(stale, Err(BackendError::RefMoved(_))), "{stale:?}");
        // Resetting a branch onto one of its own versions keeps it too.
        py(
            "out(append(branch(sys.argv[1], sys.argv[2]), [9]))",
            &[s(&uri), &made],
        );
        let on_made = o.fingerprint(Some(&made)).await.unwrap();
        py(
            "out(append(branch(sys.argv[1], sys.argv[2]), [10]))",
            &[s(&uri), &made],
        );
        let again = o
            .fork(
                &Target::Recorded(on_made.clone()),
                &made,
                &Expected::Unconditional,
            )
            .await
            .unwrap();
        assert_eq!(again, format!("{made}.2"));
        assert_eq!(o.fingerprint(Some(&again)).await.unwrap(), on_made);
        let rows = py(
            "out(rows(branch(sys.argv[1], sys.argv[2])))",
            &[s(&uri), &again],
        );
        assert_eq!(rows, json!([1, 2, 3, 4, 9]));

        // History: newest first, operations and tags named.
        let h = o.history(Some(a), 10).await.unwrap();
        assert_eq!(h[0].id, format!("{a}@3"));
        assert_eq!(h[0].message, "append");
        assert!(h[0].refs.contains(&a_pin.ref_name), "{h:?}");
        assert_eq!(h[1].message, "clone");
        let h = o.history(None, 10).await.unwrap();
        let ids: Vec<&str> = h.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["2", "1"]);
        assert_eq!(h[1].message, "overwrite");
        assert!(h[0].refs.contains(&pin.ref_name), "{h:?}");
    });
}

/// What the conformance harness writes (an empty table, then a version
/// adding a column) is a dataset pylance opens and appends to; and a
/// dataset in Lance's older manifest naming scheme is read as well.
#[test]
fn harness_datasets_and_v1_manifest_names_are_lances() {
    let tmp = tempfile::tempdir().unwrap();
    tether_testkit::block_on(async {
        let p = plugin().await;
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        let harness = p.harness(s(&scratch), &json!({})).unwrap();
        let locator = harness.new_object().await.unwrap();
        harness.mutate(&locator, None).await.unwrap();
        let uri = locator["uri"].as_str().unwrap();
        let seen = py(
            r#"
uri = sys.argv[1]
ds = lance.dataset(uri)
before = (ds.version, ds.schema.names, ds.count_rows())
ds = lance.write_dataset(pa.table({"id": pa.array([1], pa.int64()), "c2": pa.array([2], pa.int64())}),
                         uri, mode="append")
out({"before": before, "after": [ds.version, ds.count_rows()]})
"#,
            &[uri],
        );
        assert_eq!(seen["before"], json!([2, ["id", "c2"], 0]), "{seen}");
        assert_eq!(seen["after"], json!([3, 1]), "{seen}");
        let o = harness.object(&locator);
        assert_eq!(
            o.fingerprint(None).await.unwrap(),
            json!({"branch": "main", "version": 3})
        );

        let v1 = tmp.path().join("v1.lance");
        py(
            r#"
lance.write_dataset(table([1]), sys.argv[1], enable_v2_manifest_paths=False)
out(append(sys.argv[1], [2]))
"#,
            &[s(&v1)],
        );
        assert!(v1.join("_versions").join("2.manifest").is_file());
        let o = p.object(&json!({ "uri": s(&v1) }), &json!({}));
        let state = o.fingerprint(None).await.unwrap();
        assert_eq!(state, json!({"branch": "main", "version": 2}));
        let pin = o.pin(&state, "ds.2222222222222222").await.unwrap();
        let read = py(
            "out(rows(lance.dataset(sys.argv[1], version=sys.argv[2])))",
            &[s(&v1), &pin.ref_name],
        );
        assert_eq!(read, json!([1, 2]));
        let h = o.history(None, 10).await.unwrap();
        assert_eq!(h.len(), 2);
        let d = o
            .diff(&json!({"branch": "main", "version": 1}), &state, None, None)
            .await
            .unwrap();
        assert_eq!((d.added, d.removed), (1, 0), "{d:?}");
    });
}

/// The bookmark story on `s3://` (the local S3 server, moto): pylance
/// writes through its S3 client, tether through the host's with the
/// endpoint and keys in `.tether/secrets.toml`; pylance reads our tag,
/// appends on our branch, and sees `drop` remove it.
#[test]
fn s3_pins_and_branches_interoperate_with_python() {
    let server = tether_testkit::S3Server::start("lance-story");
    let uri = format!("s3://{}/tables/features.lance", server.bucket());
    let opts = json!({
        "aws_endpoint": server.endpoint(),
        "aws_access_key_id": tether_testkit::S3_ACCESS_KEY_ID,
        "aws_secret_access_key": tether_testkit::S3_SECRET_ACCESS_KEY,
        "aws_region": tether_testkit::S3_REGION,
        "allow_http": "true",
        "aws_virtual_hosted_style_request": "false",
    });
    let py = |script: &str, args: &[&str]| py_on(Some(&opts), script, args);
    py(
        "lance.write_dataset(table([1, 2, 3]), sys.argv[1], storage_options=OPTS); \
         out(append(sys.argv[1], [4]))",
        &[&uri],
    );
    let d = Dataset::init();
    d.write_secrets(&server.secrets_toml());
    d.ok(&["add", "features", &uri, "--kind", "lance"]);
    d.ok(&["commit", "-m", "on s3"]);
    let tag = pin_tag(&d, "features");
    let seen = py(
        "out({'tags': tags(sys.argv[1]), 'rows': rows(open_ds(sys.argv[1], sys.argv[2]))})",
        &[&uri, &tag],
    );
    assert_eq!(
        seen["tags"],
        json!({ tag.clone(): {"branch": null, "version": 2} })
    );
    assert_eq!(seen["rows"], json!([1, 2, 3, 4]));

    d.ok(&["new", "-b", "relabel"]);
    let opened = json_of(&d.ok(&["open", "features", "--json"]));
    let (at_uri, name) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(at_uri, uri);
    let written = py(
        "append(branch(sys.argv[1], sys.argv[2]), [10]); out(rows(branch(sys.argv[1], sys.argv[2])))",
        &[&uri, name],
    );
    assert_eq!(written, json!([1, 2, 3, 4, 10]));
    d.ok(&["commit", "-m", "relabel on s3"]);
    let branch_tag = pin_tag(&d, "features");
    let read = py(
        "out(rows(open_ds(sys.argv[1], sys.argv[2])))",
        &[&uri, &branch_tag],
    );
    assert_eq!(read, json!([1, 2, 3, 4, 10]));
    d.ok(&["verify", "--all-history", "--deep"]);
    d.ok(&["drop", "relabel", "--no-dry-run"]);
    let after = py(
        "out({'b': branches(sys.argv[1]), 't': sorted(tags(sys.argv[1]))})",
        &[&uri],
    );
    assert_eq!(after, json!({"b": [], "t": [tag]}));
}

/// A working branch a commit pinned cannot be reset in place (Lance keeps
/// a tagged branch): `tether new --discard` on the bookmark re-forks as
/// `<branch>.2`, the workspace records that name, `open` hands it out, and
/// Python reads the pinned rows there while the old branch keeps its tag.
#[test]
fn a_pinned_branch_is_reforked_as_the_next_generation() {
    let d = Dataset::init();
    let uri = committed(&d);
    d.ok(&["new", "-b", "relabel"]);
    let opened = json_of(&d.ok(&["open", "features", "--json"]));
    let (_, name) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    let name = name.to_owned();
    py(
        "out(append(branch(sys.argv[1], sys.argv[2]), [10]))",
        &[s(&uri), &name],
    );
    d.ok(&["commit", "-m", "relabel"]);
    let pinned = pin_tag(&d, "features");
    // Writes nobody commits, then thrown away.
    py(
        "out(append(branch(sys.argv[1], sys.argv[2]), [11]))",
        &[s(&uri), &name],
    );
    d.ok(&["new", "relabel", "--discard"]);
    let opened = json_of(&d.ok(&["open", "features", "--json"]));
    let (_, again) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(again, format!("{name}.2"), "{opened}");
    assert!(
        d.workspace_text().contains(&format!("{name}.2")),
        "{}",
        d.workspace_text()
    );
    let seen = py(
        "out({'new': rows(branch(sys.argv[1], sys.argv[2])), \
              'old': rows(branch(sys.argv[1], sys.argv[3])), 'tags': tags(sys.argv[1])})",
        &[s(&uri), again, &name],
    );
    assert_eq!(seen["new"], json!([1, 2, 3, 4, 10]), "{seen}");
    assert_eq!(seen["old"], json!([1, 2, 3, 4, 10, 11]), "{seen}");
    assert_eq!(seen["tags"][&pinned], json!({"branch": name, "version": 3}));
    let status = d.ok(&["status", "--snapshot"]);
    assert!(!status.contains("modified features"), "{status}");
    d.ok(&["verify", "--all-history"]);
}

/// A version with indices is not forked (the clone would have to carry the
/// index metadata): the refusal says how to make that branch with Lance,
/// and nothing is written.
#[test]
fn forking_a_version_with_indices_is_refused_with_instructions() {
    use tether::plugin::{BackendError, Expected, Target};
    let tmp = tempfile::tempdir().unwrap();
    let uri = tmp.path().join("indexed.lance");
    python_dataset(&uri);
    py(
        "open_ds(sys.argv[1]).create_scalar_index('id', 'BTREE'); out(True)",
        &[s(&uri)],
    );
    tether_testkit::block_on(async {
        let p = plugin().await;
        let o = p.object(&json!({ "uri": s(&uri) }), &json!({}));
        let name = "tether.ws.ds.idx";
        let refused = o.fork(&Target::Base, name, &Expected::Absent).await;
        let Err(BackendError::Capability(message)) = refused else {
            panic!("{refused:?}");
        };
        assert!(message.contains("has indices"), "{message}");
        assert!(
            message.contains(&format!("create_branch(\"{name}\", 3)")),
            "{message}"
        );
        assert_eq!(o.list_working_refs().await.unwrap(), Vec::<String>::new());
        assert!(!uri.join("tree").exists(), "nothing was written");
    });
}
