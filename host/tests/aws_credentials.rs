//! S3 credentials from the AWS SDK's own chain, as users have them (issue
//! 26, point 3), through the `tether` binary against moto on 127.0.0.1:
//!
//! - a shared-config profile whose `credential_process` prints the keys;
//! - a profile with `role_arn` + `source_profile` (AssumeRole at moto's STS,
//!   through `AWS_ENDPOINT_URL_STS`);
//! - ECS container credentials (`AWS_CONTAINER_CREDENTIALS_FULL_URI` at a
//!   loopback server, with its authorization token);
//! - an IAM Identity Center (SSO) profile: a cached SSO token and a loopback
//!   portal (`AWS_ENDPOINT_URL_SSO`) that trades it for the keys.
//!
//! Where moto runs with its authentication on (`start_with_user`), only the
//! IAM user's real keys reach the bucket, so a commit that succeeds proves
//! the chain produced them; elsewhere the source's failure (STS unreachable,
//! a wrong container token) shows the keys came from nowhere else. Every command has `AWS_EC2_METADATA_DISABLED`
//! and nothing leaves 127.0.0.1.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use crate::file_cloud::{keyless_secrets, tether_env};
use crate::support::{Dataset, describe};
use tether_testkit::S3Server;

/// `tether ARGS` with `env`; must exit `code`. Its stdout and stderr.
fn run(d: &Dataset, env: &[(&str, String)], args: &[&str], code: i32) -> String {
    let out = tether_env(d, env, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tether {args:?}:\n{}",
        describe(&out)
    );
    describe(&out)
}

/// The shared config and credentials files of a test, and the environment
/// that points the SDK at them.
fn aws_files(d: &Dataset, config: &str, credentials: &str) -> Vec<(&'static str, String)> {
    let c = d.tmp().join("aws-config");
    let k = d.tmp().join("aws-credentials");
    std::fs::write(&c, config).unwrap();
    std::fs::write(&k, credentials).unwrap();
    vec![
        ("AWS_CONFIG_FILE", c.display().to_string()),
        ("AWS_SHARED_CREDENTIALS_FILE", k.display().to_string()),
    ]
}

/// An executable shell script at `path`.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_profile_whose_credential_process_prints_the_keys() {
    let (server, key_id, secret) = S3Server::start_with_user("tether-process");
    let d = Dataset::init();
    let marker = d.tmp().join("process-ran");
    let good = d.tmp().join("keys.sh");
    script(
        &good,
        &format!(
            "echo ran >> '{}'\nprintf '{{\"Version\": 1, \"AccessKeyId\": \"%s\", \
             \"SecretAccessKey\": \"%s\"}}\\n' '{key_id}' '{secret}'\n",
            marker.display()
        ),
    );
    let broken = d.tmp().join("broken.sh");
    script(&broken, "echo 'no keys for you' >&2\nexit 3\n");
    let env = aws_files(
        &d,
        &format!(
            "[profile proc]\nregion = us-east-1\ncredential_process = {}\n\
             [profile broken]\nregion = us-east-1\ncredential_process = {}\n",
            good.display(),
            broken.display()
        ),
        "",
    );
    let uri = format!("s3://{}/", server.bucket());

    d.write_secrets(&keyless_secrets(&server, "profile = \"proc\"\n"));
    run(&d, &env, &["add", "bucket", &uri, "--kind", "file"], 0);
    let out = run(&d, &env, &["commit", "-m", "keys from a process"], 0);
    assert!(!out.contains(&secret), "{out}");
    assert_eq!(
        d.manifest("bucket")["state"]["type"].as_str(),
        Some("prefix")
    );
    assert!(
        std::fs::read_to_string(&marker).is_ok_and(|s| s.contains("ran")),
        "the profile's credential_process ran"
    );

    // A process that fails: the commit-less status says so, no key printed.
    d.write_secrets(&keyless_secrets(&server, "profile = \"broken\"\n"));
    let err = run(&d, &env, &["status", "--snapshot"], 1);
    assert!(
        err.contains("no S3 credentials") && err.contains("profile `broken`"),
        "{err}"
    );
    assert!(!err.contains(&secret), "{err}");
}

#[test]
fn a_profile_with_role_arn_and_source_profile_assumes_the_role_at_sts() {
    let server = S3Server::start("tether-role");
    crate::file_cloud::s3(&server, &[&["put", server.bucket(), "a.txt", "hello"]]);
    let d = Dataset::init();
    let mut env = aws_files(
        &d,
        "[profile base]\nregion = us-east-1\n\
         [profile ci]\nregion = us-east-1\n\
         role_arn = arn:aws:iam::123456789012:role/tether-ci\n\
         role_session_name = tether-test\nsource_profile = base\n",
        "[base]\naws_access_key_id = AKIABASEPROFILE00000\n\
         aws_secret_access_key = base-secret-DO-NOT-PRINT\n",
    );
    d.write_secrets(&keyless_secrets(&server, "profile = \"ci\"\n"));
    let uri = format!("s3://{}/a.txt", server.bucket());
    run(&d, &env, &["add", "a", &uri, "--kind", "file"], 0);

    // STS unreachable: the role cannot be assumed, so there are no keys
    // (the source profile's own are not used in its place).
    env.push(("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9".to_string()));
    let err = run(&d, &env, &["commit", "-m", "no sts"], 1);
    assert!(err.contains("no S3 credentials"), "{err}");
    assert!(!err.contains("base-secret-DO-NOT-PRINT"), "{err}");

    // moto's STS hands out the role's keys, and the commit reads the object.
    env.pop();
    env.push(("AWS_ENDPOINT_URL_STS", server.endpoint().to_string()));
    run(&d, &env, &["commit", "-m", "assumed"], 0);
    assert_eq!(d.manifest("a")["state"]["size"].as_integer(), Some(5));
}

