//! The `iceberg` plugin against real pyiceberg 0.12 (the project's pinned
//! venv): Python creates a table and appends; tether pins, forks, promotes,
//! drops and collects through the `tether` binary; Python then reads what
//! tether wrote (our tags and branches in `table.refs()`, scans at them,
//! appends to our branch) and expires snapshots around our tags.
//!
//! The same lifecycle runs on three catalogs: pyiceberg's `SqlCatalog` on a
//! SQLite file and on a real PostgreSQL server (tether moves the pointer
//! with its own compare-and-swap through the host's `sql` capability), and a
//! REST catalog, `support/iceberg_rest_server.py`: a small server the tests
//! run whose every request is answered by pyiceberg's own `SqlCatalog`, so
//! the metadata and each commit's requirement checks are pyiceberg's.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::{Dataset, describe, lines};
use serde_json::{Value, json};

/// Helpers every script starts with; the catalog's pyiceberg properties are
/// `sys.argv[1]` (JSON). Scripts print one JSON document.
const PRELUDE: &str = r#"
import json, sys, datetime
import pyarrow as pa
from pyiceberg.catalog import load_catalog

CATALOG = load_catalog("default", **json.loads(sys.argv[1]))
ARGS = sys.argv[2:]

def table():
    return CATALOG.load_table("ns.t")

def rows(values):
    return pa.table({"id": pa.array(values, pa.int64())})

def refs(t):
    return {name: [r.snapshot_ref_type.value, r.snapshot_id] for name, r in t.refs().items()}

def count_at(t, snapshot_id):
    return t.scan(snapshot_id=snapshot_id).to_arrow().num_rows

def out(value):
    print(json.dumps(value))

# For the S3 warehouse: pyarrow's S3 client writes every file by multipart
# upload, whose completion moto 5.2.1 answers with a root element pyarrow
# rejects (getmoto/moto#10055), so writes go through boto3's put_object;
# reads stay pyarrow's. Named by the catalog's `py-io-impl`.
import io
from pyiceberg.io.pyarrow import PyArrowFileIO

class _Upload(io.BytesIO):
    def __init__(self, client, path):
        super().__init__()
        self.client, self.path = client, path

    def close(self):
        if not self.closed:
            bucket, _, key = self.path.partition("/")
            self.client.put_object(Bucket=bucket, Key=key, Body=self.getvalue())
        super().close()

class MotoIO(PyArrowFileIO):
    def new_output(self, location):
        import boto3
        out = super().new_output(location)
        p = self.properties
        client = boto3.client("s3", endpoint_url=p["s3.endpoint"], region_name=p["s3.region"],
                              aws_access_key_id=p["s3.access-key-id"],
                              aws_secret_access_key=p["s3.secret-access-key"])
        out.create = lambda overwrite=False: _Upload(client, out._path)
        return out
"#;

/// A catalog the lifecycle runs on.
struct Catalog {
    /// pyiceberg's properties for it.
    python: Value,
    /// What `tether.toml` commits (`[backends.iceberg] catalog`).
    committed: String,
    /// What `.tether/secrets.toml` holds.
    secret: String,
    /// More of `.tether/secrets.toml` (an S3 warehouse's credentials).
    more_secrets: String,
    /// What the REST server needs to keep running.
    _server: Option<Server>,
}

/// A REST catalog server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run `script` (after the prelude) against `catalog`; its JSON.
fn py(catalog: &Catalog, script: &str, args: &[&str]) -> Value {
    let out = Command::new(tether_testkit::python())
        .arg("-c")
        .arg(format!("{PRELUDE}\n{script}"))
        .arg(catalog.python.to_string())
        .args(args)
        .output()
        .expect("run python");
    assert!(out.status.success(), "python failed:\n{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {text:?}: {e}"))
}

