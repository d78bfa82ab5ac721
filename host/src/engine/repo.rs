//! `Repo`: one dataset checkout, opened. It ties the files on disk (`model`),
//! the VCS, and the plugin runtime together, and hands out backend clients
//! for objects. Every command starts from `Repo::find`. A service: the
//! methods that run commands for a library caller are in `facade`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::error::{Result, TetherError};
use crate::lock::{self, Locks};
use crate::model::{Config, Layout, Manifest, Secrets, WorkspaceState, manifest};
use crate::oplog::Journal;
use crate::plugin::{Descriptor, ObjectClient, Plugin, PluginSource, Runtime, builtin, registry};
use crate::vcs::{self, Prefer, Vcs};

/// The built-in serving each kind, by kind.
type BuiltinsByKind = BTreeMap<String, &'static builtin::BuiltinPlugin>;

/// An opened dataset checkout.
pub struct Repo {
    pub layout: Layout,
    pub config: Config,
    pub vcs: Box<dyn Vcs>,
    secrets: Secrets,
    /// Started on first use: a command served from cached descriptors and
    /// snapshots (a plain `status`) never builds a wasm engine.
    runtime: std::sync::OnceLock<Runtime>,
    plugins: OnceCell<PluginResolution>,
    /// Storage URI -> object key, for the objects secrets.toml has an
    /// `[objects."KEY"]` entry for: how a client made from a locator alone
    /// finds the entry that applies to its store.
    keyed_storage: std::sync::OnceLock<BTreeMap<String, String>>,
    /// Built-ins loaded one at a time, by component digest: a command that
    /// needs one kind (`verify` of memory objects, `status --snapshot` of a
    /// directory) loads that plugin only, and [`Repo::plugins`] reuses it.
    builtins: tokio::sync::Mutex<BTreeMap<&'static str, Arc<Plugin>>>,
    /// [`Repo::cached_descriptors`], once read.
    cached_descriptors: std::sync::OnceLock<Option<(BTreeMap<String, Descriptor>, BuiltinsByKind)>>,
    /// The checkout's resolved path, what every client's grants are checked
    /// against: resolved once, not once per object.
    real_checkout: std::sync::OnceLock<std::path::PathBuf>,
}

/// The plugins a dataset runs: loaded ones by kind, and the pinned kinds that
/// were refused, with why.
#[derive(Debug)]
pub struct PluginResolution {
    pub plugins: BTreeMap<String, Arc<Plugin>>,
    pub refused: BTreeMap<String, registry::PinError>,
}

impl std::fmt::Debug for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repo")
            .field("root", &self.layout.root())
            .field("dataset", &self.config.dataset_id)
            .finish()
    }
}

pub(crate) fn prefer(config: &Config) -> Prefer {
    match config.vcs_prefer {
        crate::model::config::VcsPrefer::Git => Prefer::Git,
        crate::model::config::VcsPrefer::Jj => Prefer::Jj,
    }
}

impl Repo {
    /// Open the dataset that `start` is in (walking up to `tether.toml`).
    pub fn find(start: &Path) -> Result<Repo> {
        let layout = Layout::find(start)?;
        // Before anything under `.tether/` is opened: no link, special file or
        // nested repository anywhere in it, so no path below can lead outside.
        layout.check_dot_dir()?;
        let config = Config::read(&layout.config_file())?;
        let mut vcs = vcs::detect(layout.root(), prefer(&config))?;
        // The repository's own ignore file keeps the per-checkout files out of
        // every snapshot (jj's included) whatever the clone's .gitignore says.
        if let Some(exclude) = vcs.info_exclude() {
            let prefix = relative_prefix(layout.root(), vcs.root());
            if let Err(e) = crate::model::layout::ensure_excluded(&exclude, &prefix) {
                tracing::warn!("could not keep tether's per-checkout files ignored: {e}");
            }
        }
        Self::refuse_tracked_per_checkout_files(&layout, vcs.as_ref())?;
        // secrets.toml is read only now that a VCS found through the environment said
        // it is untracked, and the check above that it is a regular file in a real
        // `.tether/`; its `[vcs] jj_path` then takes over from TETHER_JJ / PATH.
        let secrets = Secrets::read(&layout.secrets_file())?;
        if vcs.kind() == vcs::VcsKind::Jj
            && let Some(jj) = &secrets.jj_path
        {
            let env = vcs::VcsEnv::from_process().with_var("TETHER_JJ", jj);
            vcs = vcs::detect_with_env(layout.root(), prefer(&config), env)?;
        }
        Ok(Repo {
            layout,
            config,
            vcs,
            secrets,
            runtime: std::sync::OnceLock::new(),
            plugins: OnceCell::new(),
            keyed_storage: std::sync::OnceLock::new(),
            builtins: tokio::sync::Mutex::new(BTreeMap::new()),
            cached_descriptors: std::sync::OnceLock::new(),
            real_checkout: std::sync::OnceLock::new(),
        })
    }

