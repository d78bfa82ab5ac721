//! The plugin runtime: one wasmtime `Engine` per process, each component
//! compiled once (and cached on disk), an `InstancePre` per plugin, and a fresh
//! `Store` per call with a deadline and a memory limit.
//!
//! A plugin that traps (runs past its deadline, grows past its memory limit,
//! panics) fails that call only: the store is dropped and the next call
//! instantiates afresh from the `InstancePre`.
//!
//! An instance whose calls all ended cleanly may be kept warm for the next
//! call with exactly the same configuration and grants ([`Warm`]; the rules
//! are in `client.rs`): a batch of objects on one store then costs one
//! instantiation, not one per object.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{HasSelf, Instance, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

use super::bindings::{
    BackendPluginFull, backend_iface, describe_ext_iface, describe_fs_iface, describe_meta_iface,
    describe_net_iface, harness_iface, verify_many_iface,
};
use super::cache::{ComponentCache, Loaded, default_cache_root};
use super::client::AccessKey;
use super::error::{BackendError, PluginError};
use super::host::{CallState, Preopens};
use super::http::HttpLimits;
use super::meta::PluginMeta;
use super::sql::SqlLimits;
use super::storage::Grants;
use super::types::{Capability, Descriptor, HOST_ABI, HttpGrant};

/// How often the epoch advances; deadlines are counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits and places the runtime works with.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The user cache root (compiled components live under `components/`).
    pub cache_root: PathBuf,
    /// How long one plugin call may run before it is stopped.
    pub call_timeout: Duration,
    /// How much linear memory one plugin call may use, in bytes.
    pub memory_limit: usize,
    /// How many plugin instances may be alive at once (pooling allocator).
    pub max_instances: u32,
    /// Timeouts and the response cap of plugins' `wasi:http` requests.
    pub http: HttpLimits,
    /// The statement timeout and row cap of the `sql` capability.
    pub sql: SqlLimits,
}

/// Instances alive at once by default: twice what one fan-out runs
/// concurrently ([`MAX_IN_FLIGHT`](super::fanout::MAX_IN_FLIGHT)), which
/// leaves room for the calls made outside one. Not more: the pool is set up
/// when the engine is made, at a cost that grows with its size and that every
/// command pays (256 cost `verify` of one pin a quarter of its time).
const DEFAULT_MAX_INSTANCES: u32 = 2 * super::fanout::MAX_IN_FLIGHT as u32;

impl Default for RuntimeConfig {
    /// Defaults, overridable by `TETHER_PLUGIN_TIMEOUT` (seconds),
    /// `TETHER_PLUGIN_MEMORY` (MiB), `TETHER_CACHE_DIR`, for `sql`
    /// `TETHER_SQL_TIMEOUT` (seconds) and `TETHER_SQL_MAX_ROWS`, and the HTTP
    /// limits' variables ([`HttpLimits::default`]).
    fn default() -> Self {
        let timeout = std::env::var("TETHER_PLUGIN_TIMEOUT")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(300));
        let memory_mib = std::env::var("TETHER_PLUGIN_MEMORY")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|m| *m > 0)
            .unwrap_or(1024);
        RuntimeConfig {
            cache_root: default_cache_root(),
            call_timeout: timeout,
            memory_limit: memory_mib << 20,
            max_instances: DEFAULT_MAX_INSTANCES,
            http: HttpLimits::default(),
            sql: SqlLimits::from_env(),
        }
    }
}

/// Counters a test or benchmark can read: claims like "a second process
/// compiles nothing" are checked with these, not with timings.
#[derive(Debug, Default)]
pub struct RuntimeStats {
    pub compiled: AtomicU64,
    pub loaded_from_cache: AtomicU64,
    pub instantiated: AtomicU64,
    /// Calls served by a warm instance instead of a new one.
    pub reused: AtomicU64,
}

/// A snapshot of the runtime's counters (`RuntimeStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct StatsSnapshot {
    pub compiled: u64,
    pub loaded_from_cache: u64,
    pub instantiated: u64,
    pub reused: u64,
}

/// At most this many warm instances wait between calls, over all plugins:
/// each holds a slot of the instance pool (which fan-outs need) and its
/// memory.
const MAX_WARM: usize = 16;