fn file_uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// pyiceberg's SqlCatalog on a SQLite file.
fn sqlite_catalog(d: &Dataset) -> Catalog {
    let db = d.data().join("catalog.db");
    let warehouse = file_uri(&d.data().join("warehouse"));
    std::fs::create_dir_all(d.data().join("warehouse")).unwrap();
    Catalog {
        python: json!({"type": "sql", "uri": format!("sqlite:///{}", db.display()), "warehouse": warehouse}),
        committed: format!("{{ type = \"sql\", warehouse = \"{warehouse}\" }}"),
        secret: format!("{{ uri = \"sqlite:///{}\" }}", db.display()),
        more_secrets: String::new(),
        _server: None,
    }
}

/// pyiceberg's SqlCatalog on a SQLite file, its warehouse on the local S3
/// server `s3` (pyiceberg writes there through pyarrow's S3 client with
/// `s3.endpoint`; tether reads and writes metadata through the host's S3
/// client, the credentials and endpoint from `.tether/secrets.toml`).
fn s3_catalog(d: &Dataset, s3: &tether_testkit::S3Server) -> Catalog {
    let db = d.data().join("catalog.db");
    let warehouse = format!("s3://{}/wh", s3.bucket());
    Catalog {
        python: json!({
            "type": "sql", "uri": format!("sqlite:///{}", db.display()), "warehouse": warehouse,
            "s3.endpoint": s3.endpoint(), "s3.access-key-id": tether_testkit::S3_ACCESS_KEY_ID,
            "s3.secret-access-key": tether_testkit::S3_SECRET_ACCESS_KEY,
            "s3.region": tether_testkit::S3_REGION, "py-io-impl": "__main__.MotoIO",
        }),
        committed: format!("{{ type = \"sql\", warehouse = \"{warehouse}\" }}"),
        secret: format!("{{ uri = \"sqlite:///{}\" }}", db.display()),
        more_secrets: s3.secrets_toml(),
        _server: None,
    }
}

/// pyiceberg's SqlCatalog on a PostgreSQL database of `pg`.
fn postgres_catalog(d: &Dataset, pg: &tether_testkit::Postgres) -> Catalog {
    pg.create_database("lake");
    let warehouse = file_uri(&d.data().join("warehouse"));
    std::fs::create_dir_all(d.data().join("warehouse")).unwrap();
    let url = pg.url("lake");
    let sqlalchemy = url.replacen("postgres://", "postgresql+psycopg://", 1);
    Catalog {
        python: json!({"type": "sql", "uri": sqlalchemy, "warehouse": warehouse}),
        committed: format!("{{ type = \"sql\", warehouse = \"{warehouse}\" }}"),
        // As pyiceberg's users write it: the SQLAlchemy form, password and all.
        secret: format!("{{ uri = \"{sqlalchemy}\" }}"),
        more_secrets: String::new(),
        _server: None,
    }
}

/// The test REST catalog, serving a SQLite-backed SqlCatalog.
fn rest_catalog(d: &Dataset, token: &str) -> Catalog {
    rest_catalog_with(d, token, None)
}

