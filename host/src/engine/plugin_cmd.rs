//! `tether plugin add | dev | trust | untrust | pin | update | list | verify |
//! remove`: the plugins a dataset pins (DESIGN §5), and the ones a checkout
//! develops.
//!
//! - `tether.toml` `[plugins.<kind>] digest = "sha256:<hex>"` pins a kind to
//!   one component (committed, shared by every clone);
//! - `.tether/plugins/sha256-<hex>.wasm` holds components the dataset ships
//!   (committed; `.tether/.gitignore` leaves the directory alone);
//! - `.tether/secrets.toml` `[plugins] trusted = [...]` lists the digests this
//!   checkout agreed to run (per checkout, never committed);
//! - `.tether/secrets.toml` `[plugins.dev] KIND = "PATH"`: a component this
//!   checkout runs for KIND, read from PATH by every command (`plugin dev`),
//!   so an author rebuilds and re-runs with no `add --replace`. It is per
//!   checkout like trust: a clone never has it, and nothing committed names
//!   its digest (`plugin pin` refuses a kind served by one, since no
//!   teammate could get that component; `commit` warns).
//!
//! How a pin resolves at load time is [`crate::plugin::registry`]'s business;
//! these commands write the files it reads. The checkout that adds a plugin
//! (`add`) or vendors a built-in (`pin --vendor`) trusts that digest, since it
//! chose the bytes; every other checkout must `trust` it itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::config::{PluginPin, is_plugin_digest};
use crate::model::{Config, Secrets, fsutil};
use crate::plugin::registry::{self, Located, Places};
use crate::plugin::{PluginMeta, PluginSource, builtin};

/// What `plugin add` did.
#[derive(Debug, Clone, Serialize)]
pub struct Added {
    pub kind: String,
    pub digest: String,
    /// The stored component, relative to the dataset root.
    pub stored: String,
    /// The digest the kind was pinned to before, when `--replace` changed it.
    pub replaced: Option<String>,
}

/// Validate the component at `path` by loading it (it must be a component
/// implementing a compatible `tether:backend` and importing only what the host
/// provides), store it under `.tether/plugins/`, pin its kind to it, and trust
/// it in this checkout. A kind already pinned to another component is refused
/// unless `replace`.
pub async fn add(repo: &Repo, path: &Path, kind: Option<&str>, replace: bool) -> Result<Added> {
    let bytes = std::fs::read(path)
        .map_err(|e| TetherError::io(format!("cannot read {}", path.display()), e))?;
    let digest = registry::digest_of(&bytes);
    let plugin = repo
        .runtime()?
        .load_bytes(&bytes, PluginSource::Path(path.to_path_buf()))
        .await?;
    let actual = plugin.kind().to_string();
    if let Some(k) = kind.filter(|k| *k != actual) {
        return Err(TetherError::refused(format!(
            "{} serves kind {actual}, not {k}",
            path.display()
        ))
        .hint(format!(
            "run `tether plugin add {} --kind {actual}`, \
             or add the component built for {k}",
            path.display()
        )));
    }
    let _locks = repo.lock()?;
    let mut config = Config::read(&repo.layout.config_file())?;
    let previous = config.plugins.get(&actual).map(|p| p.digest.clone());
    if let Some(old) = previous.as_ref().filter(|old| **old != digest)
        && !replace
    {
        return Err(TetherError::refused(format!(
            "kind {actual} is already pinned to plugin {old}, and {} is a different build, {digest}: \
             nothing changed",
            path.display(),
        ))
        .hint(format!(
            "to pin the new build run `tether plugin add {} --replace`",
            path.display()
        )));
    }
    let stored = repo
        .layout
        .plugins_dir()
        .join(registry::stored_file_name(&digest));
    if std::fs::read(&stored).ok().as_deref() != Some(bytes.as_slice()) {
        fsutil::write_atomic(&stored, &bytes)?;
    }
    config.plugins.insert(
        actual.clone(),
        PluginPin {
            digest: digest.clone(),
        },
    );
    config.write(&repo.layout.config_file())?;
    let replaced = previous.filter(|old| *old != digest);
    if let Some(old) = &replaced {
        drop_unused_file(repo, &config, old)?;
    }
    trust_digests(repo, [digest.clone()], true)?;
    Ok(Added {
        kind: actual,
        digest: digest.clone(),
        stored: rel(repo, &stored),
        replaced,
    })
}

