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

/// `verify` checks a pin on a network remote in the remote too (with the
/// user's `git ls-remote`): its tag deleted there is `missing` (exit 1)
/// though the local tag is fine, and `repair` pushes it again; moved there
/// to another commit, it is `drifted`.
#[test]
fn verify_checks_the_pin_in_the_remote() {
    let (d, _server, code, remote) = setup();
    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);
    let tag = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    let reports = d.json(&["verify"], 0);
    assert_eq!(reports["code"]["status"], "ok", "{reports}");

    git_ok(&d, &remote, &["tag", "-d", &tag]);
    assert_eq!(pin_tags(&d, &code), [tag.as_str()], "the local tag stays");
    let reports = d.json(&["verify"], 1);
    let r = &reports["code"];
    assert_eq!(r["status"], "missing", "{reports}");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.contains(&tag) && message.contains("remote origin"),
        "{message}"
    );
    let (out, _) = d.run(&["verify"], 1);
    assert!(out.contains("missing"), "{out}");

    // repair pushes the tag again.
    d.ok(&["repair"]);
    assert_eq!(pin_tags(&d, &remote), [tag.as_str()]);
    assert_eq!(d.json(&["verify"], 0)["code"]["status"], "ok");

    // The remote's tag moved to another commit: drifted.
    std::fs::write(code.join("main.py"), "x = 3\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 3"]);
    git_ok(
        &d,
        &code,
        &["push", "-q", "origin", "HEAD:refs/heads/other"],
    );
    git_ok(&d, &remote, &["tag", "-f", &tag, "other"]);
    let reports = d.json(&["verify"], 1);
    assert_eq!(reports["code"]["status"], "drifted", "{reports}");
}

/// OpenSSH's server on a free loopback port, for this test only: a temp
/// host key, one authorized user key, no passwords, no agent. Stopped on
/// drop.
struct Sshd {
    child: Child,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SSHD: &str = "/usr/sbin/sshd";

fn keygen(d: &Dataset, path: &Path) {
    git_like(
        d,
        "ssh-keygen",
        &["-q", "-t", "ed25519", "-N", "", "-f"],
        path,
    );
}

fn git_like(d: &Dataset, program: &str, args: &[&str], path: &Path) {
    tether_testkit::run_ok(d.command(program, d.tmp()).args(args).arg(path));
}

fn start_sshd(d: &Dataset, dir: &Path, authorized: &Path) -> Sshd {
    assert!(
        Path::new(SSHD).is_file(),
        "{SSHD} is missing: run `cargo xtask setup` (it installs Debian's openssh-server)"
    );
    // As root, sshd wants its privilege separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    keygen(d, &dir.join("host_key"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let user = git_like_out(d, "id", &["-un"]);
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\n\
             AuthorizedKeysFile {authorized}\nStrictModes no\nUsePAM no\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowUsers {user}\n",
            host = dir.join("host_key").display(),
            pid = dir.join("sshd.pid").display(),
            authorized = authorized.display(),
        ),
    )
    .unwrap();
    let mut child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sshd");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("sshd did not start:\n{said}");
        }
        said.push_str(&line);
        if line.contains("Server listening on 127.0.0.1") {
            break;
        }
    }
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
    });
    // The client trusts exactly this host key on this port.
    let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
    std::fs::write(
        dir.join("known_hosts"),
        format!("[127.0.0.1]:{port} {host_pub}"),
    )
    .unwrap();
    Sshd { child, port }
}

fn git_like_out(d: &Dataset, program: &str, args: &[&str]) -> String {
    tether_testkit::run_ok(d.command(program, d.tmp()).args(args))
        .trim()
        .to_string()
}

/// The user's git talks ssh with `key` (its global `core.sshCommand`, as a
/// user would configure it): no agent, no prompt, only this host key.
fn use_ssh_key(d: &Dataset, dir: &Path, key: &Path) {
    let command = format!(
        "ssh -F /dev/null -i {} -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes \
         -o StrictHostKeyChecking=yes -o UserKnownHostsFile={}",
        key.display(),
        dir.join("known_hosts").display()
    );
    git_ok(
        d,
        d.tmp(),
        &["config", "--global", "core.sshCommand", &command],
    );
}

/// Pins pushed to an ssh remote (a real sshd on loopback, the user's key
/// through git's own ssh settings): `commit` pushes the tag, a push the
/// server refuses (a key it does not know) fails the pin and leaves
/// nothing, `verify` checks the remote, and `gc` deletes the tag there.
#[test]
fn pins_are_pushed_to_an_ssh_remote_and_released_there() {
    let d = Dataset::init();
    let dir = d.tmp().join("ssh");
    std::fs::create_dir_all(&dir).unwrap();
    keygen(&d, &dir.join("user_key"));
    keygen(&d, &dir.join("stranger_key"));
    let authorized = dir.join("authorized_keys");
    std::fs::copy(dir.join("user_key.pub"), &authorized).unwrap();
    let sshd = start_sshd(&d, &dir, &authorized);
    use_ssh_key(&d, &dir, &dir.join("user_key"));

    let srv = d.tmp().join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    git_ok(&d, &srv, &["init", "-q", "--bare", "code.git"]);
    let remote = srv.join("code.git");
    let code = d.tmp().join("code");
    git_ok(&d, d.tmp(), &["init", "-q", "-b", "main", "code"]);
    std::fs::write(code.join("main.py"), "x = 1\n").unwrap();
    git_ok(&d, &code, &["add", "-A"]);
    git_ok(&d, &code, &["commit", "-q", "-m", "analysis"]);
    let user = git_like_out(&d, "id", &["-un"]);
    let url = format!("ssh://{user}@127.0.0.1:{}{}", sshd.port, remote.display());
    git_ok(&d, &code, &["remote", "add", "origin", &url]);

    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);
    let first = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    assert_eq!(pin_tags(&d, &remote), [first.as_str()]);
    assert_eq!(
        git_ok(&d, &remote, &["rev-parse", &first]),
        git_ok(&d, &code, &["rev-parse", "HEAD"])
    );
    assert_eq!(d.json(&["verify"], 0)["code"]["status"], "ok");

    // A key the server does not know: the push fails, so the pin does.
    std::fs::write(code.join("main.py"), "x = 2\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 2"]);
    use_ssh_key(&d, &dir, &dir.join("stranger_key"));
    let (manifest, history) = (d.manifest("code"), d.history());
    let out = d.fails(&["commit", "-m", "x = 2"], 1);
    let err = stderr(&out);
    assert!(
        err.contains("was not pushed to remote origin")
            && err.contains("the local tag was removed"),
        "{}",
        describe(&out)
    );
    assert!(
        err.contains("ssh-agent"),
        "says how to give credentials: {err}"
    );
    assert_eq!(pin_tags(&d, &code), [first.as_str()], "no local tag left");
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "nothing pushed");
    assert_eq!(d.manifest("code"), manifest);
    assert_eq!(d.history(), history);
    // The server cannot be listed with that key either: verify cannot tell.
    assert_eq!(d.json(&["verify"], 1)["code"]["status"], "unknown");

    use_ssh_key(&d, &dir, &dir.join("user_key"));
    let second = pinned_tag(&d.ok(&["commit", "-m", "x = 2"]), "code");
    assert_eq!(pin_tags(&d, &remote).len(), 2);

    // Drop the second commit; gc releases its pin there and here.
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "{second} released");
    assert_eq!(pin_tags(&d, &code), [first]);
}