/// The test REST catalog; with `credential` (`id:secret`), it issues
/// `token` for it at `/v1/oauth/tokens`, and both pyiceberg and tether are
/// given the credential only.
fn rest_catalog_with(d: &Dataset, token: &str, credential: Option<&str>) -> Catalog {
    let warehouse = file_uri(&d.data().join("warehouse"));
    std::fs::create_dir_all(d.data().join("warehouse")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/iceberg_rest_server.py");
    let mut child = Command::new(tether_testkit::python())
        .arg(&script)
        .arg(d.data().join("rest-catalog.db"))
        .arg(&warehouse)
        .arg(token)
        .args(credential)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the REST catalog");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let uri = first
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the REST catalog said {first:?}"))
        .to_owned();
    let (python, secret) = match credential {
        None => (
            json!({"type": "rest", "uri": uri, "token": token}),
            // Plain http:// on 127.0.0.1: only secrets.toml can allow it.
            format!("{{ uri = \"{uri}\", token = \"{token}\", allow_http = true }}"),
        ),
        Some(credential) => (
            json!({"type": "rest", "uri": uri, "credential": credential}),
            format!("{{ uri = \"{uri}\", credential = \"{credential}\", allow_http = true }}"),
        ),
    };
    Catalog {
        python,
        committed: "{ type = \"rest\" }".into(),
        secret,
        more_secrets: String::new(),
        _server: Some(Server(child)),
    }
}

/// Write the catalog's committed and secret configuration into the dataset.
fn configure(d: &Dataset, catalog: &Catalog) {
    let toml = d.root().join("tether.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!(
            "{text}\n[backends.iceberg]\ncatalog = {}\n",
            catalog.committed
        ),
    )
    .unwrap();
    let secrets = d.root().join(".tether/secrets.toml");
    std::fs::write(
        &secrets,
        format!(
            "[backends.iceberg]\ncatalog = {}\n\n{}",
            catalog.secret, catalog.more_secrets
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &secrets,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
}

/// The tag a commit's output says it pinned `tbl` with.
fn pinned_tag(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("pinned tbl -> "))
        .unwrap_or_else(|| panic!("the commit pins tbl:\n{out}"))
        .trim()
        .to_owned()
}

/// The whole story on one catalog (see the module docs).
fn lifecycle(d: &Dataset, catalog: &Catalog) {
    configure(d, catalog);
    // Python: a table with two appends, and a tag of its own.
    let made = py(
        catalog,
        r#"
CATALOG.create_namespace("ns")
t = CATALOG.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
t.append(rows([1, 2]))
t.append(rows([3, 4, 5]))
snaps = [s.snapshot_id for s in t.snapshots()]
t.manage_snapshots().create_tag(snaps[0], "theirs").commit()
out(snaps)
"#,
        &[],
    );
    let (s1, s2) = (made[0].as_i64().unwrap(), made[1].as_i64().unwrap());

    let added = d.ok(&["add", "tbl", "--kind", "iceberg", "--table", "ns.t"]);
    assert!(added.starts_with("added tbl [iceberg]"), "{added}");
    let out = d.ok(&["commit", "-m", "first"]);
    let first_commit = d.rev("HEAD");
    let tag1 = pinned_tag(&out);
    assert!(
        tag1.starts_with(&format!("tether.{}.", d.dataset_id())),
        "{tag1}"
    );
    // pyiceberg lists our tag at the head, and scans the same rows at it.
    let seen = py(
        catalog,
        "t = table(); out({'refs': refs(t), 'rows': count_at(t, t.refs()[ARGS[0]].snapshot_id)})",
        &[&tag1],
    );
    assert_eq!(seen["refs"][&tag1], json!(["tag", s2]), "{seen}");
    assert_eq!(seen["rows"], 5, "{seen}");
    assert_eq!(seen["refs"]["theirs"], json!(["tag", s1]), "{seen}");

    // A branch: `new -b` forks it at the pin; a writable open names it;
    // pyiceberg appends there.
    let out = d.ok(&["new", "-b", "feat", "--eager"]);
    let working = format!("tether.ws.{}.feat", d.dataset_id());
    assert!(out.contains(&working), "{out}");
    let opened: Value = serde_json::from_str(&d.ok(&["open", "tbl", "--json"])).unwrap();
    assert_eq!(opened["read_only"], false, "{opened}");
    assert_eq!(opened["address"], format!("ns.t#{working}"), "{opened}");
    let written = py(
        catalog,
        r#"
t = table()
t.append(rows([6, 7]), branch=ARGS[0])
t = table()
out({"head": t.refs()[ARGS[0]].snapshot_id, "main": t.refs()["main"].snapshot_id})
"#,
        &[&working],
    );
    let s3 = written["head"].as_i64().unwrap();
    assert_eq!(written["main"], s2, "the append went to the branch only");
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("modified tbl"), "{status}");
    let out = d.ok(&["commit", "-m", "feature rows"]);
    let tag2 = pinned_tag(&out);

    // The native diff: the one append between the commits.
    let diff: Value =
        serde_json::from_str(&d.ok(&["diff", &first_commit, "HEAD", "--content", "--json"]))
            .unwrap();
    let change = diff
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "tbl")
        .unwrap_or_else(|| panic!("tbl changed: {diff}"));
    assert_eq!(change["detail"]["unit"], "snapshots", "{diff}");
    let entries = change["detail"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{diff}");
    assert_eq!(entries[0]["path"], s3.to_string(), "{diff}");
    assert_eq!(entries[0]["detail"], "append: +2 rows, +1 files", "{diff}");

    // Promote fast-forwards main, as pyiceberg sees it.
    let promoted = d.ok(&["promote"]);
    assert!(
        promoted.contains(&format!("snapshot_id={s3}")),
        "{promoted}"
    );
    let main = py(
        catalog,
        "t = table(); out({'main': t.refs()['main'].snapshot_id, 'rows': t.scan().to_arrow().num_rows, 'tag2': refs(t)[ARGS[0]]})",
        &[&tag2],
    );
    assert_eq!(main["main"], s3, "{main}");
    assert_eq!(main["rows"], 7, "{main}");
    assert_eq!(main["tag2"], json!(["tag", s3]), "{main}");

    // History, newest first, from the snapshot summaries.
    let log = d.ok(&["log", "tbl"]);
    assert!(log.contains("append: +2 rows, +1 files"), "{log}");

    // drop: the feature bookmark's branch goes; the trunk's pins stay.
    d.ok(&["drop", "feat", "--no-dry-run"]);
    // gc: a pin no commit references any more goes, and only it.
    let s4 = py(
        catalog,
        "t = table(); t.append(rows([8])); out(table().refs()['main'].snapshot_id)",
        &[],
    );
    let out = d.ok(&["commit", "-m", "forgotten"]);
    let tag3 = pinned_tag(&out);
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    d.ok(&["gc", "--no-dry-run"]);
    let after = py(catalog, "out(refs(table()))", &[]);
    let names: Vec<&str> = after
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec!["main", "theirs", tag1.as_str(), tag2.as_str()];
    want.sort();
    assert_eq!(names, want, "exactly our refs went: {after}");
    assert_eq!(after["main"], json!(["branch", s4]), "{after}");
    assert!(!names.contains(&tag3.as_str()));

    // Snapshot expiry keeps what our tags hold, and drops the rest: s4,
    // whose tag gc released, goes once main has moved on.
    let s5 = py(
        catalog,
        "t = table(); t.append(rows([9])); out(table().refs()['main'].snapshot_id)",
        &[],
    );
    let s5 = s5.as_i64().unwrap();
    let expired = py(
        catalog,
        r#"
t = table()
t.maintenance.expire_snapshots().older_than(datetime.datetime.now() + datetime.timedelta(seconds=1)).commit()
t = table()
out({"snapshots": sorted(s.snapshot_id for s in t.snapshots()),
     "rows": count_at(t, t.refs()[ARGS[0]].snapshot_id)})
"#,
        &[&tag1],
    );
    let mut kept = vec![s1, s2, s3, s5];
    kept.sort();
    assert_eq!(expired["snapshots"], json!(kept), "{expired}");
    assert_eq!(expired["rows"], 5, "{expired}");
    let verified = d.ok(&["verify"]);
    assert!(
        lines(&verified).iter().all(|l| !l.starts_with("missing")),
        "{verified}"
    );
}