/// Trust (`true`) or stop trusting (`false`) `digests` in this checkout.
/// Returns whether the list changed.
/// Trust (or stop trusting) a plugin in this checkout. `which` is a digest,
/// a unique prefix of one the dataset pins or this checkout trusts (with or
/// without `sha256:`), or a kind the dataset pins. Returns the full digest
/// and whether anything changed.
pub fn trust(repo: &Repo, which: &str, trusted: bool) -> Result<(String, bool)> {
    let _locks = repo.lock()?;
    let digest = resolve_digest(repo, which)?;
    let changed = trust_digests(repo, [digest.clone()], trusted)?;
    Ok((digest, changed))
}

/// The digest `which` names: itself when it is one, else the digest of the
/// pinned kind it names, else the one known digest it is a prefix of.
fn resolve_digest(repo: &Repo, which: &str) -> Result<String> {
    if is_plugin_digest(which) {
        return Ok(which.to_string());
    }
    let config = Config::read(&repo.layout.config_file())?;
    if let Some(pin) = config.plugins.get(which) {
        return Ok(pin.digest.clone());
    }
    let hex = which.strip_prefix("sha256:").unwrap_or(which);
    let usage = || {
        TetherError::refused(format!(
            "{} is neither a plugin digest nor a kind this dataset pins",
            crate::model::display::quote(which)
        ))
        .hint(
            "give a digest (`sha256:` and 64 hex digits, or a unique prefix of one) or a \
             pinned kind, as `tether plugin list` prints them",
        )
    };
    if hex.is_empty()
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(usage());
    }
    let secrets = Secrets::read(&repo.layout.secrets_file())?;
    let known: BTreeSet<&str> = config
        .plugins
        .values()
        .map(|p| p.digest.as_str())
        .chain(secrets.trusted_plugins.iter().map(String::as_str))
        .collect();
    let matching: Vec<&str> = known
        .into_iter()
        .filter(|d| {
            d.strip_prefix("sha256:")
                .is_some_and(|h| h.starts_with(hex))
        })
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => Err(usage()),
        many => Err(TetherError::refused(format!(
            "{which:?} is a prefix of {} digests: {}",
            many.len(),
            many.join(", ")
        ))
        .hint("give more of the digest")),
    }
}

fn trust_digests(
    repo: &Repo,
    digests: impl IntoIterator<Item = String>,
    trusted: bool,
) -> Result<bool> {
    let path = repo.layout.secrets_file();
    // Re-read under the lock: the Repo's copy may predate another command.
    let mut set = Secrets::read(&path)?.trusted_plugins;
    let before = set.clone();
    for d in digests {
        if trusted {
            set.insert(d);
        } else {
            set.remove(&d);
        }
    }
    if set == before {
        return Ok(false);
    }
    Secrets::write_trusted_plugins(&path, &set)?;
    Ok(true)
}

/// What `plugin dev` did.
#[derive(Debug, Clone, Serialize)]
pub struct DevSet {
    pub kind: String,
    /// The component's absolute path, read afresh by every command.
    pub path: String,
    /// The digest of the build there now.
    pub digest: String,
    /// The path the kind was developed from before, when it changed.
    pub replaced: Option<String>,
}

