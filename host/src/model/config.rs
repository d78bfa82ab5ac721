//! `tether.toml`: the committed dataset configuration (format version 5).
//!
//! The file arrives with every clone, so it is untrusted input: besides its
//! own settings it may hold only the backend options a backend allowlists,
//! and every key that could choose an executable, an endpoint, SQL, or the
//! variable a secret is read from is refused by name, saying where it belongs
//! (`.tether/secrets.toml` or the environment). Unknown tables and keys are
//! refused too, so a typo cannot silently fall back to a default.
//!
//! ```toml
//! [tether]
//! version = 5
//! [dataset]
//! id = "0a1b2c3d"
//! [snapshot]
//! auto = false
//! [verify]
//! on_status = false
//! [new]
//! fork = "lazy"      # or "eager"
//! record = "fork"    # or "defer" (needs fork = "lazy")
//! [defaults]
//! file = "immutable" # or "versioned"
//! pin = "native"     # or "record"
//! [vcs]
//! prefer = "jj"      # or "git"
//! trunk = "main"
//! [backends.file]
//! storage_options = { region = "us-west-2" }
//! [plugins.lakefs]
//! digest = "sha256:<64 hex>"
//! ```
//!
//! Writing produces one stable, commented layout (the one `init` writes);
//! comments a person added are not kept when tether rewrites the file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::error::{ModelError, Result};
use super::fsutil;
use super::ids;
use super::policy::Policy;
use super::toml_json;

/// The format this tether reads and writes.
pub const FORMAT_VERSION: i64 = 5;

/// `[new] fork`: when a bookmark's branches are created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewFork {
    /// On the first writable `open` (the default).
    #[default]
    Lazy,
    /// During `new`.
    Eager,
}

/// `[new] record`: when `pin = "record"` objects fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewRecord {
    /// During `new`, even when forks are lazy (the default).
    #[default]
    Fork,
    /// Like every other object (needs `fork = "lazy"`).
    Defer,
}

/// `[vcs] prefer`: the adapter when both `.jj` and `.git` exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VcsPrefer {
    /// jj (the default).
    #[default]
    Jj,
    /// git.
    Git,
}

impl NewFork {
    /// The spelling in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            NewFork::Lazy => "lazy",
            NewFork::Eager => "eager",
        }
    }
}

impl NewRecord {
    /// The spelling in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            NewRecord::Fork => "fork",
            NewRecord::Defer => "defer",
        }
    }
}

impl VcsPrefer {
    /// The spelling in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            VcsPrefer::Jj => "jj",
            VcsPrefer::Git => "git",
        }
    }
}

/// `[plugins.<kind>]`: the component a dataset is pinned to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginPin {
    /// `sha256:<64 lowercase hex>` of the `.wasm` component.
    pub digest: String,
}

/// The parsed `tether.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `[tether] version`; always [`FORMAT_VERSION`] once parsed.
    pub version: i64,
    /// `[dataset] id`: 8 lowercase hex.
    pub dataset_id: String,
    /// `[snapshot] auto`: fingerprint on every `status`.
    pub snapshot_auto: bool,
    /// `[verify] on_status`: cheap verify in `status`.
    pub verify_on_status: bool,
    /// `[new] fork`.
    pub new_fork: NewFork,
    /// `[new] record`.
    pub new_record: NewRecord,
    /// `[defaults]`: the policy of objects added without one.
    pub defaults: Policy,
    /// `[vcs] prefer`.
    pub vcs_prefer: VcsPrefer,
    /// `[vcs] trunk`: the bookmark that stands for every upstream branch.
    pub trunk: String,
    /// `[backends.<kind>]`: allowlisted, non-secret options per kind.
    pub backends: BTreeMap<String, Map<String, Value>>,
    /// `[plugins.<kind>]`: pinned plugin digests.
    pub plugins: BTreeMap<String, PluginPin>,
}

