//! The per-call store state and the host side of the imported interfaces
//! (`storage`, `tree`, `log`; `sql` is in `sql.rs`).
//!
//! Every call gets a fresh [`CallState`]: its storage grants come from the
//! object's locator (the keys the plugin's descriptor names as storage keys),
//! never from the plugin. WASI is linked with nothing granted: no environment,
//! no sockets, stdout discarded, stderr captured so a crash can be reported
//! with what the plugin printed; and no preopened directory, except for a
//! plugin that exports `describe-fs` (since 0.1.2), which gets exactly the
//! directories its locator names under those keys ([`Preopens`]).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{ResourceLimiter, Result as WtResult};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::tether::backend::{log, storage, tree, types};
use super::http::{HttpAccess, HttpLimits, HttpPolicy};
use super::sql::SqlAccess;
use super::storage::{self as cap, Bucket, Grants};
use super::tree::{self as tree_cap, Tree};

/// The host type behind the WIT `bucket` resource.
pub type BucketHandle = Bucket;

/// How much of a plugin's stderr is kept for error reports.
pub(crate) const STDERR_CAPACITY: usize = 16 * 1024;

/// The memory limiter of one call: a hard cap on linear memory, remembered when
/// hit so the trap can be reported as what it was.
pub(crate) struct Limiter {
    pub(crate) max_memory: usize,
    pub(crate) hit: bool,
    /// The linear memory granted so far (bytes): a warm instance this large
    /// is not kept.
    pub(crate) size: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> WtResult<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes exceeded (asked for {desired})",
                self.max_memory
            ));
        }
        self.size = self.size.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> WtResult<bool> {
        // Tables hold function references; a million is far beyond any real plugin.
        Ok(desired <= 1_000_000)
    }
}

/// The directories one call gets as a real filesystem (`describe-fs`): each
/// one the host directory, resolved (symlinks followed), and the path the
/// plugin sees it under (the locator's own absolute spelling, lexically
/// normalized). Inside, wasmtime-wasi resolves every path through `cap-std`,
/// so neither `..` nor a symlink leads out of the directory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preopens {
    dirs: Vec<(PathBuf, String)>,
}

impl Preopens {
    /// No directory at all: what every plugin without `describe-fs` gets.
    pub(crate) fn none() -> Self {
        Preopens::default()
    }

    /// The directories named by `paths` (locator values or a harness's scratch
    /// path). A relative path, a URL or an empty value grants nothing. A
    /// missing directory grants nothing either, unless `create_missing` (the
    /// `create` call and the harness's scratch), when it is created first and
    /// returned in the second list so a failed call can remove it again.
    pub(crate) fn for_paths(
        paths: &[String],
        create_missing: bool,
    ) -> Result<(Self, Vec<PathBuf>), String> {
        let mut dirs = Vec::new();
        let mut created = Vec::new();
        for raw in paths {
            let Some(guest) = normalize_absolute(raw) else {
                continue;
            };
            let path = Path::new(&guest);
            if !path.exists() {
                if !create_missing {
                    continue;
                }
                std::fs::create_dir_all(path)
                    .map_err(|e| format!("cannot create directory {guest}: {e}"))?;
                created.push(path.to_path_buf());
            }
            let host = crate::model::fsutil::canonicalize_once(path)
                .map_err(|e| format!("cannot resolve {guest}: {e}"))?;
            if !host.is_dir() {
                // A file is no directory to work in; the plugin reports it
                // missing when it looks.
                continue;
            }
            if !dirs.iter().any(|(_, g)| g == &guest) {
                dirs.push((host, guest));
            }
        }
        Ok((Preopens { dirs }, created))
    }

    /// The preopened directories' resolved host paths.
    pub(crate) fn host_dirs(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|(host, _)| host.as_path())
    }

    /// The preopened directories as (resolved host path, guest path).
    #[cfg(test)]
    pub(crate) fn dirs(&self) -> &[(PathBuf, String)] {
        &self.dirs
    }
}

/// `raw` as a lexically normalized absolute path (`.`, `..`, doubled and
/// trailing slashes gone), or `None` when it is not an absolute local path.
fn normalize_absolute(raw: &str) -> Option<String> {
    let path = Path::new(raw);
    if raw.contains("://") || !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out.to_str().map(str::to_string)
}

