//! Typed calls into a plugin for one object.
//!
//! An [`ObjectClient`] binds a plugin to one object's locator and config. Each
//! method is one plugin call in a fresh store: instantiate from the
//! `InstancePre`, `configure`, then the method itself, under the runtime's
//! deadline and memory limit. The storage grants of the call are the URIs the
//! locator holds under the plugin's declared storage keys (plus any scratch
//! URIs the caller grants explicitly, as the conformance harness does); the
//! `tree` grants likewise are the local paths under its tree keys, and the
//! hash cache is the dataset's when the engine names it
//! ([`ObjectClient::with_hash_cache`]). A plugin that exports `describe-fs`
//! also gets the local directories under its filesystem keys preopened
//! (and the harness's scratch path); no other plugin gets any. The origins
//! its `wasi:http` requests may reach, and the credentials the host adds to
//! them, are resolved per object too (`http.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::model::canonical;
use crate::vcs::pin_push::PinRemote;

use super::bindings::types as wit;
use super::bindings::{backend_iface, verify_many_iface};
use super::error::BackendError;
use super::git_guard::GitGuard;
use super::host::{CallState, Preopens};
use super::http::HttpAccess;
use super::runtime::{Plugin, Warm};
use super::sql::{SqlAccess, SqlGrants, dotted_get, dotted_set};
use super::storage::{Grants, S3Resolution};
use super::tree::{Tree, TreeGrants};
use super::types::{
    Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Target, VerifyReport, VerifyStatus,
    json_in, json_out,
};

/// One call, with its arguments in wire form.
enum Call {
    ValidateLocator,
    Identity,
    EffectiveCapabilities(String),
    Fingerprint(Option<String>),
    Pin(String, String),
    Unpin(wit::PinRef),
    ListPins,
    Verify(String, Option<wit::PinRef>, bool),
    /// `verify-many` (since 0.1.5): the items and `deep`.
    VerifyMany(Vec<verify_many_iface::VerifyItem>, bool),
    Fork(wit::Target, String, wit::Expected),
    DeleteWorkingRef(String),
    WorkingRefBlockers(String),
    ListWorkingRefs,
    RenamePin(wit::PinRef, String, String),
    RenameWorkingRef(String, String),
    Promote(wit::Target, wit::Expected),
    Merge(wit::Target, String, wit::Expected),
    AncestorOf(String, String),
    Open(wit::Target, bool),
    History(Option<String>, u32),
    Diff(String, String, Option<String>, Option<String>),
    Listing(String),
    Create(String),
    Owner,
    IsRefEmpty(Vec<String>),
    DeleteStore(String),
    CheckQuiescence(Option<String>),
    BranchScope,
    RefNamespace,
    StateAddressable(String),
    HarnessNewObject(String),
    HarnessMutate(Option<String>),
    HarnessFreshLocator(String),
}

impl Call {
    /// How many deadlines the call gets: one, or one per pin of a
    /// `verify-many`, which answers what as many `verify` calls would.
    fn weight(&self) -> usize {
        match self {
            Call::VerifyMany(items, _) => items.len().max(1),
            _ => 1,
        }
    }
}

/// What a call returned, in wire form.
enum Reply {
    Unit,
    Json(String),
    Text(String),
    OptText(Option<String>),
    Strings(Vec<String>),
    OptBool(Option<bool>),
    Bool(bool),
    Pin(wit::PinRef),
    Verify(wit::VerifyReport),
    VerifyMany(Vec<Result<wit::VerifyReport, wit::Error>>),
    Handle(wit::Handle),
    History(Vec<wit::HistoryEntry>),
    Diff(wit::ObjectDiff),
}

/// A plugin bound to one object.
#[derive(Clone)]
pub struct ObjectClient {
    plugin: Arc<Plugin>,
    locator: String,
    config: String,
    grants: Vec<String>,
    tree_grants: Vec<String>,
    /// Local directories preopened for each call (`describe-fs`).
    fs_grants: Vec<String>,
    hash_cache: Option<PathBuf>,
    /// Host-resolved settings for the `s3://` storage grants.
    s3: Option<S3Resolution>,
    /// The dataset's checkout, which no preopened directory may overlap.
    checkout: Option<PathBuf>,
    /// The SQL connections this object's calls may open (`describe-net`).
    sql: Arc<SqlGrants>,
    /// The origins its `wasi:http` requests may reach.
    http: Arc<HttpAccess>,
    /// A git object's network remote: the host pushes its pin tags there
    /// (and deletes them) with the user's git, outside the sandbox.
    pin_remote: Option<Arc<PinRemote>>,
    /// The instance this client keeps between its calls
    /// ([`ObjectClient::resident`]); `None`: each call finds its own.
    resident: Option<Arc<ResidentSlot>>,
}

/// What one call may reach besides `tree`: storage URIs and directories to
/// preopen.
#[derive(Debug, Clone, Default)]
struct Access {
    storage: Vec<String>,
    /// Settings the `s3://` grants open with; `None`: the environment's.
    s3: Option<S3Resolution>,
    fs: Vec<String>,
    sql: Arc<SqlGrants>,
    http: Arc<HttpAccess>,
}

impl std::fmt::Debug for ObjectClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectClient")
            .field("kind", &self.plugin.kind())
            .field("locator", &self.locator)
            .finish()
    }
}

impl Plugin {
    /// A client for the object at `locator`, configured with `config` (the
    /// `[backends.<kind>]` table, `{}` when none).
    pub fn object(self: &Arc<Self>, locator: &Value, config: &Value) -> ObjectClient {
        self.object_with_secrets(locator, config, &Map::new())
    }