/// Have this checkout run the component at `path` for its kind (`kind`,
/// when given, must be what it describes), reading it again on every
/// command so each rebuild is picked up: `[plugins.dev]` in
/// `.tether/secrets.toml`. The component is loaded once now, so a path that
/// is not a loadable plugin is refused before anything is written.
pub async fn dev(repo: &Repo, path: &Path, kind: Option<&str>) -> Result<DevSet> {
    let abs = std::path::absolute(path)
        .map_err(|e| TetherError::io(format!("cannot resolve {}", path.display()), e))?;
    let bytes = std::fs::read(&abs)
        .map_err(|e| TetherError::io(format!("cannot read {}", abs.display()), e))?;
    let plugin = repo
        .runtime()?
        .load_bytes(&bytes, PluginSource::Path(abs.clone()))
        .await?;
    let actual = plugin.kind().to_string();
    if let Some(k) = kind.filter(|k| *k != actual) {
        return Err(TetherError::refused(format!(
            "{} serves kind {actual}, not {k}",
            abs.display()
        ))
        .hint(format!(
            "run `tether plugin dev {} --kind {actual}`, or build the plugin for {k}",
            abs.display()
        )));
    }
    let path_text = abs.to_str().map(str::to_string).ok_or_else(|| {
        TetherError::refused(format!("{} is not a UTF-8 path", abs.display()))
            .hint("move the component to a path secrets.toml can name")
    })?;
    let _locks = repo.lock()?;
    let file = repo.layout.secrets_file();
    // Re-read under the lock: the Repo's copy may predate another command.
    let mut dev = Secrets::read(&file)?.dev_plugins;
    let replaced = dev
        .insert(actual.clone(), path_text.clone())
        .filter(|old| *old != path_text);
    Secrets::write_dev_plugins(&file, &dev)?;
    Ok(DevSet {
        kind: actual,
        path: path_text,
        digest: plugin.digest().to_string(),
        replaced,
    })
}

/// What `plugin dev --off` did.
#[derive(Debug, Clone, Serialize)]
pub struct DevOff {
    pub kind: String,
    /// The path the kind was developed from.
    pub path: String,
    /// What serves the kind now: the pinned digest, else `built-in`, else
    /// nothing (`None`).
    pub now: Option<String>,
}

/// Stop running a dev build for `kind`: the kind is served by its pin (or
/// the built-in) again.
pub fn dev_off(repo: &Repo, kind: &str) -> Result<DevOff> {
    let _locks = repo.lock()?;
    let file = repo.layout.secrets_file();
    let mut dev = Secrets::read(&file)?.dev_plugins;
    let Some(path) = dev.remove(kind) else {
        let known: Vec<&str> = dev.keys().map(String::as_str).collect();
        return Err(TetherError::refused(format!(
            "this checkout runs no dev plugin for kind {}",
            crate::model::display::quote(kind)
        ))
        .hint(if known.is_empty() {
            "`tether plugin list` shows what serves each kind".to_string()
        } else {
            format!("dev plugins here: {}", known.join(", "))
        }));
    };
    Secrets::write_dev_plugins(&file, &dev)?;
    let config = Config::read(&repo.layout.config_file())?;
    let now = match config.plugins.get(kind) {
        Some(pin) => Some(pin.digest.clone()),
        None => builtin::BUILTIN_PLUGINS
            .iter()
            .any(|b| b.crate_name.strip_prefix("tether-plugin-") == Some(kind))
            .then(|| "built-in".to_string()),
    };
    Ok(DevOff {
        kind: kind.to_string(),
        path,
        now,
    })
}

/// A warning per kind of `keys`' objects (all objects when `keys` is empty)
/// that this checkout serves from a dev build: a commit records states
/// that build computed, while every other checkout runs what `tether.toml`
/// pins (or the built-in). The commit names no plugin digest, so it goes
/// ahead; the warning says how to pin the build.
pub fn dev_warnings(repo: &Repo, keys: &[String]) -> Result<Vec<String>> {
    let dev = &repo.secrets().dev_plugins;
    if dev.is_empty() {
        return Ok(Vec::new());
    }
    let manifests = repo.manifests()?;
    let kinds: BTreeSet<&str> = manifests
        .iter()
        .filter(|(k, _)| {
            keys.is_empty()
                || keys
                    .iter()
                    .any(|s| *k == s || (s.ends_with('/') && k.starts_with(s.as_str())))
        })
        .map(|(_, m)| m.kind.as_str())
        .collect();
    Ok(dev
        .iter()
        .filter(|(kind, _)| kinds.contains(kind.as_str()))
        .map(|(kind, path)| {
            let (others, replace) = match repo.config.plugins.get(kind) {
                Some(pin) => (format!("the pinned {}", pin.digest), " --replace"),
                None => (
                    format!("whatever their tether has for {kind} (it is not pinned)"),
                    "",
                ),
            };
            format!(
                "kind {kind} runs the dev plugin {path} in this checkout; other checkouts run \
                 {others}. To share this build: `tether plugin add {path} --kind \
                 {kind}{replace}`, and commit tether.toml and .tether/plugins/"
            )
        })
        .collect())
}

