//! Where the plugin a dataset pins comes from, and whether it may run.
//!
//! A dataset pins a kind to a component digest (`[plugins.<kind>] digest` in
//! `tether.toml`). Resolving a pin looks, in order, at:
//!
//! 1. the built-in plugins of this binary (trusted: they are tether itself);
//! 2. `<dataset>/.tether/plugins/sha256-<hex>.wasm` (committed with the
//!    dataset, so untrusted until this checkout trusts the digest);
//! 3. the user plugin directory, `$TETHER_PLUGIN_DIR` or
//!    `<data dir>/tether/plugins/`, same file name and same trust rule.
//!
//! A kind this checkout's `.tether/secrets.toml` names under `[plugins.dev]`
//! (`tether plugin dev`) is served instead by the component at that path,
//! read afresh by every command ([`load_dev`]): the plugin author's loop,
//! per checkout and never committed, so no clone inherits it.
//!
//! A file is read and hashed before anything else happens to it: its content
//! must hash to the digest its name claims, and that digest must be trusted,
//! before the runtime compiles or instantiates it. Kinds without a pin are
//! served by the built-in of that kind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::builtin::{self, BuiltinPlugin};
use super::runtime::{Plugin, PluginSource, Runtime};

/// `sha256:<hex>` of a component's bytes.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The file name a component with `digest` is stored under:
/// `sha256-<hex>.wasm` (no `:`, which some filesystems refuse).
pub fn stored_file_name(digest: &str) -> String {
    format!("{}.wasm", digest.replacen(':', "-", 1))
}

/// The user plugin directory: `$TETHER_PLUGIN_DIR`, else
/// `<data dir>/tether/plugins/` (`~/.local/share/tether/plugins` on Linux).
pub fn user_plugin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TETHER_PLUGIN_DIR") {
        return Some(PathBuf::from(dir));
    }
    dirs::data_dir().map(|d| d.join("tether").join("plugins"))
}

/// The built-in component whose bytes have `digest`, if any.
pub fn builtin_by_digest(digest: &str) -> Option<&'static BuiltinPlugin> {
    builtin::BUILTIN_PLUGINS
        .iter()
        .find(|p| builtin::digest(p) == digest)
}

/// Where a pinned component was found, before it is loaded.
#[derive(Debug, Clone)]
pub enum Located {
    /// Embedded in this binary.
    BuiltIn(&'static BuiltinPlugin),
    /// A component file whose bytes hash to the pinned digest.
    File { path: PathBuf, bytes: Vec<u8> },
}

impl Located {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Located::BuiltIn(p) => p.wasm,
            Located::File { bytes, .. } => bytes,
        }
    }

    pub fn source(&self) -> PluginSource {
        match self {
            Located::BuiltIn(_) => PluginSource::BuiltIn,
            Located::File { path, .. } => PluginSource::Path(path.clone()),
        }
    }

    pub fn is_builtin(&self) -> bool {
        matches!(self, Located::BuiltIn(_))
    }
}

/// The places a checkout looks for pinned components.
#[derive(Debug, Clone)]
pub struct Places {
    /// `<dataset>/.tether/plugins/`.
    pub dataset_dir: PathBuf,
    /// The user plugin directory, when there is one.
    pub user_dir: Option<PathBuf>,
}

impl Places {
    /// The dataset's directory and the user plugin directory.
    pub fn new(dataset_dir: &Path) -> Places {
        Places {
            dataset_dir: dataset_dir.to_path_buf(),
            user_dir: user_plugin_dir(),
        }
    }

    /// The file paths a component with `digest` may be stored at, in order.
    pub fn candidates(&self, digest: &str) -> Vec<PathBuf> {
        let name = stored_file_name(digest);
        let mut out = vec![self.dataset_dir.join(&name)];
        if let Some(u) = &self.user_dir {
            out.push(u.join(&name));
        }
        out
    }
}