/// An instance between calls: configured once, with the grants `key` names
/// (`None`: grants that are never shared with another object, kept only by
/// the client that made it).
pub(crate) struct Warm {
    /// The plugin it is an instance of ([`Plugin`]'s `id`).
    pub(crate) plugin: u64,
    pub(crate) key: Option<AccessKey>,
    pub(crate) store: Store<CallState>,
    pub(crate) instance: Instance,
    pub(crate) backend: backend_iface::Guest,
    /// Its preopened directories (resolved): what the git guard watches.
    pub(crate) host_dirs: Vec<PathBuf>,
    /// Each preopened directory's (device, inode) when it was opened: an
    /// instance whose directory was removed (`delete-store`) or replaced
    /// holds a handle to the old one, so it may not serve again.
    pub(crate) dir_ids: Vec<Option<(u64, u64)>>,
    /// Calls it served; an instance is retired after [`Warm::MAX_CALLS`].
    pub(crate) calls: u32,
}

impl Warm {
    /// Calls one instance serves before it is retired, so a plugin that leaks
    /// a little per call never runs into its memory limit because of reuse.
    pub(crate) const MAX_CALLS: u32 = 1_000;
    /// Linear memory above which an instance is not kept (bytes).
    pub(crate) const MAX_MEMORY: usize = 64 << 20;

    /// (device, inode) of each directory in `dirs`, `None` where it is gone.
    pub(crate) fn dir_ids_of(dirs: &[PathBuf]) -> Vec<Option<(u64, u64)>> {
        use std::os::unix::fs::MetadataExt;
        dirs.iter()
            .map(|d| std::fs::metadata(d).ok().map(|m| (m.dev(), m.ino())))
            .collect()
    }

    /// Whether its preopened directories are still the ones it opened.
    pub(crate) fn dirs_unchanged(&self) -> bool {
        Self::dir_ids_of(&self.host_dirs) == self.dir_ids
    }

    /// Whether it may serve another call.
    pub(crate) fn reusable(&self) -> bool {
        self.dirs_unchanged()
            && self.calls < Self::MAX_CALLS
            && self.store.data().limiter.size <= Self::MAX_MEMORY
            && !self.store.data().limiter.hit
            && self.store.data().stderr_len() < super::host::STDERR_CAPACITY / 2
    }
}

pub(crate) struct Shared {
    pub(crate) engine: Engine,
    linker: Linker<CallState>,
    cache: ComponentCache,
    pub(crate) config: RuntimeConfig,
    pub(crate) stats: RuntimeStats,
    /// Warm instances by recency (newest last), at most [`MAX_WARM`].
    warm: Mutex<VecDeque<Warm>>,
}

/// The plugin runtime. Cheap to clone; one per process is the intended use
/// ([`Runtime::global`]).
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// Where a plugin's bytes came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginSource {
    /// Embedded in this tether binary.
    BuiltIn,
    /// A component file.
    Path(PathBuf),
}

impl std::fmt::Display for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginSource::BuiltIn => f.write_str("built-in"),
            PluginSource::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A loaded plugin: compiled, linked, described.
pub struct Plugin {
    pub(crate) shared: Arc<Shared>,
    /// Unique in this process: which plugin a warm instance belongs to.
    id: u64,
    pub(crate) pre: InstancePre<CallState>,
    pub(crate) backend: backend_iface::GuestIndices,
    pub(crate) harness: Option<harness_iface::GuestIndices>,
    /// `describe-ext` (since 0.1.1), absent from older plugins.
    describe_ext: Option<describe_ext_iface::GuestIndices>,
    /// Locator keys naming directories to preopen (`describe-fs`, since
    /// 0.1.2); empty for a plugin without it, which gets no directory.
    filesystem_keys: Vec<String>,
    /// What network access it asks for (`describe-net`, since 0.1.3); none
    /// for a plugin without it.
    http_grants: Vec<HttpGrant>,
    sql_keys: Vec<String>,
    /// `describe-meta` (since 0.1.5), absent from older plugins.
    describe_meta: Option<describe_meta_iface::GuestIndices>,
    /// Its answer, bounded ([`PluginMeta::bounded`]); `None` without it.
    meta: Option<PluginMeta>,
    /// `verify-many` (since 0.1.5): many pins in one call; without it the
    /// host asks pin by pin.
    pub(crate) verify_many: Option<verify_many_iface::GuestIndices>,
    /// The host capabilities the component imports ([`Plugin::host_imports`]).
    host_imports: Vec<&'static str>,
    pub(crate) kind: Arc<str>,
    descriptor: Descriptor,
    digest: String,
    source: PluginSource,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("kind", &self.descriptor.kind)
            .field("digest", &self.digest)
            .field("source", &self.source)
            .finish()
    }
}