/// One kind `plugin pin` recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Pinned {
    pub kind: String,
    pub digest: String,
    /// `built-in` or the component file the digest was taken from.
    pub source: String,
    /// Whether `--vendor` stored the built-in under `.tether/plugins/`.
    pub vendored: bool,
}

/// Pin `kinds` (none: every kind the dataset's objects use, and every kind
/// already pinned) to the component that serves them now. A kind already
/// pinned keeps its pin. `vendor` also stores pinned built-ins under
/// `.tether/plugins/` (and trusts them here), so a later tether whose
/// built-in differs still finds them.
pub async fn pin(repo: &Repo, kinds: &[String], vendor: bool) -> Result<Vec<Pinned>> {
    let kinds: BTreeSet<String> = if kinds.is_empty() {
        repo.manifests()?
            .values()
            .map(|m| m.kind.clone())
            .chain(repo.config.plugins.keys().cloned())
            .collect()
    } else {
        kinds.iter().cloned().collect()
    };
    if kinds.is_empty() {
        return Err(TetherError::refused(
            "no object uses a plugin yet, so there is nothing to pin",
        )
        .hint(
            "`tether add` objects first, \
             or name kinds (`tether plugin pin memory`)",
        ));
    }
    if let Some((kind, path)) = repo
        .secrets()
        .dev_plugins
        .iter()
        .find(|(k, _)| kinds.contains(*k))
    {
        // The pin would name a component only this checkout has.
        return Err(TetherError::refused(format!(
            "kind {kind} runs the dev plugin {path} in this checkout; pinning it would record a \
             digest no other checkout can get, so nothing was pinned"
        ))
        .hint(format!(
            "`tether plugin add {path} --kind {kind}` stores that build and pins it (commit \
             .tether/plugins/ with tether.toml), or `tether plugin dev --off {kind}` first"
        )));
    }
    let mut out = Vec::new();
    for kind in &kinds {
        let plugin = repo.plugin(kind).await?;
        out.push(Pinned {
            kind: kind.clone(),
            digest: plugin.digest().to_string(),
            source: plugin.source().to_string(),
            vendored: false,
        });
    }
    let _locks = repo.lock()?;
    let mut config = Config::read(&repo.layout.config_file())?;
    let mut vendored = Vec::new();
    for p in &mut out {
        config.plugins.insert(
            p.kind.clone(),
            PluginPin {
                digest: p.digest.clone(),
            },
        );
        if vendor && let Some(b) = registry::builtin_by_digest(&p.digest) {
            let stored = repo
                .layout
                .plugins_dir()
                .join(registry::stored_file_name(&p.digest));
            if std::fs::read(&stored).ok().as_deref() != Some(b.wasm) {
                fsutil::write_atomic(&stored, b.wasm)?;
            }
            vendored.push(p.digest.clone());
            p.vendored = true;
        }
    }
    config.write(&repo.layout.config_file())?;
    if !vendored.is_empty() {
        trust_digests(repo, vendored, true)?;
    }
    Ok(out)
}

/// One kind `plugin update` looked at.
#[derive(Debug, Clone, Serialize)]
pub struct Updated {
    pub kind: String,
    /// The digest pinned before.
    pub from: String,
    /// The digest pinned now: this tether's built-in of the kind.
    pub to: String,
    /// Whether the pin moved (`false`: it already named this tether's built-in).
    pub changed: bool,
    /// Whether the new component is stored under `.tether/plugins/` (the
    /// old one was: a vendored pin stays vendored).
    pub vendored: bool,
    /// The old stored component, deleted since no pin names it any more.
    pub deleted: Option<String>,
}