/// The tables a committed `[backends.<kind>]` may hold, and the keys allowed
/// inside each. Everything else belongs in `.tether/secrets.toml`.
pub fn committed_allowlist(kind: &str) -> &'static [(&'static str, &'static [&'static str])] {
    const STORAGE: &[(&str, &[&str])] = &[(
        "storage_options",
        &[
            "region",
            "allow_http",
            "virtual_hosted_style_request",
            "conditional_put",
        ],
    )];
    const CATALOG: &[(&str, &[&str])] = &[("catalog", &["type", "warehouse", "name"])];
    match kind {
        "file" | "delta" | "lance" => STORAGE,
        "iceberg" => CATALOG,
        _ => &[],
    }
}

/// Whether a digest is `sha256:<64 lowercase hex>`.
pub fn is_plugin_digest(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

impl Config {
    /// A new dataset's configuration: every default, the given id.
    pub fn new(dataset_id: &str) -> Result<Config> {
        ids::validate_dataset_id(dataset_id)?;
        Ok(Config {
            version: FORMAT_VERSION,
            dataset_id: dataset_id.to_string(),
            snapshot_auto: false,
            verify_on_status: false,
            new_fork: NewFork::Lazy,
            new_record: NewRecord::Fork,
            defaults: Policy::default(),
            vcs_prefer: VcsPrefer::Jj,
            trunk: "main".to_string(),
            backends: BTreeMap::new(),
            plugins: BTreeMap::new(),
        })
    }

    /// Read and validate `path`.
    pub fn read(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        Config::parse(&text, path)
    }

    /// Write `path` atomically in the stable layout.
    pub fn write(&self, path: &Path) -> Result<()> {
        fsutil::write_atomic(path, self.to_toml_string()?.as_bytes())
    }

    /// The committed options of a backend kind (empty when none).
    pub fn backend_options(&self, kind: &str) -> Map<String, Value> {
        self.backends.get(kind).cloned().unwrap_or_default()
    }

    /// Parse and validate the text of `tether.toml` (`file` names it in
    /// errors). Refuses other format versions (see [`peek_version`]).
    pub fn parse(text: &str, file: &Path) -> Result<Config> {
        let table = parse_table(text, file)?;
        let version = version_of(&table, file)?;
        if version < FORMAT_VERSION {
            return Err(ModelError::OutdatedFormat {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        if version > FORMAT_VERSION {
            return Err(ModelError::NewerFormat {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let mut p = Parser {
            file: file.to_path_buf(),
        };
        p.config(&table)
    }

    /// The file's text in the stable, commented layout.
    pub fn to_toml_string(&self) -> Result<String> {
        let s = |v: &str| toml::Value::String(v.to_string()).to_string();
        let mut out = String::new();
        out.push_str(
            "# tether dataset configuration: committed and shared by every clone.\n\
             # Credentials, endpoints, executables and SQL go in .tether/secrets.toml.\n\n",
        );
        out.push_str(&format!(
            "[tether]\nversion = {}  # the format this tether writes; older ones need the release that wrote them\n\n",
            self.version
        ));
        out.push_str(&format!(
            "[dataset]\nid = {}  # the namespace of this dataset's pins and branches in every store\n\n",
            s(&self.dataset_id)
        ));
        out.push_str(&format!(
            "[snapshot]\nauto = {}  # true: fingerprint every object on every `status`\n\n",
            self.snapshot_auto
        ));
        out.push_str(&format!(
            "[verify]\non_status = {}  # true: also run a cheap verify of each committed object in `status`\n\n",
            self.verify_on_status
        ));
        out.push_str(&format!(
            "[new]\nfork = {}  # \"lazy\": create a working branch on the first writable open; \"eager\": during `new`\n\
             record = {}  # pin = \"record\" objects: \"fork\" during `new` even when lazy; \"defer\": like the rest\n\n",
            s(self.new_fork.as_str()),
            s(self.new_record.as_str())
        ));
        out.push_str(&format!(
            "[defaults]  # the policy of objects added without one\nfile = {}  # immutable | versioned\npin = {}  # native | record\n\n",
            s(self.defaults.file.as_str()),
            s(self.defaults.pin.as_str())
        ));
        out.push_str(&format!(
            "[vcs]\nprefer = {}  # the adapter when both .jj and .git exist\ntrunk = {}  # the bookmark that stands for every object's upstream branch\n",
            s(self.vcs_prefer.as_str()),
            s(&self.trunk)
        ));
        let mut rest = toml::Table::new();
        if !self.backends.is_empty() {
            let mut b = toml::Table::new();
            for (kind, opts) in &self.backends {
                let t = toml_json::json_map_to_table(opts).map_err(|m| {
                    ModelError::Unrepresentable {
                        what: format!("[backends.{kind}]"),
                        message: m,
                    }
                })?;
                b.insert(kind.clone(), toml::Value::Table(t));
            }
            rest.insert("backends".into(), toml::Value::Table(b));
        }
        if !self.plugins.is_empty() {
            let mut p = toml::Table::new();
            for (kind, pin) in &self.plugins {
                let mut t = toml::Table::new();
                t.insert("digest".into(), toml::Value::String(pin.digest.clone()));
                p.insert(kind.clone(), toml::Value::Table(t));
            }
            rest.insert("plugins".into(), toml::Value::Table(p));
        }
        if !rest.is_empty() {
            out.push('\n');
            out.push_str(
                &toml::to_string(&rest).map_err(|e| ModelError::Unrepresentable {
                    what: "tether.toml".into(),
                    message: e.to_string(),
                })?,
            );
        }
        Ok(out)
    }
}

/// The text `init` writes for a new dataset.
pub fn default_file_text(dataset_id: &str) -> Result<String> {
    Config::new(dataset_id)?.to_toml_string()
}

/// The `[tether] version` of a `tether.toml` without validating the rest,
/// for `upgrade` (a file without one is taken as the current version, as
/// every key but the id has a default).
pub fn peek_version(text: &str, file: &Path) -> Result<i64> {
    version_of(&parse_table(text, file)?, file)
}

fn parse_table(text: &str, file: &Path) -> Result<toml::Table> {
    super::toml_json::parse_table(text).map_err(|m| ModelError::invalid(file, m))
}

fn version_of(table: &toml::Table, file: &Path) -> Result<i64> {
    match table.get("tether") {
        None => Ok(FORMAT_VERSION),
        Some(toml::Value::Table(t)) => match t.get("version") {
            None => Ok(FORMAT_VERSION),
            Some(toml::Value::Integer(v)) => Ok(*v),
            Some(other) => Err(ModelError::invalid(
                file,
                format!("[tether] version must be an integer, not {other}"),
            )),
        },
        Some(_) => Err(ModelError::invalid(
            file,
            "`tether` must be a table ([tether])",
        )),
    }
}

fn secrets_home(what: &str) -> String {
    format!("put it in .tether/secrets.toml ({what}), which is per checkout and never committed")
}

struct Parser {
    file: PathBuf,
}

impl Parser {
    fn invalid(&self, message: impl Into<String>) -> ModelError {
        ModelError::invalid(&self.file, message)
    }

    fn forbidden(&self, key: impl Into<String>, belongs: impl Into<String>) -> ModelError {
        ModelError::ForbiddenKey {
            file: self.file.clone(),
            key: key.into(),
            belongs: belongs.into(),
        }
    }

    fn unknown(&self, key: &str) -> ModelError {
        self.invalid(format!(
            "`{key}` is not a tether.toml setting (a typo, or a newer tether's?); remove it. \
             Per-checkout settings and credentials belong in .tether/secrets.toml"
        ))
    }

    fn table<'a>(&self, root: &'a toml::Table, name: &str) -> Result<Option<&'a toml::Table>> {
        match root.get(name) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(t)),
            Some(_) => Err(self.invalid(format!("`{name}` must be a table ([{name}])"))),
        }
    }

    fn string<'a>(&self, t: &'a toml::Table, table: &str, key: &str) -> Result<Option<&'a str>> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(other) => {
                Err(self.invalid(format!("[{table}] {key} must be a string, not {other}")))
            }
        }
    }

    fn boolean(&self, t: &toml::Table, table: &str, key: &str) -> Result<Option<bool>> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(self.invalid(format!(
                "[{table}] {key} must be true or false, not {other}"
            ))),
        }
    }

    fn only(&self, t: &toml::Table, table: &str, allowed: &[&str]) -> Result<()> {
        match t.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.unknown(&format!("{table}.{k}"))),
            None => Ok(()),
        }
    }

    fn config(&mut self, root: &toml::Table) -> Result<Config> {
        // Refusals that are about trust come first, so a hostile file is
        // named for what it tried, not for a typo next to it.
        if let Some(vcs) = self.table(root, "vcs")? {
            for (key, env) in [("git_path", "TETHER_GIT"), ("jj_path", "TETHER_JJ")] {
                if vcs.contains_key(key) {
                    return Err(self.forbidden(
                        format!("vcs.{key}"),
                        format!(
                            "{}, or set {env} in the environment",
                            secrets_home(&format!("[vcs] {key}"))
                        ),
                    ));
                }
            }
        }
        if let Some(import) = self.table(root, "import")? {
            if import.contains_key("query") {
                return Err(self.forbidden(
                    "import.query",
                    format!(
                        "{}, or pass the query on the command line",
                        secrets_home("[import] query")
                    ),
                ));
            }
            self.only(import, "import", &[])?;
        }
        let backends = match self.table(root, "backends")? {
            Some(b) => self.backends(b)?,
            None => BTreeMap::new(),
        };

        for name in root.keys() {
            if !matches!(
                name.as_str(),
                "tether"
                    | "dataset"
                    | "snapshot"
                    | "verify"
                    | "new"
                    | "defaults"
                    | "vcs"
                    | "backends"
                    | "plugins"
                    | "import"
            ) {
                return Err(self.unknown(name));
            }
        }
        if let Some(t) = self.table(root, "tether")? {
            self.only(t, "tether", &["version"])?;
        }

        let dataset_id = match self.table(root, "dataset")? {
            Some(t) => {
                self.only(t, "dataset", &["id"])?;
                self.string(t, "dataset", "id")?
            }
            None => None,
        };
        let Some(dataset_id) = dataset_id else {
            return Err(self.invalid(
                "[dataset] id is missing: a dataset from before ids opens only with the tether \
                 release that made it (this build cannot upgrade it); a new one gets its id \
                 from `tether init`",
            ));
        };
        if !ids::is_dataset_id(dataset_id) {
            return Err(self.invalid(format!(
                "[dataset] id {dataset_id:?} is not 8 lowercase hex characters (like \"0a1b2c3d\")"
            )));
        }
        let mut c = Config::new(dataset_id)?;
        c.backends = backends;

        if let Some(t) = self.table(root, "snapshot")? {
            self.only(t, "snapshot", &["auto"])?;
            c.snapshot_auto = self.boolean(t, "snapshot", "auto")?.unwrap_or(false);
        }
        if let Some(t) = self.table(root, "verify")? {
            self.only(t, "verify", &["on_status"])?;
            c.verify_on_status = self.boolean(t, "verify", "on_status")?.unwrap_or(false);
        }
        if let Some(t) = self.table(root, "new")? {
            self.only(t, "new", &["fork", "record"])?;
            c.new_fork = match self.string(t, "new", "fork")? {
                None | Some("lazy") => NewFork::Lazy,
                Some("eager") => NewFork::Eager,
                Some(o) => {
                    return Err(
                        self.invalid(format!("[new] fork is {o:?}; use \"lazy\" or \"eager\""))
                    );
                }
            };
            c.new_record = match self.string(t, "new", "record")? {
                None | Some("fork") => NewRecord::Fork,
                Some("defer") => NewRecord::Defer,
                Some(o) => {
                    return Err(
                        self.invalid(format!("[new] record is {o:?}; use \"fork\" or \"defer\""))
                    );
                }
            };
            if c.new_record == NewRecord::Defer && c.new_fork == NewFork::Eager {
                return Err(self.invalid(
                    "[new] record = \"defer\" needs fork = \"lazy\" (with eager forks nothing is deferred); change one of them",
                ));
            }
        }
        if let Some(t) = self.table(root, "defaults")? {
            self.only(t, "defaults", &["file", "pin"])?;
            if let Some(f) = self.string(t, "defaults", "file")? {
                c.defaults.file = f
                    .parse()
                    .map_err(|m: String| self.invalid(format!("[defaults] {m}")))?;
            }
            if let Some(p) = self.string(t, "defaults", "pin")? {
                c.defaults.pin = p
                    .parse()
                    .map_err(|m: String| self.invalid(format!("[defaults] {m}")))?;
            }
        }
        if let Some(t) = self.table(root, "vcs")? {
            self.only(t, "vcs", &["prefer", "trunk"])?;
            c.vcs_prefer = match self.string(t, "vcs", "prefer")? {
                None | Some("jj") => VcsPrefer::Jj,
                Some("git") => VcsPrefer::Git,
                Some(o) => {
                    return Err(
                        self.invalid(format!("[vcs] prefer is {o:?}; use \"jj\" or \"git\""))
                    );
                }
            };
            if let Some(trunk) = self.string(t, "vcs", "trunk")? {
                if trunk.trim().is_empty() {
                    return Err(self.invalid(
                        "[vcs] trunk is empty; name the trunk bookmark (default \"main\")",
                    ));
                }
                c.trunk = trunk.to_string();
            }
        }
        if let Some(t) = self.table(root, "plugins")? {
            for (kind, v) in t {
                let toml::Value::Table(pt) = v else {
                    return Err(self.invalid(format!(
                        "`plugins.{kind}` must be a table ([plugins.{kind}])"
                    )));
                };
                self.only(pt, &format!("plugins.{kind}"), &["digest"])?;
                let Some(digest) = self.string(pt, &format!("plugins.{kind}"), "digest")? else {
                    return Err(self.invalid(format!(
                        "[plugins.{kind}] has no digest; `tether plugin pin` writes one"
                    )));
                };
                if !is_plugin_digest(digest) {
                    return Err(self.invalid(format!(
                        "[plugins.{kind}] digest {digest:?} is not \"sha256:\" and 64 lowercase hex"
                    )));
                }
                c.plugins.insert(
                    kind.clone(),
                    PluginPin {
                        digest: digest.to_string(),
                    },
                );
            }
        }
        Ok(c)
    }

    fn backends(&self, b: &toml::Table) -> Result<BTreeMap<String, Map<String, Value>>> {
        let mut out = BTreeMap::new();
        for (kind, v) in b {
            let toml::Value::Table(t) = v else {
                return Err(self.invalid(format!(
                    "`backends.{kind}` must be a table ([backends.{kind}])"
                )));
            };
            let allow = committed_allowlist(kind);
            for (name, value) in t {
                let Some((_, keys)) = allow.iter().find(|(n, _)| n == name) else {
                    return Err(self.forbidden(
                        format!("backends.{kind}.{name}"),
                        format!(
                            "the committed [backends.{kind}] may set {}; {}",
                            describe_allow(allow),
                            secrets_home(&format!("[backends.{kind}]"))
                        ),
                    ));
                };
                let toml::Value::Table(inner) = value else {
                    return Err(self.invalid(format!(
                        "backends.{kind}.{name} must be a table, like {name} = {{ {} = ... }}",
                        keys[0]
                    )));
                };
                if let Some(k) = inner.keys().find(|k| !keys.contains(&k.as_str())) {
                    let belongs = if name == "storage_options" {
                        format!(
                            "{} (or in a [uris.\"PREFIX\"] or [objects.\"KEY\"] entry there); the committed file allows only {}",
                            secrets_home(&format!("[backends.{kind}.{name}]")),
                            keys.join(", ")
                        )
                    } else {
                        format!(
                            "{}; the committed file allows only {}",
                            secrets_home(&format!("[backends.{kind}.{name}]")),
                            keys.join(", ")
                        )
                    };
                    return Err(self.forbidden(format!("backends.{kind}.{name}.{k}"), belongs));
                }
            }
            let map = toml_json::table_to_json_map(t)
                .map_err(|m| self.invalid(format!("[backends.{kind}]: {m}")))?;
            out.insert(kind.clone(), map);
        }
        Ok(out)
    }
}