/// Everything one plugin call can reach.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    grants: Grants,
    /// The `tree` capability: its own grants (the locator's tree keys) and
    /// the dataset's hash cache, set by the client after instantiation.
    tree: Tree,
    /// The `sql` capability: the connection names granted (none until
    /// [`CallState::set_sql`]) and the statement limits.
    sql: SqlAccess,
    kind: Arc<str>,
    stderr: MemoryOutputPipe,
    /// Where this call's stderr starts (a warm instance served earlier calls).
    stderr_from: usize,
    /// Buckets this instance opened, by normalised URI: opening one again
    /// (the memory plugin opens its store per call, a verify batch makes
    /// hundreds of calls) reuses it, with the root directory it keeps open.
    opened: HashMap<String, Bucket>,
    http_ctx: WasiHttpCtx,
    /// Which origins `wasi:http` requests may reach: none until the client
    /// grants the object's ([`CallState::set_http`]).
    http: HttpPolicy,
}

impl CallState {
    pub(crate) fn new(
        kind: Arc<str>,
        grants: Grants,
        preopens: &Preopens,
        max_memory: usize,
    ) -> Result<Self, String> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut builder = WasiCtx::builder();
        builder.stderr(stderr.clone());
        for (host, guest) in &preopens.dirs {
            builder
                .preopened_dir(host, guest, FsPerms::ReadWrite)
                .map_err(|e| format!("cannot open directory {guest} for the plugin: {e:#}"))?;
        }
        let wasi = builder.build();
        Ok(CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory,
                hit: false,
                size: 0,
            },
            grants,
            tree: Tree::default(),
            http: HttpPolicy::deny_all(kind.clone()),
            sql: SqlAccess::default(),
            kind,
            stderr,
            stderr_from: 0,
            opened: HashMap::new(),
            http_ctx: WasiHttpCtx::new(),
        })
    }

    /// Grant the call the object's HTTP origins, under `limits`.
    pub(crate) fn set_http(&mut self, access: Arc<HttpAccess>, limits: HttpLimits) {
        self.http = HttpPolicy::new(self.kind.clone(), access, limits);
    }

    /// Take back every HTTP origin (what a fresh instance starts with).
    pub(crate) fn deny_http(&mut self) {
        self.http = HttpPolicy::deny_all(self.kind.clone());
    }

    /// Grant the call its `tree` capability (none until this is called).
    pub(crate) fn set_tree(&mut self, tree: Tree) {
        self.tree = tree;
    }

    /// Grant the call its `sql` capability (none until this is called).
    pub(crate) fn set_sql(&mut self, sql: SqlAccess) {
        self.sql = sql;
    }

    pub(crate) fn sql_access(&self) -> &SqlAccess {
        &self.sql
    }

    pub(crate) fn table_mut(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The plugin's kind, for log lines.
    pub(crate) fn kind_name(&self) -> Arc<str> {
        self.kind.clone()
    }

    /// What the plugin wrote to stderr during the call (a panic message, say).
    pub(crate) fn stderr_text(&self) -> String {
        let all = self.stderr.contents();
        String::from_utf8_lossy(all.get(self.stderr_from..).unwrap_or_default())
            .trim()
            .to_string()
    }

    /// Bytes of stderr kept so far, over every call of the instance.
    pub(crate) fn stderr_len(&self) -> usize {
        self.stderr.contents().len()
    }

    /// Start another call on this (warm) instance: what it reports of
    /// stderr starts here, and with `forget_buckets` (an instance that last
    /// served another object, or waited) no bucket an earlier call opened is
    /// handed out again: each is opened afresh, at its root as it is now.
    pub(crate) fn begin_call(&mut self, forget_buckets: bool) {
        self.stderr_from = self.stderr_len();
        if forget_buckets {
            self.opened.clear();
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl types::Host for CallState {}

impl log::Host for CallState {
    async fn log(&mut self, level: log::Level, message: String) -> WtResult<()> {
        let kind = &*self.kind;
        match level {
            log::Level::Trace => tracing::trace!(plugin = kind, "{message}"),
            log::Level::Debug => tracing::debug!(plugin = kind, "{message}"),
            log::Level::Info => tracing::info!(plugin = kind, "{message}"),
            log::Level::Warn => tracing::warn!(plugin = kind, "{message}"),
            log::Level::Error => tracing::error!(plugin = kind, "{message}"),
        }
        Ok(())
    }
}

fn to_wit_error(e: cap::StorageError) -> storage::StorageError {
    use cap::StorageError as E;
    match e {
        E::Denied(m) => storage::StorageError::Denied(m),
        E::AlreadyExists(m) => storage::StorageError::AlreadyExists(m),
        E::PreconditionFailed(m) => storage::StorageError::PreconditionFailed(m),
        E::Invalid(m) => storage::StorageError::Invalid(m),
        E::Io(m) => storage::StorageError::Io(m),
    }
}

fn to_wit_meta(m: cap::ObjectMeta) -> storage::ObjectMeta {
    storage::ObjectMeta {
        key: m.key,
        size: m.size,
        etag: m.etag,
        last_modified: m.last_modified,
    }
}

type StorageResult<T> = WtResult<Result<T, storage::StorageError>>;

impl CallState {
    fn bucket(&self, handle: &Resource<BucketHandle>) -> WtResult<Bucket> {
        Ok(self.table.get(handle)?.clone())
    }
}

impl storage::Host for CallState {}

impl storage::HostBucket for CallState {
    async fn open(&mut self, uri: String) -> StorageResult<Resource<BucketHandle>> {
        let location = match self.grants.check(&uri) {
            Ok(location) => location,
            Err(e) => {
                tracing::warn!(plugin = &*self.kind, uri, "storage open refused: {e}");
                return Ok(Err(to_wit_error(e)));
            }
        };
        if let Some(bucket) = self.opened.get(location.uri()) {
            return Ok(Ok(self.table.push(bucket.clone())?));
        }
        let uri = location.uri().to_owned();
        match Bucket::open(location).await {
            Ok(bucket) => {
                self.opened.insert(uri, bucket.clone());
                Ok(Ok(self.table.push(bucket)?))
            }
            Err(e) => Ok(Err(to_wit_error(e))),
        }
    }

    async fn uri(&mut self, handle: Resource<BucketHandle>) -> WtResult<String> {
        Ok(self.bucket(&handle)?.uri().to_string())
    }

    async fn get(
        &mut self,
        handle: Resource<BucketHandle>,
        key: String,
    ) -> StorageResult<Option<storage::StoredObject>> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .get(&key)
            .await
            .map(|o| {
                o.map(|o| storage::StoredObject {
                    meta: to_wit_meta(o.meta),
                    data: o.data.to_vec(),
                })
            })
            .map_err(to_wit_error))
    }

    async fn get_range(
        &mut self,
        handle: Resource<BucketHandle>,
        key: String,
        offset: u64,
        length: u64,
    ) -> StorageResult<Option<Vec<u8>>> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .get_range(&key, offset, length)
            .await
            .map_err(to_wit_error))
    }

    async fn head(
        &mut self,
        handle: Resource<BucketHandle>,
        key: String,
    ) -> StorageResult<Option<storage::ObjectMeta>> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .head(&key)
            .await
            .map(|m| m.map(to_wit_meta))
            .map_err(to_wit_error))
    }

    async fn head_version(
        &mut self,
        handle: Resource<BucketHandle>,
        key: String,
        version: Option<String>,
    ) -> StorageResult<Option<storage::VersionedMeta>> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .head_version(&key, version.as_deref())
            .await
            .map(|m| {
                m.map(|m| storage::VersionedMeta {
                    meta: to_wit_meta(m.meta),
                    version: m.version,
                })
            })
            .map_err(to_wit_error))
    }

    async fn put(
        &mut self,
        handle: Resource<BucketHandle>,
        key: String,
        data: Vec<u8>,
        mode: storage::PutMode,
    ) -> StorageResult<storage::ObjectMeta> {
        let bucket = self.bucket(&handle)?;
        let mode = match mode {
            storage::PutMode::Overwrite => cap::PutMode::Overwrite,
            storage::PutMode::Create => cap::PutMode::Create,
            storage::PutMode::IfMatch(etag) => cap::PutMode::IfMatch(etag),
        };
        Ok(bucket
            .put(&key, data, mode)
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error))
    }

    async fn list(
        &mut self,
        handle: Resource<BucketHandle>,
        prefix: String,
        cursor: Option<String>,
        limit: u32,
    ) -> StorageResult<storage::ListPage> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .list(&prefix, cursor, limit)
            .await
            .map(|p| storage::ListPage {
                objects: p.objects.into_iter().map(to_wit_meta).collect(),
                next: p.next,
            })
            .map_err(to_wit_error))
    }

    async fn delete(&mut self, handle: Resource<BucketHandle>, key: String) -> StorageResult<bool> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket.delete(&key).await.map_err(to_wit_error))
    }

    async fn copy(
        &mut self,
        handle: Resource<BucketHandle>,
        src: String,
        dst: String,
        overwrite: bool,
    ) -> StorageResult<storage::ObjectMeta> {
        let bucket = self.bucket(&handle)?;
        Ok(bucket
            .copy(&src, &dst, overwrite)
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error))
    }

    async fn drop(&mut self, handle: Resource<BucketHandle>) -> WtResult<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