/// Move the pins of `kinds` (none: every pinned kind this tether has a
/// built-in of) to this tether's built-in components, as `cargo update`
/// moves a lock file: `tether.toml` changes in the working tree, for review
/// and a commit. A pin that was vendored stays vendored (the new component
/// stored and trusted, the old one deleted when nothing else pins it).
/// Nothing is written with `dry_run`. A pin naming a component that is not
/// a built-in of this tether moves too (the built-in serves the same kind);
/// a kind this tether has no built-in of is refused: only `plugin add
/// --replace` can move it.
pub async fn update(repo: &Repo, kinds: &[String], dry_run: bool) -> Result<Vec<Updated>> {
    let builtins = builtin::load_all(repo.runtime()?).await?;
    let builtin_digest = |kind: &str| {
        builtins
            .iter()
            .find(|p| p.kind() == kind)
            .map(|p| p.digest().to_string())
    };
    let _locks = (!dry_run).then(|| repo.lock()).transpose()?;
    // Re-read under the lock: the Repo's copy may predate another command.
    let mut config = Config::read(&repo.layout.config_file())?;
    let wanted: Vec<String> = if kinds.is_empty() {
        let all: Vec<String> = config
            .plugins
            .keys()
            .filter(|k| builtin_digest(k).is_some())
            .cloned()
            .collect();
        if all.is_empty() {
            return Err(TetherError::refused(
                "no kind this tether has a built-in of is pinned, so there is nothing to update",
            )
            .hint(
                "`tether plugin list` shows the pins; `tether plugin pin KIND` pins one to \
                 this tether's built-in",
            ));
        }
        all
    } else {
        kinds.to_vec()
    };
    let mut out = Vec::new();
    for kind in &wanted {
        let Some(pin) = config.plugins.get(kind) else {
            return Err(TetherError::refused(format!(
                "kind {kind} is not pinned in this dataset, so it already runs this tether's \
                 built-in"
            ))
            .hint(format!(
                "`tether plugin pin {kind}` pins it; `tether plugin list` shows the pins"
            )));
        };
        let Some(to) = builtin_digest(kind) else {
            return Err(TetherError::refused(format!(
                "this tether has no built-in {kind} plugin to move the pin {} to",
                pin.digest
            ))
            .hint(format!(
                "a third-party plugin moves with `tether plugin add NEW.wasm --kind {kind} \
                 --replace`"
            )));
        };
        let from = pin.digest.clone();
        let stored_old = repo
            .layout
            .plugins_dir()
            .join(registry::stored_file_name(&from));
        out.push(Updated {
            kind: kind.clone(),
            changed: from != to,
            vendored: stored_old.is_file(),
            from,
            to,
            deleted: None,
        });
    }
    if dry_run || !out.iter().any(|u| u.changed) {
        return Ok(out);
    }
    let mut vendored = Vec::new();
    for u in out.iter().filter(|u| u.changed) {
        config.plugins.insert(
            u.kind.clone(),
            PluginPin {
                digest: u.to.clone(),
            },
        );
        if u.vendored
            && let Some(b) = registry::builtin_by_digest(&u.to)
        {
            let stored = repo
                .layout
                .plugins_dir()
                .join(registry::stored_file_name(&u.to));
            if std::fs::read(&stored).ok().as_deref() != Some(b.wasm) {
                fsutil::write_atomic(&stored, b.wasm)?;
            }
            vendored.push(u.to.clone());
        }
    }
    config.write(&repo.layout.config_file())?;
    if !vendored.is_empty() {
        trust_digests(repo, vendored, true)?;
    }
    for u in out.iter_mut().filter(|u| u.changed) {
        u.deleted = drop_unused_file(repo, &config, &u.from)?;
    }
    Ok(out)
}

/// One row of `plugin list`.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub kind: String,
    /// The pinned digest; `None` for a kind the objects use without a pin.
    pub digest: Option<String>,
    /// Where the component resolves: `built-in`, a file path, or `missing`.
    pub source: String,
    /// Whether this checkout may run it (built-ins always).
    pub trusted: bool,
    /// Why it does not resolve, when it does not.
    pub problem: Option<String>,
    /// What the plugin says about itself (`describe-meta`, since 0.1.5);
    /// `null` when it has none or was not loaded (not trusted, missing).
    pub meta: Option<PluginMeta>,
    /// The dev build this checkout runs instead (`plugin dev`), by path;
    /// `source` is then `dev: PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
}

