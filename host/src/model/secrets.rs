//! `.tether/secrets.toml`: per-checkout settings a clone may not choose.
//!
//! ```toml
//! [vcs]
//! git_path = "/usr/bin/git"          # or TETHER_GIT / TETHER_JJ
//! jj_path = "/opt/jj/bin/jj"
//! [backends.neon]                    # any key, per kind
//! api_key_env = "NEON_API_KEY"
//! [uris."s3://lab-a-bucket/"]        # every object whose store URI starts here
//! profile = "lab-a"
//! [objects."zarr/imaging"]           # one object; beats a URI prefix
//! profile = "imaging"
//! [import]
//! query = "SELECT name AS key, 'file' AS kind, uri FROM catalog"
//! [publish]
//! dsn = "postgresql://tether@db.example.org/catalog"   # or TETHER_PUBLISH_DSN
//! [plugins]
//! trusted = ["sha256:<64 hex>"]      # `tether plugin trust`
//! [plugins.dev]                      # `tether plugin dev PATH`: run this file
//! my-kv = "/abs/target/wasm32-wasip2/release/tether_plugin_my_kv.wasm"
//! ```
//!
//! Resolution per object and per field, most specific first: the
//! `[objects."<key>"]` entry, then the longest matching `[uris."<prefix>"]`,
//! then `[backends.<kind>]` (the committed table merged with this file's, this
//! file winning a field). Tables given at two levels are merged field by
//! field, recursively, not replaced. The environment comes after all of them.
//! For `s3://` stores the host itself reads the S3 fields of the result
//! (`plugin::storage::S3Settings`, then `AWS_*`) to open the storage grants,
//! and strips them from the configuration a plugin sees.
//!
//! The file may hold literal credentials: its values are never printed —
//! not by `Debug`, not in an error (a parse error gives only the line and
//! column) — and reading it warns when group or others may read it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use serde_json::{Map, Value};

use super::error::{ModelError, Result};
use super::fsutil;
use super::key::validate_key;
use super::toml_json;

/// An options table: JSON object.
pub type Options = Map<String, Value>;

/// The parsed `secrets.toml`. `Debug` shows which tables and keys are set,
/// never a value.
#[derive(Clone, Default, PartialEq)]
pub struct Secrets {
    /// `[vcs] git_path`.
    pub git_path: Option<String>,
    /// `[vcs] jj_path`.
    pub jj_path: Option<String>,
    /// `[backends.<kind>]`: any keys.
    pub backends: BTreeMap<String, Options>,
    /// `[uris."<prefix>"]`.
    pub uris: BTreeMap<String, Options>,
    /// `[objects."<key>"]`.
    pub objects: BTreeMap<String, Options>,
    /// `[import] query`.
    pub import_query: Option<String>,
    /// `[publish] dsn`: where `tether publish` writes when neither `--to`
    /// nor `$TETHER_PUBLISH_DSN` says.
    pub publish_dsn: Option<String>,
    /// `[plugins] trusted`: plugin digests this checkout agreed to run.
    pub trusted_plugins: BTreeSet<String>,
    /// `[plugins.dev]`: kind -> absolute path of a component this checkout
    /// runs for the kind, read afresh by every command (`tether plugin dev`).
    pub dev_plugins: BTreeMap<String, String>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn keys(m: &BTreeMap<String, Options>) -> BTreeMap<&str, Vec<&str>> {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.keys().map(String::as_str).collect()))
                .collect()
        }
        f.debug_struct("Secrets")
            .field("git_path", &self.git_path.as_ref().map(|_| "<set>"))
            .field("jj_path", &self.jj_path.as_ref().map(|_| "<set>"))
            .field("backends", &keys(&self.backends))
            .field("uris", &keys(&self.uris))
            .field("objects", &keys(&self.objects))
            .field("import_query", &self.import_query.as_ref().map(|_| "<set>"))
            .field("publish_dsn", &self.publish_dsn.as_ref().map(|_| "<set>"))
            .field("trusted_plugins", &self.trusted_plugins.len())
            .field("dev_plugins", &self.dev_plugins)
            .finish()
    }
}

