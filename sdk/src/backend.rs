//! The [`Backend`] trait: the `backend` interface in Rust terms.
//!
//! A backend names its locator type ([`Backend::Locator`], any serde type);
//! the glue parses each call's locator into it once, and a locator that does
//! not parse is refused with the contract's `invalid` error (ConfigError)
//! before the method runs. States, policies and configs are
//! [`serde_json::Value`]s; the glue parses the canonical JSON text that crosses
//! the boundary and prints results canonically, so a backend never handles
//! JSON text. Every method but
//! [`Backend::describe`], [`Backend::identity`] and [`Backend::fingerprint`] has
//! a default: the spec's default where it gives one, a capability error
//! otherwise. A backend writes only what its system has.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::tether::backend::types as wit;
use crate::error::{Error, Result};
use crate::json::canonical_json;

pub use wit::{Descriptor, HistoryEntry, PinRef, VerifyReport, VerifyStatus};

/// The contract version this SDK implements (`descriptor.abi`).
pub const ABI_VERSION: &str = tether_contract::ABI_VERSION;

/// The optional `describe-ext` interface (since 0.1.1): what a plugin says
/// about itself beyond [`Descriptor`]. Exported only when `export!` names
/// `describe_ext`; a plugin without it is treated as saying nothing.
pub trait DescribeExt: Backend {
    /// The settings this kind accepts from the committed tether.toml's
    /// `[backends.<kind>]`, as dotted paths (`storage_options.region`); every
    /// other setting belongs in `.tether/secrets.toml`. Empty: none.
    fn config_keys(&self) -> Vec<String>;
}

/// The optional `describe-fs` interface (since 0.1.2): the real-filesystem
/// grant. Exported only when `export!` names `describe_fs`.
pub trait DescribeFs: Backend {
    /// Locator keys naming local directories this plugin needs as a real,
    /// read-write filesystem (`std::fs` on the locator's path works inside
    /// that directory and nowhere else).
    fn filesystem_keys(&self) -> Vec<String>;
}

/// One origin a plugin asks to reach over `wasi:http` ([`DescribeNet`]).
pub use crate::describe_net_bindings::exports::tether::backend::describe_net::HttpGrant;

impl HttpGrant {
    /// A grant of the origin of the URL under dotted key `url_key`, with no
    /// default and no token.
    pub fn url(url_key: &str) -> HttpGrant {
        HttpGrant {
            url_key: url_key.into(),
            default_url: None,
            token_key: None,
            token_env_key: None,
            default_token_env: None,
        }
    }
}

/// The optional `describe-net` interface (since 0.1.3): the network a plugin
/// asks for. Exported only when `export!` names `describe_net`; a plugin
/// without it reaches no network at all. Both lists default to empty.
pub trait DescribeNet: Backend {
    /// The origins this plugin may send HTTP requests to (`wit/net.wit`,
    /// `http-grant`): each is the origin of a URL the object's locator or
    /// configuration holds under a key.
    fn http_grants(&self) -> Vec<HttpGrant> {
        Vec::new()
    }

    /// Dotted keys (`metadata`, `catalog.uri`) whose values, in the locator or
    /// else the configuration, are database addresses; the plugin opens one
    /// with [`crate::sql::Connection::open`] by its key. The value the
    /// plugin sees has any password removed: the host connects.
    fn sql_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

/// One question of [`Backend::verify_many`]: what [`Backend::verify`] takes
/// besides the locator.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyItem {
    pub state: Value,
    pub pin: Option<PinRef>,
}

/// Prefix of every native pin ref (`tether.<pin-id>`).
pub const PIN_REF_PREFIX: &str = tether_contract::names::REF_PREFIX;

/// Prefix of every working ref (`tether.ws.<dataset-id>.<slug>`).
pub const WORKING_REF_PREFIX: &str = tether_contract::names::WORKING_REF_PREFIX;

pub use tether_contract::Capability;

/// The capabilities by their spec names (`cap::PIN` is [`Capability::Pin`]),
/// for descriptors: `descriptor("mysys", &[cap::FINGERPRINT, cap::PIN])`.
pub mod cap {
    use super::Capability;