/// Why a pinned plugin was not loaded. Every message says what to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// No component with the pinned digest is present. `how` says how to
    /// get it back: from a tether whose built-in it is, or (a third-party
    /// component) from the commit that stored it or from its author.
    #[error(
        "kind {kind} is pinned to plugin {wanted}, but no component with that digest is here \
         ({found}; looked in {looked}): {how}"
    )]
    Missing {
        kind: String,
        wanted: String,
        /// What was found instead: `the built-in {kind} is sha256:...`, or
        /// `this tether has no built-in {kind}`.
        found: String,
        looked: String,
        how: String,
    },
    /// A stored file's bytes do not hash to the digest its name claims.
    #[error(
        "kind {kind} is pinned to plugin {wanted}, but {path} holds a different component, \
         {found}: tether refuses to run it; restore the pinned component (or `tether plugin add` \
         the new build to pin it instead)"
    )]
    WrongContent {
        kind: String,
        wanted: String,
        found: String,
        path: PathBuf,
    },
    /// The component is not built in and this checkout has not trusted it.
    #[error(
        "kind {kind} uses plugin {digest} ({path}), which this checkout has not trusted, so it \
         was not run: review it, then run `tether plugin trust {digest}`"
    )]
    Untrusted {
        kind: String,
        digest: String,
        path: PathBuf,
    },
    /// The component loaded but describes another kind.
    #[error(
        "kind {kind} is pinned to plugin {digest}, but that component says it serves kind \
         {actual}: pin the right component with `tether plugin add PATH.wasm --kind {kind}`"
    )]
    WrongKind {
        kind: String,
        digest: String,
        actual: String,
    },
    /// The component `[plugins.dev]` names for the kind cannot serve it.
    #[error(
        "kind {kind} runs the dev plugin {path} (`tether plugin dev`), which {detail}: rebuild \
         it, point `tether plugin dev` at another build, or `tether plugin dev --off {kind}`"
    )]
    Dev {
        kind: String,
        path: PathBuf,
        detail: String,
    },
    /// The component could not be loaded (not a component, incompatible, ...).
    #[error("kind {kind}: plugin {digest} ({source_name}) does not load: {detail}")]
    Load {
        kind: String,
        digest: String,
        source_name: String,
        detail: String,
    },
}

