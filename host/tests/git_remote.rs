//! git pins on a network remote (spec/11, `git`, `--remote`; issue 26): the
//! host pushes each pin's tag with the user's own `git push` and its
//! credential helper (never through the plugin), a failed push fails the pin
//! and leaves no tag behind, and `gc` deletes the tag in the remote too.
//!
//! The remote is a smart-HTTP server the test runs on 127.0.0.1
//! (`support/git_http_server.py`: `git http-backend` behind basic auth); the
//! credentials are in a `store` credential helper in the test's own HOME.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::{Dataset, describe, lines, stderr};

/// The HTTP server, stopped on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(root: &Path, user: &str, password: &str) -> Server {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/git_http_server.py");
    let mut child = Command::new(tether_testkit::python())
        .arg(&script)
        .arg(root)
        .args([user, password])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the git server");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the git server said {first:?}"))
        .to_owned();
    Server { child, url }
}

/// `git ARGS` in `dir` with the dataset's environment; stdout, trimmed.
fn git_ok(d: &Dataset, dir: &Path, args: &[&str]) -> String {
    tether_testkit::run_ok(d.command("git", dir).args(args))
        .trim()
        .to_string()
}

/// The `tether.*` tags of the repository at `dir`.
fn pin_tags(d: &Dataset, dir: &Path) -> Vec<String> {
    lines(&git_ok(d, dir, &["tag", "-l", "tether.*"]))
}

/// The test HOME's credential store: `password` for the server.
fn store_credentials(d: &Dataset, server: &Server, password: &str) {
    let with_user = server
        .url
        .replacen("http://", &format!("http://tether:{password}@"), 1);
    std::fs::write(
        d.tmp().join("home/.git-credentials"),
        format!("{with_user}\n"),
    )
    .unwrap();
}

/// A code repository with one commit, its `origin` the server's `code.git`
/// (bare, empty); the user's git has the `store` credential helper.
fn setup() -> (Dataset, Server, PathBuf, PathBuf) {
    let d = Dataset::init();
    let srv = d.tmp().join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    git_ok(&d, &srv, &["init", "-q", "--bare", "code.git"]);
    let server = start_server(&srv, "tether", "s3cret");
    git_ok(
        &d,
        d.tmp(),
        &["config", "--global", "credential.helper", "store"],
    );
    store_credentials(&d, &server, "s3cret");
    let code = d.tmp().join("code");
    git_ok(&d, d.tmp(), &["init", "-q", "-b", "main", "code"]);
    std::fs::write(code.join("main.py"), "x = 1\n").unwrap();
    git_ok(&d, &code, &["add", "-A"]);
    git_ok(&d, &code, &["commit", "-q", "-m", "analysis"]);
    let url = format!("{}/code.git", server.url);
    git_ok(&d, &code, &["remote", "add", "origin", &url]);
    (d, server, code, srv.join("code.git"))
}

/// The tag a dataset commit reports for `key` (`pinned KEY -> TAG`).
fn pinned_tag(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("pinned {key} -> ")))
        .unwrap_or_else(|| panic!("the commit pins {key}:\n{out}"))
        .trim()
        .to_string()
}

/// `commit` pushes the pin's tag over smart HTTP with the credential
/// helper's password; a second pin follows; `gc` deletes a released pin in
/// the remote and locally.
#[test]
fn pins_are_pushed_over_https_with_the_users_credentials_and_released_there() {
    let (d, _server, code, remote) = setup();
    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);
    let first = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    assert_eq!(pin_tags(&d, &remote), [first.as_str()]);
    assert_eq!(
        git_ok(&d, &remote, &["rev-parse", &first]),
        git_ok(&d, &code, &["rev-parse", "HEAD"])
    );
    assert_eq!(git_ok(&d, &remote, &["fsck", "--strict"]), "");
    assert!(d.ok(&["verify"]).contains("ok"), "the pushed pin verifies");

    std::fs::write(code.join("main.py"), "x = 2\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 2"]);
    let second = pinned_tag(&d.ok(&["commit", "-m", "x = 2"]), "code");
    assert_eq!(pin_tags(&d, &remote).len(), 2);
    assert_eq!(
        git_ok(&d, &remote, &["rev-parse", &second]),
        git_ok(&d, &code, &["rev-parse", "HEAD"])
    );

    // Drop the second commit; gc releases its pin there and here.
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "{second} released");
    assert_eq!(pin_tags(&d, &code), [first]);
}

/// A push the server refuses (a wrong password in the credential store)
/// fails the commit: no local tag, nothing in the remote, the manifest and
/// history as they were, the password never printed; with the right one the
/// same commit goes through. A gc whose delete is refused keeps the pin in
/// both places.
#[test]
fn a_failed_push_fails_the_pin_and_leaves_nothing_behind() {
    let (d, server, code, remote) = setup();
    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);
    let first = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");

    std::fs::write(code.join("main.py"), "x = 2\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 2"]);
    store_credentials(&d, &server, "wrong-password");
    let (manifest, history, uncommitted) = (d.manifest("code"), d.history(), d.uncommitted());
    let out = d.fails(&["commit", "-m", "x = 2"], 1);
    let err = stderr(&out);
    assert!(
        err.contains("was not pushed to remote origin"),
        "{}",
        describe(&out)
    );
    assert!(err.contains("the local tag was removed"), "{err}");
    assert!(err.contains("credential helper"), "{err}");
    assert!(!err.contains("wrong-password"), "{err}");
    assert_eq!(pin_tags(&d, &code), [first.as_str()], "no local tag left");
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "nothing pushed");
    assert_eq!(d.manifest("code"), manifest);
    assert_eq!(d.history(), history);
    assert_eq!(d.uncommitted(), uncommitted);

    store_credentials(&d, &server, "s3cret");
    let second = pinned_tag(&d.ok(&["commit", "-m", "x = 2"]), "code");
    assert_eq!(pin_tags(&d, &remote).len(), 2);

    // gc cannot delete the tag in the remote: both copies stay.
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    store_credentials(&d, &server, "wrong-password");
    let out = d.tether(&["gc", "--no-dry-run"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains("the local tag is kept")
            || crate::support::stdout(&out).contains("the local tag is kept"),
        "{}",
        describe(&out)
    );
    assert!(pin_tags(&d, &remote).contains(&second));
    assert!(pin_tags(&d, &code).contains(&second));
    store_credentials(&d, &server, "s3cret");
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(pin_tags(&d, &remote), [first.as_str()]);
    assert_eq!(pin_tags(&d, &code), [first]);
}