/// The dataset's pins and the kinds its objects use, with where each
/// resolves, and the kinds this checkout serves from a dev build. Reads
/// files and hashes them; a plugin's metadata comes from the plugins the
/// dataset loads, so an untrusted one is never run and has none.
pub async fn list(repo: &Repo) -> Result<Vec<Listed>> {
    let builtins = builtin::load_all(repo.runtime()?).await?;
    let builtin_digest = |kind: &str| {
        builtins
            .iter()
            .find(|p| p.kind() == kind)
            .map(|p| p.digest().to_string())
    };
    let builtin_meta = |kind: &str| {
        builtins
            .iter()
            .find(|p| p.kind() == kind)
            .and_then(|p| p.meta().cloned())
    };
    // A kind whose pin cannot be served is missing from the resolution.
    let resolution = repo.plugin_resolution().await.ok();
    let pinned_meta = |kind: &str, digest: &str| {
        resolution
            .and_then(|r| r.plugins.get(kind))
            .filter(|p| p.digest() == digest)
            .and_then(|p| p.meta().cloned())
    };
    let places = Places::new(&repo.layout.plugins_dir());
    let trusted = &repo.secrets().trusted_plugins;
    let mut out = Vec::new();
    for (kind, pin) in &repo.config.plugins {
        let bd = builtin_digest(kind);
        let row = match registry::locate(kind, &pin.digest, &places, bd.as_deref()) {
            Ok(located) => {
                let ok = registry::check_trust(kind, &pin.digest, &located, trusted);
                Listed {
                    kind: kind.clone(),
                    digest: Some(pin.digest.clone()),
                    source: source_text(repo, &located),
                    trusted: ok.is_ok(),
                    problem: ok.err().map(|e| e.to_string()),
                    meta: pinned_meta(kind, &pin.digest),
                    dev: None,
                }
            }
            Err(e) => Listed {
                kind: kind.clone(),
                digest: Some(pin.digest.clone()),
                source: "missing".into(),
                trusted: trusted.contains(&pin.digest),
                problem: Some(e.to_string()),
                meta: None,
                dev: None,
            },
        };
        out.push(row);
    }
    let used: BTreeSet<String> = repo.manifests()?.values().map(|m| m.kind.clone()).collect();
    for kind in used
        .iter()
        .filter(|k| !repo.config.plugins.contains_key(*k))
    {
        let bd = builtin_digest(kind);
        out.push(Listed {
            kind: kind.clone(),
            digest: None,
            source: if bd.is_some() { "built-in" } else { "missing" }.into(),
            trusted: bd.is_some(),
            problem: bd.is_none().then(|| {
                format!("no plugin serves kind {kind}: `tether plugin add PATH.wasm --kind {kind}`")
            }),
            meta: builtin_meta(kind),
            dev: None,
        });
    }
    // A dev build serves its kind whatever the pin says: its row says so
    // (the pinned digest stays, as what every other checkout runs).
    for (kind, path) in &repo.secrets().dev_plugins {
        let problem = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => None,
            Ok(_) => Some(format!("{path} is not a file")),
            Err(e) => Some(format!("cannot read {path}: {e}")),
        };
        let row = Listed {
            kind: kind.clone(),
            digest: repo.config.plugins.get(kind).map(|p| p.digest.clone()),
            source: format!("dev: {path}"),
            trusted: true,
            problem,
            meta: resolution
                .and_then(|r| r.plugins.get(kind))
                .and_then(|p| p.meta().cloned()),
            dev: Some(path.clone()),
        };
        match out.iter_mut().find(|r| r.kind == *kind) {
            Some(r) => *r = row,
            None => out.push(row),
        }
    }
    out.sort_by(|a, b| a.kind.cmp(&b.kind));
    Ok(out)
}

fn source_text(repo: &Repo, located: &Located) -> String {
    match located {
        Located::BuiltIn(_) => "built-in".into(),
        Located::File { path, .. } => rel(repo, path),
    }
}

/// One row of `plugin verify`.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub kind: String,
    pub digest: String,
    pub ok: bool,
    /// `built-in` or the file it loaded from, when it loaded.
    pub source: Option<String>,
    pub problem: Option<String>,
}