    /// The security model: a clone that ships a per-checkout file is refused
    /// before anything in it is read. The paths are asked about as the VCS
    /// names them, from the dataset's real location (a checkout reached
    /// through a linked directory is still the same files to the VCS).
    fn refuse_tracked_per_checkout_files(layout: &Layout, vcs: &dyn Vcs) -> Result<()> {
        let prefix = relative_prefix(layout.root(), vcs.root());
        // A tracked copy could choose where writes go, which pins gc releases,
        // which programs run and which plugins are trusted, or what a cache
        // answers.
        let paths: Vec<String> = Layout::untracked_paths()
            .iter()
            .map(|p| format!("{prefix}{p}"))
            .collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let tracked = vcs.tracked(&refs)?;
        if tracked.is_empty() {
            return Ok(());
        }
        let untrack = match vcs.kind() {
            vcs::VcsKind::Git => {
                // `-r` only where a directory (the cache) is tracked.
                let r = if tracked.iter().any(|p| p.ends_with("cache")) {
                    "-r "
                } else {
                    ""
                };
                format!("`git rm {r}--cached {}` and commit", tracked.join(" "))
            }
            // `jj file untrack` needs them ignored: the repository's
            // info/exclude (see `find`) does that, whatever .gitignore says.
            vcs::VcsKind::Jj => format!("`jj file untrack {}`", tracked.join(" ")),
        };
        Err(TetherError::refused(format!(
            "{} {} tracked by the VCS; these files are per checkout and a clone must not bring them \
             (they choose where writes go, which pins gc releases, and which programs and plugins \
             run)",
            tracked.join(", "),
            if tracked.len() == 1 { "is" } else { "are" },
        ))
        .hint(format!("untrack them with {untrack}, then run tether again")))
    }

    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    pub fn dataset_id(&self) -> &str {
        &self.config.dataset_id
    }

    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    pub fn runtime(&self) -> Result<&Runtime> {
        if let Some(rt) = self.runtime.get() {
            return Ok(rt);
        }
        let rt = Runtime::global()?;
        Ok(self.runtime.get_or_init(|| rt))
    }

    /// A path of the dataset as the VCS names it (relative to the VCS root).
    pub fn vcs_path(&self, path: &Path) -> String {
        super::history::Source::from(self).vcs_path(path)
    }

    /// The manifests of the working tree.
    pub fn manifests(&self) -> Result<BTreeMap<String, Manifest>> {
        Ok(manifest::read_all(&self.layout.objects_dir())?)
    }

    /// The manifests a commit recorded; a conflicted jj commit whose sides
    /// disagree on one is refused
    /// (`history::manifest_sets_at` gives
    /// every side, for the callers that count them all).
    pub fn manifests_at(
        &self,
        commit: &crate::vcs::CommitId,
    ) -> Result<BTreeMap<String, Manifest>> {
        super::history::manifests_at(self, commit)
    }

    pub fn manifest(&self, key: &str) -> Result<Manifest> {
        let manifests = self.manifests()?;
        manifests
            .get(key)
            .cloned()
            .ok_or_else(|| TetherError::no_such_object(key, manifests.keys().map(String::as_str)))
    }

    pub fn workspace(&self) -> Result<WorkspaceState> {
        Ok(WorkspaceState::read_or_new(&self.layout.workspace_file())?)
    }

    /// The workspace state a plan binds to: a checkout with no
    /// `workspace.toml` yet gets one now, so the id the plan records is the
    /// id apply finds (spec/07: `--plan` first persists the id).
    pub fn workspace_for_plan(&self) -> Result<WorkspaceState> {
        if let Some(ws) = WorkspaceState::read(&self.layout.workspace_file())? {
            return Ok(ws);
        }
        // Another command may write the first one meanwhile: its id wins.
        self.update_workspace(|ws| ws.clone())
    }