#[test]
fn sqlite_catalog_lifecycle() {
    let d = Dataset::init();
    let catalog = sqlite_catalog(&d);
    lifecycle(&d, &catalog);
    // `catalog.uri` names a database here, not an HTTP origin: no warning
    // about HTTP access on an ordinary command.
    let out = d.tether(&["status", "--snapshot"]);
    let err = crate::support::stderr(&out);
    assert!(
        out.status.success() && !err.contains("HTTP access"),
        "{err}"
    );
}

#[test]
fn postgres_catalog_lifecycle() {
    let pg = tether_testkit::Postgres::start();
    let d = Dataset::init();
    let catalog = postgres_catalog(&d, &pg);
    lifecycle(&d, &catalog);
    // The password reached neither the committed files nor the journal.
    for file in ["tether.toml", ".tether/ops.jsonl"] {
        let text = std::fs::read_to_string(d.root().join(file)).unwrap_or_default();
        assert!(
            !text.contains(tether_testkit::Postgres::PASSWORD),
            "{file} holds the password"
        );
    }
}

/// The lifecycle with the warehouse on S3 (a local S3 server): metadata
/// read and written through the host's S3 client, pins and forks that
/// pyiceberg reads back from S3.
#[test]
fn s3_warehouse_lifecycle() {
    let s3 = tether_testkit::S3Server::start("tether-iceberg");
    let d = Dataset::init();
    let catalog = s3_catalog(&d, &s3);
    lifecycle(&d, &catalog);
    // The metadata tether wrote is on S3, beside pyiceberg's.
    let location = py(&catalog, "out(table().metadata_location)", &[]);
    assert!(
        location
            .as_str()
            .unwrap()
            .starts_with(&format!("s3://{}/wh/", s3.bucket())),
        "{location}"
    );
}

