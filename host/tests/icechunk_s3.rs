//! The `icechunk` plugin on `s3://` against the real Icechunk library: a
//! local S3 server (moto, which honours the conditional puts Icechunk relies
//! on) holds the repository; Python `icechunk` 2.3 writes and reads it with
//! `icechunk.s3_storage`, and the `tether` binary works on it with the
//! endpoint and keys in `.tether/secrets.toml`, which the host resolves and
//! the plugin never sees.

use std::process::Output;

use crate::support::{Dataset, describe, lines};
use serde_json::{Value, json};
use tether_testkit::{S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY, S3Server};

/// Helpers every script starts with; `sys.argv[1:4]` are the endpoint, the
/// bucket and the repository's prefix. Scripts print one JSON document.
const PRELUDE: &str = r#"
import json, sys
import icechunk, zarr

ENDPOINT, BUCKET, PREFIX = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]

def storage():
    return icechunk.s3_storage(
        bucket=BUCKET, prefix=PREFIX, endpoint_url=ENDPOINT, allow_http=True,
        force_path_style=True, access_key_id=KEY_ID, secret_access_key=SECRET,
        region=REGION)

def open_repo():
    return icechunk.Repository.open(storage())

def read(session, name="temp"):
    return zarr.open_array(session.store, path=name, mode="r")[:].tolist()

def write(repo, branch, values, message, name="temp"):
    session = repo.writable_session(branch)
    zarr.open_array(session.store, path=name, mode="r+")[:] = values
    return session.commit(message)

def out(value):
    print(json.dumps(value))
"#;

/// Run `script` on the repository at `s3://BUCKET/prefix`, `args` as `ARGS`.
fn py(server: &S3Server, prefix: &str, script: &str, args: &[&str]) -> Value {
    let prelude = format!(
        "KEY_ID, SECRET, REGION = {S3_ACCESS_KEY_ID:?}, {S3_SECRET_ACCESS_KEY:?}, {S3_REGION:?}\n{PRELUDE}"
    );
    let out = std::process::Command::new(tether_testkit::python())
        .arg("-c")
        .arg(format!("{prelude}\n{script}"))
        .args([server.endpoint(), server.bucket(), prefix])
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
fn python_repository(server: &S3Server, prefix: &str) -> String {
    let made = py(
        server,
        prefix,
        r#"
repo = icechunk.Repository.create(storage())
session = repo.writable_session("main")
group = zarr.group(store=session.store)
array = group.create_array("temp", shape=(4,), chunks=(2,), dtype="i4")
array[:] = [1, 2, 3, 4]
out(session.commit("first values"))
"#,
        &[],
    );
    made.as_str().expect("a snapshot id").to_owned()
}

fn python_tags(server: &S3Server, prefix: &str) -> Value {
    py(
        server,
        prefix,
        "repo = open_repo()\nout({t: repo.lookup_tag(t) for t in sorted(repo.list_tags())})",
        &[],
    )
}

/// A dataset whose secrets.toml points `s3://BUCKET/` at the server.
fn dataset(server: &S3Server) -> Dataset {
    let d = Dataset::init();
    write_secrets(&d, &server.secrets_toml());
    d
}

fn write_secrets(d: &Dataset, text: &str) {
    d.write_secrets(text);
}

/// `tether ARGS` with no AWS variable in the environment, so only
/// secrets.toml can point it at the server.
fn tether(d: &Dataset, args: &[&str]) -> Output {
    let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    for v in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ALLOW_HTTP",
        "AWS_PROFILE",
    ] {
        c.env_remove(v);
    }
    c.args(args).output().expect("run tether")
}