fn describe_allow(allow: &[(&str, &[&str])]) -> String {
    if allow.is_empty() {
        "nothing".to_string()
    } else {
        allow
            .iter()
            .map(|(n, keys)| format!("only `{n}` ({})", keys.join(", ")))
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_toml_string() {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

/// A `tether.toml` that sets every section: this module's round-trip test
/// and the parsers' property tests start from it.
#[cfg(test)]
pub(crate) const FULL_CONFIG: &str = r#"
[tether]
version = 5
[dataset]
id = "0a1b2c3d"
[snapshot]
auto = true
[verify]
on_status = true
[new]
fork = "lazy"
record = "defer"
[defaults]
file = "versioned"
pin = "record"
[vcs]
prefer = "git"
trunk = "trunk"
[backends.file]
storage_options = { region = "us-west-2", allow_http = true }
[backends.iceberg.catalog]
type = "rest"
warehouse = "wh"
[plugins.lakefs]
digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/d/tether.toml"))
    }

    #[test]
    fn defaults_and_minimal_file() {
        let c = parse("[dataset]\nid = \"0a1b2c3d\"\n").unwrap();
        assert_eq!(c, Config::new("0a1b2c3d").unwrap());
        assert_eq!(c.trunk, "main");
        assert_eq!(c.new_fork, NewFork::Lazy);
        assert_eq!(c.new_record, NewRecord::Fork);
        assert_eq!(c.vcs_prefer, VcsPrefer::Jj);
        assert!(!c.snapshot_auto && !c.verify_on_status);
    }

    #[test]
    fn full_file_round_trips_stably() {
        let text = FULL_CONFIG;
        let c = parse(text).unwrap();
        assert!(c.snapshot_auto && c.verify_on_status);
        assert_eq!(c.new_record, NewRecord::Defer);
        assert_eq!(c.defaults.pin, super::super::policy::PinMode::Record);
        assert_eq!(c.vcs_prefer, VcsPrefer::Git);
        assert_eq!(
            Value::Object(c.backend_options("file")),
            json!({"storage_options": {"region": "us-west-2", "allow_http": true}})
        );
        let written = c.to_toml_string().unwrap();
        let again = parse(&written).unwrap();
        assert_eq!(again, c);
        assert_eq!(again.to_toml_string().unwrap(), written);
        assert!(
            written.contains("[backends.file.storage_options]"),
            "{written}"
        );
    }

    #[test]
    fn default_file_is_commented_and_parses() {
        let text = default_file_text("0a1b2c3d").unwrap();
        assert!(text.contains("version = 5  #"), "{text}");
        assert!(text.contains("id = \"0a1b2c3d\""));
        assert_eq!(parse(&text).unwrap(), Config::new("0a1b2c3d").unwrap());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tether.toml");
        Config::new("0a1b2c3d").unwrap().write(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert_eq!(Config::read(&p).unwrap().dataset_id, "0a1b2c3d");
    }

    #[test]
    fn versions() {
        let e = parse("[tether]\nversion = 4\n[dataset]\nid = \"0a1b2c3d\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "tether.toml is version 4; this tether expects 5: open this dataset with the tether release that writes version 4 (this build cannot upgrade it)"
        );
        // An old file is refused for its version, whatever else it holds.
        let e = parse("[tether]\nversion = 1\n[mystery]\nx = 1\n").unwrap_err();
        assert!(matches!(e, ModelError::OutdatedFormat { found: 1, .. }));
        let e = parse("[tether]\nversion = 6\n").unwrap_err();
        assert!(e.to_string().contains("newer tether"), "{e}");
        assert_eq!(
            peek_version("[tether]\nversion = 3\n", Path::new("t")).unwrap(),
            3
        );
        assert!(
            parse("[tether]\nversion = \"5\"\n")
                .unwrap_err()
                .to_string()
                .contains("integer")
        );
    }

    #[test]
    fn refuses_what_a_clone_may_not_set() {
        for (text, key, belongs) in [
            (
                "[vcs]\ngit_path = \"/bin/sh\"",
                "vcs.git_path",
                "TETHER_GIT",
            ),
            ("[vcs]\njj_path = \"/bin/sh\"", "vcs.jj_path", "TETHER_JJ"),
            (
                "[import]\nquery = \"DROP TABLE x\"",
                "import.query",
                "[import] query",
            ),
            (
                "[backends.neon]\napi_url = \"http://evil\"",
                "backends.neon.api_url",
                "[backends.neon]",
            ),
            (
                "[backends.neon]\napi_key_env = \"HOME\"",
                "backends.neon.api_key_env",
                "[backends.neon]",
            ),
            (
                "[backends.ducklake]\ninit_sql = [\"x\"]",
                "backends.ducklake.init_sql",
                "[backends.ducklake]",
            ),
            (
                "[backends.file.storage_options]\nendpoint = \"http://evil\"",
                "backends.file.storage_options.endpoint",
                "[uris.",
            ),
            (
                "[backends.iceberg.catalog]\nuri = \"http://evil\"",
                "backends.iceberg.catalog.uri",
                "type, warehouse, name",
            ),
            (
                "[backends.icechunk]\nendpoint_url = \"x\"",
                "backends.icechunk.endpoint_url",
                "may set nothing",
            ),
            (
                "[backends.lance]\ncatalog = { type = \"x\" }",
                "backends.lance.catalog",
                "storage_options",
            ),
        ] {
            let full = format!("[dataset]\nid = \"0a1b2c3d\"\n{text}\n");
            let e = parse(&full).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, ModelError::ForbiddenKey { .. }), "{msg}");
            assert!(msg.contains(&format!("`{key}`")), "{msg}");
            assert!(msg.contains(belongs), "{msg}");
            assert!(msg.contains(".tether/secrets.toml"), "{msg}");
            assert!(msg.starts_with("/d/tether.toml: "), "{msg}");
        }
    }

    #[test]
    fn refuses_unknown_and_invalid() {
        for (text, needle) in [
            ("[mystery]\nx = 1", "`mystery`"),
            ("[snapshot]\nauto = true\noften = 1", "`snapshot.often`"),
            ("[snapshot]\nauto = \"yes\"", "true or false"),
            ("[new]\nfork = \"soon\"", "\"lazy\" or \"eager\""),
            (
                "[new]\nfork = \"eager\"\nrecord = \"defer\"",
                "needs fork = \"lazy\"",
            ),
            ("[defaults]\nfile = \"mutable\"", "\"mutable\""),
            ("[vcs]\nprefer = \"hg\"", "\"hg\""),
            ("[vcs]\ntrunk = \"\"", "trunk is empty"),
            ("[plugins.x]\ndigest = \"md5:1\"", "sha256:"),
            ("[import]\nother = 1", "`import.other`"),
        ] {
            let full = format!("[dataset]\nid = \"0a1b2c3d\"\n{text}\n");
            let msg = parse(&full).unwrap_err().to_string();
            assert!(msg.contains(needle), "{text}: {msg}");
        }
        assert!(
            parse("")
                .unwrap_err()
                .to_string()
                .contains("[dataset] id is missing")
        );
        assert!(
            parse("[dataset]\nid = \"XYZ\"")
                .unwrap_err()
                .to_string()
                .contains("8 lowercase hex")
        );
        assert!(
            parse("[dataset\n")
                .unwrap_err()
                .to_string()
                .contains("not valid TOML")
        );
    }
}