#[test]
fn rest_catalog_lifecycle() {
    let d = Dataset::init();
    let catalog = rest_catalog(&d, "rest-token-8c1d");
    lifecycle(&d, &catalog);
}

/// A REST catalog that takes an OAuth2 client credential: the host
/// exchanges `credential` at the catalog's `/v1/oauth/tokens` and sends the
/// token it gets; the plugin sees neither, and nothing tether writes holds
/// them. A wrong credential fails the command without echoing it.
#[test]
fn rest_catalog_with_an_oauth2_credential() {
    const TOKEN: &str = "issued-token-51c7e0";
    const CREDENTIAL: &str = "tether-client:cl1ent-s3cret";
    let d = Dataset::init();
    let catalog = rest_catalog_with(&d, TOKEN, Some(CREDENTIAL));
    lifecycle(&d, &catalog);
    // The server issued tokens for the credential, to pyiceberg and tether
    // alike (tether's secrets hold no token: every request it made to the
    // catalog carried an exchanged one, or the lifecycle would have failed).
    let issued = std::fs::read_to_string(d.data().join("rest-catalog.db.tokens.log")).unwrap();
    assert!(
        issued.lines().count() >= 2,
        "tokens issued for the credential:\n{issued}"
    );
    for line in issued.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry["client_id"], "tether-client", "{issued}");
    }
    for file in crate::support::files_under(&d.root(), &d.root()) {
        if file.starts_with(".git/") || file == ".tether/secrets.toml" {
            continue;
        }
        let text =
            String::from_utf8_lossy(&std::fs::read(d.root().join(&file)).unwrap_or_default())
                .into_owned();
        assert!(!text.contains("cl1ent-s3cret"), "{file} holds the secret");
        assert!(!text.contains(TOKEN), "{file} holds the token");
    }

    // The wrong secret: refused by the catalog's token endpoint, said so,
    // and neither the secret nor a token shown.
    let secrets = d.root().join(".tether/secrets.toml");
    let text = std::fs::read_to_string(&secrets).unwrap();
    std::fs::write(&secrets, text.replace("cl1ent-s3cret", "wr0ng-s3cret")).unwrap();
    let out = d.tether(&["status", "--snapshot"]);
    let text = format!(
        "{}{}",
        crate::support::stdout(&out),
        crate::support::stderr(&out)
    );
    assert!(text.contains("refused the credential"), "{text}");
    assert!(
        !text.contains("wr0ng-s3cret") && !text.contains(TOKEN),
        "{text}"
    );
}

