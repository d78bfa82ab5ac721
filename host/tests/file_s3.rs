//! The `file` plugin on S3 (spec/11 "file": an object is `type=object, size,
//! etag`; a prefix `type=prefix, count, size, digest` from one paged listing,
//! etag and size per key), against a
//! local S3 server (moto) written to by boto3, through the `tether` binary
//! with the endpoint and keys in `.tether/secrets.toml`.

use crate::support::{Dataset, describe, lines};
use serde_json::Value;
use tether_testkit::{S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY, S3Server};

/// Put (`put KEY TEXT`) or delete (`delete KEY`) objects with boto3.
fn s3(server: &S3Server, ops: &[&[&str]]) {
    let script = r#"
import sys, json, boto3
endpoint, bucket, key_id, secret, region, ops = sys.argv[1:7]
c = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                 aws_access_key_id=key_id, aws_secret_access_key=secret)
for op in json.loads(ops):
    if op[0] == "put":
        c.put_object(Bucket=bucket, Key=op[1], Body=op[2].encode())
    else:
        c.delete_object(Bucket=bucket, Key=op[1])
"#;
    let ops = serde_json::to_string(ops).unwrap();
    let out = std::process::Command::new(tether_testkit::python())
        .arg("-c")
        .arg(script)
        .args([
            server.endpoint(),
            server.bucket(),
            S3_ACCESS_KEY_ID,
            S3_SECRET_ACCESS_KEY,
            S3_REGION,
            &ops,
        ])
        .output()
        .expect("run python");
    assert!(out.status.success(), "boto3 failed:\n{}", describe(&out));
}

fn ok(d: &Dataset, args: &[&str]) -> String {
    let out = d.tether(args);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "tether {args:?}:\n{text}");
    assert!(!text.contains(S3_SECRET_ACCESS_KEY), "{text}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn dataset(server: &S3Server) -> Dataset {
    use std::os::unix::fs::PermissionsExt as _;
    let d = Dataset::init();
    let path = d.root().join(".tether").join("secrets.toml");
    std::fs::write(&path, server.secrets_toml()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    d
}

/// A single object: its state is size and etag, read with only the object's
/// own URI granted; new bytes are drift; re-registered, `diff` shows the
/// size and etag change.
#[test]
fn s3_object_state_and_diff() {
    let server = S3Server::start("tether-one-file");
    s3(
        &server,
        &[
            &["put", "dir/one.txt", "first"],
            &["put", "dir/two.txt", "x"],
        ],
    );
    let d = dataset(&server);
    let uri = format!("s3://{}/dir/one.txt", server.bucket());
    ok(&d, &["add", "one", &uri, "--kind", "file"]);
    ok(&d, &["commit", "-m", "first"]);
    let m = d.manifest("one");
    assert_eq!(m["state"]["type"].as_str(), Some("object"), "{m:?}");
    assert_eq!(m["state"]["size"].as_integer(), Some(5), "{m:?}");
    // moto's etag is the MD5 of a single-part upload.
    assert_eq!(
        m["state"]["etag"].as_str(),
        Some("8b04d5e3775d298e78455efc5ca404d5"),
        "{m:?}"
    );
    let first = d.rev("HEAD");
    // Another key beside it is not this object.
    s3(&server, &[&["put", "dir/two.txt", "changed"]]);
    assert!(ok(&d, &["status", "--snapshot"]).contains("clean one"));

    s3(&server, &[&["put", "dir/one.txt", "second, longer"]]);
    let out = d.tether(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    ok(&d, &["remove", "one"]);
    ok(&d, &["add", "one", &uri, "--kind", "file"]);
    ok(&d, &["commit", "-m", "second"]);
    let diff = ok(&d, &["diff", &first, "HEAD", "--content", "--json"]);
    let diff: Value = serde_json::from_str(&diff).unwrap();
    let entry = &diff.as_array().unwrap()[0]["detail"]["entries"][0];
    assert_eq!(entry["change"], "modified", "{diff}");
    let detail = entry["detail"].as_str().unwrap();
    assert!(
        detail.contains("size 5 B -> 14 B") && detail.contains("etag 8b04d5e"),
        "{diff}"
    );

    // A missing object is an error naming it.
    s3(&server, &[&["delete", "dir/one.txt"]]);
    let out = d.tether(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&uri),
        "{}",
        describe(&out)
    );
}

#[test]
fn s3_prefix_states_listings_and_diffs() {
    let server = S3Server::start("tether-files");
    s3(
        &server,
        &[
            &["put", "raw/a.txt", "alpha"],
            &["put", "raw/sub/b.txt", "bravo!"],
            // Beside the prefix, not under it.
            &["put", "rawish/c.txt", "not ours"],
        ],
    );
    let d = dataset(&server);
    let uri = format!("s3://{}/raw/", server.bucket());
    ok(&d, &["add", "raw", &uri, "--kind", "file"]);
    ok(&d, &["commit", "-m", "first"]);
    let m = d.manifest("raw");
    let state = &m["state"];
    assert_eq!(state["type"].as_str(), Some("prefix"), "{m:?}");
    assert_eq!(state["count"].as_integer(), Some(2), "{m:?}");
    assert_eq!(state["size"].as_integer(), Some(11), "{m:?}");
    let first = d.rev("HEAD");
    let status = ok(&d, &["status", "--snapshot"]);
    assert!(status.contains("clean raw"), "{status}");

    // Bytes change under one key, one key is added and one removed.
    s3(
        &server,
        &[
            &["put", "raw/a.txt", "ALPHA, longer"],
            &["put", "raw/new.txt", "n"],
            &["delete", "raw/sub/b.txt"],
        ],
    );
    // `file` objects are immutable by default: drift is an error...
    let out = d.tether(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        lines(&String::from_utf8_lossy(&out.stdout))
            .iter()
            .any(|l| l.starts_with("error raw [file/observed]")),
        "{}",
        describe(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed since it was committed"),
        "{}",
        describe(&out)
    );
    // ...until the object is registered again with its new content.
    ok(&d, &["remove", "raw"]);
    ok(&d, &["add", "raw", &uri, "--kind", "file"]);
    ok(&d, &["commit", "-m", "second"]);
    let m = d.manifest("raw");
    assert_eq!(m["state"]["count"].as_integer(), Some(2), "{m:?}");
    assert_eq!(m["state"]["size"].as_integer(), Some(14), "{m:?}");
    let diff = ok(&d, &["diff", &first, "HEAD", "--content", "--json"]);
    let diff: Value = serde_json::from_str(&diff).unwrap();
    let entries = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "raw")
        .unwrap_or_else(|| panic!("raw changed: {diff}"))["detail"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["change"].as_str().unwrap(),
                e["path"].as_str().unwrap()
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        entries,
        ["modified a.txt", "added new.txt", "removed sub/b.txt"],
        "{diff}"
    );

    // `add --create` makes only local directories.
    let out = d.tether(&[
        "add",
        "made",
        &format!("s3://{}/made/", server.bucket()),
        "--kind",
        "file",
        "--create",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only local directories"),
        "{}",
        describe(&out)
    );
}