    /// [`Plugin::object`] with what `.tether/secrets.toml` gives this object
    /// (its `[objects."<key>"]` entry): values under the plugin's filesystem
    /// keys override the locator's for the directories preopened
    /// (`fs_grants`), and reach the plugin in its config under the same key;
    /// so do its values under the plugin's HTTP URL keys, which with the
    /// locator and config decide the origins its requests may reach
    /// (`http.rs`). Database addresses under its `sql-keys` are looked up in
    /// the locator, then the entry, then `config` ([`SqlGrants::resolve`]);
    /// the plugin's copies of them lose their passwords. Nothing else of the
    /// entry enters the sandbox, and no HTTP token does.
    pub fn object_with_secrets(
        self: &Arc<Self>,
        locator: &Value,
        config: &Value,
        secret: &Map<String, Value>,
    ) -> ObjectClient {
        let values = |keys: &[String]| -> Vec<String> {
            keys.iter()
                .filter_map(|k| key_value(locator, config, k))
                .collect()
        };
        let mut config = config.clone();
        if let Value::Object(c) = &mut config {
            for key in self.filesystem_keys() {
                if let Some(v) = secret.get(key) {
                    c.insert(key.clone(), v.clone());
                }
            }
        }
        let mut plugin_locator = locator.clone();
        let sql = SqlGrants::resolve(self.sql_keys(), &mut plugin_locator, &mut config, secret);
        let secret_value = Value::Object(secret.clone());
        for grant in self.http_grants() {
            if let Some(v) = dotted_get(&secret_value, &grant.url_key) {
                dotted_set(&mut config, &grant.url_key, v.clone());
            }
        }
        let access = HttpAccess::resolve(
            self.kind(),
            self.http_grants(),
            locator,
            &config,
            secret,
            |var| std::env::var(var).ok(),
        );
        access.strip(&mut config);
        ObjectClient {
            plugin: self.clone(),
            locator: json_in(&plugin_locator),
            config: json_in(&config),
            grants: values(&self.descriptor().storage_keys),
            // Local paths only: `TreeGrants` grants nothing for a relative
            // path or a URL, so a request for one is refused.
            tree_grants: values(&self.descriptor().tree_keys),
            fs_grants: self
                .filesystem_dirs(locator, secret)
                .into_iter()
                .map(|(_, dir)| dir)
                .collect(),
            hash_cache: None,
            s3: None,
            checkout: None,
            sql: Arc::new(sql),
            http: Arc::new(access),
            pin_remote: (self.kind() == "git")
                .then(|| PinRemote::resolve(locator, secret))
                .flatten()
                .map(Arc::new),
            resident: None,
        }
    }

    /// The directories an object's calls get as a real filesystem, as
    /// (filesystem key, absolute path): see `fs_grants.rs`.
    pub fn filesystem_dirs(
        &self,
        locator: &Value,
        secret: &Map<String, Value>,
    ) -> Vec<(String, String)> {
        super::fs_grants::directories(self.filesystem_keys(), locator, secret)
    }

    /// A client for the conformance harness, with `scratch_uri` granted.
    pub fn harness(
        self: &Arc<Self>,
        scratch_uri: &str,
        config: &Value,
    ) -> Result<HarnessClient, BackendError> {
        if !self.has_harness() {
            return Err(BackendError::Capability(format!(
                "the {} plugin exports no harness",
                self.kind()
            )));
        }
        // The harness's configuration comes from whoever runs the
        // conformance suite, not from a clone: it may name origins, tokens
        // and `allow_http` as secrets.toml does.
        let http = self.harness_http(&Value::Object(Map::new()), config);
        Ok(HarnessClient {
            plugin: self.clone(),
            scratch: scratch_uri.to_string(),
            config: json_in(config),
            sql_scratch: None,
            http,
        })
    }
}

/// The string a descriptor's key names: a locator field, or with a dotted
/// key (`catalog.warehouse`) a nested one, looked up in the locator first and
/// then in the object's configuration (where a catalog's warehouse is set
/// once for every table).
fn key_value(locator: &Value, config: &Value, key: &str) -> Option<String> {
    let find = |root: &Value| {
        if let Some(v) = root.get(key) {
            return v.as_str().map(str::to_string);
        }
        let mut at = root;
        for part in key.split('.') {
            at = at.get(part)?;
        }
        at.as_str().map(str::to_string)
    };
    find(locator).or_else(|| key.contains('.').then(|| find(config)).flatten())
}

impl Plugin {
    /// The HTTP access of a harness call on `locator`: `config` counts as
    /// secrets.toml's.
    fn harness_http(&self, locator: &Value, config: &Value) -> Arc<HttpAccess> {
        let secret = config.as_object().cloned().unwrap_or_default();
        Arc::new(HttpAccess::resolve(
            self.kind(),
            self.http_grants(),
            locator,
            config,
            &secret,
            |var| std::env::var(var).ok(),
        ))
    }
}

/// Calls into a plugin's `harness` (conformance only).
#[derive(Clone)]
pub struct HarnessClient {
    plugin: Arc<Plugin>,
    scratch: String,
    /// The configuration as given (JSON, with any token or password: the
    /// plugin gets it without them).
    config: String,
    /// A database address the harness gets under each of the plugin's
    /// `sql-keys` the locator does not name (conformance's SQL scratch).
    sql_scratch: Option<String>,
    /// The origins the harness's own calls may reach (`--config` naming
    /// them, as secrets.toml would).
    http: Arc<HttpAccess>,
}

impl HarnessClient {
    /// Grant `address` (a database address, its password kept by the host)
    /// to the harness's calls and its objects' under each of the plugin's
    /// `sql-keys` that the locator leaves unset.
    pub fn with_sql_scratch(mut self, address: &str) -> Self {
        self.sql_scratch = Some(address.to_string());
        self
    }

    /// The config a call of the harness or one of its objects resolves
    /// its SQL grants from: the SQL scratch under every `sql-key` unset.
    fn sql_config(&self) -> Value {
        let mut config: Value = serde_json::from_str(&self.config).unwrap_or_default();
        if let (Some(address), Value::Object(map)) = (&self.sql_scratch, &mut config) {
            for key in self.plugin.sql_keys() {
                map.entry(key.clone())
                    .or_insert_with(|| Value::String(address.clone()));
            }
        }
        config
    }

    /// Make a fresh system under the scratch URI; returns its locator.
    pub async fn new_object(&self) -> Result<Value, BackendError> {
        let reply = run(
            &self.plugin,
            &self.harness_config(),
            "{}",
            self.access(),
            self.scratch_tree(),
            Call::HarnessNewObject(self.scratch.clone()),
            None,
        )
        .await?;
        json_out(&expect_json(reply)?, "harness locator")
    }

    /// Write something new to `locator` at `working_ref` (the base when none).
    pub async fn mutate(
        &self,
        locator: &Value,
        working_ref: Option<&str>,
    ) -> Result<(), BackendError> {
        run(
            &self.plugin,
            &self.harness_config(),
            &json_in(locator),
            self.access(),
            self.scratch_tree(),
            Call::HarnessMutate(working_ref.map(str::to_string)),
            None,
        )
        .await
        .map(|_| ())
    }