    /// Write `workspace.toml` for a command that holds the locks (`held`
    /// proves it) and read the state it changes after taking them, so no
    /// other writer's update can fall between its read and this write.
    pub fn save_workspace(&self, held: &Locks, ws: &WorkspaceState) -> Result<()> {
        debug_assert_eq!(
            held.checkout.path(),
            self.layout.lock_file(),
            "the checkout lock of this checkout"
        );
        Ok(ws.write(&self.layout.workspace_file())?)
    }

    /// Change `workspace.toml` from a command that does not hold the locks
    /// (a snapshot caching its fingerprints, a plan giving the checkout its
    /// id): take the checkout lock, read the file as it is now, apply `f`,
    /// and write the result if `f` changed it. `f` must change only the
    /// fields it owns, judged against what it finds: everything else is
    /// another command's, and survives. Returns what `f` returns.
    pub fn update_workspace<R>(&self, f: impl FnOnce(&mut WorkspaceState) -> R) -> Result<R> {
        let _held = lock::lock_checkout(&self.layout.dot_dir())?;
        let path = self.layout.workspace_file();
        let found = WorkspaceState::read(&path)?;
        let mut ws = found.clone().unwrap_or_default();
        let out = f(&mut ws);
        if found.as_ref() != Some(&ws) {
            ws.write(&path)?;
        }
        Ok(out)
    }

    pub fn journal(&self) -> Result<Journal> {
        Ok(Journal::open(self.layout.ops_file()))
    }

    /// Take the checkout lock and the repository lock (in that order).
    pub fn lock(&self) -> Result<Locks> {
        Ok(lock::lock_both(
            &self.layout.dot_dir(),
            self.vcs.shared_dir(),
        )?)
    }

    /// Every plugin this dataset runs, by kind: the built-ins, with each kind
    /// the dataset pins (`[plugins.<kind>]`) replaced by exactly the pinned
    /// component, and each kind this checkout develops (`[plugins.dev]`) by
    /// its dev build (see [`crate::plugin::registry`]). Fails when a pinned kind
    /// cannot be served; [`Repo::plugin`] fails only for that kind.
    pub async fn plugins(&self) -> Result<&BTreeMap<String, Arc<Plugin>>> {
        let loaded = self.loaded_plugins().await?;
        if let Some(e) = loaded.refused.values().next() {
            return Err(TetherError::refused(e.to_string()));
        }
        Ok(&loaded.plugins)
    }

    /// The plugins that loaded by kind, and why each pinned kind that did not
    /// was refused (`tether backends`, `tether plugin verify`).
    pub async fn plugin_resolution(&self) -> Result<&PluginResolution> {
        self.loaded_plugins().await
    }

    async fn loaded_plugins(&self) -> Result<&PluginResolution> {
        self.plugins
            .get_or_try_init(|| async {
                let mut builtins = BTreeMap::new();
                let runtime = self.runtime()?;
                for b in builtin::BUILTIN_PLUGINS {
                    let p = self.builtin(b).await?;
                    builtins.insert(p.kind().to_string(), p);
                }
                let places = registry::Places::new(&self.layout.plugins_dir());
                let mut plugins = builtins.clone();
                let mut refused = BTreeMap::new();
                let dev = &self.secrets.dev_plugins;
                for (kind, pin) in &self.config.plugins {
                    if dev.contains_key(kind) {
                        // This checkout runs its dev build instead (below).
                        continue;
                    }
                    // Trust is checked before the component is compiled: an
                    // untrusted one is never run, not even to describe itself.
                    match registry::load_pinned(
                        runtime,
                        kind,
                        &pin.digest,
                        &places,
                        &self.secrets.trusted_plugins,
                        &builtins,
                    )
                    .await
                    {
                        Ok(p) => {
                            plugins.insert(kind.clone(), p);
                        }
                        Err(e) => {
                            plugins.remove(kind);
                            refused.insert(kind.clone(), e);
                        }
                    }
                }
                for (kind, path) in dev {
                    match registry::load_dev(runtime, kind, Path::new(path)).await {
                        Ok(p) => {
                            plugins.insert(kind.clone(), p);
                        }
                        Err(e) => {
                            plugins.remove(kind);
                            refused.insert(kind.clone(), e);
                        }
                    }
                }
                Ok::<_, TetherError>(PluginResolution { plugins, refused })
            })
            .await
    }