/// Every pinned digest resolves, is trusted, and loads.
pub async fn verify(repo: &Repo) -> Result<Vec<Verified>> {
    let resolution = repo.plugin_resolution().await?;
    Ok(repo
        .config
        .plugins
        .iter()
        .map(|(kind, pin)| match resolution.refused.get(kind) {
            Some(e) => Verified {
                kind: kind.clone(),
                digest: pin.digest.clone(),
                ok: false,
                source: None,
                problem: Some(e.to_string()),
            },
            None => Verified {
                kind: kind.clone(),
                digest: pin.digest.clone(),
                ok: true,
                source: match repo.secrets().dev_plugins.get(kind) {
                    Some(path) => Some(format!("dev: {path}")),
                    None => resolution.plugins.get(kind).map(|p| match p.source() {
                        PluginSource::BuiltIn => "built-in".to_string(),
                        PluginSource::Path(path) => rel(repo, path),
                    }),
                },
                problem: None,
            },
        })
        .collect())
}

/// What `plugin remove` did.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub kind: String,
    pub digest: String,
    /// The stored component deleted with it (no other kind used it).
    pub deleted: Option<String>,
}

/// Drop `kind`'s pin, and its stored component when no other kind pins it.
/// Trust is left alone: it is this checkout's record of what it agreed to.
pub fn remove(repo: &Repo, kind: &str) -> Result<Removed> {
    let _locks = repo.lock()?;
    let mut config = Config::read(&repo.layout.config_file())?;
    let Some(pin) = config.plugins.remove(kind) else {
        return Err(
            TetherError::refused(format!("kind {kind} is not pinned in this dataset"))
                .hint("`tether plugin list` shows the pins"),
        );
    };
    config.write(&repo.layout.config_file())?;
    let deleted = drop_unused_file(repo, &config, &pin.digest)?;
    Ok(Removed {
        kind: kind.to_string(),
        digest: pin.digest,
        deleted,
    })
}

/// Delete `.tether/plugins/<digest>` when no pin of `config` names it.
fn drop_unused_file(repo: &Repo, config: &Config, digest: &str) -> Result<Option<String>> {
    if config.plugins.values().any(|p| p.digest == digest) {
        return Ok(None);
    }
    let stored: PathBuf = repo
        .layout
        .plugins_dir()
        .join(registry::stored_file_name(digest));
    match std::fs::remove_file(&stored) {
        Ok(()) => Ok(Some(rel(repo, &stored))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TetherError::io(
            format!("cannot delete {}", stored.display()),
            e,
        )),
    }
}

