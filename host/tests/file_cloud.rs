//! The `file` backend on every object store and with the credentials users
//! have (issue 26, points 2 and 3), through the `tether` binary:
//!
//! - `--file versioned` on S3 (moto with bucket versioning): the state
//!   carries the version id, `open --rev` of an old commit hands out the old
//!   version id, which reads the old bytes; a bucket without versioning is
//!   refused at `add`; `open` refuses a recorded state without a version id.
//! - GCS on fake-gcs-server (its generations are GCS's version ids) and Azure
//!   Blob on Azurite (no blob versions: `--file versioned` refused), through
//!   object_store's own builders.
//! - S3 keys from a shared-config profile (moto with its authentication on,
//!   so only the profile's keys reach the bucket) and from web identity
//!   against moto's STS.

use crate::support::{Dataset, describe, stdout};
use serde_json::Value;
use tether_testkit::{
    Azurite, GcsServer, S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY, S3Server,
};

/// boto3 operations on `server`'s bucket (or another): `["versioning",
/// BUCKET]`, `["bucket", BUCKET]`, `["put", BUCKET, KEY, TEXT]`, `["get",
/// BUCKET, KEY, VERSION]` (prints the body).
pub(crate) fn s3(server: &S3Server, ops: &[&[&str]]) -> String {
    let script = r#"
import sys, json, boto3
endpoint, key_id, secret, region, ops = sys.argv[1:6]
c = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                 aws_access_key_id=key_id, aws_secret_access_key=secret)
for op in json.loads(ops):
    if op[0] == "versioning":
        c.put_bucket_versioning(Bucket=op[1],
                                VersioningConfiguration={"Status": "Enabled"})
    elif op[0] == "bucket":
        c.create_bucket(Bucket=op[1])
    elif op[0] == "put":
        c.put_object(Bucket=op[1], Key=op[2], Body=op[3].encode())
    elif op[0] == "get":
        print(c.get_object(Bucket=op[1], Key=op[2], VersionId=op[3])["Body"].read().decode())
"#;
    let ops = serde_json::to_string(ops).unwrap();
    let out = std::process::Command::new(tether_testkit::python())
        .arg("-c")
        .arg(script)
        .args([
            server.endpoint(),
            S3_ACCESS_KEY_ID,
            S3_SECRET_ACCESS_KEY,
            S3_REGION,
            &ops,
        ])
        .output()
        .expect("run python");
    assert!(out.status.success(), "boto3 failed:\n{}", describe(&out));
    stdout(&out)
}

fn ok(d: &Dataset, args: &[&str]) -> String {
    let out = d.tether(args);
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(0), "tether {args:?}:\n{text}");
    assert!(!text.contains(S3_SECRET_ACCESS_KEY), "{text}");
    stdout(&out)
}