fn to_wit_tree_error(e: tree_cap::TreeError) -> tree::TreeError {
    use tree_cap::TreeError as E;
    match e {
        E::Denied(m) => tree::TreeError::Denied(m),
        E::NotFound(m) => tree::TreeError::NotFound(m),
        E::Invalid(m) => tree::TreeError::Invalid(m),
        E::Io(m) => tree::TreeError::Io(m),
    }
}

fn to_wit_entry(e: tree_cap::Entry) -> tree::Entry {
    tree::Entry {
        path: e.path,
        kind: match e.kind {
            tree_cap::EntryKind::File => tree::EntryKind::File,
            tree_cap::EntryKind::Dir => tree::EntryKind::Dir,
            tree_cap::EntryKind::Symlink => tree::EntryKind::Symlink,
        },
        size: e.size,
        mtime_ns: e.mtime_ns,
        ctime_ns: e.ctime_ns,
        inode: e.inode,
        link_target: e.link_target,
        sha256: e.sha256,
    }
}

type TreeResult<T> = WtResult<Result<T, tree::TreeError>>;

/// Run a tree operation on a blocking thread: walks and hashing are
/// filesystem-bound and must not stall the async runtime. Takes clones, not
/// `&CallState`, which is not `Sync`.
async fn tree_op<T: Send + 'static>(
    tree: Tree,
    kind: Arc<str>,
    op: impl FnOnce(&Tree) -> Result<T, tree_cap::TreeError> + Send + 'static,
) -> TreeResult<T> {
    let result = tokio::task::spawn_blocking(move || op(&tree))
        .await
        .map_err(|e| wasmtime::format_err!("tree worker failed: {e}"))?;
    if let Err(tree_cap::TreeError::Denied(m)) = &result {
        tracing::warn!(plugin = &*kind, "tree access refused: {m}");
    }
    Ok(result.map_err(to_wit_tree_error))
}