/// `path` relative to the dataset root when it is inside it.
fn rel(repo: &Repo, path: &Path) -> String {
    path.strip_prefix(repo.root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The contract methods `plugin call` runs: the ones that change nothing in
/// the store, so a debugging call cannot move a ref or release a pin.
pub const CALLABLE: &[&str] = &[
    "describe",
    "validate-locator",
    "identity",
    "effective-capabilities",
    "fingerprint",
    "list-pins",
    "list-working-refs",
    "verify",
    "history",
    "listing",
    "owner",
    "branch-scope",
    "ref-namespace",
    "state-addressable",
    "check-quiescence",
];

/// Run one contract method of the plugin serving `kind` against one store,
/// as a debugging aid (`extism call`'s role): `args` is a JSON object with
/// the object's `locator` (every method but `describe`) and the method's
/// parameters by name (`ref`, `policy`, `state`, `pin`, `deep`, `limit`).
/// With `key`, the locator is that object's, from its manifest (and the
/// object's secrets apply). In a dataset the plugin is the one the dataset
/// runs (its pins, its `[backends.<kind>]` configuration and secrets);
/// elsewhere this tether's built-in. The answer is the method's result as
/// JSON.
pub async fn call(
    repo: Option<&Repo>,
    kind: &str,
    method: &str,
    key: Option<&str>,
    args: &serde_json::Value,
) -> Result<serde_json::Value> {
    use serde_json::{Value, json, to_value};
    let usage = |what: String| {
        TetherError::refused(what).hint(format!(
            "give a JSON object such as '{{\"locator\": {{...}}}}'; the methods are {}",
            CALLABLE.join(", ")
        ))
    };
    if !CALLABLE.contains(&method) {
        return Err(usage(format!(
            "{} is not a method `plugin call` runs",
            crate::model::display::quote(method)
        )));
    }
    let Value::Object(args) = args else {
        return Err(usage("the arguments must be a JSON object".into()));
    };
    let plugin = match repo {
        Some(repo) => repo.plugin(kind).await?,
        None => {
            let builtins = builtin::load_all(&crate::plugin::Runtime::global()?).await?;
            let found = builtins.iter().find(|p| p.kind() == kind).cloned();
            found
                .ok_or_else(|| TetherError::unknown_kind(kind, builtins.iter().map(|p| p.kind())))?
        }
    };
    if method == "describe" {
        return Ok(to_value(plugin.descriptor()).expect("a descriptor is JSON"));
    }
    let client = match (repo, key) {
        (Some(repo), Some(key)) => {
            let manifests = repo.manifests()?;
            let Some(m) = manifests.get(key) else {
                return Err(TetherError::refused(format!(
                    "no object {} in this dataset",
                    crate::model::display::quote(key)
                ))
                .hint("`tether status` lists the objects"));
            };
            if m.kind != kind {
                return Err(TetherError::refused(format!(
                    "object {key} is of kind {}, not {kind}",
                    m.kind
                )));
            }
            repo.client_for_key(&plugin, &Value::Object(m.locator.clone()), key)
        }
        (None, Some(_)) => {
            return Err(TetherError::refused(
                "--key names an object of a dataset, and this is no dataset",
            )
            .hint("run it in the dataset, or `-C DIR`"));
        }
        (repo, None) => {
            let Some(locator) = args.get("locator").filter(|l| l.is_object()) else {
                return Err(usage(format!(
                    "{method} needs \"locator\": an object (or --key KEY)"
                )));
            };
            match repo {
                Some(repo) => repo.client_for(&plugin, locator),
                None => plugin.object(locator, &json!({})),
            }
        }
    };
    let text = |name: &str| args.get(name).and_then(Value::as_str);
    let value = |name: &str| {
        args.get(name)
            .filter(|v| v.is_object())
            .ok_or_else(|| usage(format!("{method} needs \"{name}\": an object")))
    };
    let pin: Option<crate::plugin::PinRef> = match args.get("pin") {
        None | Some(Value::Null) => None,
        Some(p) => Some(
            serde_json::from_value(p.clone())
                .map_err(|e| usage(format!("\"pin\" is no pin reference: {e}")))?,
        ),
    };
    let failed = |e| TetherError::backend(&format!("{kind} {method}"), e);
    let out = match method {
        "validate-locator" => client
            .validate_locator()
            .await
            .map(|()| json!({"valid": true})),
        "identity" => client.identity().await,
        "effective-capabilities" => client
            .effective_capabilities(args.get("policy").unwrap_or(&json!({})))
            .await
            .map(|c| json!(c)),
        "fingerprint" => client.fingerprint(text("ref")).await,
        "list-pins" => client.list_pins().await.map(|p| json!(p)),
        "list-working-refs" => client.list_working_refs().await.map(|r| json!(r)),
        "verify" => {
            let deep = args.get("deep").and_then(Value::as_bool).unwrap_or(false);
            client
                .verify(value("state")?, pin.as_ref(), deep)
                .await
                .map(|r| to_value(r).expect("a report is JSON"))
        }
        "history" => {
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(20, |n| u32::try_from(n).unwrap_or(u32::MAX));
            client
                .history(text("ref"), limit)
                .await
                .map(|h| to_value(h).expect("history is JSON"))
        }
        "listing" => client.listing(value("state")?).await.map(|l| json!(l)),
        "owner" => client.owner().await.map(|o| json!(o)),
        "branch-scope" => client.branch_scope().await.map(|s| json!(s)),
        "ref-namespace" => client.ref_namespace().await.map(|s| json!(s)),
        "state-addressable" => client
            .state_addressable(value("state")?)
            .await
            .map(|b| json!(b)),
        "check-quiescence" => client
            .check_quiescence(text("ref"))
            .await
            .map(|()| json!({"quiescent": true})),
        _ => unreachable!("every CALLABLE method is matched"),
    };
    out.map_err(failed)
}