/// `tether ARGS` must fail with exit 1; its stderr.
fn fails(d: &Dataset, args: &[&str]) -> String {
    let out = d.tether(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "tether {args:?}:\n{}",
        describe(&out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn open_json(d: &Dataset, args: &[&str]) -> Value {
    serde_json::from_str(&ok(d, args)).unwrap()
}

#[test]
fn s3_versioned_object_is_addressable_by_its_version_id() {
    let server = S3Server::start("tether-versioned");
    let bucket = server.bucket();
    s3(
        &server,
        &[
            &["versioning", bucket],
            &["put", bucket, "raw/plate1.csv", "first"],
            &["bucket", "tether-plain"],
            &["put", "tether-plain", "raw/plate1.csv", "plain"],
        ],
    );
    let d = Dataset::init();
    d.write_secrets(&format!(
        "{}{}",
        server.secrets_toml(),
        server
            .secrets_toml()
            .replace(&format!("s3://{bucket}/"), "s3://tether-plain/")
    ));
    let uri = format!("s3://{bucket}/raw/plate1.csv");
    ok(
        &d,
        &[
            "add",
            "plate",
            &uri,
            "--kind",
            "file",
            "--file",
            "versioned",
        ],
    );
    assert!(ok(&d, &["commit", "-m", "first"]).contains("plate"));
    let m = d.manifest("plate");
    let v1 = m["state"]["version_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a version id in {m:?}"))
        .to_string();
    assert_eq!(m["recoverable"].as_bool(), Some(true), "{m:?}");
    let first = d.rev("HEAD");

    // A new version is not immutable drift: on the trunk the object is
    // behind its pin (it has no branches), and `pull` records it.
    s3(
        &server,
        &[&["put", bucket, "raw/plate1.csv", "second, longer"]],
    );
    let status = ok(&d, &["status", "--snapshot"]);
    assert!(status.contains("behind plate"), "{status}");
    ok(&d, &["pull"]);
    let v2 = d.manifest("plate")["state"]["version_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(v1, v2);

    // The old commit opens at the old version id, which reads the old bytes.
    let old = open_json(&d, &["open", "plate", "-r", &first, "--json"]);
    assert_eq!(old["type"], "FileHandle", "{old}");
    assert_eq!(old["read_only"], true, "{old}");
    assert_eq!(
        old["address"].as_str(),
        Some(format!("{uri}?versionId={v1}").as_str()),
        "{old}"
    );
    assert_eq!(
        s3(&server, &[&["get", bucket, "raw/plate1.csv", &v1]]).trim(),
        "first"
    );
    let now = open_json(&d, &["open", "plate", "-r", "HEAD", "--json"]);
    assert_eq!(
        now["address"].as_str(),
        Some(format!("{uri}?versionId={v2}").as_str()),
        "{now}"
    );
    let diff = ok(&d, &["diff", &first, "HEAD", "--content", "--json"]);
    assert!(
        diff.contains(&format!("version {v1} -> {v2}")),
        "diff names both versions: {diff}"
    );

    // A bucket without versioning: refused at add, nothing registered.
    let plain = "s3://tether-plain/raw/plate1.csv";
    let err = fails(
        &d,
        &[
            "add",
            "plain",
            plain,
            "--kind",
            "file",
            "--file",
            "versioned",
        ],
    );
    assert!(
        err.contains("versioning") && err.contains(plain) && err.contains("--file immutable"),
        "{err}"
    );
    assert!(!d.root().join(".tether/objects/plain.toml").exists());
    // A local path is never Addressable: refused too.
    let local = d.tmp().join("local.txt");
    std::fs::write(&local, "x").unwrap();
    // A local file stays Observed under `--file versioned` (spec/14: only its
    // drift is no error): accepted, and not Addressable.
    ok(
        &d,
        &[
            "add",
            "local",
            local.to_str().unwrap(),
            "--kind",
            "file",
            "--file",
            "versioned",
        ],
    );
    let status = open_json(&d, &["status", "--json"]);
    let local_row = status["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["key"] == "local")
        .unwrap_or_else(|| panic!("no local in {status}"));
    assert_eq!(local_row["tier"], "observed", "{status}");
    ok(&d, &["remove", "local"]);

    // A recorded state with no version id (recorded from the unversioned
    // bucket, then marked versioned by hand) is refused by `open`.
    ok(&d, &["add", "plain", plain, "--kind", "file"]);
    ok(&d, &["commit", "-m", "plain"]);
    let path = d.root().join(".tether/objects/plain.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("recoverable = false"), "{text}");
    std::fs::write(
        &path,
        text.replace("recoverable = false", "recoverable = true"),
    )
    .unwrap();
    d.git(&["commit", "-qam", "hand-edited"]);
    let err = fails(&d, &["open", "plain", "-r", "HEAD"]);
    assert!(err.contains("no version id"), "{err}");
}

#[test]
fn gcs_objects_and_generations_on_fake_gcs_server() {
    let gcs = GcsServer::start();
    gcs.create_bucket("tether-gcs", true);
    gcs.create_bucket("tether-gcs-plain", false);
    let g1 = gcs.upload("tether-gcs", "raw/a.txt", b"first");
    gcs.upload("tether-gcs", "list/b.txt", b"bb");
    gcs.upload("tether-gcs", "list/c/d.txt", b"ddd");
    gcs.upload("tether-gcs-plain", "raw/a.txt", b"plain");
    let d = Dataset::init();
    d.write_secrets(&format!(
        "{}{}",
        gcs.secrets_toml("tether-gcs"),
        gcs.secrets_toml("tether-gcs-plain")
    ));
    // A prefix: listed, one entry per object.
    ok(
        &d,
        &["add", "list", "gs://tether-gcs/list/", "--kind", "file"],
    );
    // A single object, addressable by its generation.
    let uri = "gs://tether-gcs/raw/a.txt";
    ok(
        &d,
        &["add", "a", uri, "--kind", "file", "--file", "versioned"],
    );
    ok(&d, &["commit", "-m", "first"]);
    let m = d.manifest("list");
    assert_eq!(m["state"]["type"].as_str(), Some("prefix"), "{m:?}");
    assert_eq!(m["state"]["count"].as_integer(), Some(2), "{m:?}");
    assert_eq!(m["state"]["size"].as_integer(), Some(5), "{m:?}");
    let m = d.manifest("a");
    assert_eq!(
        m["state"]["version_id"].as_str(),
        Some(g1.as_str()),
        "{m:?}"
    );
    let first = d.rev("HEAD");

    let g2 = gcs.upload("tether-gcs", "raw/a.txt", b"second");
    assert_ne!(g1, g2);
    // A new generation on the trunk: behind its pin, which `pull` records.
    assert!(ok(&d, &["status", "--snapshot"]).contains("behind a [file/addressable]"));
    ok(&d, &["pull", "-m", "second"]);
    assert_eq!(
        d.manifest("a")["state"]["version_id"].as_str(),
        Some(g2.as_str())
    );
    let old = open_json(&d, &["open", "a", "-r", &first, "--json"]);
    assert_eq!(
        old["address"].as_str(),
        Some(format!("{uri}#{g1}").as_str()),
        "{old}"
    );

    // GCS gives every object a generation, versioned bucket or not, so
    // `add` cannot tell; without versioning the old generation is gone once
    // overwritten, and `open` at the old commit says so instead of handing
    // out an address that reads nothing.
    let plain = "gs://tether-gcs-plain/raw/a.txt";
    ok(
        &d,
        &["add", "p", plain, "--kind", "file", "--file", "versioned"],
    );
    ok(&d, &["commit", "-m", "plain", "p"]);
    let recorded = d.rev("HEAD");
    gcs.upload("tether-gcs-plain", "raw/a.txt", b"replaced");
    ok(&d, &["pull", "--key", "p", "-m", "plain again"]);
    let err = fails(&d, &["open", "p", "-r", &recorded]);
    assert!(err.contains(plain) && err.contains("no version"), "{err}");
}

#[test]
fn azure_objects_and_prefixes_on_azurite() {
    let Some(az) = Azurite::start() else { return };
    let container = "tether-data";
    az.create_container(container);
    az.put(container, "raw/a.txt", b"first");
    az.put(container, "raw/b.txt", b"bb");
    let d = Dataset::init();
    d.write_secrets(&az.secrets_toml(container));
    ok(
        &d,
        &["add", "raw", "az://tether-data/raw/", "--kind", "file"],
    );
    ok(
        &d,
        &["add", "a", "az://tether-data/raw/a.txt", "--kind", "file"],
    );
    ok(&d, &["commit", "-m", "first"]);
    let m = d.manifest("raw");
    assert_eq!(m["state"]["type"].as_str(), Some("prefix"), "{m:?}");
    assert_eq!(m["state"]["count"].as_integer(), Some(2), "{m:?}");
    assert_eq!(m["state"]["size"].as_integer(), Some(7), "{m:?}");
    let a = d.manifest("a");
    assert_eq!(a["state"]["type"].as_str(), Some("object"), "{a:?}");
    assert!(a["state"].get("version_id").is_none(), "{a:?}");
    assert!(ok(&d, &["status", "--snapshot"]).contains("clean"));

    // New bytes: the immutable object drifts, the prefix changes.
    az.put(container, "raw/a.txt", b"second");
    let out = d.tether(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = describe(&out);
    assert!(
        text.contains("modified raw") || text.contains("raw"),
        "{text}"
    );

    // Azurite keeps no blob versions: `--file versioned` is refused at add.
    let err = fails(
        &d,
        &[
            "add",
            "v",
            "az://tether-data/raw/b.txt",
            "--kind",
            "file",
            "--file",
            "versioned",
        ],
    );
    assert!(
        err.contains("versioning") && err.contains("az://tether-data/raw/b.txt"),
        "{err}"
    );

    // Wrong credentials: access denied, naming the store, never the key.
    d.write_secrets(&az.secrets_toml(container).replace(
        tether_testkit::AZURITE_KEY,
        "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk=",
    ));
    let err = fails(&d, &["status", "--snapshot"]);
    assert!(err.contains("az://tether-data"), "{err}");
    assert!(!err.contains(tether_testkit::AZURITE_KEY), "{err}");
}

/// A tether command with `env` set and the caller's AWS keys removed.
pub(crate) fn tether_env(
    d: &Dataset,
    env: &[(&str, String)],
    args: &[&str],
) -> std::process::Output {
    let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    for v in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_STS",
        "AWS_ENDPOINT_URL_SSO",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args).output().expect("run tether")
}

/// The server's secrets entry without its literal keys: endpoint and
/// path style only, so the credentials must come from elsewhere.
pub(crate) fn keyless_secrets(server: &S3Server, extra: &str) -> String {
    format!(
        "[uris.\"s3://{}/\"]\nregion = \"{S3_REGION}\"\nendpoint_url = \"{}\"\n\
         allow_http = true\nforce_path_style = true\n{extra}",
        server.bucket(),
        server.endpoint()
    )
}

#[test]
fn s3_credentials_from_a_shared_config_profile() {
    let (server, key_id, secret) = S3Server::start_with_user("tether-profiles");
    let d = Dataset::init();
    let uri = format!("s3://{}/", server.bucket());
    let config = d.tmp().join("aws-config");
    let credentials = d.tmp().join("aws-credentials");
    std::fs::write(
        &config,
        "[profile lab]\nregion = us-east-1\n[profile other]\nregion = us-east-1\n",
    )
    .unwrap();
    std::fs::write(
        &credentials,
        format!(
            "[lab]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n\
             [other]\naws_access_key_id = AKIANOTKNOWNTOMOTO00\naws_secret_access_key = nope\n"
        ),
    )
    .unwrap();
    let env = vec![
        ("AWS_CONFIG_FILE", config.display().to_string()),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            credentials.display().to_string(),
        ),
    ];
    let run = |args: &[&str]| tether_env(&d, &env, args);

    d.write_secrets(&keyless_secrets(&server, "profile = \"lab\"\n"));
    let out = run(&["add", "bucket", &uri, "--kind", "file"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = run(&["commit", "-m", "with the lab profile"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!describe(&out).contains(&secret));
    assert_eq!(
        d.manifest("bucket")["state"]["type"].as_str(),
        Some("prefix")
    );

    // The other profile's keys are not moto's: the store refuses them.
    d.write_secrets(&keyless_secrets(&server, "profile = \"other\"\n"));
    let out = run(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        describe(&out).contains("InvalidAccessKeyId"),
        "{}",
        describe(&out)
    );

    // A profile the files do not have: named, with what to set.
    d.write_secrets(&keyless_secrets(&server, "profile = \"nowhere\"\n"));
    let out = run(&["status", "--snapshot"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = describe(&out);
    assert!(
        err.contains("profile `nowhere`") && err.contains("secrets.toml"),
        "{err}"
    );
    assert!(!err.contains(&secret), "{err}");
}

#[test]
fn s3_credentials_from_web_identity_through_sts() {
    let server = S3Server::start("tether-web-identity");
    s3(&server, &[&["put", server.bucket(), "a.txt", "hello"]]);
    let d = Dataset::init();
    d.write_secrets(&keyless_secrets(&server, ""));
    let token = d.tmp().join("token");
    std::fs::write(&token, "token-from-the-ci-provider").unwrap();
    let uri = format!("s3://{}/a.txt", server.bucket());
    let web_identity = |sts: &str| {
        vec![
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/tether-ci".to_string(),
            ),
            ("AWS_ENDPOINT_URL_STS", sts.to_string()),
        ]
    };

    // No source of credentials at all (and no instance metadata): refused,
    // saying what to set.
    let out = tether_env(&d, &[], &["add", "a", &uri, "--kind", "file"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = tether_env(&d, &[], &["commit", "-m", "nothing"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = describe(&out);
    assert!(
        err.contains("no S3 credentials") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );

    // STS unreachable: the web identity exchange is what failed.
    let out = tether_env(
        &d,
        &web_identity("http://127.0.0.1:9"),
        &["commit", "-m", "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));

    // moto's STS exchanges the token for keys, and the commit reads the object.
    let out = tether_env(
        &d,
        &web_identity(server.endpoint()),
        &["commit", "-m", "web identity"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(d.manifest("a")["state"]["size"].as_integer(), Some(5));
}
