//! The `neon` plugin against `support/neon_fake.py`: a loopback fake of the
//! Neon API v2 whose every branch is a real PostgreSQL cluster, cut with
//! `pg_basebackup` from its parent (so LSNs and transaction ids are real).
//! The tests write through the connection URIs tether hands out with real
//! `psql`, and read what tether made (pin and working branches) through the
//! fake's API as a Neon user would. The plugin probes the branches over the
//! host's `sql` (`open-uri`): the role's password stays with the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::{Dataset, describe, stderr, stdout};

/// The API key the fake accepts; no output or file may ever hold it.
const KEY: &str = "neon-key-5c1e0a9d77b24f31";

/// A running fake: its API base URL.
struct Fake {
    child: Child,
    api: String,
}

impl Drop for Fake {
    fn drop(&mut self) {
        // Closing its stdin stops it: it stops its clusters and removes them.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// One request to `url` (http://127.0.0.1:PORT/...); status and JSON body.
fn http(method: &str, url: &str, body: Option<&Value>, key: Option<&str>) -> (u16, Value) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut s = TcpStream::connect(host).expect("connect to the fake");
    let data = body.map(Value::to_string).unwrap_or_default();
    let auth = key
        .map(|k| format!("authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} /{path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n{auth}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{data}",
        data.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status: u16 = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

impl Fake {
    fn start() -> Fake {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/neon_fake.py");
        let bin = tether_testkit::postgres_bin_dir().expect("PostgreSQL is installed");
        let mut child = Command::new(tether_testkit::python())
            .arg(&script)
            .arg(&bin)
            .arg(KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Neon fake");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let api = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the fake said {first:?}"))
            .to_owned();
        Fake { child, api }
    }

    /// A request to the API with the key; the JSON of a 2xx answer.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = http(
            method,
            &format!("{}{path}", self.api),
            body.as_ref(),
            Some(KEY),
        );
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// A new project: its id and the URI of `neondb` on `main`.
    fn project(&self) -> (String, String) {
        let p = self.call(
            "POST",
            "/projects",
            Some(json!({"project": {"name": "lab"}})),
        );
        (
            p["project"]["id"].as_str().unwrap().to_owned(),
            p["connection_uris"][0]["connection_uri"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    }

    fn branches(&self, pid: &str) -> Vec<Value> {
        self.call("GET", &format!("/projects/{pid}/branches"), None)["branches"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn branch(&self, pid: &str, name: &str) -> Value {
        self.branches(pid)
            .into_iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("no branch {name}: {:?}", self.names(pid)))
    }

    fn names(&self, pid: &str) -> Vec<String> {
        let mut n: Vec<String> = self
            .branches(pid)
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_owned())
            .collect();
        n.sort();
        n
    }

    /// A read-only URI of `database` on branch `name` (an endpoint made for it).
    fn read_only_uri(&self, pid: &str, name: &str, database: &str) -> String {
        let bid = self.branch(pid, name)["id"].as_str().unwrap().to_owned();
        let ep = self.call(
            "POST",
            &format!("/projects/{pid}/endpoints"),
            Some(json!({"endpoint": {"branch_id": bid, "type": "read_only"}})),
        );
        let eid = ep["endpoint"]["id"].as_str().unwrap();
        self.call(
            "GET",
            &format!(
                "/projects/{pid}/connection_uri?branch_id={bid}&endpoint_id={eid}\
                 &database_name={database}&role_name=neondb_owner"
            ),
            None,
        )["uri"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `.tether/secrets.toml` for a dataset using this fake.
    fn secrets(&self) -> String {
        format!(
            "[backends.neon]\napi_url = \"{}\"\nallow_http = true\n",
            self.api
        )
    }
}

/// `psql URI -c SQL`, unaligned tuples only.
fn psql(uri: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .arg(uri)
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("run psql");
    assert!(out.status.success(), "psql {sql}:\n{}", describe(&out));
    stdout(&out).trim().to_owned()
}

/// Every output a test saw, to check for the key at the end; and every
/// output but the handles the user asked for with `--with-password`, to
/// check for the role's password.
struct Run<'a> {
    d: &'a Dataset,
    seen: std::cell::RefCell<String>,
    unasked: std::cell::RefCell<String>,
}

impl<'a> Run<'a> {
    fn new(d: &'a Dataset, fake: &Fake) -> Run<'a> {
        d.write_secrets(&fake.secrets());
        Run {
            d,
            seen: Default::default(),
            unasked: Default::default(),
        }
    }

    fn tether(&self, args: &[&str]) -> Output {
        let out = self
            .d
            .command(env!("CARGO_BIN_EXE_tether"), &self.d.root())
            .env("NEON_API_KEY", KEY)
            .args(args)
            .output()
            .expect("run tether");
        let text = format!("{}{}", stdout(&out), stderr(&out));
        self.seen.borrow_mut().push_str(&text);
        if !args.contains(&"--with-password") {
            self.unasked.borrow_mut().push_str(&text);
        }
        out
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.tether(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "tether {} should succeed:\n{}",
            args.join(" "),
            describe(&out)
        );
        stdout(&out)
    }

    /// The key appears in no output and in no file of the dataset (but the
    /// secrets file, which holds none either: it names the variable).
    fn assert_key_never_shown(&self) {
        assert!(!self.seen.borrow().contains(KEY), "the API key was printed");
        self.assert_in_no_file(KEY, "the API key");
    }

    /// The role's password appears in no output but the handles asked for
    /// with `--with-password`, and in no file of the dataset.
    fn assert_password_only_in_handles(&self, password: &str) {
        assert!(
            !self.unasked.borrow().contains(password),
            "the role's password was printed unasked"
        );
        self.assert_in_no_file(password, "the role's password");
    }

    fn assert_in_no_file(&self, secret: &str, what: &str) {
        for file in crate::support::files_under(&self.d.root(), &self.d.root()) {
            let bytes = std::fs::read(self.d.root().join(&file)).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "{file} holds {what}"
            );
        }
    }
}

/// The password of a connection URI the test got from the fake itself.
fn password_of(uri: &str) -> String {
    let userinfo = uri.split_once("://").unwrap().1.split_once('@').unwrap().0;
    let password = userinfo.split_once(':').unwrap().1.to_owned();
    assert!(password.starts_with("npg_"), "{uri}");
    password
}

/// The pin ref a commit's output names for `key`.
fn pinned(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("pinned {key} -> ")))
        .unwrap_or_else(|| panic!("the commit pins {key}:\n{out}"))
        .trim()
        .to_owned()
}

fn add(run: &Run, key: &str, pid: &str, database: &str) {
    let out = run.ok(&[
        "add",
        key,
        "--kind",
        "neon",
        "--project-id",
        pid,
        "--database",
        database,
        "--role",
        "neondb_owner",
    ]);
    assert!(out.starts_with(&format!("added {key} [neon]")), "{out}");
}

/// spec/06's story: pin the trunk, fork per bookmark, write through the
/// handle's URI, commit (a pin off the working branch), gc.
#[test]
fn pin_fork_write_commit_gc() {
    let fake = Fake::start();
    let (pid, main_uri) = fake.project();
    psql(
        &main_uri,
        "CREATE TABLE m (n int); INSERT INTO m VALUES (1)",
    );
    let d = Dataset::init();
    let run = Run::new(&d, &fake);
    add(&run, "db", &pid, "neondb");

    // A plan file, then the commit: the trunk's pin is a child of main.
    let password = password_of(&main_uri);
    let plan = d.tmp().join("plan.json");
    run.ok(&["commit", "-m", "first", "--plan", plan.to_str().unwrap()]);
    let plan_text = std::fs::read_to_string(&plan).unwrap();
    assert!(!plan_text.contains(KEY) && !plan_text.contains(&password));
    let out = run.ok(&["commit", "-m", "first"]);
    let pin1 = pinned(&out, "db");
    let ds = d.dataset_id();
    assert!(pin1.starts_with(&format!("tether.{ds}.")), "{pin1}");
    let main = fake.branch(&pid, "main");
    assert_eq!(fake.branch(&pid, &pin1)["parent_id"], main["id"]);
    // The pin holds the trunk's rows, read as any Postgres client would.
    let pin_uri = fake.read_only_uri(&pid, &pin1, "neondb");
    assert_eq!(psql(&pin_uri, "SELECT count(*) FROM m"), "1");

    // A bookmark forks a working branch off the pin; the handle names it.
    run.ok(&["new", "-b", "feat", "--eager"]);
    let ws = format!("tether.ws.{ds}.feat");
    assert_eq!(
        fake.branch(&pid, &ws)["parent_id"],
        fake.branch(&pid, &pin1)["id"]
    );
    // The plugin built the handle from a URI without the password; the
    // host put the one it learned back for the user who asked.
    let url = run.ok(&["open", "db", "--with-password"]).trim().to_owned();
    assert!(
        url.starts_with(&format!("postgresql://neondb_owner:{password}@")),
        "{url}"
    );
    let redacted = run.ok(&["open", "db"]);
    assert!(
        redacted.starts_with("postgresql://neondb_owner:***@") && !redacted.contains("npg_"),
        "the password is redacted: {redacted}"
    );
    let json = run.ok(&["open", "db", "--json"]);
    assert!(!json.contains("npg_"), "never in --json: {json}");
    psql(&url, "INSERT INTO m VALUES (2)");
    assert_eq!(
        psql(&main_uri, "SELECT count(*) FROM m"),
        "1",
        "main is untouched"
    );
    let status = run.ok(&["status", "--snapshot"]);
    assert!(status.contains("modified db"), "{status}");
    let out = run.ok(&["commit", "-m", "feat rows"]);
    let pin2 = pinned(&out, "db");
    assert_eq!(
        fake.branch(&pid, &pin2)["parent_id"],
        fake.branch(&pid, &ws)["id"]
    );
    let ok = run.ok(&["verify", "--deep"]);
    assert!(!ok.contains("drifted") && !ok.contains("missing"), "{ok}");
    // The working branch now has a pin hanging off it: Neon cannot delete it.
    let ws_id = fake.branch(&pid, &ws)["id"].as_str().unwrap().to_owned();
    let (status, refused) = http(
        "DELETE",
        &format!("{}/projects/{pid}/branches/{ws_id}", fake.api),
        None,
        Some(KEY),
    );
    assert_eq!(status, 400, "{refused}");

    // A commit history forgets: gc deletes that pin branch, and only it.
    psql(&url, "INSERT INTO m VALUES (3)");
    let out = run.ok(&["commit", "-m", "forgotten"]);
    let pin3 = pinned(&out, "db");
    assert!(fake.names(&pid).contains(&pin3));
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    run.ok(&["gc", "--no-dry-run"]);
    let names = fake.names(&pid);
    assert!(!names.contains(&pin3), "{names:?}");
    for kept in ["main", pin1.as_str(), pin2.as_str(), ws.as_str()] {
        assert!(names.iter().any(|n| n == kept), "{kept} kept: {names:?}");
    }
    // The second pin still reads the feature's rows.
    let uri2 = fake.read_only_uri(&pid, &pin2, "neondb");
    assert_eq!(psql(&uri2, "SELECT count(*) FROM m"), "2");
    run.assert_key_never_shown();
    run.assert_password_only_in_handles(&password);
}

/// Two databases of one project: one pin per commit, one working branch
/// per bookmark, both handles on it.
#[test]
fn two_databases_share_pins_and_a_branch() {
    let fake = Fake::start();
    let (pid, main_uri) = fake.project();
    let main_id = fake.branch(&pid, "main")["id"].as_str().unwrap().to_owned();
    fake.call(
        "POST",
        &format!("/projects/{pid}/branches/{main_id}/databases"),
        Some(json!({"database": {"name": "metrics", "owner_name": "neondb_owner"}})),
    );
    psql(&main_uri, "CREATE TABLE a (n int)");
    let d = Dataset::init();
    let run = Run::new(&d, &fake);
    add(&run, "db/app", &pid, "neondb");
    add(&run, "db/metrics", &pid, "metrics");
    let out = run.ok(&["commit", "-m", "both"]);
    assert_eq!(pinned(&out, "db/app"), pinned(&out, "db/metrics"), "{out}");
    let pins = |names: &[String]| {
        names
            .iter()
            .filter(|n| n.starts_with("tether.") && !n.starts_with("tether.ws."))
            .count()
    };
    assert_eq!(pins(&fake.names(&pid)), 1, "{:?}", fake.names(&pid));

    run.ok(&["new", "-b", "feat", "--eager"]);
    let names = fake.names(&pid);
    let ws: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("tether.ws."))
        .collect();
    assert_eq!(ws.len(), 1, "one working branch for both: {names:?}");
    let app = run
        .ok(&["open", "db/app", "--with-password"])
        .trim()
        .to_owned();
    let metrics = run
        .ok(&["open", "db/metrics", "--with-password"])
        .trim()
        .to_owned();
    // Both on the branch's one read-write endpoint.
    let endpoint = |u: &str| {
        u.split('@')
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(endpoint(&app), endpoint(&metrics));
    let eps = fake.call("GET", &format!("/projects/{pid}/endpoints"), None);
    let ws_id = fake.branch(&pid, ws[0])["id"].clone();
    let rw = eps["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["branch_id"] == ws_id && e["type"] == "read_write")
        .count();
    assert_eq!(rw, 1, "{eps}");
    psql(&app, "INSERT INTO a VALUES (1)");
    psql(&metrics, "CREATE TABLE m (n int)");
    let out = run.ok(&["commit", "-m", "feat"]);
    assert_eq!(pinned(&out, "db/app"), pinned(&out, "db/metrics"), "{out}");
    assert_eq!(pins(&fake.names(&pid)), 2, "{:?}", fake.names(&pid));
    // Naming one of the two is refused: they share a branch.
    let one = run.tether(&["commit", "db/app", "-m", "one"]);
    assert_ne!(one.status.code(), Some(0), "{}", describe(&one));
    run.assert_key_never_shown();
}

/// `commit` refuses while a session holds an open write transaction;
/// `--force` pins anyway, and the pin holds only what was committed.
#[test]
fn quiescence_refuses_and_force_pins_the_committed_state() {
    let fake = Fake::start();
    let (pid, main_uri) = fake.project();
    psql(
        &main_uri,
        "CREATE TABLE m (n int); INSERT INTO m VALUES (1)",
    );
    let d = Dataset::init();
    let run = Run::new(&d, &fake);
    add(&run, "db", &pid, "neondb");
    run.ok(&["commit", "-m", "first"]);
    psql(&main_uri, "INSERT INTO m VALUES (2)");

    // A writer: psql with an open transaction that inserted a row.
    let mut writer = Command::new("psql")
        .arg(&main_uri)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    writeln!(stdin, "BEGIN; INSERT INTO m VALUES (99);").unwrap();
    stdin.flush().unwrap();
    let holding = "SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL \
                   AND pid <> pg_backend_pid()";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while psql(&main_uri, holding) != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    let refused = run.tether(&["commit", "-m", "busy"]);
    assert_ne!(refused.status.code(), Some(0), "{}", describe(&refused));
    let text = format!("{}{}", stdout(&refused), stderr(&refused));
    assert!(text.contains("not quiescent"), "{text}");
    assert!(text.contains("pg_stat_activity"), "{text}");
    assert!(text.contains("--force"), "{text}");
    let out = run.ok(&["commit", "--force", "-m", "forced"]);
    let pin = pinned(&out, "db");
    drop(stdin);
    writer.wait().unwrap();
    let uri = fake.read_only_uri(&pid, &pin, "neondb");
    assert_eq!(
        psql(&uri, "SELECT string_agg(n::text, ',' ORDER BY n) FROM m"),
        "1,2",
        "the pin holds what was committed, not the open transaction's row"
    );
    run.assert_key_never_shown();
}

/// A plugin a clone brings cannot get the Neon key: not by naming the
/// variable in its locator, not by asking for the fake's origin.
#[test]
fn a_hostile_plugin_cannot_read_the_api_key() {
    let fake = Fake::start();
    let (pid, _) = fake.project();
    let d = Dataset::init();
    let run = Run::new(&d, &fake);
    let probe = tether_testkit::test_plugin("http_probe");
    run.ok(&["plugin", "add", probe.to_str().unwrap()]);
    // The user's secrets grant the fake's origin to the probe (as a user
    // might, for another reason); the clone's locator asks for the key.
    let secrets = d.root().join(".tether/secrets.toml");
    let mut text = std::fs::read_to_string(&secrets).unwrap();
    text.push_str(&format!(
        "\n[backends.http-probe]\nurl = \"{}\"\nallow_http = true\n",
        fake.api
    ));
    d.write_secrets(&text);
    let url = format!("url={}/projects/{pid}/branches", fake.api);
    run.ok(&[
        "add",
        "web",
        "--kind",
        "http-probe",
        "--set",
        &url,
        "--set",
        "token_env=NEON_API_KEY",
    ]);
    run.ok(&["commit", "-m", "web"]);
    let manifest = d.manifest("web").to_string();
    assert!(manifest.contains("401"), "the fake saw no key: {manifest}");
    assert!(manifest.contains("authorization failed"), "{manifest}");
    run.assert_key_never_shown();
}

/// A plugin granted the API (and its key, by the user) fetches a connection
/// URI: the response it gets holds no password, it can open that URI over
/// `sql` (the host supplies the password), and nothing it made up: not
/// another database or role on the same server, not a URI with a guessed
/// password, not the fake's own database as its admin.
#[test]
fn a_plugin_gets_no_database_password_and_opens_only_what_the_host_learned() {
    let fake = Fake::start();
    let (pid, main_uri) = fake.project();
    let password = password_of(&main_uri);
    let server = main_uri
        .split('@')
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let d = Dataset::init();
    let run = Run::new(&d, &fake);
    let probe = tether_testkit::test_plugin("http_probe");
    run.ok(&["plugin", "add", probe.to_str().unwrap()]);
    let secrets = d.root().join(".tether/secrets.toml");
    let mut text = std::fs::read_to_string(&secrets).unwrap();
    text.push_str(&format!(
        "\n[backends.http-probe]\nurl = \"{}\"\nallow_http = true\ntoken_env = \"NEON_API_KEY\"\n",
        fake.api
    ));
    d.write_secrets(&text);
    let made_up = [
        format!("postgresql://neondb_owner@{server}/postgres?sslmode=disable"),
        format!("postgresql://tether@{server}/neondb?sslmode=disable"),
        format!("postgresql://neondb_owner:guessed@{server}/neondb?sslmode=disable"),
        format!(
            "postgresql://neondb_owner@{server}/neondb?sslmode=disable&sslrootcert=/etc/passwd"
        ),
    ];
    let url = format!(
        "url={}/projects/{pid}/connection_uri?database_name=neondb&role_name=neondb_owner",
        fake.api
    );
    let opens = format!("open_uri=$uri {}", made_up.join(" "));
    run.ok(&[
        "add",
        "web",
        "--kind",
        "http-probe",
        "--set",
        &url,
        "--set",
        &opens,
    ]);
    run.ok(&["commit", "-m", "web"]);
    let manifest = d.manifest("web");
    let state = manifest.get("state").expect("a state");
    let text = |v: &toml::Value, path: &[&str]| -> Option<String> {
        let mut at = v;
        for p in path {
            at = at.get(p)?;
        }
        at.as_str().map(str::to_owned)
    };
    let body: Value = serde_json::from_str(&text(state, &["response", "body"]).unwrap()).unwrap();
    let given = body["uri"].as_str().unwrap();
    assert!(
        given.starts_with(&format!("postgresql://neondb_owner@{server}/neondb?")),
        "the URI without its password: {given}"
    );
    let opened = state.get("opened").and_then(|o| o.as_array()).unwrap();
    assert_eq!(opened.len(), 5, "{opened:?}");
    assert_eq!(text(&opened[0], &["uri"]).as_deref(), Some(given));
    assert_eq!(
        text(&opened[0], &["user"]).as_deref(),
        Some("neondb_owner"),
        "the learned URI opens: {}",
        opened[0]
    );
    let errors: Vec<String> = opened[1..]
        .iter()
        .map(|a| text(a, &["error"]).unwrap_or_else(|| panic!("not denied: {a}")))
        .collect();
    for (error, uri) in errors.iter().zip(&made_up) {
        assert!(error.starts_with("SQL access denied"), "{uri}: {error}");
    }
    assert!(errors[2].contains("holds a password"), "{}", errors[2]);
    assert!(errors[3].contains("sslrootcert"), "{}", errors[3]);
    // The body also lost the project's role password and connection
    // parameters' password (none in this response), and nothing repeats it.
    assert!(!body.to_string().contains(&password), "{body}");
    run.assert_key_never_shown();
    run.assert_password_only_in_handles(&password);
}