    pub const FINGERPRINT: Capability = Capability::Fingerprint;
    pub const ADDRESSABLE: Capability = Capability::Addressable;
    pub const PIN: Capability = Capability::Pin;
    pub const FORK: Capability = Capability::Fork;
    pub const CHEAP_FINGERPRINT: Capability = Capability::CheapFingerprint;
    pub const RETENTION_BOUND: Capability = Capability::RetentionBound;
    pub const NEEDS_QUIESCENCE: Capability = Capability::NeedsQuiescence;
    pub const ATOMIC_REF: Capability = Capability::AtomicRef;
    pub const CONDITIONAL_REF: Capability = Capability::ConditionalRef;
    pub const DIFF: Capability = Capability::Diff;
    pub const HISTORY: Capability = Capability::History;
    pub const BRANCH_IS_STORAGE: Capability = Capability::BranchIsStorage;
    pub const PROMOTE: Capability = Capability::Promote;
    pub const MERGE: Capability = Capability::Merge;
    pub const CREATE: Capability = Capability::Create;
}

/// A descriptor with the common defaults (stable, no key roles, this SDK's
/// ABI); override fields with struct update syntax:
///
/// ```
/// use tether_sdk::{cap, descriptor, Descriptor};
/// let d = Descriptor {
///     storage_keys: vec!["root".into()],
///     ..descriptor("mysys", &[cap::FINGERPRINT, cap::PIN])
/// };
/// assert_eq!(d.abi, tether_sdk::ABI_VERSION);
/// ```
pub fn descriptor(kind: &str, capabilities: &[Capability]) -> Descriptor {
    Descriptor {
        kind: kind.to_owned(),
        maturity: "stable".to_owned(),
        capabilities: Capability::names(capabilities),
        volatile_keys: Vec::new(),
        local_path_keys: Vec::new(),
        local_path_prefixes: Vec::new(),
        storage_keys: Vec::new(),
        tree_keys: Vec::new(),
        promote_hint: String::new(),
        abi: ABI_VERSION.to_owned(),
    }
}

/// What a fork, promote, merge or open starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The locator's base ref.
    Base,
    /// A working ref `fork` returned.
    WorkingRef(String),
    /// The state a pin holds.
    Pinned(PinRef),
    /// A recorded state.
    Recorded(Value),
}

/// The head a caller reviewed before a ref move.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// Move without checking.
    Unconditional,
    /// The ref must not exist yet.
    Absent,
    /// The ref must hold this state (content keys compared).
    At(Value),
}

/// What `open` returns: a native address and typed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Handle {
    pub type_name: String,
    pub address: String,
    pub read_only: bool,
    pub fields: Value,
}