/// The loopback credentials server, stopped on drop.
struct CredentialsServer {
    child: Child,
    lines: BufReader<ChildStdout>,
    url: String,
}

impl CredentialsServer {
    fn start(key_id: &str, secret: &str, ecs_token: &str, sso_token: &str) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/aws_credentials_server.py");
        let mut child = Command::new(tether_testkit::python())
            .arg(&script)
            .args([key_id, secret, ecs_token, sso_token])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the credentials server");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        let url = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the credentials server said {first:?}"))
            .to_owned();
        CredentialsServer { child, lines, url }
    }

    /// The next endpoint it answered with keys (`ecs` or `sso`).
    fn served(&mut self) -> String {
        let mut line = String::new();
        self.lines.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }
}

impl Drop for CredentialsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ecs_container_credentials_from_a_loopback_endpoint() {
    // Container credentials always carry a session token, which moto with
    // its authentication on would check against those it issued: this
    // bucket takes any keys, and the endpoint's own log says it handed them
    // out (and a wrong token gets none from anywhere).
    let server = S3Server::start("tether-ecs");
    let (key_id, secret) = ("AKIACONTAINER0000000", "container-secret-DO-NOT-PRINT");
    let mut creds = CredentialsServer::start(key_id, secret, "ecs-token", "unused");
    let d = Dataset::init();
    let nowhere = d.tmp().join("no-such-aws-file").display().to_string();
    let env = |token: &str| {
        vec![
            ("AWS_CONFIG_FILE", nowhere.clone()),
            ("AWS_SHARED_CREDENTIALS_FILE", nowhere.clone()),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("{}/ecs", creds.url),
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", token.to_string()),
        ]
    };
    d.write_secrets(&keyless_secrets(&server, ""));
    let uri = format!("s3://{}/", server.bucket());
    let good = env("ecs-token");
    let bad = env("wrong-token");
    run(&d, &good, &["add", "bucket", &uri, "--kind", "file"], 0);

    // The endpoint refuses a wrong token: no keys, said so.
    let err = run(&d, &bad, &["commit", "-m", "refused"], 1);
    assert!(err.contains("no S3 credentials"), "{err}");

    let out = run(&d, &good, &["commit", "-m", "container keys"], 0);
    assert!(!out.contains(secret), "{out}");
    assert_eq!(creds.served(), "ecs");
    assert_eq!(
        d.manifest("bucket")["state"]["type"].as_str(),
        Some("prefix")
    );
}

#[test]
fn an_sso_profile_trades_its_cached_token_at_the_portal() {
    let (server, key_id, secret) = S3Server::start_with_user("tether-sso");
    let mut creds = CredentialsServer::start(&key_id, &secret, "unused", "sso-access-token");
    let d = Dataset::init();
    let start_url = "https://tether-test.awsapps.invalid/start";
    let mut env = aws_files(
        &d,
        &format!(
            "[profile sso]\nregion = us-east-1\nsso_start_url = {start_url}\n\
             sso_region = us-east-1\nsso_account_id = 123456789012\nsso_role_name = lab\n"
        ),
        "",
    );
    env.push(("AWS_ENDPOINT_URL_SSO", creds.url.clone()));
    d.write_secrets(&keyless_secrets(&server, "profile = \"sso\"\n"));
    let uri = format!("s3://{}/", server.bucket());
    run(&d, &env, &["add", "bucket", &uri, "--kind", "file"], 0);

    // No cached token (nobody ran `aws sso login`): no keys, said so.
    let err = run(&d, &env, &["commit", "-m", "no login"], 1);
    assert!(
        err.contains("no S3 credentials") && err.contains("profile `sso`"),
        "{err}"
    );

    // The token `aws sso login` caches, under the SHA-1 of the start URL.
    let cache = d.tmp().join("home/.aws/sso/cache");
    std::fs::create_dir_all(&cache).unwrap();
    let made = Command::new(tether_testkit::python())
        .args([
            "-c",
            "import hashlib, json, sys\n\
             url, cache = sys.argv[1:3]\n\
             name = hashlib.sha1(url.encode()).hexdigest() + '.json'\n\
             json.dump({'accessToken': 'sso-access-token', 'expiresAt': '2099-01-01T00:00:00Z',\n\
                        'region': 'us-east-1', 'startUrl': url}, open(cache + '/' + name, 'w'))\n",
            start_url,
            cache.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));

    let out = run(&d, &env, &["commit", "-m", "sso keys"], 0);
    assert!(!out.contains(&secret), "{out}");
    assert_eq!(creds.served(), "sso");
    assert_eq!(
        d.manifest("bucket")["state"]["type"].as_str(),
        Some("prefix")
    );
}