    /// A locator under the scratch URI where no store exists yet.
    pub async fn fresh_locator(&self) -> Result<Value, BackendError> {
        let reply = run(
            &self.plugin,
            &self.harness_config(),
            "{}",
            self.access(),
            self.scratch_tree(),
            Call::HarnessFreshLocator(self.scratch.clone()),
            None,
        )
        .await?;
        json_out(&expect_json(reply)?, "harness locator")
    }

    /// A client for an object the harness made, with the scratch URI granted
    /// besides what the locator names.
    pub fn object(&self, locator: &Value) -> ObjectClient {
        let mut client = self.plugin.object(locator, &self.sql_config());
        if self.sql_scratch.is_some() {
            // The harness wrote the scratch's address into the locator as it
            // saw it, without the password: the host still has it.
            let scratch = self.scratch_sql_grants();
            client.sql = Arc::new((*client.sql).clone().with_passwords_of(&scratch));
        }
        client.http = self.plugin.harness_http(locator, &self.sql_config());
        client.grants.push(self.scratch.clone());
        client.tree_grants.push(self.scratch.clone());
        if !self.plugin.filesystem_keys().is_empty() {
            client.fs_grants.push(self.scratch.clone());
        }
        client
    }

    /// The SQL grants of the harness's own calls, and the config they see.
    fn scratch_sql(&self) -> (SqlGrants, String) {
        let mut config = self.sql_config();
        let grants = SqlGrants::resolve(
            self.plugin.sql_keys(),
            &mut Value::Object(Default::default()),
            &mut config,
            &Map::new(),
        );
        self.http.strip(&mut config);
        (grants, json_in(&config))
    }

    fn scratch_sql_grants(&self) -> SqlGrants {
        self.scratch_sql().0
    }

    /// The config the harness's own calls are configured with.
    fn harness_config(&self) -> String {
        self.scratch_sql().1
    }

    /// The scratch URI as a storage grant, and as a preopened directory for
    /// a plugin that works on a real filesystem.
    fn access(&self) -> Access {
        let fs = if self.plugin.filesystem_keys().is_empty() {
            Vec::new()
        } else {
            vec![self.scratch.clone()]
        };
        Access {
            storage: vec![self.scratch.clone()],
            s3: None,
            fs,
            sql: Arc::new(self.scratch_sql_grants()),
            http: self.http.clone(),
        }
    }

    /// The scratch URI as a `tree` grant too (when it is a local path).
    fn scratch_tree(&self) -> Tree {
        Tree::new(TreeGrants::new([self.scratch.clone()]), None)
    }
}

fn unexpected(what: &str) -> BackendError {
    BackendError::Other(format!("internal error: unexpected reply shape for {what}"))
}

fn expect_json(r: Reply) -> Result<String, BackendError> {
    match r {
        Reply::Json(s) => Ok(s),
        _ => Err(unexpected("json")),
    }
}

macro_rules! reply {
    ($reply:expr, $variant:ident) => {
        match $reply {
            Reply::$variant(v) => Ok(v),
            _ => Err(unexpected(stringify!($variant))),
        }
    };
}

impl ObjectClient {
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// The locator, in canonical JSON.
    pub fn locator_json(&self) -> &str {
        &self.locator
    }

    /// Use the dataset's hash cache (`<dataset>/.tether/cache/file-hashes.json`)
    /// for this object's `tree` calls; without one, hashes are cached in
    /// this process's memory only.
    pub fn with_hash_cache(mut self, path: impl Into<PathBuf>) -> Self {
        self.hash_cache = Some(path.into());
        self
    }

    /// Refuse every call whose preopened directories overlap `root` (the
    /// dataset's checkout): its files came with the clone, so a committed
    /// locator naming a repository there must not be handed to the plugin
    /// (spec/10, "Security model"; `add` refuses one up front). `root` is
    /// compared as given, so give it with links resolved.
    pub fn with_checkout(mut self, root: impl Into<PathBuf>) -> Self {
        self.checkout = Some(root.into());
        self
    }

    fn refuse_checkout_grants(&self) -> Result<(), BackendError> {
        let Some(checkout) = &self.checkout else {
            return Ok(());
        };
        // Nothing to compare (a storage-only plugin): no path resolved per call.
        if self.fs_grants.is_empty() {
            return Ok(());
        }
        let real = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        for dir in &self.fs_grants {
            let d = real(std::path::Path::new(dir));
            if d.starts_with(checkout) || checkout.starts_with(&d) {
                return Err(BackendError::Denied(format!(
                    "{} overlaps the dataset's checkout ({}), whose files came with the clone: \
                     a {} object must live outside it. Register one outside the checkout \
                     (or give its path in .tether/secrets.toml)",
                    crate::model::fsutil::shown(std::path::Path::new(dir)).display(),
                    checkout.display(),
                    self.plugin.kind()
                )));
            }
        }
        Ok(())
    }

    /// Open this object's `s3://` storage grants with `settings`, which the
    /// host resolved from secrets.toml and the environment (without, the
    /// environment alone). The plugin never sees them.
    pub fn with_s3_settings(mut self, settings: S3Resolution) -> Self {
        self.s3 = Some(settings);
        self
    }

    /// The cloud (`s3://`, `gs://`, `az://`, `abfs[s]://`) URIs among this
    /// object's storage grants: the ones the host resolves settings for.
    pub fn s3_grants(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().map(String::as_str).filter(|g| {
            ["s3://", "gs://", "az://", "abfs://", "abfss://"]
                .iter()
                .any(|s| g.starts_with(s))
        })
    }

    /// This call's `tree` capability: the granted paths, and the dataset's
    /// hash cache when there is one.
    fn tree(&self) -> Tree {
        Tree::new(
            TreeGrants::new(self.tree_grants.iter().cloned()),
            self.hash_cache.clone(),
        )
    }

    fn access(&self) -> Access {
        Access {
            storage: self.grants.clone(),
            s3: self.s3.clone(),
            fs: self.fs_grants.clone(),
            sql: self.sql.clone(),
            http: self.http.clone(),
        }
    }

    /// Give this object's database addresses that hold no password one from
    /// secrets.toml's `[uris."<prefix>"]` entry for the address (as
    /// `uri_settings` finds it): `password`, or `password_env` naming an
    /// environment variable. The plugin never sees it.
    pub fn with_sql_uri_settings(
        mut self,
        uri_settings: impl Fn(&str) -> Option<Map<String, Value>>,
    ) -> Self {
        if !self.sql.is_empty() {
            let grants = (*self.sql)
                .clone()
                .with_uri_settings(uri_settings, |v| std::env::var(v).ok());
            self.sql = Arc::new(grants);
        }
        self
    }