    /// Every kind's descriptor, as [`Repo::plugins`] would give them, but read
    /// from the descriptor cache when it can be: when every built-in was
    /// described before and every pin names a built-in. Otherwise the plugins
    /// are loaded.
    pub async fn descriptors(&self) -> Result<BTreeMap<String, Descriptor>> {
        if self.plugins.get().is_none()
            && let Some((cached, _)) = self.cached_descriptors()
        {
            return Ok(cached.clone());
        }
        Ok(self
            .plugins()
            .await?
            .iter()
            .map(|(k, p)| (k.clone(), p.descriptor().clone()))
            .collect())
    }

    /// Every built-in's cached descriptor by kind, with the built-in serving
    /// each kind; `None` unless all are cached and every pin names a built-in.
    fn cached_descriptors(&self) -> Option<&(BTreeMap<String, Descriptor>, BuiltinsByKind)> {
        // Read once per command: every client made asks.
        self.cached_descriptors
            .get_or_init(|| self.read_cached_descriptors())
            .as_ref()
    }

    fn read_cached_descriptors(&self) -> Option<(BTreeMap<String, Descriptor>, BuiltinsByKind)> {
        let root = crate::plugin::default_cache_root();
        let mut out = BTreeMap::new();
        let mut serving = BTreeMap::new();
        for b in builtin::BUILTIN_PLUGINS {
            let d = crate::plugin::cached_descriptor(&root, b.sha256)?;
            serving.insert(d.kind.clone(), b);
            out.insert(d.kind.clone(), d);
        }
        // A pin the built-in satisfies changes nothing; any other needs the
        // registry (trust, stored components).
        let pins_are_builtin = self.config.plugins.iter().all(|(kind, pin)| {
            serving
                .get(kind)
                .is_some_and(|b| pin.digest == format!("sha256:{}", b.sha256))
        });
        // A dev plugin is read afresh each time: never served from a cache.
        (pins_are_builtin && self.secrets.dev_plugins.is_empty()).then_some((out, serving))
    }

    /// One built-in, loaded once per command.
    async fn builtin(&self, b: &'static builtin::BuiltinPlugin) -> Result<Arc<Plugin>> {
        let mut loaded = self.builtins.lock().await;
        if let Some(p) = loaded.get(b.sha256) {
            return Ok(p.clone());
        }
        let p = self
            .runtime()?
            .load_digested(b.wasm, b.sha256.to_string(), PluginSource::BuiltIn)
            .await?;
        loaded.insert(b.sha256, p.clone());
        Ok(p)
    }

    /// The built-in that serves `kind` in this dataset, found through the
    /// descriptor cache without loading the others: only when every
    /// built-in's descriptor is cached and every pin names a built-in (else
    /// the registry decides, [`Repo::plugins`]).
    async fn lone_builtin(&self, kind: &str) -> Result<Option<Arc<Plugin>>> {
        if self.plugins.get().is_some() {
            return Ok(None);
        }
        let Some((_, serving)) = self.cached_descriptors() else {
            return Ok(None);
        };
        let Some(b) = serving.get(kind) else {
            return Ok(None);
        };
        let p = self.builtin(b).await?;
        // The cache said which component serves `kind`: the plugin loaded
        // must be that kind (its descriptor, cached or asked, is the one the
        // runtime validated for these bytes).
        Ok((p.kind() == kind).then_some(p))
    }