fn ok(d: &Dataset, args: &[&str]) -> String {
    let out = tether(d, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tether {} should succeed:\n{}",
        args.join(" "),
        describe(&out)
    );
    assert_no_secret(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_no_secret(out: &Output) {
    let all = describe(out);
    assert!(
        !all.contains(S3_SECRET_ACCESS_KEY),
        "the secret key was printed:\n{all}"
    );
}

/// The whole story on S3: add, commit pins (Python reads the tag), a branch
/// with a writable open Python commits on, commit, promote (Python sees
/// main at the promoted snapshot), `verify --all-history`.
#[test]
fn s3_pin_fork_write_promote_interoperate_with_python() {
    let server = S3Server::start("tether-story");
    let prefix = "lab/cube.icechunk";
    let first = python_repository(&server, prefix);
    let d = dataset(&server);
    let uri = format!("s3://{}/{prefix}", server.bucket());
    let added = ok(&d, &["add", "cube", &uri, "--kind", "icechunk"]);
    assert_eq!(added, "added cube [icechunk]\n");

    let out = ok(&d, &["commit", "-m", "first"]);
    assert!(out.contains("pinned cube -> tether."), "{out}");
    let tags = python_tags(&server, prefix);
    let tags = tags.as_object().unwrap();
    assert_eq!(tags.len(), 1, "one pin: {tags:?}");
    let (tag, at) = tags.iter().next().unwrap();
    assert!(
        tag.starts_with(&format!("tether.{}.", d.dataset_id())),
        "{tag}"
    );
    assert_eq!(at.as_str(), Some(first.as_str()), "the tag holds the head");
    let read = py(
        &server,
        prefix,
        "out(read(open_repo().readonly_session(tag=ARGS[0])))",
        &[tag],
    );
    assert_eq!(read, json!([1, 2, 3, 4]));

    // A branch: the working branch exists for Python, opens writable, and
    // Python commits on it.
    let out = ok(&d, &["new", "-b", "feat", "--eager"]);
    let working = format!("tether.ws.{}.feat", d.dataset_id());
    assert!(out.contains(&working), "{out}");
    let opened = ok(&d, &["open", "cube", "--json"]);
    let opened: Value = serde_json::from_str(&opened).unwrap();
    assert_eq!(opened["read_only"], false, "{opened}");
    let (address_uri, branch) = opened["address"].as_str().unwrap().split_once('#').unwrap();
    assert_eq!(address_uri, uri, "{opened}");
    assert_eq!(branch, working, "{opened}");
    let written = py(
        &server,
        prefix,
        r#"
repo = open_repo()
assert ARGS[0] in repo.list_branches(), repo.list_branches()
out(write(repo, ARGS[0], [9, 9, 9, 9], "feature values"))
"#,
        &[branch],
    );
    ok(&d, &["commit", "-m", "feature values"]);
    let promoted = ok(&d, &["promote"]);
    assert!(
        promoted.contains(&format!(
            "fast-forwarded cube -> snapshot_id={}",
            written.as_str().unwrap()
        )),
        "{promoted}"
    );
    let main = py(
        &server,
        prefix,
        r#"
repo = open_repo()
out({"main": repo.lookup_branch("main"), "values": read(repo.readonly_session(branch="main")),
     "tags": sorted(repo.list_tags())})
"#,
        &[],
    );
    assert_eq!(
        main["main"], written,
        "Icechunk's main is the promoted snapshot"
    );
    assert_eq!(main["values"], json!([9, 9, 9, 9]));
    assert_eq!(main["tags"].as_array().unwrap().len(), 2, "{main}");

    let verified = ok(&d, &["verify", "--all-history"]);
    let cube: Vec<String> = lines(&verified)
        .into_iter()
        .filter(|l| l.contains(":cube:"))
        .collect();
    assert_eq!(cube.len(), 2, "{verified}");
    assert!(
        cube.iter()
            .all(|l| l.starts_with("ok ") && l.contains("pinned as tether.")),
        "{verified}"
    );
}

/// `gc` unpins on S3: Icechunk tombstones the tag, Python cannot create it
/// again, and pinning the state again takes the next generation.
#[test]
fn s3_gc_tombstones_a_pin_python_cannot_recreate() {
    let server = S3Server::start("tether-gc");
    let prefix = "cube.icechunk";
    python_repository(&server, prefix);
    let d = dataset(&server);
    let uri = format!("s3://{}/{prefix}", server.bucket());
    ok(&d, &["add", "cube", &uri, "--kind", "icechunk"]);
    ok(&d, &["commit", "-m", "first"]);
    let second = py(
        &server,
        prefix,
        r#"out(write(open_repo(), "main", [5, 6, 7, 8], "second values"))"#,
        &[],
    );
    let out = ok(&d, &["commit", "-m", "second"]);
    let tag = out
        .lines()
        .find_map(|l| l.strip_prefix("pinned cube -> "))
        .unwrap_or_else(|| panic!("the commit pins cube:\n{out}"))
        .to_string();
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let applied = ok(&d, &["gc", "--no-dry-run"]);
    assert!(
        applied.contains(tag.strip_prefix("tether.").unwrap()),
        "{applied}"
    );
    let after = py(
        &server,
        prefix,
        r#"
repo = open_repo()
tags = sorted(repo.list_tags())
try:
    repo.create_tag(ARGS[0], snapshot_id=ARGS[1])
    recreated = True
except Exception:
    recreated = False
out({"tags": tags, "recreated": recreated})
"#,
        &[&tag, second.as_str().unwrap()],
    );
    assert_eq!(after["recreated"], false, "{after}");
    assert!(
        !after["tags"].as_array().unwrap().contains(&json!(tag)),
        "{after}"
    );
    let out = ok(&d, &["commit", "-m", "second again"]);
    assert!(out.contains(&format!("pinned cube -> {tag}.2")), "{out}");
    assert_eq!(python_tags(&server, prefix)[format!("{tag}.2")], second);
}

/// `add --create` on S3: an empty Icechunk repository Python opens, owned
/// by the dataset (`tether.owner`), that Python then commits into and
/// tether reads back.
#[test]
fn s3_add_create_makes_a_repository_python_opens() {
    let server = S3Server::start("tether-create");
    let d = dataset(&server);
    let prefix = "made/fresh.icechunk";
    let uri = format!("s3://{}/{prefix}", server.bucket());
    ok(
        &d,
        &["add", "fresh", &uri, "--kind", "icechunk", "--create"],
    );
    let seen = py(
        &server,
        prefix,
        r#"
st = storage()
assert icechunk.Repository.exists(st)
repo = icechunk.Repository.open(st)
meta = repo.get_metadata()
session = repo.writable_session("main")
group = zarr.group(store=session.store)
group.create_array("temp", shape=(2,), chunks=(2,), dtype="i4")[:] = [7, 8]
out({"metadata": meta, "commit": session.commit("python writes into a store tether made"),
     "spec": int(icechunk.Repository.fetch_spec_version(st))})
"#,
        &[],
    );
    assert_eq!(
        seen["metadata"],
        json!({ "tether.owner": d.dataset_id() }),
        "{seen}"
    );
    assert_eq!(seen["spec"], 2, "{seen}");
    let out = ok(&d, &["commit", "-m", "python's values"]);
    assert!(out.contains("pinned fresh -> tether."), "{out}");
    let tags = python_tags(&server, prefix);
    assert!(
        tags.as_object()
            .unwrap()
            .values()
            .any(|v| *v == seen["commit"]),
        "tether pinned Python's commit: {tags}"
    );
}

/// Bad S3 settings fail with exit 1, a message saying what to configure,
/// and never the secret; a committed endpoint is refused outright.
#[test]
fn s3_bad_settings_are_clear_errors_without_secrets() {
    let server = S3Server::start("tether-bad");
    let prefix = "cube.icechunk";
    python_repository(&server, prefix);
    let d = Dataset::init();
    let uri = format!("s3://{}/{prefix}", server.bucket());
    // No credentials anywhere: `add` records the object, reading it fails.
    ok(&d, &["add", "cube", &uri, "--kind", "icechunk"]);
    let failed = tether(&d, &["commit", "-m", "first"]);
    assert_eq!(failed.status.code(), Some(1), "{}", describe(&failed));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("no S3 credentials")
            && err.contains("secrets.toml")
            && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );

    // A profile the shared config files do not have: the chain's failure
    // names it and says what else to set.
    write_secrets(
        &d,
        &format!("[uris.\"s3://{}/\"]\nprofile = \"lab\"\n", server.bucket()),
    );
    let failed = tether(&d, &["commit", "-m", "first"]);
    assert_eq!(failed.status.code(), Some(1), "{}", describe(&failed));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("`profile`") && err.contains("access_key_id"),
        "{err}"
    );

    // A wrong endpoint: the request fails, naming the store, not the key.
    let wrong = server
        .secrets_toml()
        .replace(server.endpoint(), "http://127.0.0.1:9");
    write_secrets(&d, &wrong);
    let failed = tether(&d, &["commit", "-m", "first"]);
    assert_eq!(failed.status.code(), Some(1), "{}", describe(&failed));
    assert_no_secret(&failed);
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains(&uri) && err.contains("http://127.0.0.1:9/"),
        "names the store and the endpoint tried: {err}"
    );

    // The object-level entry beats the URI-level one, field by field: the
    // right endpoint for this object alone fixes it.
    let fixed = format!(
        "{wrong}[objects.\"cube\"]\nendpoint_url = \"{}\"\n",
        server.endpoint()
    );
    write_secrets(&d, &fixed);
    let out = ok(&d, &["commit", "-m", "first"]);
    assert!(out.contains("pinned cube -> tether."), "{out}");

    // The store refuses the keys: access denied, saying what to configure.
    let denying = S3Server::start_denying("tether-denied");
    let d2 = Dataset::init();
    write_secrets(&d2, &denying.secrets_toml());
    let denied_uri = format!("s3://{}/{prefix}", denying.bucket());
    ok(&d2, &["add", "cube", &denied_uri, "--kind", "icechunk"]);
    let failed = tether(&d2, &["commit", "-m", "first"]);
    assert_eq!(failed.status.code(), Some(1), "{}", describe(&failed));
    assert_no_secret(&failed);
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("access denied")
            && err.contains("secret_access_key")
            && err.contains(".tether/secrets.toml"),
        "{err}"
    );

    // A committed tether.toml may not choose the endpoint credentials go to.
    let toml = d.root().join("tether.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str("\n[backends.icechunk]\nendpoint_url = \"http://evil.example\"\n");
    std::fs::write(&toml, text).unwrap();
    let refused = tether(&d, &["status"]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("endpoint_url") && err.contains("secrets.toml"),
        "{err}"
    );
}