/// A catalog URI on a link-local (cloud metadata) address is never
/// connected to, whatever secrets.toml allows.
#[test]
fn a_metadata_address_is_never_reached() {
    let d = Dataset::init();
    let catalog = Catalog {
        python: json!({}),
        committed: "{ type = \"rest\" }".into(),
        secret: "{ uri = \"http://169.254.169.254/latest/meta-data\", token = \"t\", allow_http = true }"
            .into(),
        more_secrets: String::new(),
        _server: None,
    };
    configure(&d, &catalog);
    d.ok(&["add", "tbl", "--kind", "iceberg", "--table", "ns.t"]);
    let out = d.tether(&["commit", "-m", "first"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = format!(
        "{}{}",
        crate::support::stdout(&out),
        crate::support::stderr(&out)
    );
    assert!(text.contains("link-local"), "{text}");
    assert!(text.contains("refused to connect"), "{text}");
}

/// `catalog_name` is the SQL catalog's `catalog_name` column: a table
/// pyiceberg made in catalog `default` is not in catalog `other`, and the
/// first commit says so (the add is not refused: nothing is contacted then).
#[test]
fn catalog_name_selects_the_sql_catalogs_rows() {
    let d = Dataset::init();
    let catalog = sqlite_catalog(&d);
    configure(&d, &catalog);
    py(
        &catalog,
        r#"
CATALOG.create_namespace("ns")
t = CATALOG.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
t.append(rows([1]))
out(True)
"#,
        &[],
    );
    d.ok(&[
        "add",
        "tbl",
        "--kind",
        "iceberg",
        "--table",
        "ns.t",
        "--set",
        "catalog_name=other",
    ]);
    let out = d.tether(&["commit", "-m", "first"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = format!(
        "{}{}",
        crate::support::stdout(&out),
        crate::support::stderr(&out)
    );
    assert!(text.contains("not in catalog other"), "{text}");
}

/// `--pin record` (spec: lever 1): a commit records the snapshot id and
/// makes no tag; `open -r` reads the recorded snapshot while the table
/// keeps it; `new` forks straight from it; once snapshot expiry removes it,
/// `verify --all-history --deep` says so.
#[test]
fn pin_record_records_the_snapshot_and_makes_no_tag() {
    let d = Dataset::init();
    let catalog = sqlite_catalog(&d);
    configure(&d, &catalog);
    let made = py(
        &catalog,
        r#"
CATALOG.create_namespace("ns")
t = CATALOG.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
t.append(rows([1, 2]))
t.append(rows([3, 4, 5]))
out([s.snapshot_id for s in t.snapshots()])
"#,
        &[],
    );
    let s2 = made[1].as_i64().unwrap();
    d.ok(&[
        "add", "tbl", "--kind", "iceberg", "--table", "ns.t", "--pin", "record",
    ]);
    let out = d.ok(&["commit", "-m", "first"]);
    assert!(!out.contains("pinned tbl"), "no native pin: {out}");
    let first = d.rev("HEAD");
    let manifest = d.show(&first, ".tether/objects/tbl.toml");
    assert!(manifest.contains(&s2.to_string()), "{manifest}");
    let refs = py(&catalog, "out(refs(table()))", &[]);
    assert_eq!(refs, json!({"main": ["branch", s2]}), "no tag made: {refs}");

    // Main moves on; the first commit still opens at its recorded snapshot.
    let s3 = py(
        &catalog,
        "t = table(); t.append(rows([6])); out(table().refs()['main'].snapshot_id)",
        &[],
    );
    let opened: Value =
        serde_json::from_str(&d.ok(&["open", "tbl", "-r", &first, "--json"])).unwrap();
    // The recorded snapshot itself (no tag to name), read-only.
    assert_eq!(opened["address"], format!("ns.t#{s2}"), "{opened}");
    assert_eq!(opened["read_only"], true, "{opened}");
    d.ok(&["commit", "-m", "second"]);

    // `new` forks from the recorded snapshot at once (the branch is what
    // keeps it alive), even though forks are lazy by default.
    d.ok(&["new", "-b", "feat"]);
    let working = format!("tether.ws.{}.feat", d.dataset_id());
    let refs = py(&catalog, "out(refs(table()))", &[]);
    assert_eq!(refs[&working], json!(["branch", s3]), "{refs}");
    assert_eq!(refs.as_object().unwrap().len(), 2, "still no tag: {refs}");

    // Expiry takes the first commit's snapshot (no ref holds it): a record
    // pin is bounded by the table's retention, and verify reports it.
    py(
        &catalog,
        r#"
t = table()
t.append(rows([7]))
table().maintenance.expire_snapshots().older_than(datetime.datetime.now() + datetime.timedelta(seconds=1)).commit()
out(True)
"#,
        &[],
    );
    // (Without --deep a pin with no ref to check is `unknown`: the SDK
    // kit's rule for every backend.)
    let out = d.fails(&["verify", "--all-history", "--deep"], 1);
    let text = crate::support::stdout(&out);
    assert!(
        lines(&text)
            .iter()
            .any(|l| l.starts_with("missing") && l.contains("tbl")),
        "{text}"
    );
    let out = d.tether(&["open", "tbl", "-r", &first]);
    assert!(!out.status.success(), "{}", describe(&out));
}

/// Gzip metadata (`write.metadata.compression-codec = gzip`): pyiceberg
/// 0.12 reads `NNNNN-<uuid>.gz.metadata.json` but does not write it, so the
/// script does what a writer honouring the codec (Iceberg's Java library)
/// does on commit: the next metadata file, gzip-compressed, and the catalog
/// pointer moved to it. tether reads it and writes its own next metadata
/// file compressed the same way, which pyiceberg reads back.
#[test]
fn gzip_metadata_is_read_and_written_compressed() {
    let d = Dataset::init();
    let catalog = sqlite_catalog(&d);
    configure(&d, &catalog);
    let made = py(
        &catalog,
        r#"
import gzip, sqlite3, uuid
CATALOG.create_namespace("ns")
t = CATALOG.create_table("ns.t", schema=pa.schema([("id", pa.int64())]),
                         properties={"write.metadata.compression-codec": "gzip"})
t.append(rows([1, 2, 3]))
t = table()
current = t.metadata_location
directory, name = current.rsplit("/", 1)
version = int(name.split("-", 1)[0]) + 1
compressed = f"{directory}/{version:05d}-{uuid.uuid4()}.gz.metadata.json"
with open(current.removeprefix("file://"), "rb") as f:
    data = f.read()
with open(compressed.removeprefix("file://"), "wb") as f:
    f.write(gzip.compress(data))
db = sqlite3.connect(CATALOG.properties["uri"].removeprefix("sqlite:///"))
db.execute("UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
           "WHERE table_name = 't'", (compressed, current))
db.commit()
t = table()
out({"head": t.refs()["main"].snapshot_id, "location": t.metadata_location})
"#,
        &[],
    );
    let location = made["location"].as_str().unwrap();
    assert!(location.ends_with(".gz.metadata.json"), "{made}");
    d.ok(&["add", "tbl", "--kind", "iceberg", "--table", "ns.t"]);
    let out = d.ok(&["commit", "-m", "first"]);
    let tag = pinned_tag(&out);
    let seen = py(
        &catalog,
        r#"
t = table()
out({"location": t.metadata_location, "refs": refs(t),
     "rows": count_at(t, t.refs()[ARGS[0]].snapshot_id)})
"#,
        &[&tag],
    );
    let ours = seen["location"].as_str().unwrap();
    assert_ne!(
        ours, location,
        "tether wrote the next metadata file: {seen}"
    );
    assert!(ours.ends_with(".gz.metadata.json"), "{seen}");
    let path = ours.strip_prefix("file://").unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip-compressed");
    assert_eq!(seen["refs"][&tag], json!(["tag", made["head"]]), "{seen}");
    assert_eq!(seen["rows"], 3, "{seen}");
    d.ok(&["verify"]);
}