    /// Run `work` here while the plugins serving the working tree's kinds
    /// load on another thread. A command that reads history before it calls
    /// any plugin (`verify --all-history`) overlaps the two, each a few
    /// milliseconds: the wasm engine and a component from the cache.
    pub fn warming_plugins<T>(&self, work: impl FnOnce() -> T) -> T {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return work();
        };
        std::thread::scope(|s| {
            s.spawn(move || {
                let Ok(manifests) = self.manifests() else {
                    return;
                };
                let kinds: BTreeSet<&str> = manifests.values().map(|m| m.kind.as_str()).collect();
                for kind in kinds {
                    // A failure is the later call's to report, in its context.
                    let _ = handle.block_on(self.plugin(kind));
                }
            });
            work()
        })
    }

    /// The plugin serving `kind`.
    pub async fn plugin(&self, kind: &str) -> Result<Arc<Plugin>> {
        if let Some(p) = self.lone_builtin(kind).await? {
            return Ok(p);
        }
        let loaded = self.loaded_plugins().await?;
        if let Some(e) = loaded.refused.get(kind) {
            return Err(TetherError::refused(e.to_string()));
        }
        loaded.plugins.get(kind).cloned().ok_or_else(|| {
            TetherError::unknown_kind(kind, loaded.plugins.keys().map(String::as_str))
        })
    }

    /// The backend options a plugin is configured with for `kind`: the
    /// committed `[backends.<kind>]` merged with secrets.toml's (which wins).
    pub fn backend_config(&self, kind: &str) -> Value {
        let mut options = self
            .secrets
            .backend_options(kind, &self.config.backend_options(kind));
        // S3 credentials and endpoints are the host's: they open the
        // storage grants and never enter the sandbox.
        crate::plugin::storage::strip_settings(&mut options);
        Value::Object(options)
    }

    /// A backend client for one object.
    pub async fn client(&self, manifest: &Manifest) -> Result<ObjectClient> {
        let plugin = self.plugin(&manifest.kind).await?;
        Ok(self.client_for(&plugin, &Value::Object(manifest.locator.clone())))
    }

    /// The checkout's path with links resolved, resolved once per command
    /// (the path as found when it cannot be resolved).
    fn real_checkout(&self) -> std::path::PathBuf {
        self.real_checkout
            .get_or_init(|| {
                let root = self.vcs.root();
                root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
            })
            .clone()
    }

    /// Local file hashes are cached across commands in the dataset's
    /// `.tether/cache/file-hashes.json` (spec/11, `file`).
    pub fn client_for(&self, plugin: &Arc<Plugin>, locator: &Value) -> ObjectClient {
        let client = plugin
            .object_with_secrets(
                locator,
                &self.backend_config(plugin.kind()),
                &self.secrets.backend_options(plugin.kind(), &Map::new()),
            )
            .with_hash_cache(self.layout.dot_dir().join("cache").join("file-hashes.json"))
            .with_checkout(self.real_checkout())
            .with_sql_uri_settings(|address| self.sql_uri_settings(address));
        self.with_s3_settings(client, None, plugin.kind(), locator)
    }

    /// Open the client's `s3://` storage grants with the settings the host
    /// resolves for object `key` (when the caller knows it; otherwise an
    /// `[objects."KEY"]` entry applies to the object whose manifest names the
    /// same storage URI). The plugin never sees them.
    fn with_s3_settings(
        &self,
        client: ObjectClient,
        key: Option<&str>,
        kind: &str,
        locator: &Value,
    ) -> ObjectClient {
        let s3_uri = client.s3_grants().next().map(str::to_string);
        match s3_uri {
            Some(uri) => {
                let region = locator.get("region").and_then(Value::as_str);
                let settings = self.s3_settings(key, kind, &uri, region);
                client.with_s3_settings(settings)
            }
            None => client,
        }
    }

    /// The settings an `s3://` store of object `key` (kind `kind`) opens
    /// with: `[objects."KEY"]`, the longest `[uris."PREFIX"]`,
    /// `[backends.KIND]` (committed and secrets.toml), then the environment,
    /// per field. A `region` in the locator (spec/11: it "overrides the
    /// store region") beats them all; it names no endpoint or secret.
    pub fn s3_settings(
        &self,
        key: Option<&str>,
        kind: &str,
        uri: &str,
        locator_region: Option<&str>,
    ) -> crate::plugin::storage::S3Resolution {
        let found;
        let key = match key {
            Some(k) => Some(k),
            None => {
                found = self.keyed_storage().get(uri).cloned();
                found.as_deref()
            }
        };
        let mut options = self.secrets.resolve(
            key.unwrap_or_default(),
            kind,
            Some(uri),
            &self.config.backend_options(kind),
        );
        if let Some(region) = locator_region.filter(|r| !r.is_empty()) {
            options.insert("region".into(), Value::String(region.to_string()));
        }
        // gs:// and az:// stores take object_store's own keys from the entry.
        if let Some((scheme, _)) = uri.split_once("://").filter(|(s, _)| *s != "s3") {
            return Arc::new(crate::plugin::storage::S3Settings::resolve_cloud(
                scheme, &options,
            ));
        }
        Arc::new(crate::plugin::storage::S3Settings::resolve(&options, |v| {
            std::env::var(v).ok()
        }))
    }

    fn keyed_storage(&self) -> &BTreeMap<String, String> {
        self.keyed_storage.get_or_init(|| {
            let mut out = BTreeMap::new();
            if self.secrets.objects.is_empty() {
                return out;
            }
            // An unreadable manifest fails the command elsewhere, with its
            // own error; here it only means no entry applies.
            let Ok(manifests) = self.manifests() else {
                return out;
            };
            for key in self.secrets.objects.keys() {
                let Some(m) = manifests.get(key) else {
                    continue;
                };
                for v in m.locator.values().filter_map(Value::as_str) {
                    if ["s3://", "gs://", "az://", "abfs://", "abfss://"]
                        .iter()
                        .any(|s| v.starts_with(s))
                    {
                        out.entry(v.to_string()).or_insert_with(|| key.clone());
                    }
                }
            }
            out
        })
    }

    /// [`Repo::client_for`] for the object `key` (also one `add` is
    /// registering, which no manifest names yet): its `s3://` grants open
    /// with `key`'s settings, and its `[objects."<key>"]` entry in
    /// `.tether/secrets.toml` says, over `[backends.<kind>]`, which
    /// directories its plugin gets (a git object's `remote` path): the calls
    /// that write outside the object's own store (pin and unpin) need this.
    pub fn client_for_key(&self, plugin: &Arc<Plugin>, locator: &Value, key: &str) -> ObjectClient {
        let mut secret = self.secrets.backend_options(plugin.kind(), &Map::new());
        crate::model::secrets::merge_options(&mut secret, &self.secrets.object_entry(key, None));
        let client = plugin
            .object_with_secrets(locator, &self.backend_config(plugin.kind()), &secret)
            .with_hash_cache(self.layout.dot_dir().join("cache").join("file-hashes.json"))
            .with_checkout(self.real_checkout())
            .with_sql_uri_settings(|address| self.sql_uri_settings(address));
        self.with_s3_settings(client, Some(key), plugin.kind(), locator)
    }

    /// secrets.toml's settings for a database address (the longest matching
    /// `[uris."<prefix>"]`): where its `password` or `password_env` is.
    fn sql_uri_settings(&self, address: &str) -> Option<Map<String, Value>> {
        self.secrets.uri_entry(address).map(|(_, o)| o.clone())
    }

    /// [`Repo::client`] for the object `key` ([`Repo::client_for_key`]).
    pub async fn client_for_object(&self, key: &str, manifest: &Manifest) -> Result<ObjectClient> {
        let plugin = self.plugin(&manifest.kind).await?;
        Ok(self.client_for_key(&plugin, &Value::Object(manifest.locator.clone()), key))
    }

    /// The capabilities of an object under its policy, as the host derives
    /// them from the descriptor (`pin = "record"` drops PIN).
    pub fn capabilities(descriptor: &Descriptor, manifest: &Manifest) -> Vec<String> {
        let record = manifest.policy.pin == crate::model::PinMode::Record;
        descriptor
            .capabilities
            .iter()
            .filter(|c| !(record && c.as_str() == "PIN"))
            .cloned()
            .collect()
    }

    /// The working ref of `key` in this checkout (`None`: the base branch).
    pub fn working_ref(ws: &WorkspaceState, key: &str) -> Option<String> {
        ws.working_refs.get(key).cloned()
    }
}