    /// The connection names this object's calls may open, with their
    /// addresses as the plugin sees them (no password).
    pub fn sql_grants(&self) -> &SqlGrants {
        &self.sql
    }

    /// This client (and its clones) keeping one instance between its calls,
    /// until the last of them is dropped: an object's several calls in a row
    /// (fingerprint, identity and capabilities; a pin and its listing) cost
    /// one instantiation. As a batch does, it relies on plugins keeping no
    /// state between calls; every call still gets its own deadline and a
    /// fresh `tree`, `sql` and `wasi:http` state. Hold it only for one
    /// object's work: each one holds a slot of the runtime's instance pool.
    pub fn resident(mut self) -> Self {
        self.resident = Some(Arc::new(ResidentSlot::new(self.plugin.clone())));
        self
    }

    async fn call(&self, call: Call) -> Result<Reply, BackendError> {
        self.refuse_checkout_grants()?;
        let tree = self.tree();
        // Boxed: a call's state (an instance being made, the component
        // model's lowering) is tens of kilobytes, and held inline it made
        // every caller's future as big, before it ever ran. A fan-out holds
        // one future per object, so 10,000 objects' futures touched hundreds
        // of megabytes; boxed, only the calls running hold that state.
        Box::pin(run(
            &self.plugin,
            &self.config,
            &self.locator,
            self.access(),
            tree,
            call,
            self.resident.as_deref(),
        ))
        .await
    }

    async fn json(&self, call: Call, what: &str) -> Result<Value, BackendError> {
        json_out(&expect_json(self.call(call).await?)?, what)
    }

    pub async fn validate_locator(&self) -> Result<(), BackendError> {
        self.call(Call::ValidateLocator).await.map(|_| ())
    }

    pub async fn identity(&self) -> Result<Value, BackendError> {
        self.json(Call::Identity, "identity").await
    }

    pub async fn effective_capabilities(
        &self,
        policy: &Value,
    ) -> Result<Vec<String>, BackendError> {
        reply!(
            self.call(Call::EffectiveCapabilities(json_in(policy)))
                .await?,
            Strings
        )
    }

    pub async fn fingerprint(&self, working_ref: Option<&str>) -> Result<Value, BackendError> {
        self.json(Call::Fingerprint(working_ref.map(str::to_string)), "state")
            .await
    }

    pub async fn pin(&self, state: &Value, pin_id: &str) -> Result<PinRef, BackendError> {
        let pin: Result<PinRef, BackendError> = reply!(
            self.call(Call::Pin(json_in(state), pin_id.to_string()))
                .await?,
            Pin
        )
        .map(Into::into);
        let pin = match (pin, &self.pin_remote) {
            (Ok(pin), Some(remote)) => self.push_pin(remote, pin).await,
            (pin, _) => pin,
        };
        crate::fault::on_ok("store.pin", pin)
    }

    /// Push a new pin's tag to the network remote; when that fails, take
    /// back the local tag this call created, so a pin exists only once it is
    /// pushed (as the plugin does for a remote on this machine).
    async fn push_pin(&self, remote: &PinRemote, pin: PinRef) -> Result<PinRef, BackendError> {
        let Err(e) = remote.push_tag(&pin.ref_name).await else {
            return Ok(pin);
        };
        let local = if pin.created {
            match self.call(Call::Unpin((&pin).into())).await {
                Ok(_) => "the local tag was removed".to_string(),
                Err(d) => format!("removing the local tag failed too: {d}"),
            }
        } else {
            "the local tag was there before and is kept".to_string()
        };
        Err(BackendError::Backend(format!(
            "pin {} was not pushed to {}, so it is no pin: {e}; {local}. Fix the remote, then \
             retry",
            pin.ref_name,
            remote.label()
        )))
    }

    pub async fn unpin(&self, pin: &PinRef) -> Result<(), BackendError> {
        // The remote first: a tag left there alone would be a pin nobody
        // releases, so its failure keeps the local tag too.
        if let Some(remote) = &self.pin_remote {
            remote.delete_tag(&pin.ref_name).await.map_err(|e| {
                BackendError::Backend(format!(
                    "cannot delete {} in {}: {e}; the local tag is kept",
                    pin.ref_name,
                    remote.label()
                ))
            })?;
        }
        let done = self.call(Call::Unpin(pin.into())).await;
        crate::fault::on_ok("store.unpin", done.map(|_| ()))
    }

    pub async fn list_pins(&self) -> Result<Vec<String>, BackendError> {
        reply!(self.call(Call::ListPins).await?, Strings)
    }