/// The process-wide runtime ([`Runtime::global`]).
static GLOBAL: Mutex<Option<Runtime>> = Mutex::new(None);
/// How many times [`GLOBAL`] was built: once, whoever asked first.
static GLOBAL_BUILDS: AtomicU64 = AtomicU64::new(0);
/// The next [`Plugin`] id.
static NEXT_PLUGIN_ID: AtomicU64 = AtomicU64::new(0);

impl Runtime {
    /// The process-wide runtime with the default configuration. Built once:
    /// a caller that asks while another thread builds it waits for that one
    /// (an engine reserves its pools and starts a ticker thread; a second
    /// would be thrown away). A failed build is not kept, so the next caller
    /// tries again and reports its own error.
    pub fn global() -> Result<Runtime, PluginError> {
        let mut slot = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rt) = slot.as_ref() {
            return Ok(rt.clone());
        }
        let rt = Runtime::new(RuntimeConfig::default())?;
        GLOBAL_BUILDS.fetch_add(1, Ordering::Relaxed);
        *slot = Some(rt.clone());
        Ok(rt)
    }

    /// The counters of the process-wide runtime, if it was started (it is
    /// not started to answer): what `tether` logs as it exits
    /// (`RUST_LOG=tether::runtime=debug`), for tests that count instances.
    pub fn global_stats() -> Option<StatsSnapshot> {
        GLOBAL
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(Runtime::stats)
    }

    /// A runtime with its own engine and limits.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, PluginError> {
        let engine = build_engine(&config)?;
        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        // Every plugin may import `wasi:http`; each request is checked
        // against its call's grants (`http.rs`), so without one all fail.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        BackendPluginFull::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        start_epoch_ticker(&engine);
        let cache = ComponentCache::new(&config.cache_root, &engine);
        Ok(Runtime {
            shared: Arc::new(Shared {
                engine,
                linker,
                cache,
                config,
                stats: RuntimeStats::default(),
                warm: Mutex::new(VecDeque::new()),
            }),
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.shared.config
    }

    /// Where compiled components are cached for this engine.
    pub fn cache_dir(&self) -> &Path {
        self.shared.cache.dir()
    }

    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.shared.stats;
        StatsSnapshot {
            compiled: s.compiled.load(Ordering::Relaxed),
            loaded_from_cache: s.loaded_from_cache.load(Ordering::Relaxed),
            instantiated: s.instantiated.load(Ordering::Relaxed),
            reused: s.reused.load(Ordering::Relaxed),
        }
    }

    /// Load a component file.
    pub async fn load_file(&self, path: &Path) -> Result<Arc<Plugin>, PluginError> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Io {
            what: format!("cannot read plugin {}", path.display()),
            source,
        })?;
        self.load_bytes(&bytes, PluginSource::Path(path.to_path_buf()))
            .await
    }

    /// Load a component from its bytes: compile (or take the cached compiled
    /// form), link against the host's interfaces, and ask it to describe itself.
    pub async fn load_bytes(
        &self,
        wasm: &[u8],
        source: PluginSource,
    ) -> Result<Arc<Plugin>, PluginError> {
        let digest_hex = hex::encode(Sha256::digest(wasm));
        self.load_digested(wasm, digest_hex, source).await
    }

    /// Load a component whose sha256 is already known (the built-ins', which
    /// `build.rs` computed): hashing a component costs more than loading it
    /// from the cache, and every command loads the built-ins.
    pub(crate) async fn load_digested(
        &self,
        wasm: &[u8],
        digest_hex: String,
        source: PluginSource,
    ) -> Result<Arc<Plugin>, PluginError> {
        let shared = &self.shared;
        let source_name = source.to_string();
        if !wasmparser_is_component(wasm) {
            return Err(PluginError::Invalid {
                source_name,
                detail: "not a WebAssembly component (build it for wasm32-wasip2)".into(),
            });
        }
        // What the compile notice calls it: a built-in by its crate's kind
        // part (`memory`), a file by its name.
        let label = match &source {
            PluginSource::BuiltIn => super::builtin::BUILTIN_PLUGINS
                .iter()
                .find(|p| p.sha256 == digest_hex)
                .map_or_else(
                    || "built-in".to_string(),
                    |p| {
                        let kind = p.crate_name.trim_start_matches("tether-plugin-");
                        format!("built-in {kind}")
                    },
                ),
            PluginSource::Path(p) => p
                .file_name()
                .map_or_else(|| source_name.clone(), |n| n.to_string_lossy().into_owned()),
        };
        let (component, how) =
            shared
                .cache
                .load(&shared.engine, wasm, &digest_hex, &source_name, &label)?;
        match how {
            Loaded::Compiled => shared.stats.compiled.fetch_add(1, Ordering::Relaxed),
            Loaded::FromCache => shared
                .stats
                .loaded_from_cache
                .fetch_add(1, Ordering::Relaxed),
        };
        tracing::debug!(source = %source_name, digest = %digest_hex, ?how, "loaded plugin component");
        let incompatible = |detail: String| PluginError::Incompatible {
            source_name: source_name.clone(),
            host_abi: HOST_ABI,
            detail,
        };
        let pre = shared
            .linker
            .instantiate_pre(&component)
            .map_err(|e| incompatible(format!("{e:#}")))?;
        let backend = backend_iface::GuestIndices::new(&pre).map_err(|e| {
            incompatible(format!(
                "it does not export tether:backend/backend@{HOST_ABI}: {e:#}"
            ))
        })?;
        let harness = harness_iface::GuestIndices::new(&pre).ok();
        // Optional like the harness: a plugin built before 0.1.1 lacks it. A
        // plugin exporting it with the wrong shape loses it too, rather than
        // failing to load, since nothing it exports is required.
        let describe_ext = describe_ext_iface::GuestIndices::new(&pre).ok();
        let describe_fs = describe_fs_iface::GuestIndices::new(&pre).ok();
        let describe_net = describe_net_iface::GuestIndices::new(&pre).ok();
        let describe_meta = describe_meta_iface::GuestIndices::new(&pre).ok();
        let verify_many = verify_many_iface::GuestIndices::new(&pre).ok();
        let import_names: Vec<String> = component
            .component_type()
            .imports(&shared.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let host_imports = host_imports(&import_names, describe_fs.is_some());
        let mut plugin = Plugin {
            shared: self.shared.clone(),
            id: NEXT_PLUGIN_ID.fetch_add(1, Ordering::Relaxed),
            pre,
            backend,
            harness,
            describe_ext,
            filesystem_keys: Vec::new(),
            http_grants: Vec::new(),
            sql_keys: Vec::new(),
            describe_meta,
            meta: None,
            verify_many,
            host_imports,
            kind: Arc::from(""),
            descriptor: empty_descriptor(),
            digest: format!("sha256:{digest_hex}"),
            source,
        };
        // `describe` is a pure function of the component: the descriptor this
        // host cached for these bytes is its answer, with no instance started
        // to ask again (same trust as the compiled code beside it).
        let cache_root = &shared.config.cache_root;
        // `describe-meta` asked with a fresh `describe`, in its instance.
        let mut fresh_meta = None;
        let descriptor = match super::cache::read_descriptor(cache_root, &digest_hex)
            .filter(|d| validate_descriptor(d).is_ok())
        {
            Some(cached) => cached,
            None => {
                let (described, meta) =
                    plugin
                        .describe_raw()
                        .await
                        .map_err(|e| PluginError::Describe {
                            source_name: source_name.clone(),
                            detail: e.to_string(),
                        })?;
                validate_descriptor(&described).map_err(|detail| PluginError::Describe {
                    source_name: source_name.clone(),
                    detail,
                })?;
                if let Err(e) = super::cache::write_descriptor(cache_root, &digest_hex, &described)
                {
                    tracing::debug!("could not cache the descriptor of {source_name}: {e}");
                }
                fresh_meta = meta;
                described
            }
        };
        // Asked once at load: every call's preopens depend on it.
        if let Some(indices) = &describe_fs {
            plugin.filesystem_keys =
                plugin
                    .filesystem_keys_raw(indices)
                    .await
                    .map_err(|e| PluginError::Describe {
                        source_name: source_name.clone(),
                        detail: e.to_string(),
                    })?;
        }
        // Likewise: every call's network grants depend on it.
        if let Some(indices) = &describe_net {
            let (http, sql) =
                plugin
                    .net_grants_raw(indices)
                    .await
                    .map_err(|e| PluginError::Describe {
                        source_name: source_name.clone(),
                        detail: e.to_string(),
                    })?;
            plugin.http_grants = http;
            plugin.sql_keys = sql;
        }
        // Cached like the descriptor. Only shown, never acted on: a plugin
        // whose `describe-meta` fails still loads, without metadata.
        if plugin.describe_meta.is_some() {
            let cached = match fresh_meta {
                Some(_) => None,
                None => super::cache::read_meta(cache_root, &digest_hex),
            };
            plugin.meta = match cached {
                Some(cached) => Some(cached.bounded()),
                None => {
                    let given = match fresh_meta {
                        Some(given) => given.map(Some),
                        None => plugin.meta_as_given().await,
                    };
                    match given {
                        Ok(Some(given)) => {
                            let meta = given.bounded();
                            if let Err(e) = super::cache::write_meta(cache_root, &digest_hex, &meta)
                            {
                                tracing::debug!(
                                    "could not cache the metadata of {source_name}: {e}"
                                );
                            }
                            Some(meta)
                        }
                        Ok(None) => None,
                        Err(e) => {
                            tracing::debug!("describe-meta of {source_name} failed: {e}");
                            None
                        }
                    }
                }
            };
        }
        plugin.kind = Arc::from(descriptor.kind.as_str());
        plugin.descriptor = descriptor;
        Ok(Arc::new(plugin))
    }
}