/// Merge `over` into `base`: a field both set takes `over`'s value, except
/// that two tables are merged recursively.
pub fn merge_options(base: &mut Options, over: &Options) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge_options(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether `uri` falls under `prefix`: a string prefix that ends at a
/// boundary (the prefix ends in `/`, or the URI continues with `/`, `?` or
/// `#`, or they are equal), so `s3://lab` does not take `s3://lab-b/x`.
pub fn uri_matches(prefix: &str, uri: &str) -> bool {
    match uri.strip_prefix(prefix) {
        None => false,
        Some(rest) => {
            rest.is_empty()
                || prefix.ends_with('/')
                || rest.starts_with('/')
                || rest.starts_with('?')
                || rest.starts_with('#')
        }
    }
}

/// Whether the file's mode lets group or others read or write it.
pub fn exposed_permissions(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

impl Secrets {
    /// Read `path`; a missing file is empty. Warns when other users can
    /// read it.
    pub fn read(path: &Path) -> Result<Secrets> {
        let Some(text) = fsutil::read_optional(path)? else {
            return Ok(Secrets::default());
        };
        if exposed_permissions(path) {
            tracing::warn!(
                "{} may be read by other users and can hold credentials: run `chmod 600 {}`",
                path.display(),
                path.display()
            );
        }
        Secrets::parse(&text, path)
    }

    /// Parse the file's text; errors name `file` and never quote a value.
    pub fn parse(text: &str, file: &Path) -> Result<Secrets> {
        let bad = |m: String| ModelError::invalid(file, m);
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let before = &text[..s.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!(" at line {line}, column {col}")
                })
                .unwrap_or_default();
            bad(format!(
                "not valid TOML{at} (the text is not shown: it may hold credentials)"
            ))
        })?;
        let mut s = Secrets::default();
        for (name, value) in &table {
            let toml::Value::Table(t) = value else {
                return Err(bad(format!("`{name}` must be a table ([{name}])")));
            };
            match name.as_str() {
                "vcs" => {
                    for (k, v) in t {
                        let toml::Value::String(p) = v else {
                            return Err(bad(format!("[vcs] {k} must be a path (a string)")));
                        };
                        match k.as_str() {
                            "git_path" => s.git_path = Some(p.clone()),
                            "jj_path" => s.jj_path = Some(p.clone()),
                            _ => {
                                return Err(bad(format!(
                                    "[vcs] {k} is not a setting (git_path, jj_path)"
                                )));
                            }
                        }
                    }
                }
                "import" => {
                    for (k, v) in t {
                        match (k.as_str(), v) {
                            ("query", toml::Value::String(q)) => s.import_query = Some(q.clone()),
                            ("query", _) => {
                                return Err(bad("[import] query must be a string".into()));
                            }
                            _ => return Err(bad(format!("[import] {k} is not a setting (query)"))),
                        }
                    }
                }
                "publish" => {
                    for (k, v) in t {
                        match (k.as_str(), v) {
                            ("dsn", toml::Value::String(d)) => s.publish_dsn = Some(d.clone()),
                            ("dsn", _) => return Err(bad("[publish] dsn must be a string".into())),
                            _ => return Err(bad(format!("[publish] {k} is not a setting (dsn)"))),
                        }
                    }
                }
                "plugins" => {
                    for (k, v) in t {
                        match (k.as_str(), v) {
                            ("trusted", toml::Value::Array(items)) => {
                                for item in items {
                                    let toml::Value::String(d) = item else {
                                        return Err(bad(
                                            "[plugins] trusted must be a list of digests".into(),
                                        ));
                                    };
                                    s.trusted_plugins.insert(d.clone());
                                }
                            }
                            ("dev", toml::Value::Table(dev)) => {
                                for (kind, path) in dev {
                                    let toml::Value::String(path) = path else {
                                        return Err(bad(format!(
                                            "[plugins.dev] {kind:?} must be the path of a component"
                                        )));
                                    };
                                    if !Path::new(path).is_absolute() {
                                        return Err(bad(format!(
                                            "[plugins.dev] {kind:?} must be an absolute path \
                                             (`tether plugin dev PATH` writes one)"
                                        )));
                                    }
                                    s.dev_plugins.insert(kind.clone(), path.clone());
                                }
                            }
                            _ => {
                                return Err(bad(format!(
                                    "[plugins] {k} is not a setting (trusted = [digests], \
                                     [plugins.dev] KIND = PATH)"
                                )));
                            }
                        }
                    }
                }
                "backends" | "uris" | "objects" => {
                    let mut out = BTreeMap::new();
                    for (k, v) in t {
                        let toml::Value::Table(entry) = v else {
                            return Err(bad(format!("[{name}.{k:?}] must be a table")));
                        };
                        if name == "objects" {
                            validate_key(k).map_err(|e| bad(format!("[objects]: {e}")))?;
                        }
                        if name == "uris" && k.is_empty() {
                            return Err(bad(
                                "[uris.\"\"] has an empty prefix; name the URI prefix it is for"
                                    .into(),
                            ));
                        }
                        // The mapping's errors name keys, never values.
                        let opts = toml_json::table_to_json_map(entry)
                            .map_err(|m| bad(format!("[{name}.{k:?}]: {m}")))?;
                        out.insert(k.clone(), opts);
                    }
                    match name.as_str() {
                        "backends" => s.backends = out,
                        "uris" => s.uris = out,
                        _ => s.objects = out,
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "[{name}] is not a secrets.toml table (vcs, backends, uris, objects, import, publish, plugins)"
                    )));
                }
            }
        }
        Ok(s)
    }

    /// Set `[plugins] trusted` in the file at `path` to `trusted`, keeping
    /// everything else (`[plugins.dev]` included); see `Secrets::write_plugins`.
    pub fn write_trusted_plugins(path: &Path, trusted: &BTreeSet<String>) -> Result<()> {
        let dev = Secrets::read(path)?.dev_plugins;
        Secrets::write_plugins(path, trusted, &dev)
    }

    /// Set `[plugins.dev]` in the file at `path` to `dev`, keeping
    /// everything else; see `Secrets::write_plugins`.
    pub fn write_dev_plugins(path: &Path, dev: &BTreeMap<String, String>) -> Result<()> {
        let trusted = Secrets::read(path)?.trusted_plugins;
        Secrets::write_plugins(path, &trusted, dev)
    }

    /// Set `[plugins] trusted` and `[plugins.dev]` in the file at `path`,
    /// keeping every other line as it was (comments included): only the
    /// `[plugins]` and `[plugins.dev]` tables are rewritten, at the end of
    /// the file. Written atomically with mode 600, since the file may hold
    /// credentials. Refuses, writing nothing, when the result would change
    /// anything else (a `[plugins]` given as a dotted key or inline table,
    /// which a line edit cannot see).
    fn write_plugins(
        path: &Path,
        trusted: &BTreeSet<String>,
        dev: &BTreeMap<String, String>,
    ) -> Result<()> {
        let text = fsutil::read_optional(path)?.unwrap_or_default();
        let before = Secrets::parse(&text, path)?;
        let mut out = String::new();
        let mut in_plugins = false;
        for line in text.split_inclusive('\n') {
            let t = line.trim_start();
            if t.starts_with('[') {
                let header = t.split('#').next().unwrap_or("").trim();
                in_plugins = header == "[plugins]" || header == "[plugins.dev]";
            }
            if !in_plugins {
                out.push_str(line);
            }
        }
        let section = |out: &mut String, body: &str| {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push('\n');
            }
            out.push_str(body);
        };
        if !trusted.is_empty() {
            let mut body = String::from(
                "[plugins]  # `tether plugin trust DIGEST` / `untrust DIGEST`\ntrusted = [\n",
            );
            for d in trusted {
                body.push_str(&format!("    {},\n", toml::Value::String(d.clone())));
            }
            body.push_str("]\n");
            section(&mut out, &body);
        }
        if !dev.is_empty() {
            let mut body =
                String::from("[plugins.dev]  # `tether plugin dev PATH` / `dev --off KIND`\n");
            for (kind, p) in dev {
                // Kinds are bare keys (`my-kv`); anything else is quoted.
                let bare = !kind.is_empty()
                    && kind
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                let key = if bare {
                    kind.clone()
                } else {
                    toml::Value::String(kind.clone()).to_string()
                };
                body.push_str(&format!("{key} = {}\n", toml::Value::String(p.clone())));
            }
            section(&mut out, &body);
        }
        let after = Secrets::parse(&out, path)?;
        let wanted = Secrets {
            trusted_plugins: trusted.clone(),
            dev_plugins: dev.clone(),
            ..before
        };
        if after != wanted {
            return Err(ModelError::invalid(
                path,
                "[plugins] is written in a form tether cannot rewrite in place \
                 (a dotted key, an inline table, or a [plugins] line inside a multi-line string): \
                 move it into a `[plugins]` table of its own and run the command again",
            ));
        }
        fsutil::write_atomic(path, out.as_bytes())?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| ModelError::io(path, e))?;
        Ok(())
    }

    /// `[backends.<kind>]`: the committed table (from `tether.toml`) merged
    /// with this file's, this file winning a field.
    pub fn backend_options(&self, kind: &str, committed: &Options) -> Options {
        let mut out = committed.clone();
        if let Some(own) = self.backends.get(kind) {
            merge_options(&mut out, own);
        }
        out
    }

    /// The longest `[uris."<prefix>"]` entry that `uri` falls under.
    pub fn uri_entry(&self, uri: &str) -> Option<(&str, &Options)> {
        self.uris
            .iter()
            .filter(|(p, _)| uri_matches(p, uri))
            .max_by_key(|(p, _)| p.len())
            .map(|(p, o)| (p.as_str(), o))
    }

    /// The per-store entries for one object: its longest matching URI
    /// entry, with its `[objects."<key>"]` entry merged over it. This is what
    /// `file`, `delta` and `lance` take as storage options and `icechunk`
    /// passes to its storage.
    pub fn object_entry(&self, key: &str, uri: Option<&str>) -> Options {
        let mut out = Options::new();
        if let Some((_, e)) = uri.and_then(|u| self.uri_entry(u)) {
            merge_options(&mut out, e);
        }
        if let Some(e) = self.objects.get(key) {
            merge_options(&mut out, e);
        }
        out
    }

    /// Everything that applies to one object, merged most specific last:
    /// `[backends.<kind>]` (committed, then this file's), the longest
    /// matching URI entry, then the object's entry.
    pub fn resolve(
        &self,
        key: &str,
        kind: &str,
        uri: Option<&str>,
        committed: &Options,
    ) -> Options {
        let mut out = self.backend_options(kind, committed);
        merge_options(&mut out, &self.object_entry(key, uri));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TEXT: &str = r#"
[vcs]
git_path = "/usr/bin/git"
[backends.neon]
api_key_env = "NEON_API_KEY"
[backends.file.storage_options]
endpoint = "http://seaweedfs.local:8333"
region = "eu-west-1"
[uris."s3://lab-a-bucket/"]
profile = "lab-a"
region = "us-east-1"
[uris."s3://lab-a-bucket/deep/"]
profile = "deep"
[uris."mysql://dolt.internal:3306"]
user = "svc"
password_env = "DOLT_PASSWORD"
[objects."zarr/imaging"]
profile = "imaging"
[import]
query = "SELECT 1"
[plugins]
trusted = ["sha256:00"]
"#;

    fn secrets() -> Secrets {
        Secrets::parse(TEXT, Path::new("s")).unwrap()
    }

    fn obj(v: Value) -> Options {
        let Value::Object(m) = v else { panic!() };
        m
    }

    #[test]
    fn parses_every_table() {
        let s = secrets();
        assert_eq!(s.git_path.as_deref(), Some("/usr/bin/git"));
        assert_eq!(s.jj_path, None);
        assert_eq!(s.import_query.as_deref(), Some("SELECT 1"));
        assert!(s.trusted_plugins.contains("sha256:00"));
        assert_eq!(s.uris.len(), 3);
        assert_eq!(s.objects["zarr/imaging"]["profile"], "imaging");
    }

    #[test]
    fn resolution_most_specific_wins_per_field() {
        let s = secrets();
        let committed =
            obj(json!({"storage_options": {"region": "us-west-2", "allow_http": true}}));
        assert_eq!(
            Value::Object(s.backend_options("file", &committed)),
            json!({"storage_options": {"region": "eu-west-1", "allow_http": true,
                   "endpoint": "http://seaweedfs.local:8333"}})
        );
        assert_eq!(
            Value::Object(
                s.object_entry("zarr/imaging", Some("s3://lab-a-bucket/deep/x.icechunk"))
            ),
            // Only the longest prefix applies; the object entry wins its fields.
            json!({"profile": "imaging"})
        );
        assert_eq!(
            Value::Object(s.object_entry("other", Some("s3://lab-a-bucket/deep/x"))),
            json!({"profile": "deep"})
        );
        assert_eq!(
            Value::Object(s.object_entry("other", Some("s3://lab-a-bucket-2/x"))),
            json!({})
        );
        assert_eq!(
            s.uri_entry("mysql://dolt.internal:3306/db").unwrap().0,
            "mysql://dolt.internal:3306"
        );
        assert!(s.uri_entry("mysql://dolt.internal:33060/db").is_none());
        assert_eq!(
            Value::Object(s.resolve(
                "zarr/imaging",
                "neon",
                Some("s3://lab-a-bucket/x"),
                &Options::new()
            )),
            json!({"api_key_env": "NEON_API_KEY", "profile": "imaging", "region": "us-east-1"})
        );
    }

    #[test]
    fn never_prints_values() {
        let s = secrets();
        let dbg = format!("{s:?}");
        for secret in [
            "/usr/bin/git",
            "NEON_API_KEY",
            "\"lab-a\"",
            "SELECT 1",
            "DOLT_PASSWORD",
            "seaweedfs",
        ] {
            assert!(!dbg.contains(secret), "{dbg}");
        }
        assert!(
            dbg.contains("password_env") && dbg.contains("<set>"),
            "{dbg}"
        );
        let e = Secrets::parse(
            "[uris.\"x\"]\nsecret_access_key = \"AKIA-SECRET\" broken",
            Path::new("s"),
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("AKIA-SECRET") && e.contains("line 2"), "{e}");
        let e = Secrets::parse("[vcs]\ngit_path = 5", Path::new("s"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains('5'), "{e}");
    }

    #[test]
    fn refuses_unknown_and_bad_keys() {
        for (text, needle) in [
            ("[mystery]\nx = 1", "[mystery] is not"),
            ("[vcs]\nhg_path = \"x\"", "hg_path"),
            ("[objects.\"../x\"]\na = 1", "'..'"),
            ("[uris.\"\"]\na = 1", "empty prefix"),
            ("vcs = 1", "must be a table"),
        ] {
            let e = Secrets::parse(text, Path::new("s"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn dev_plugins_are_written_beside_trust_and_must_be_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secrets.toml");
        let a = format!("sha256:{}", "a".repeat(64));
        std::fs::write(&p, "[vcs]\ngit_path = \"/usr/bin/git\"\n").unwrap();
        Secrets::write_trusted_plugins(&p, &BTreeSet::from([a.clone()])).unwrap();
        let dev = BTreeMap::from([("my-kv".to_string(), "/w/k.wasm".to_string())]);
        Secrets::write_dev_plugins(&p, &dev).unwrap();
        let s = Secrets::read(&p).unwrap();
        assert_eq!(s.dev_plugins, dev);
        assert_eq!(s.trusted_plugins, BTreeSet::from([a.clone()]));
        assert_eq!(s.git_path.as_deref(), Some("/usr/bin/git"));
        // Trust changes keep the dev table, and the reverse.
        Secrets::write_trusted_plugins(&p, &BTreeSet::new()).unwrap();
        assert_eq!(Secrets::read(&p).unwrap().dev_plugins, dev);
        Secrets::write_dev_plugins(&p, &BTreeMap::new()).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains("plugins"), "{text}");
        let e = Secrets::parse("[plugins.dev]\nx = \"rel/x.wasm\"", Path::new("s"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("absolute"), "{e}");
    }

    #[test]
    fn trusted_plugins_rewrite_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secrets.toml");
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let head = "# mine\n[vcs]\ngit_path = \"/usr/bin/git\"  # keep\n";
        std::fs::write(
            &p,
            format!("{head}[plugins]\ntrusted = [\"{a}\"]\n[backends.neon]\napi_key_env = \"K\"\n"),
        )
        .unwrap();
        Secrets::write_trusted_plugins(&p, &BTreeSet::from([a.clone(), b.clone()])).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(head), "{text}");
        assert!(
            text.contains("[backends.neon]\napi_key_env = \"K\"\n"),
            "{text}"
        );
        let s = Secrets::read(&p).unwrap();
        assert_eq!(s.trusted_plugins, BTreeSet::from([a, b]));
        assert_eq!(s.git_path.as_deref(), Some("/usr/bin/git"));
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        Secrets::write_trusted_plugins(&p, &BTreeSet::new()).unwrap();
        assert!(!std::fs::read_to_string(&p).unwrap().contains("[plugins]"));
        // A form a line edit cannot see is refused, the file untouched.
        std::fs::write(
            &p,
            format!(
                "plugins = {{ trusted = [\"{}\"] }}\n",
                "sha256:".to_string() + &"c".repeat(64)
            ),
        )
        .unwrap();
        let before = std::fs::read_to_string(&p).unwrap();
        assert!(Secrets::write_trusted_plugins(&p, &BTreeSet::new()).is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
    }

    #[test]
    fn missing_file_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secrets.toml");
        assert_eq!(Secrets::read(&p).unwrap(), Secrets::default());
        std::fs::write(&p, TEXT).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(exposed_permissions(&p));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert!(!exposed_permissions(&p));
        }
        assert_eq!(Secrets::read(&p).unwrap(), secrets());
    }
}