impl<'a> From<&'a Repo> for super::history::Source<'a> {
    fn from(repo: &'a Repo) -> Self {
        super::history::Source {
            vcs: repo.vcs.as_ref(),
            layout: &repo.layout,
        }
    }
}

/// The dataset root relative to the VCS root, as a path prefix (`""` or `sub/`).
fn relative_prefix(root: &Path, vcs_root: &Path) -> String {
    // Both resolved: a dataset reached through a linked directory is asked
    // about at the path the VCS tracks it under.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (root_real, vcs_real) = (canonical(root), canonical(vcs_root));
    if let Ok(rel) = root_real.strip_prefix(&vcs_real) {
        return match rel.as_os_str().is_empty() {
            true => String::new(),
            false => format!("{}/", rel.to_string_lossy()),
        };
    }
    match root.strip_prefix(vcs_root) {
        Ok(rel) if !rel.as_os_str().is_empty() => format!("{}/", rel.to_string_lossy()),
        _ => String::new(),
    }
}

/// Strip a state to its content keys (volatile keys removed).
pub fn content(state: &Map<String, Value>, descriptor: &Descriptor) -> Map<String, Value> {
    let volatile: Vec<&str> = descriptor
        .volatile_keys
        .iter()
        .map(String::as_str)
        .collect();
    crate::model::ids::content_state(state, &volatile)
}