impl Plugin {
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    pub fn kind(&self) -> &str {
        &self.descriptor.kind
    }

    /// `sha256:<hex>` of the component bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    pub fn source(&self) -> &PluginSource {
        &self.source
    }

    /// Whether the component exports the conformance `harness`.
    pub fn has_harness(&self) -> bool {
        self.harness.is_some()
    }

    /// Whether the component exports `verify-many` (since 0.1.5), so an
    /// object's pins are checked in one call rather than one call each.
    pub fn has_verify_many(&self) -> bool {
        self.verify_many.is_some()
    }

    /// The settings this plugin accepts from the committed tether.toml's
    /// `[backends.<kind>]`, as dotted paths (`storage_options.region`), or
    /// `None` when the plugin does not say (it predates `describe-ext`, 0.1.1).
    /// Asked on demand, so loading a plugin costs no extra instance.
    pub async fn config_keys(&self) -> Result<Option<Vec<String>>, BackendError> {
        let Some(indices) = &self.describe_ext else {
            return Ok(None);
        };
        let (mut store, instance) = self.bare_instance().await?;
        let ext = indices
            .load(&mut store, &instance)
            .map_err(|e| self.fault(e, &store))?;
        let keys = ext
            .call_config_keys(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        Ok(Some(keys))
    }

    /// Its name, version, authors and the like (`describe-meta`, since
    /// 0.1.5), bounded and without control characters; `None` for a plugin
    /// without it. Asked once per component and cached with its descriptor.
    pub fn meta(&self) -> Option<&PluginMeta> {
        self.meta.as_ref()
    }

    /// `describe-meta` asked afresh and returned as the plugin gave it, not
    /// bounded (the conformance suite checks it); `None` without it.
    pub async fn meta_as_given(&self) -> Result<Option<PluginMeta>, BackendError> {
        let Some(indices) = &self.describe_meta else {
            return Ok(None);
        };
        let (mut store, instance) = self.bare_instance().await?;
        let ext = indices
            .load(&mut store, &instance)
            .map_err(|e| self.fault(e, &store))?;
        let meta = ext
            .call_meta(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        Ok(Some(meta.into()))
    }

    /// Locator keys whose directories this plugin gets as a real filesystem
    /// (`describe-fs`, since 0.1.2); empty when it does not export it.
    pub fn filesystem_keys(&self) -> &[String] {
        &self.filesystem_keys
    }

    async fn filesystem_keys_raw(
        &self,
        indices: &describe_fs_iface::GuestIndices,
    ) -> Result<Vec<String>, BackendError> {
        let (mut store, instance) = self.bare_instance().await?;
        let ext = indices
            .load(&mut store, &instance)
            .map_err(|e| self.fault(e, &store))?;
        ext.call_filesystem_keys(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))
    }

    /// The host capabilities the component imports, of `storage`, `tree`,
    /// `sql`, `wasi:http` and `filesystem` (`tether backends` shows them).
    /// `filesystem` only for a plugin that also exports `describe-fs`: every
    /// wasip2 program imports `wasi:filesystem`, and only those get a
    /// directory.
    pub fn host_imports(&self) -> &[&'static str] {
        &self.host_imports
    }

    /// The origins this plugin may reach over `wasi:http`
    /// (`describe-net.http-grants`, since 0.1.3); empty without it.
    pub fn http_grants(&self) -> &[HttpGrant] {
        &self.http_grants
    }

    /// Dotted keys whose values are database addresses it may open through
    /// `sql` (`describe-net.sql-keys`, since 0.1.3); empty without it.
    pub fn sql_keys(&self) -> &[String] {
        &self.sql_keys
    }

    async fn net_grants_raw(
        &self,
        indices: &describe_net_iface::GuestIndices,
    ) -> Result<(Vec<HttpGrant>, Vec<String>), BackendError> {
        let (mut store, instance) = self.bare_instance().await?;
        let net = indices
            .load(&mut store, &instance)
            .map_err(|e| self.fault(e, &store))?;
        let http = net
            .call_http_grants(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        let sql = net
            .call_sql_keys(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        Ok((http.into_iter().map(Into::into).collect(), sql))
    }

    /// `describe`, and in the same instance `describe-meta` when the plugin
    /// has it (a failed `describe-meta` is `Some(Err)`: the plugin still
    /// loads, without metadata).
    async fn describe_raw(
        &self,
    ) -> Result<(Descriptor, Option<Result<PluginMeta, BackendError>>), BackendError> {
        let (mut store, instance) = self.bare_instance().await?;
        let guest = self
            .backend
            .load(&mut store, &instance)
            .map_err(|e| self.fault(e, &store))?;
        let d = guest
            .call_describe(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        let meta = match &self.describe_meta {
            None => None,
            Some(indices) => Some(match indices.load(&mut store, &instance) {
                Err(e) => Err(self.fault(e, &store)),
                Ok(ext) => ext
                    .call_meta(&mut store)
                    .await
                    .map(Into::into)
                    .map_err(|e| self.fault(e, &store)),
            }),
        };
        Ok((d.into(), meta))
    }

    /// A fresh instance with no grants, for what is asked at load and on
    /// demand (`describe`, `describe-*`, `config-keys`).
    async fn bare_instance(
        &self,
    ) -> Result<(Store<CallState>, wasmtime::component::Instance), BackendError> {
        self.instantiate(Grants::new(Vec::<String>::new()), Preopens::none())
            .await
    }

    /// A fresh store and instance for one call, with these storage grants
    /// and preopened directories.
    pub(crate) async fn instantiate(
        &self,
        grants: Grants,
        preopens: Preopens,
    ) -> Result<(Store<CallState>, wasmtime::component::Instance), BackendError> {
        let config = &self.shared.config;
        let kind = if self.kind.is_empty() {
            Arc::from(self.source.to_string())
        } else {
            self.kind.clone()
        };
        // What a read returns is copied into the plugin's memory: a read
        // larger than its limit is refused by the storage capability, with
        // a message naming the object, before the host reads it whole.
        let grants = grants.with_read_limit(config.memory_limit as u64);
        let mut store = Store::new(
            &self.shared.engine,
            CallState::new(kind, grants, &preopens, config.memory_limit)
                .map_err(BackendError::Denied)?,
        );
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.deadline_ticks());
        store.epoch_deadline_trap();
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| self.fault(e, &store))?;
        self.shared
            .stats
            .instantiated
            .fetch_add(1, Ordering::Relaxed);
        Ok((store, instance))
    }

    /// A warm instance of this plugin set up with exactly `key`, if one waits.
    pub(crate) fn take_warm(&self, key: &AccessKey) -> Option<Warm> {
        let mut warm = self
            .shared
            .warm
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let at = warm
            .iter()
            .rposition(|w| w.plugin == self.id && w.key.as_ref() == Some(key))?;
        let taken = warm.remove(at).filter(Warm::dirs_unchanged);
        if taken.is_some() {
            self.shared.stats.reused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Keep `w` for a later call with the same key; the oldest warm instance
    /// goes when there are too many. One whose grants are never shared, or
    /// that may not serve again, is dropped.
    pub(crate) fn park(&self, w: Warm) {
        if w.key.is_none() || w.plugin != self.id || !w.reusable() {
            return;
        }
        let evicted = {
            let mut warm = self
                .shared
                .warm
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            warm.push_back(w);
            (warm.len() > MAX_WARM).then(|| warm.pop_front()).flatten()
        };
        // Dropped outside the lock: freeing an instance resets its memory.
        drop(evicted);
    }

    /// Count a call served by an instance kept by its client.
    pub(crate) fn count_reuse(&self) {
        self.shared.stats.reused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// One call's deadline in epoch ticks from now.
    pub(crate) fn deadline_ticks(&self) -> u64 {
        let ticks = self.shared.config.call_timeout.as_millis() / EPOCH_TICK.as_millis() + 1;
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }

    /// Turn a wasmtime failure into a typed error for this plugin.
    pub(crate) fn fault(&self, err: wasmtime::Error, store: &Store<CallState>) -> BackendError {
        let kind = self.kind_label();
        let state = store.data();
        if state.limiter.hit {
            return BackendError::MemoryLimit {
                kind,
                limit: self.shared.config.memory_limit as u64,
            };
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => BackendError::Deadline {
                kind,
                limit: self.shared.config.call_timeout,
            },
            Some(trap) => {
                let stderr = state.stderr_text();
                let detail = if stderr.is_empty() {
                    trap.to_string()
                } else {
                    format!("{trap}; it printed: {stderr}")
                };
                BackendError::Crashed { kind, detail }
            }
            None => BackendError::Runtime {
                kind,
                detail: format!("{err:#}"),
            },
        }
    }

    pub(crate) fn kind_label(&self) -> String {
        if self.kind.is_empty() {
            self.source.to_string()
        } else {
            self.kind.to_string()
        }
    }
}

/// The host capabilities among a component's import names
/// (`tether:backend/sql@0.1.3`, `wasi:http/outgoing-handler@0.2.6`, ...).
fn host_imports(names: &[String], describes_fs: bool) -> Vec<&'static str> {
    let imports = |prefix: &str| names.iter().any(|n| n.starts_with(prefix));
    [
        ("storage", imports("tether:backend/storage@")),
        ("tree", imports("tether:backend/tree@")),
        ("sql", imports("tether:backend/sql@")),
        ("wasi:http", imports("wasi:http/")),
        ("filesystem", describes_fs && imports("wasi:filesystem/")),
    ]
    .into_iter()
    .filter_map(|(name, yes)| yes.then_some(name))
    .collect()
}

fn empty_descriptor() -> Descriptor {
    Descriptor {
        kind: String::new(),
        maturity: String::new(),
        capabilities: Vec::new(),
        volatile_keys: Vec::new(),
        local_path_keys: Vec::new(),
        local_path_prefixes: Vec::new(),
        storage_keys: Vec::new(),
        tree_keys: Vec::new(),
        promote_hint: String::new(),
        abi: String::new(),
    }
}

/// The capability names the contract defines (`Capability::ALL`'s names).
pub const KNOWN_CAPABILITIES: &[&str] = &{
    let mut names = [""; Capability::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Capability::ALL[i].as_str();
        i += 1;
    }
    names
};

/// A descriptor as the host takes it from the descriptor cache: JSON, then
/// the checks every `describe` answer passes. For the property tests and
/// fuzz targets; the cache reads through the same two steps.
#[doc(hidden)]
pub fn parse_descriptor(bytes: &[u8]) -> Result<Descriptor, String> {
    let d: Descriptor = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    validate_descriptor(&d)?;
    Ok(d)
}

fn validate_descriptor(d: &Descriptor) -> Result<(), String> {
    let kind_ok = !d.kind.is_empty()
        && d.kind.len() <= crate::model::manifest::MAX_KIND_LEN
        && d.kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !kind_ok {
        return Err(format!(
            "kind \"{}\" must be 1 to {} lowercase letters, digits, '-' or '_'",
            crate::model::display::quote(&d.kind),
            crate::model::manifest::MAX_KIND_LEN
        ));
    }
    if !d.declares(Capability::Fingerprint) {
        return Err(format!(
            "kind {} does not declare FINGERPRINT, which every backend must",
            d.kind
        ));
    }
    if !matches!(d.maturity.as_str(), "stable" | "experimental") {
        return Err(format!(
            "maturity {:?} must be \"stable\" or \"experimental\"",
            d.maturity
        ));
    }
    if !abi_compatible(&d.abi) {
        return Err(format!(
            "it was built against tether:backend@{}, which this host ({HOST_ABI}) cannot serve",
            d.abi
        ));
    }
    Ok(())
}

/// Same rule as wasmtime's linker and export lookup: `0.minor` versions are
/// compatible across patches (a 0.1.0 plugin on this 0.1.3 host, and a 0.1.4
/// one too: whatever it adds is optional), other minors and majors are not.
fn abi_compatible(abi: &str) -> bool {
    let parts = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parts(abi), parts(HOST_ABI)) {
        (Some((0, a)), Some((0, b))) => a == b,
        (Some((a, _)), Some((b, _))) => a == b && a != 0,
        _ => false,
    }
}

/// A component starts with the component-model layer in its header
/// (`\0asm`, version 0x0d, layer 1); a core module has layer 0.
fn wasmparser_is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && &bytes[0..4] == b"\0asm" && bytes[6..8] == [1, 0]
}

/// How much of a freed instance's linear memory and tables is reset in place
/// rather than returned to the kernel (see [`build_engine`]). Chosen by
/// measurement, not derived: 4, 16 and 64 MiB timed alike on a 10,000-object
/// `status --snapshot`; the smallest bounds what a slot keeps mapped.
const KEEP_RESIDENT: usize = 4 << 20;

fn build_engine(config: &RuntimeConfig) -> Result<Engine, PluginError> {
    let mut wt = Config::new();
    wt.wasm_component_model(true);
    wt.epoch_interruption(true);
    // Plugins are WASI p2 components: no component-model async, so turn off
    // its per-call bookkeeping.
    wt.concurrency_support(false);
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(config.max_instances)
        .total_core_instances(config.max_instances * 4)
        .total_memories(config.max_instances * 2)
        .total_tables(config.max_instances * 4)
        .total_stacks(config.max_instances)
        .max_memory_size(config.memory_limit.max(1 << 20));
    // A command may run thousands of short instances (one per object on its
    // own store). Freeing each by `madvise` costs a TLB shootdown across the
    // process's threads (the profile of a 10,000-object `status --snapshot`:
    // a quarter of its time); instead a slot's first pages stay mapped and
    // are zeroed in place, only the pages the instance dirtied where the
    // kernel can say which (`PAGEMAP_SCAN`, Linux 6.7+).
    pooling
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let pooled = {
        let mut c = wt.clone();
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        Engine::new(&c)
    };
    match pooled {
        Ok(engine) => Ok(engine),
        Err(e) => {
            // Pooling reserves address space up front; where that is refused
            // (small ulimits, 39-bit VMs), the on-demand allocator still works.
            tracing::debug!("pooling allocator unavailable, using on-demand: {e:#}");
            Engine::new(&wt).map_err(|e| PluginError::Engine(format!("{e:#}")))
        }
    }
}

fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("tether-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .expect("spawn the epoch ticker thread");
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::{GLOBAL_BUILDS, Runtime, abi_compatible};

    #[test]
    fn the_global_runtime_is_built_once_however_many_threads_ask() {
        // Fan-out workers and the thread warming plugins may ask at once:
        // all must end up with the one engine.
        let runtimes: Vec<Runtime> = std::thread::scope(|s| {
            let asking: Vec<_> = (0..8)
                .map(|_| s.spawn(|| Runtime::global().expect("an engine")))
                .collect();
            asking.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let first = &runtimes[0].shared;
        assert!(runtimes.iter().all(|rt| Arc::ptr_eq(&rt.shared, first)));
        assert!(Arc::ptr_eq(&Runtime::global().unwrap().shared, first));
        // Not merely handed the same one: no other engine was built and
        // thrown away (this test binary's other tests ask for it too).
        assert_eq!(GLOBAL_BUILDS.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn every_0_1_patch_is_compatible_and_nothing_else() {
        for abi in ["0.1.0", "0.1.1", "0.1.7"] {
            assert!(abi_compatible(abi), "{abi}");
        }
        for abi in ["0.2.0", "0.0.9", "1.0.0", "1.1.0", "", "0", "x.y", "0.x.0"] {
            assert!(!abi_compatible(abi), "{abi:?}");
        }
    }
}