impl CallState {
    fn tree_parts(&self) -> (Tree, Arc<str>) {
        (self.tree.clone(), self.kind.clone())
    }
}

impl tree::Host for CallState {
    async fn walk(
        &mut self,
        root: String,
        options: tree::WalkOptions,
    ) -> TreeResult<tree::WalkPage> {
        let options = tree_cap::WalkOptions {
            hash: options.hash,
            cursor: options.cursor,
            limit: options.limit,
        };
        let (t, kind) = self.tree_parts();
        let page = tree_op(t, kind, move |t| t.walk(&root, &options)).await?;
        Ok(page.map(|p| tree::WalkPage {
            entries: p.entries.into_iter().map(to_wit_entry).collect(),
            next: p.next,
        }))
    }

    async fn stat(&mut self, path: String) -> TreeResult<Option<tree::Entry>> {
        let (t, kind) = self.tree_parts();
        let entry = tree_op(t, kind, move |t| t.stat(&path)).await?;
        Ok(entry.map(|e| e.map(to_wit_entry)))
    }

    async fn hash_file(&mut self, path: String) -> TreeResult<String> {
        let (t, kind) = self.tree_parts();
        tree_op(t, kind, move |t| t.hash_file(&path)).await
    }

    async fn realpath(&mut self, path: String) -> TreeResult<String> {
        let (t, kind) = self.tree_parts();
        tree_op(t, kind, move |t| t.realpath(&path)).await
    }

    async fn summarize(&mut self, root: String, listing: bool) -> TreeResult<tree::ContentSummary> {
        let (t, kind) = self.tree_parts();
        let summary = tree_op(t, kind, move |t| t.summarize(&root, listing)).await?;
        Ok(summary.map(|s| tree::ContentSummary {
            count: s.count,
            size: s.size,
            digest: s.digest,
            listing: s.listing,
        }))
    }

    async fn remove_empty_dir(&mut self, path: String) -> TreeResult<bool> {
        let (t, kind) = self.tree_parts();
        tree_op(t, kind, move |t| t.remove_empty_dir(&path)).await
    }
}

#[cfg(test)]
mod tests {
    use super::Preopens;

    #[test]
    fn preopens_are_resolved_absolute_directories_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        let t = tmp.path().to_str().unwrap();
        let paths = [
            format!("{t}/link/"),
            format!("{t}/real/../link"),
            "relative/dir".to_string(),
            format!("file://{t}/real"),
            format!("{t}/file"),
            format!("{t}/missing"),
            String::new(),
        ];
        let (preopens, created) = Preopens::for_paths(&paths, false).unwrap();
        assert!(created.is_empty());
        // One directory: the symlink resolved on the host side, the locator's
        // spelling (normalized) on the guest side; the two spellings that
        // normalize alike are one preopen.
        assert_eq!(
            preopens.dirs(),
            [(real.canonicalize().unwrap(), format!("{t}/link"))]
        );
        assert!(!tmp.path().join("missing").exists());

        let (preopens, created) = Preopens::for_paths(&[format!("{t}/missing")], true).unwrap();
        assert_eq!(created, [tmp.path().join("missing")]);
        assert_eq!(preopens.dirs().len(), 1);
        assert!(tmp.path().join("missing").is_dir());
    }
}