/// Find the component pinned for `kind`: a built-in with that digest, else a
/// stored file. `builtin_kind_digest` is the digest of this binary's built-in
/// plugin of `kind`, named in the refusal when nothing matches.
pub fn locate(
    kind: &str,
    digest: &str,
    places: &Places,
    builtin_kind_digest: Option<&str>,
) -> Result<Located, PinError> {
    if let Some(p) = builtin_by_digest(digest) {
        return Ok(Located::BuiltIn(p));
    }
    let candidates = places.candidates(digest);
    for path in &candidates {
        // Never through a link: `.tether/plugins/` came with the clone.
        let Ok(bytes) = crate::model::fsutil::read_nofollow(path) else {
            continue;
        };
        let found = digest_of(&bytes);
        if found != digest {
            return Err(PinError::WrongContent {
                kind: kind.to_string(),
                wanted: digest.to_string(),
                found,
                path: path.clone(),
            });
        }
        return Ok(Located::File {
            path: path.clone(),
            bytes,
        });
    }
    let file = stored_file_name(digest);
    let how = match builtin_kind_digest {
        // Most likely a built-in of another tether release.
        Some(_) => format!(
            "copy the pinned component there (a tether whose built-in {kind} is {digest} \
             writes it with `tether plugin pin --vendor`), or pin what this tether has with \
             `tether plugin update {kind}`"
        ),
        // A third-party component: `plugin add` stored it beside the pin,
        // so the history that has the pin has it too.
        None => format!(
            "`tether plugin add` stored it as .tether/plugins/{file} and it is committed with \
             the pin: restore it from history (`git log --all -- .tether/plugins/{file}` names \
             the commit, `git checkout COMMIT -- .tether/plugins/{file}` brings it back), or \
             put the component its author ships in the user plugin directory, or pin another \
             build with `tether plugin add PATH.wasm --kind {kind} --replace`"
        ),
    };
    Err(PinError::Missing {
        kind: kind.to_string(),
        wanted: digest.to_string(),
        how,
        found: match builtin_kind_digest {
            Some(d) => format!("the built-in {kind} is {d}"),
            None => format!("this tether has no built-in {kind}"),
        },
        looked: candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Refuse a located component this checkout may not run. Built-ins are
/// trusted; a file only when its digest is in `trusted`.
pub fn check_trust(
    kind: &str,
    digest: &str,
    located: &Located,
    trusted: &BTreeSet<String>,
) -> Result<(), PinError> {
    match located {
        Located::BuiltIn(_) => Ok(()),
        Located::File { path, .. } if !trusted.contains(digest) => Err(PinError::Untrusted {
            kind: kind.to_string(),
            digest: digest.to_string(),
            path: path.clone(),
        }),
        Located::File { .. } => Ok(()),
    }
}

/// Locate, check trust, and only then load the component pinned for `kind`,
/// checking that it serves `kind`. `builtins` are this binary's loaded
/// built-ins by kind (reused when the pin names one of them).
pub async fn load_pinned(
    runtime: &Runtime,
    kind: &str,
    digest: &str,
    places: &Places,
    trusted: &BTreeSet<String>,
    builtins: &BTreeMap<String, Arc<Plugin>>,
) -> Result<Arc<Plugin>, PinError> {
    if let Some(p) = builtins.get(kind).filter(|p| p.digest() == digest) {
        return Ok(p.clone());
    }
    let located = locate(kind, digest, places, builtins.get(kind).map(|p| p.digest()))?;
    check_trust(kind, digest, &located, trusted)?;
    let source = located.source();
    let plugin = runtime
        .load_bytes(located.bytes(), source.clone())
        .await
        .map_err(|e| PinError::Load {
            kind: kind.to_string(),
            digest: digest.to_string(),
            source_name: source.to_string(),
            detail: e.to_string(),
        })?;
    if plugin.kind() != kind {
        return Err(PinError::WrongKind {
            kind: kind.to_string(),
            digest: digest.to_string(),
            actual: plugin.kind().to_string(),
        });
    }
    Ok(plugin)
}

/// Load the component at `path` to serve `kind`, as `[plugins.dev]` asks:
/// read now, so every command runs the latest build; compiled only when its
/// digest is new to the compiled-component cache (a rebuild that changed
/// nothing costs a cache load). The path comes from this checkout's
/// secrets.toml, which a clone never brings, so it needs no digest trust.
pub async fn load_dev(runtime: &Runtime, kind: &str, path: &Path) -> Result<Arc<Plugin>, PinError> {
    let dev = |detail: String| PinError::Dev {
        kind: kind.to_string(),
        path: path.to_path_buf(),
        detail,
    };
    let bytes = std::fs::read(path).map_err(|e| dev(format!("cannot be read ({e})")))?;
    let plugin = runtime
        .load_bytes(&bytes, PluginSource::Path(path.to_path_buf()))
        .await
        .map_err(|e| dev(format!("does not load: {e}")))?;
    if plugin.kind() != kind {
        return Err(dev(format!("serves kind {}", plugin.kind())));
    }
    tracing::info!(
        kind,
        path = %path.display(),
        digest = %plugin.digest(),
        "running the dev plugin"
    );
    Ok(plugin)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn names_and_digests() {
        assert_eq!(
            stored_file_name(D),
            "sha256-0000000000000000000000000000000000000000000000000000000000000000.wasm"
        );
        assert_eq!(
            digest_of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn locate_checks_content_and_names_both_digests() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places {
            dataset_dir: dir.path().join("ds"),
            user_dir: Some(dir.path().join("user")),
        };
        let e = locate("x", D, &places, Some("sha256:11")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(D) && msg.contains("the built-in x is sha256:11"),
            "{msg}"
        );

        // A file in the user directory is found when the dataset has none.
        std::fs::create_dir_all(dir.path().join("user")).unwrap();
        let good = b"component";
        let gd = digest_of(good);
        std::fs::write(dir.path().join("user").join(stored_file_name(&gd)), good).unwrap();
        let l = locate("x", &gd, &places, None).unwrap();
        assert!(!l.is_builtin());
        assert_eq!(l.bytes(), good);
        let trusted = BTreeSet::new();
        assert!(matches!(
            check_trust("x", &gd, &l, &trusted),
            Err(PinError::Untrusted { .. })
        ));
        let trusted = BTreeSet::from([gd.clone()]);
        check_trust("x", &gd, &l, &trusted).unwrap();

        // A file whose bytes are another component is refused, both named.
        std::fs::create_dir_all(&places.dataset_dir).unwrap();
        std::fs::write(places.dataset_dir.join(stored_file_name(&gd)), b"other").unwrap();
        let msg = locate("x", &gd, &places, None).unwrap_err().to_string();
        assert!(
            msg.contains(&gd) && msg.contains(&digest_of(b"other")),
            "{msg}"
        );
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    #[test]
    fn every_builtin_is_found_by_its_digest() {
        for p in builtin::BUILTIN_PLUGINS {
            let d = builtin::digest(p);
            assert!(std::ptr::eq(builtin_by_digest(&d).unwrap(), p));
        }
    }
}