    /// Verify many (state, pin) pairs of this object in one instance, in
    /// order; one result per pair. The states are manifests' own maps,
    /// written as JSON without being copied into a [`Value`] first.
    ///
    /// One `verify-many` call when the plugin exports it (since 0.1.5: it
    /// reads its system and tags once for all of them), else one `verify`
    /// call per pair; the answers are the same.
    pub async fn verify_batch(
        &self,
        items: &[(&Map<String, Value>, Option<PinRef>)],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport, BackendError>>, BackendError> {
        let reports = self.verify_local(items, deep).await?;
        let Some(remote) = &self.pin_remote else {
            return Ok(reports);
        };
        // The store's answers, then the pins' tags in the network remote.
        let tags = remote.tags().await;
        Ok(reports
            .into_iter()
            .zip(items)
            .map(|(report, (state, pin))| {
                Ok(match pin {
                    Some(pin) => on_remote(remote, &tags, state, pin, report?),
                    None => report?,
                })
            })
            .collect())
    }

    /// What the plugin answers for `items`: one `verify-many` call when it
    /// has one, else a `verify` call per item in one batch.
    async fn verify_local(
        &self,
        items: &[(&Map<String, Value>, Option<PinRef>)],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport, BackendError>>, BackendError> {
        if self.plugin.has_verify_many() {
            let wire = items
                .iter()
                .map(|(state, pin)| verify_many_iface::VerifyItem {
                    state: canonical::map_to_string(state),
                    pin: pin.as_ref().map(Into::into),
                })
                .collect();
            return self.verify_many_call(wire, deep).await;
        }
        tracing::debug!(
            kind = %self.plugin.kind(),
            pins = items.len(),
            "verify: one call per pin"
        );
        let calls = items
            .iter()
            .map(|(state, pin)| {
                Call::Verify(
                    canonical::map_to_string(state),
                    pin.as_ref().map(Into::into),
                    deep,
                )
            })
            .collect();
        self.refuse_checkout_grants()?;
        let tree = self.tree();
        let replies = run_batch(
            &self.plugin,
            &self.config,
            &self.locator,
            self.access(),
            tree,
            calls,
            self.resident.as_deref(),
        )
        .await?;
        Ok(replies
            .into_iter()
            .map(|r| r.and_then(|r| reply!(r, Verify).map(Into::into)))
            .collect())
    }

    async fn verify_many_call(
        &self,
        items: Vec<verify_many_iface::VerifyItem>,
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport, BackendError>>, BackendError> {
        let asked = items.len();
        // Counted by tests: one line per call, however many pins it holds.
        tracing::debug!(
            kind = %self.plugin.kind(),
            pins = asked,
            "verify-many: one call"
        );
        let answers = reply!(self.call(Call::VerifyMany(items, deep)).await?, VerifyMany)?;
        if answers.len() != asked {
            return Err(BackendError::Runtime {
                kind: self.plugin.kind_label(),
                detail: format!(
                    "verify-many returned {} answers for {asked} pins",
                    answers.len()
                ),
            });
        }
        Ok(answers
            .into_iter()
            .map(|a| a.map(Into::into).map_err(BackendError::from))
            .collect())
    }

    pub async fn verify(
        &self,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport, BackendError> {
        let report: VerifyReport = reply!(
            self.call(Call::Verify(json_in(state), pin.map(Into::into), deep))
                .await?,
            Verify
        )
        .map(Into::into)?;
        match (&self.pin_remote, pin, state.as_object()) {
            (Some(remote), Some(pin), Some(state)) => {
                let tags = remote.tags().await;
                Ok(on_remote(remote, &tags, state, pin, report))
            }
            _ => Ok(report),
        }
    }

    pub async fn fork(
        &self,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String, BackendError> {
        let forked = reply!(
            self.call(Call::Fork(source.into(), name.to_string(), expected.into()))
                .await?,
            Text
        );
        crate::fault::on_ok("store.fork", forked)
    }

    pub async fn delete_working_ref(&self, working_ref: &str) -> Result<(), BackendError> {
        let done = self
            .call(Call::DeleteWorkingRef(working_ref.to_string()))
            .await;
        crate::fault::on_ok("store.delete-ref", done.map(|_| ()))
    }

    pub async fn working_ref_blockers(
        &self,
        working_ref: &str,
    ) -> Result<Option<String>, BackendError> {
        reply!(
            self.call(Call::WorkingRefBlockers(working_ref.to_string()))
                .await?,
            OptText
        )
    }

    pub async fn list_working_refs(&self) -> Result<Vec<String>, BackendError> {
        reply!(self.call(Call::ListWorkingRefs).await?, Strings)
    }

    pub async fn rename_pin(
        &self,
        old: &PinRef,
        state: &Value,
        new_id: &str,
    ) -> Result<PinRef, BackendError> {
        let new: PinRef = reply!(
            self.call(Call::RenamePin(
                old.into(),
                json_in(state),
                new_id.to_string()
            ))
            .await?,
            Pin
        )
        .map(Into::into)?;
        if let Some(remote) = &self.pin_remote
            && new.ref_name != old.ref_name
        {
            remote
                .push_tag(&new.ref_name)
                .await
                .map_err(BackendError::Backend)?;
            remote
                .delete_tag(&old.ref_name)
                .await
                .map_err(BackendError::Backend)?;
        }
        Ok(new)
    }

    pub async fn rename_working_ref(&self, old: &str, new: &str) -> Result<String, BackendError> {
        reply!(
            self.call(Call::RenameWorkingRef(old.to_string(), new.to_string()))
                .await?,
            Text
        )
    }

    pub async fn promote(
        &self,
        source: &Target,
        expected: &Expected,
    ) -> Result<Value, BackendError> {
        let moved = self
            .json(Call::Promote(source.into(), expected.into()), "state")
            .await;
        crate::fault::on_ok("store.move", moved)
    }

    pub async fn merge(
        &self,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value, BackendError> {
        let merged = self
            .json(
                Call::Merge(source.into(), message.to_string(), expected.into()),
                "state",
            )
            .await;
        crate::fault::on_ok("store.move", merged)
    }

    pub async fn ancestor_of(
        &self,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>, BackendError> {
        reply!(
            self.call(Call::AncestorOf(json_in(ancestor), json_in(descendant)))
                .await?,
            OptBool
        )
    }

    /// A native handle. A database address the plugin hands back without
    /// its password gets the one the host learned for it (`open-uri`): the
    /// user asked for a usable handle, and the password is theirs (the CLI
    /// redacts it unless `--with-password`).
    pub async fn open(&self, target: &Target, read_only: bool) -> Result<Handle, BackendError> {
        let mut handle: Handle = reply!(
            self.call(Call::Open(target.into(), read_only)).await?,
            Handle
        )?
        .try_into()?;
        handle.address = super::sql::with_learned_password(
            self.plugin.kind(),
            &self.http.origins(),
            &handle.address,
        );
        Ok(handle)
    }

    pub async fn history(
        &self,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>, BackendError> {
        let entries = reply!(
            self.call(Call::History(from_ref.map(str::to_string), limit))
                .await?,
            History
        )?;
        Ok(entries.into_iter().map(Into::into).collect())
    }

    pub async fn diff(
        &self,
        a: &Value,
        b: &Value,
        listing_a: Option<&str>,
        listing_b: Option<&str>,
    ) -> Result<ObjectDiff, BackendError> {
        let call = Call::Diff(
            json_in(a),
            json_in(b),
            listing_a.map(str::to_string),
            listing_b.map(str::to_string),
        );
        reply!(self.call(call).await?, Diff).map(Into::into)
    }

    pub async fn listing(&self, state: &Value) -> Result<Option<String>, BackendError> {
        reply!(self.call(Call::Listing(json_in(state))).await?, OptText)
    }

    pub async fn create(&self, owner: &str) -> Result<Value, BackendError> {
        self.json(Call::Create(owner.to_string()), "state").await
    }

    pub async fn owner(&self) -> Result<Option<String>, BackendError> {
        reply!(self.call(Call::Owner).await?, OptText)
    }

    pub async fn is_ref_empty(&self, ignoring: &[String]) -> Result<Option<bool>, BackendError> {
        reply!(
            self.call(Call::IsRefEmpty(ignoring.to_vec())).await?,
            OptBool
        )
    }

    pub async fn delete_store(&self, owner: &str) -> Result<(), BackendError> {
        let done = self.call(Call::DeleteStore(owner.to_string())).await;
        crate::fault::on_ok("store.delete-store", done.map(|_| ()))
    }

    pub async fn check_quiescence(&self, working_ref: Option<&str>) -> Result<(), BackendError> {
        self.call(Call::CheckQuiescence(working_ref.map(str::to_string)))
            .await
            .map(|_| ())
    }

    pub async fn branch_scope(&self) -> Result<String, BackendError> {
        reply!(self.call(Call::BranchScope).await?, Text)
    }

    pub async fn ref_namespace(&self) -> Result<String, BackendError> {
        reply!(self.call(Call::RefNamespace).await?, Text)
    }

    pub async fn state_addressable(&self, state: &Value) -> Result<bool, BackendError> {
        reply!(
            self.call(Call::StateAddressable(json_in(state))).await?,
            Bool
        )
    }
}

/// One call: in a warm instance set up with the same grants when one waits
/// (`slot`'s, or one the runtime kept), else in a fresh one.
async fn run(
    plugin: &Plugin,
    config: &str,
    locator: &str,
    grants: Access,
    tree: Tree,
    call: Call,
    slot: Option<&ResidentSlot>,
) -> Result<Reply, BackendError> {
    run_batch(plugin, config, locator, grants, tree, vec![call], slot)
        .await?
        .pop()
        .expect("one reply per call")
}

/// A batch of calls on one instance, bounded by one deadline per call: the
/// epoch deadline stops guest code, and this outer bound also covers time
/// spent waiting in host calls (storage), where epochs are not checked. When
/// the outer bound strikes, the instance goes with the future that held it.
async fn run_batch(
    plugin: &Plugin,
    config: &str,
    locator: &str,
    grants: Access,
    tree: Tree,
    calls: Vec<Call>,
    slot: Option<&ResidentSlot>,
) -> Result<Vec<Result<Reply, BackendError>>, BackendError> {
    let limit = plugin.shared.config.call_timeout;
    let weight: usize = calls.iter().map(Call::weight).sum();
    let n = u32::try_from(weight.max(1)).unwrap_or(u32::MAX);
    match tokio::time::timeout(
        limit.saturating_mul(n) + std::time::Duration::from_secs(1),
        run_inner_batch(plugin, config, locator, grants, tree, calls, slot),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(BackendError::Deadline {
            kind: plugin.kind_label(),
            limit,
        }),
    }
}

/// What an instance was set up with, as far as another object may share it:
/// the configuration its `configure` got, the storage grants (and the
/// settings `s3://` ones open with) and the directories it was given when
/// instantiated, and the `tree` grants its calls get. Two objects whose keys
/// are equal can reach exactly the same things, so whatever one call leaves
/// in the instance's memory the next could have read itself. Objects with
/// `sql` or `wasi:http` grants get no key: their connections and credentials
/// stay their own, and their instances are never shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AccessKey {
    config: String,
    storage: Vec<String>,
    s3: Option<S3Resolution>,
    fs: Vec<String>,
    tree: Vec<(PathBuf, PathBuf)>,
    hash_cache: Option<PathBuf>,
}

impl AccessKey {
    fn of(config: &str, access: &Access, tree: &Tree) -> Option<AccessKey> {
        if !access.sql.is_empty() || !access.http.is_empty() {
            return None;
        }
        Some(AccessKey {
            config: config.to_string(),
            storage: access.storage.clone(),
            s3: access.s3.clone(),
            fs: access.fs.clone(),
            tree: tree.granted(),
            hash_cache: tree.cache_path().map(PathBuf::from),
        })
    }
}

/// The instance one client keeps between its calls ([`ObjectClient::resident`]).
/// When the client goes, the instance is offered to the runtime for another
/// object with the same grants, or dropped.
pub(crate) struct ResidentSlot {
    plugin: Arc<Plugin>,
    warm: std::sync::Mutex<Option<Warm>>,
}

impl ResidentSlot {
    fn new(plugin: Arc<Plugin>) -> Self {
        ResidentSlot {
            plugin,
            warm: std::sync::Mutex::new(None),
        }
    }

    fn take(&self) -> Option<Warm> {
        self.warm
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .filter(Warm::dirs_unchanged)
    }

    /// Keep `w` for the client's next call; a client making calls
    /// concurrently keeps one, and the other is offered to the runtime.
    fn put(&self, w: Warm) {
        let spare = {
            let mut slot = self
                .warm
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if slot.is_none() && w.reusable() {
                *slot = Some(w);
                None
            } else {
                Some(w)
            }
        };
        if let Some(w) = spare {
            self.plugin.park(w);
        }
    }
}

impl Drop for ResidentSlot {
    fn drop(&mut self) {
        if let Some(w) = self.take() {
            self.plugin.park(w);
        }
    }
}

/// Several calls on one object in one instance: instantiated and configured
/// once, so a batch (verifying every pin an object ever had) costs one
/// instantiation rather than one per call. Plugins keep no state between
/// calls, so this is observably the same as separate calls. After a trap the
/// instance is gone: the calls left get the same error.
///
/// The instance may be a warm one: the client's own ([`ResidentSlot`]), or one
/// the runtime kept from a call whose [`AccessKey`] is equal to this one's.
/// Each call still gets its own deadline, memory cap and `tree`, `sql` and
/// `wasi:http` state; only an instance whose calls all ended cleanly (no trap,
/// no git file put back, memory and stderr small) is kept for another.
async fn run_inner_batch(
    plugin: &Plugin,
    config: &str,
    locator: &str,
    grants: Access,
    tree: Tree,
    calls: Vec<Call>,
    slot: Option<&ResidentSlot>,
) -> Result<Vec<Result<Reply, BackendError>>, BackendError> {
    // Only `create` and the harness may bring a missing directory into being
    // (an empty one, removed again when the call fails); every other call
    // on a missing directory gets no preopen and finds nothing. They always
    // run in a fresh instance, which is never kept: its preopens are what
    // the call created.
    let create_missing = calls.iter().any(|c| {
        matches!(
            c,
            Call::Create(_)
                | Call::HarnessNewObject(_)
                | Call::HarnessMutate(_)
                | Call::HarnessFreshLocator(_)
        )
    });
    let key = (!create_missing)
        .then(|| AccessKey::of(config, &grants, &tree))
        .flatten();
    let (mut warm, forget_buckets, created) = match slot
        .filter(|_| !create_missing)
        .and_then(ResidentSlot::take)
    {
        Some(w) => {
            plugin.count_reuse();
            (w, false, Vec::new())
        }
        None => match key.as_ref().and_then(|k| plugin.take_warm(k)) {
            Some(w) => (w, true, Vec::new()),
            None => {
                let (preopens, created) = Preopens::for_paths(&grants.fs, create_missing)
                    .map_err(BackendError::Denied)?;
                match start(plugin, config, grants.storage, grants.s3, preopens).await {
                    Ok(mut w) => {
                        w.key = key;
                        (w, false, created)
                    }
                    Err(e) => {
                        remove_created(&created);
                        return Err(e);
                    }
                }
            }
        },
    };
    let guard = GitGuard::take(warm.host_dirs.iter().map(PathBuf::as_path));
    let sql =
        SqlAccess::new(grants.sql, plugin.shared.config.sql).with_origins(grants.http.origins());
    let mut result = run_calls(
        plugin,
        &mut warm,
        locator,
        (tree, sql, grants.http),
        forget_buckets,
        calls,
    )
    .await;
    let restored = guard.restore_changed();
    if !restored.is_empty() {
        let files: Vec<String> = restored.iter().map(|p| p.display().to_string()).collect();
        result = Err(BackendError::Denied(format!(
            "the {} plugin changed {}, which git runs commands from or finds the \
             repository by; no plugin may: put back as it was, and the call refused",
            plugin.kind_label(),
            files.join(", ")
        )));
    }
    let failed = match &result {
        Ok(replies) => replies.iter().any(Result::is_err),
        Err(_) => true,
    };
    if failed {
        remove_created(&created);
    }
    // Kept only after calls that all ended as calls do: a plugin's own error
    // is an answer, a trap or a refusal by the host is not.
    let clean = restored.is_empty()
        && created.is_empty()
        && !create_missing
        && match &result {
            Ok(replies) => !replies.iter().any(|r| {
                matches!(r, Err(e) if e.is_contained_fault() || matches!(e, BackendError::Runtime { .. }))
            }),
            Err(_) => false,
        };
    if clean {
        match slot {
            Some(slot) => slot.put(warm),
            None => plugin.park(warm),
        }
    }
    result
}

/// Remove the directories a failed call created (only empty ones: whatever
/// the plugin wrote stays for the user to see).
fn remove_created(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// The storage grants of one call: the URIs, `s3://` ones opening with the
/// host-resolved settings when given (the environment's otherwise).
fn storage_grants(uris: Vec<String>, s3: Option<S3Resolution>) -> Grants {
    let grants = Grants::new(uris);
    match s3 {
        Some(s3) => grants.with_s3(s3),
        None => grants,
    }
}

/// A fresh instance with these storage grants and directories, configured
/// with `config`.
async fn start(
    plugin: &Plugin,
    config: &str,
    storage: Vec<String>,
    s3: Option<S3Resolution>,
    preopens: Preopens,
) -> Result<Warm, BackendError> {
    let host_dirs: Vec<PathBuf> = preopens.host_dirs().map(PathBuf::from).collect();
    let (mut store, instance) = plugin
        .instantiate(storage_grants(storage, s3), preopens)
        .await?;
    let s = &mut store;
    let backend = plugin
        .backend
        .load(&mut *s, &instance)
        .map_err(|e| plugin.fault(e, s))?;
    // `json` is a type alias of `string`, so the bindings take `&String`.
    let config = config.to_string();
    match backend.call_configure(&mut *s, &config).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(BackendError::from(e)),
        Err(e) => return Err(plugin.fault(e, s)),
    }
    Ok(Warm {
        plugin: plugin.id(),
        key: None,
        store,
        instance,
        backend,
        dir_ids: Warm::dir_ids_of(&host_dirs),
        host_dirs,
        calls: 0,
    })
}

/// The calls of a batch on `w`, in order, each with its own deadline and
/// this batch's `tree`, `sql` and `wasi:http` state.
async fn run_calls(
    plugin: &Plugin,
    w: &mut Warm,
    locator: &str,
    (tree, sql, http): (Tree, SqlAccess, Arc<HttpAccess>),
    forget_buckets: bool,
    calls: Vec<Call>,
) -> Result<Vec<Result<Reply, BackendError>>, BackendError> {
    let state = w.store.data_mut();
    state.begin_call(forget_buckets);
    state.set_tree(tree);
    state.set_sql(sql);
    if http.is_empty() {
        state.deny_http();
    } else {
        state.set_http(http, plugin.shared.config.http);
    }
    let locator = locator.to_string();
    let mut replies = Vec::with_capacity(calls.len());
    let total = calls.len();
    for call in calls {
        w.calls = w.calls.saturating_add(1);
        // Each call of a batch gets the whole deadline, as a lone call would
        // (a `verify-many` one per pin it answers, as its calls one by one).
        w.store
            .set_epoch_deadline(plugin.deadline_ticks().saturating_mul(call.weight() as u64));
        let reply = dispatch(
            plugin,
            &w.backend,
            &mut w.store,
            &w.instance,
            &locator,
            call,
        )
        .await;
        let trapped = matches!(&reply, Err(e) if e.is_contained_fault() || matches!(e, BackendError::Runtime { .. }));
        replies.push(reply);
        if trapped {
            let err = replies
                .last()
                .and_then(|r| r.as_ref().err())
                .cloned()
                .expect("just pushed");
            replies.resize_with(total, || Err(err.clone()));
            break;
        }
    }
    Ok(replies)
}

/// Run one call on an instance that is already configured.
async fn dispatch(
    plugin: &Plugin,
    backend: &backend_iface::Guest,
    s: &mut wasmtime::Store<CallState>,
    instance: &wasmtime::component::Instance,
    l: &String,
    call: Call,
) -> Result<Reply, BackendError> {
    let fault = |e: wasmtime::Error, s: &wasmtime::Store<_>| plugin.fault(e, s);
    macro_rules! go {
        ($fut:expr) => {
            match $fut.await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err(BackendError::from(e)),
                Err(e) => return Err(fault(e, s)),
            }
        };
    }
    let reply = match call {
        Call::ValidateLocator => {
            go!(backend.call_validate_locator(&mut *s, l));
            Reply::Unit
        }
        Call::Identity => Reply::Json(go!(backend.call_identity(&mut *s, l))),
        Call::EffectiveCapabilities(policy) => {
            Reply::Strings(go!(backend.call_effective_capabilities(&mut *s, l, &policy)))
        }
        Call::Fingerprint(wr) => {
            Reply::Json(go!(backend.call_fingerprint(&mut *s, l, wr.as_deref())))
        }
        Call::Pin(state, id) => Reply::Pin(go!(backend.call_pin(&mut *s, l, &state, &id))),
        Call::Unpin(pin) => {
            go!(backend.call_unpin(&mut *s, l, &pin));
            Reply::Unit
        }
        Call::ListPins => Reply::Strings(go!(backend.call_list_pins(&mut *s, l))),
        Call::Verify(state, pin, deep) => Reply::Verify(go!(backend.call_verify(
            &mut *s,
            l,
            &state,
            pin.as_ref(),
            deep
        ))),
        Call::VerifyMany(items, deep) => {
            let indices = plugin.verify_many.as_ref().ok_or_else(|| {
                BackendError::Capability(format!(
                    "the {} plugin does not export verify-many",
                    plugin.kind_label()
                ))
            })?;
            let guest = indices.load(&mut *s, instance).map_err(|e| fault(e, s))?;
            Reply::VerifyMany(go!(guest.call_verify_many(&mut *s, l, &items, deep)))
        }
        Call::Fork(source, name, expected) => {
            Reply::Text(go!(backend.call_fork(&mut *s, l, &source, &name, &expected)))
        }
        Call::DeleteWorkingRef(r) => {
            go!(backend.call_delete_working_ref(&mut *s, l, &r));
            Reply::Unit
        }
        Call::WorkingRefBlockers(r) => {
            Reply::OptText(go!(backend.call_working_ref_blockers(&mut *s, l, &r)))
        }
        Call::ListWorkingRefs => Reply::Strings(go!(backend.call_list_working_refs(&mut *s, l))),
        Call::RenamePin(old, state, new_id) => Reply::Pin(go!(
            backend.call_rename_pin(&mut *s, l, &old, &state, &new_id)
        )),
        Call::RenameWorkingRef(old, new) => {
            Reply::Text(go!(backend.call_rename_working_ref(&mut *s, l, &old, &new)))
        }
        Call::Promote(source, expected) => {
            Reply::Json(go!(backend.call_promote(&mut *s, l, &source, &expected)))
        }
        Call::Merge(source, message, expected) => Reply::Json(go!(
            backend.call_merge(&mut *s, l, &source, &message, &expected)
        )),
        Call::AncestorOf(a, d) => Reply::OptBool(go!(backend.call_ancestor_of(&mut *s, l, &a, &d))),
        Call::Open(target, ro) => Reply::Handle(go!(backend.call_open(&mut *s, l, &target, ro))),
        Call::History(from, limit) => Reply::History(go!(backend.call_history(
            &mut *s,
            l,
            from.as_deref(),
            limit
        ))),
        Call::Diff(a, b, la, lb) => Reply::Diff(go!(backend.call_diff(
            &mut *s,
            l,
            &a,
            &b,
            la.as_deref(),
            lb.as_deref()
        ))),
        Call::Listing(state) => Reply::OptText(go!(backend.call_listing(&mut *s, l, &state))),
        Call::Create(owner) => Reply::Json(go!(backend.call_create(&mut *s, l, &owner))),
        Call::Owner => Reply::OptText(go!(backend.call_owner(&mut *s, l))),
        Call::IsRefEmpty(ignoring) => {
            Reply::OptBool(go!(backend.call_is_ref_empty(&mut *s, l, &ignoring)))
        }
        Call::DeleteStore(owner) => {
            go!(backend.call_delete_store(&mut *s, l, &owner));
            Reply::Unit
        }
        Call::CheckQuiescence(wr) => {
            go!(backend.call_check_quiescence(&mut *s, l, wr.as_deref()));
            Reply::Unit
        }
        Call::BranchScope => Reply::Text(go!(backend.call_branch_scope(&mut *s, l))),
        Call::RefNamespace => Reply::Text(go!(backend.call_ref_namespace(&mut *s, l))),
        Call::StateAddressable(state) => {
            Reply::Bool(go!(backend.call_state_addressable(&mut *s, l, &state)))
        }
        Call::HarnessNewObject(_) | Call::HarnessMutate(_) | Call::HarnessFreshLocator(_) => {
            let indices = plugin.harness.as_ref().ok_or_else(|| {
                BackendError::Capability(format!(
                    "the {} plugin exports no harness",
                    plugin.kind_label()
                ))
            })?;
            let harness = indices.load(&mut *s, instance).map_err(|e| fault(e, s))?;
            match call {
                Call::HarnessNewObject(scratch) => {
                    Reply::Json(go!(harness.call_new_object(&mut *s, &scratch)))
                }
                Call::HarnessMutate(wr) => {
                    go!(harness.call_mutate(&mut *s, l, wr.as_deref()));
                    Reply::Unit
                }
                Call::HarnessFreshLocator(scratch) => {
                    Reply::Json(go!(harness.call_fresh_locator(&mut *s, &scratch)))
                }
                _ => unreachable!("matched above"),
            }
        }
    };
    Ok(reply)
}

/// A git pin on a network remote is a pin only while its tag is there too
/// (spec/11, `git`, "Pin"): a report the local tag passed is checked
/// against the remote's tags, as `ls-remote` listed them. Missing there is
/// `missing` (`tether repair` pushes it again); at another commit,
/// `drifted`; a remote that cannot be listed, `unknown`.
fn on_remote(
    remote: &PinRemote,
    tags: &Result<std::collections::BTreeMap<String, String>, String>,
    state: &Map<String, Value>,
    pin: &PinRef,
    local: VerifyReport,
) -> VerifyReport {
    if local.status != VerifyStatus::Ok {
        return local;
    }
    let tag = &pin.ref_name;
    let (status, message) = match tags {
        Err(e) => (
            VerifyStatus::Unknown,
            format!("the local tag {tag} is there, but the remote cannot be checked: {e}"),
        ),
        Ok(tags) => match (tags.get(tag), state.get("sha").and_then(Value::as_str)) {
            (None, _) => (
                VerifyStatus::Missing,
                format!(
                    "{tag} is missing in {}: only the local tag is left (`tether repair` pushes                      it again)",
                    remote.label()
                ),
            ),
            (Some(there), Some(sha)) if there != sha => (
                VerifyStatus::Drifted,
                format!(
                    "{tag} in {} names commit {there}, not the recorded {sha}",
                    remote.label()
                ),
            ),
            _ => return local,
        },
    };
    VerifyReport { status, message }
}