/// One implementation serves every object of its kind; per-object addressing
/// travels in `locator`. The SDK makes a `Default` instance per component
/// instance, calls [`Backend::configure`] on it, then the real method.
pub trait Backend: Default + 'static {
    /// Where an object is: the locator's fields, parsed once per call by the
    /// glue (`#[derive(Deserialize)]`; `serde_json::Value` to take it raw).
    type Locator: DeserializeOwned;

    /// What this plugin is: kind, maturity, capabilities, key roles.
    fn describe(&self) -> Descriptor;

    /// `[backends.<kind>]` config merged with secrets (`{}` when absent).
    /// Default: accept anything.
    fn configure(&mut self, config: Value) -> Result<()> {
        let _ = config;
        Ok(())
    }

    /// Cheap checks at `add` time. Default: accept.
    fn validate_locator(&self, locator: &Self::Locator) -> Result<()> {
        let _ = locator;
        Ok(())
    }

    /// The subset of the locator that names the system (hashed into pin ids).
    fn identity(&self, locator: &Self::Locator) -> Result<Value>;

    /// Capabilities under `policy`. Default: the descriptor's, minus `PIN`
    /// when the policy says `{"pin": "record"}`.
    fn effective_capabilities(
        &self,
        locator: &Self::Locator,
        policy: &Value,
    ) -> Result<Vec<String>> {
        let _ = locator;
        let mut caps = self.describe().capabilities;
        if policy.get("pin").and_then(Value::as_str) == Some("record") {
            caps.retain(|c| c != cap::PIN.as_str());
        }
        Ok(caps)
    }

    /// The current state at `working_ref`, or at the base (honouring `at`).
    fn fingerprint(&self, locator: &Self::Locator, working_ref: Option<&str>) -> Result<Value>;

    /// Create `tether.<pin_id>` at `state`; idempotent, saying which it did.
    fn pin(&self, locator: &Self::Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let _ = (locator, state, pin_id);
        Err(self.unsupported("pin"))
    }

    /// Delete a pin's ref; already gone is success, still there is an error.
    fn unpin(&self, locator: &Self::Locator, pin: &PinRef) -> Result<()> {
        let _ = (locator, pin);
        Err(self.unsupported("unpin"))
    }

    /// Pin ids (without `tether.`) that exist natively, every dataset's.
    fn list_pins(&self, locator: &Self::Locator) -> Result<Vec<String>> {
        let _ = locator;
        Err(self.unsupported("list_pins"))
    }

    /// Whether the pin resolves to `state`; without a pin, unknown unless `deep`.
    fn verify(
        &self,
        locator: &Self::Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let _ = (locator, state, pin, deep);
        Err(self.unsupported("verify"))
    }

    /// [`Backend::verify`] of each item, in order (`verify-many`, since
    /// 0.1.5; every SDK plugin exports it). `verify --all-history` asks one
    /// object about every pin it ever had in one call: a backend whose system
    /// lists its tags cheaply overrides this to open the system and read its
    /// tags once for all items. The answers must be exactly what `verify`
    /// gives item by item; an `Err` of the whole call answers every item
    /// with it (the system cannot be opened). The default asks `verify`.
    fn verify_many(
        &self,
        locator: &Self::Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        Ok(items
            .iter()
            .map(|item| self.verify(locator, &item.state, item.pin.as_ref(), deep))
            .collect())
    }

    /// Create or reset branch `name` at `source`, conditional on `expected`.
    fn fork(
        &self,
        locator: &Self::Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        let _ = (locator, source, name, expected);
        Err(self.unsupported("fork"))
    }

    /// Delete a branch `fork` created (never the base); already gone is success.
    fn delete_working_ref(&self, locator: &Self::Locator, working_ref: &str) -> Result<()> {
        let _ = (locator, working_ref);
        Err(self.unsupported("delete_working_ref"))
    }

    /// Why `working_ref` cannot be deleted now. Default: nothing blocks it.
    fn working_ref_blockers(
        &self,
        locator: &Self::Locator,
        working_ref: &str,
    ) -> Result<Option<String>> {
        let _ = (locator, working_ref);
        Ok(None)
    }

    /// Native branches named `tether.ws.*`. Default: none.
    fn list_working_refs(&self, locator: &Self::Locator) -> Result<Vec<String>> {
        let _ = locator;
        Ok(Vec::new())
    }

    /// Give a pin a new id. Default: pin the state under the new id, then unpin
    /// the old one (right wherever pins are tags).
    fn rename_pin(
        &self,
        locator: &Self::Locator,
        old: &PinRef,
        state: &Value,
        new_id: &str,
    ) -> Result<PinRef> {
        let new = self.pin(locator, state, new_id)?;
        self.unpin(locator, old)?;
        Ok(new)
    }

    /// Rename a working branch. Default: fork `new` from `old`'s head, then
    /// delete `old`.
    fn rename_working_ref(&self, locator: &Self::Locator, old: &str, new: &str) -> Result<String> {
        let head = self.fingerprint(locator, Some(old))?;
        let renamed = self.fork(
            locator,
            &Target::Recorded(head),
            new,
            &Expected::Unconditional,
        )?;
        self.delete_working_ref(locator, old)?;
        Ok(renamed)
    }

    /// Fast-forward the base to `source`; the base's new state.
    fn promote(
        &self,
        locator: &Self::Locator,
        source: &Target,
        expected: &Expected,
    ) -> Result<Value> {
        let _ = (locator, source, expected);
        Err(self.unsupported("promote"))
    }

    /// Three-way merge `source` into the base; the base's new state.
    fn merge(
        &self,
        locator: &Self::Locator,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value> {
        let _ = (locator, source, message, expected);
        Err(self.unsupported("merge"))
    }

    /// Whether `ancestor` is in `descendant`'s history. Default: unknown.
    fn ancestor_of(
        &self,
        locator: &Self::Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let _ = (locator, ancestor, descendant);
        Ok(None)
    }

    /// A handle on the base, a working ref, a pin or a recorded state.
    fn open(&self, locator: &Self::Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let _ = (locator, target, read_only);
        Err(self.unsupported("open"))
    }

    /// Native history from `from_ref` (the base when none), newest first.
    fn history(
        &self,
        locator: &Self::Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let _ = (locator, from_ref, limit);
        Err(self.unsupported("history"))
    }

    /// The native diff of two states, from metadata only.
    fn diff(
        &self,
        locator: &Self::Locator,
        a: &Value,
        b: &Value,
        listing_a: Option<&str>,
        listing_b: Option<&str>,
    ) -> Result<crate::ObjectDiff> {
        let _ = (locator, a, b, listing_a, listing_b);
        Err(self.unsupported("diff"))
    }

    /// A detailed description of `state` for `.tether/listings/`. Default: none.
    fn listing(&self, locator: &Self::Locator, state: &Value) -> Result<Option<String>> {
        let _ = (locator, state);
        Ok(None)
    }

    /// Make an empty store owned by `owner`; its initial state.
    fn create(&self, locator: &Self::Locator, owner: &str) -> Result<Value> {
        let _ = (locator, owner);
        Err(self.unsupported("create"))
    }

    /// The dataset id in the store's owner marker, or none.
    fn owner(&self, locator: &Self::Locator) -> Result<Option<String>> {
        let _ = locator;
        Err(self.unsupported("owner"))
    }

    /// Whether nothing remains but the base at its initial state, the marker
    /// and the refs in `ignoring`.
    fn is_ref_empty(&self, locator: &Self::Locator, ignoring: &[String]) -> Result<Option<bool>> {
        let _ = (locator, ignoring);
        Err(self.unsupported("is_ref_empty"))
    }

    /// Remove a store `owner` created, re-checking owner and emptiness.
    fn delete_store(&self, locator: &Self::Locator, owner: &str) -> Result<()> {
        let _ = (locator, owner);
        Err(self.unsupported("delete_store"))
    }

    /// Refuse when writers are active. Default: never.
    fn check_quiescence(&self, locator: &Self::Locator, working_ref: Option<&str>) -> Result<()> {
        let _ = (locator, working_ref);
        Ok(())
    }

    /// The resource that owns branches. Default: canonical identity.
    fn branch_scope(&self, locator: &Self::Locator) -> Result<String> {
        Ok(canonical_json(&self.identity(locator)?))
    }

    /// The resource whose pins `list_pins` returns. Default: canonical identity.
    fn ref_namespace(&self, locator: &Self::Locator) -> Result<String> {
        Ok(canonical_json(&self.identity(locator)?))
    }

    /// Whether `state` can be reopened. Default: yes.
    fn state_addressable(&self, locator: &Self::Locator, state: &Value) -> Result<bool> {
        let _ = (locator, state);
        Ok(true)
    }

    /// What `tether backends` shows about this plugin (`describe-meta`, since
    /// 0.1.5). `package` is what [`export!`](crate::export) took from the
    /// crate's Cargo metadata (name, version, authors, description,
    /// homepage or else repository, license); return it with
    /// [`Meta::tested_against`](crate::Meta::tested_against) set, or changed.
    /// Default: as Cargo says.
    fn meta(&self, package: crate::meta::Meta) -> crate::meta::Meta {
        package
    }

    /// The capability error for an unsupported `method` (used by defaults).
    fn unsupported(&self, method: &str) -> Error {
        Error::unsupported(method, &self.describe().kind)
    }
}
