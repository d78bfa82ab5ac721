//! Host-side values of the contract: what the engine passes to and gets from a
//! backend, with JSON fields as `serde_json::Value` and conversions to and from
//! the generated bindings (where JSON crosses as canonical text).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::bindings::types as wit;
use super::error::BackendError;
use crate::model::canonical;

/// The contract version this host implements. It serves plugins built against
/// any `0.1.x` (wasmtime links `0.1.x` names as one track), and refuses others.
pub const HOST_ABI: &str = tether_contract::ABI_VERSION;

/// The capability names, one enum shared with the SDK and conformance.
pub use tether_contract::Capability;

/// One origin a plugin may send HTTP requests to (`describe-net`, since
/// 0.1.3): see `wit/net.wit` for each field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpGrant {
    pub url_key: String,
    pub default_url: Option<String>,
    pub token_key: Option<String>,
    pub token_env_key: Option<String>,
    pub default_token_env: Option<String>,
}

impl From<super::bindings::describe_net_iface::HttpGrant> for HttpGrant {
    fn from(g: super::bindings::describe_net_iface::HttpGrant) -> Self {
        HttpGrant {
            url_key: g.url_key,
            default_url: g.default_url,
            token_key: g.token_key,
            token_env_key: g.token_env_key,
            default_token_env: g.default_token_env,
        }
    }
}

/// A native ref pinning a state (`tether.<pin_id>` or a later generation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinRef {
    pub id: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub created: bool,
}

impl From<&crate::model::Pin> for PinRef {
    /// A manifest's pin as the contract passes it.
    fn from(p: &crate::model::Pin) -> PinRef {
        PinRef {
            id: p.id.clone(),
            ref_name: p.r#ref.clone(),
            created: p.created,
        }
    }
}

impl PinRef {
    /// The manifest's pin as the contract passes it (`None`: unpinned).
    pub fn of(m: &crate::model::Manifest) -> Option<PinRef> {
        m.pin.as_ref().map(PinRef::from)
    }
}

/// What a fork, promote, merge or open starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Base,
    WorkingRef(String),
    Pinned(PinRef),
    Recorded(Value),
}

/// The head a caller reviewed before a ref move.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    Unconditional,
    Absent,
    At(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyStatus {
    Ok,
    Drifted,
    Missing,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub status: VerifyStatus,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeEntry {
    pub path: String,
    pub change: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectDiff {
    pub unit: String,
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub entries: Vec<ChangeEntry>,
    pub truncated: bool,
    pub note: String,
}

impl ObjectDiff {
    /// Whether the two states differ at all.
    pub fn is_empty(&self) -> bool {
        self.added == 0 && self.removed == 0 && self.modified == 0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub id: String,
    pub when: Option<String>,
    pub message: String,
    pub refs: Vec<String>,
}

/// A native address any client library can open, with typed fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handle {
    #[serde(rename = "type")]
    pub type_name: String,
    pub address: String,
    pub read_only: bool,
    pub fields: Value,
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    pub kind: String,
    pub maturity: String,
    pub capabilities: Vec<String>,
    pub volatile_keys: Vec<String>,
    pub local_path_keys: Vec<String>,
    pub local_path_prefixes: Vec<String>,
    pub storage_keys: Vec<String>,
    #[serde(default)]
    pub tree_keys: Vec<String>,
    pub promote_hint: String,
    pub abi: String,
}

impl Descriptor {
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// Whether the descriptor declares `capability`.
    pub fn declares(&self, capability: Capability) -> bool {
        self.has(capability.as_str())
    }

    /// The spec's tier name for a set of capabilities.
    pub fn tier_of(capabilities: &[String]) -> &'static str {
        let has = |c: Capability| capabilities.iter().any(|x| x == c.as_str());
        if has(Capability::Fork) {
            "Forkable"
        } else if has(Capability::Pin) {
            "Pinnable"
        } else if has(Capability::Addressable) {
            "Addressable"
        } else {
            "Observed"
        }
    }

    pub fn tier(&self) -> &'static str {
        Self::tier_of(&self.capabilities)
    }
}

impl From<wit::Descriptor> for Descriptor {
    fn from(d: wit::Descriptor) -> Self {
        Descriptor {
            kind: d.kind,
            maturity: d.maturity,
            capabilities: d.capabilities,
            volatile_keys: d.volatile_keys,
            local_path_keys: d.local_path_keys,
            local_path_prefixes: d.local_path_prefixes,
            storage_keys: d.storage_keys,
            tree_keys: d.tree_keys,
            promote_hint: d.promote_hint,
            abi: d.abi,
        }
    }
}

pub(crate) fn json_in(value: &Value) -> String {
    canonical::to_string(value)
}

/// The most JSON one reply may hold (a locator, a state, a handle's
/// fields): far beyond any real one, and it keeps a plugin from handing the
/// host a state of hundreds of megabytes to write into every manifest.
pub(crate) const MAX_JSON_REPLY: usize = 4 << 20;

pub(crate) fn json_out(text: &str, what: &str) -> Result<Value, BackendError> {
    if text.len() > MAX_JSON_REPLY {
        return Err(BackendError::Other(format!(
            "the plugin returned a {what} of {} bytes, more than the {} bytes the host accepts: {}",
            text.len(),
            MAX_JSON_REPLY,
            crate::model::display::quote(text)
        )));
    }
    canonical::parse(text, what).map_err(BackendError::Other)
}

impl From<&PinRef> for wit::PinRef {
    fn from(p: &PinRef) -> Self {
        wit::PinRef {
            id: p.id.clone(),
            ref_: p.ref_name.clone(),
            created: p.created,
        }
    }
}

impl From<wit::PinRef> for PinRef {
    fn from(p: wit::PinRef) -> Self {
        PinRef {
            id: p.id,
            ref_name: p.ref_,
            created: p.created,
        }
    }
}

impl From<&Target> for wit::Target {
    fn from(t: &Target) -> Self {
        match t {
            Target::Base => wit::Target::Base,
            Target::WorkingRef(r) => wit::Target::WorkingRef(r.clone()),
            Target::Pinned(p) => wit::Target::Pinned(p.into()),
            Target::Recorded(s) => wit::Target::Recorded(json_in(s)),
        }
    }
}

impl From<&Expected> for wit::Expected {
    fn from(e: &Expected) -> Self {
        match e {
            Expected::Unconditional => wit::Expected::Unconditional,
            Expected::Absent => wit::Expected::Absent,
            Expected::At(s) => wit::Expected::At(json_in(s)),
        }
    }
}

impl From<wit::VerifyReport> for VerifyReport {
    fn from(r: wit::VerifyReport) -> Self {
        let status = match r.status {
            wit::VerifyStatus::Ok => VerifyStatus::Ok,
            wit::VerifyStatus::Drifted => VerifyStatus::Drifted,
            wit::VerifyStatus::Missing => VerifyStatus::Missing,
            wit::VerifyStatus::Unknown => VerifyStatus::Unknown,
        };
        VerifyReport {
            status,
            message: r.message,
        }
    }
}

impl From<wit::ObjectDiff> for ObjectDiff {
    fn from(d: wit::ObjectDiff) -> Self {
        ObjectDiff {
            unit: d.unit,
            added: d.added,
            removed: d.removed,
            modified: d.modified,
            entries: d
                .entries
                .into_iter()
                .map(|e| ChangeEntry {
                    path: e.path,
                    change: e.change,
                    detail: e.detail,
                })
                .collect(),
            truncated: d.truncated,
            note: d.note,
        }
    }
}

impl From<wit::HistoryEntry> for HistoryEntry {
    fn from(h: wit::HistoryEntry) -> Self {
        HistoryEntry {
            id: h.id,
            when: h.when,
            message: h.message,
            refs: h.refs,
        }
    }
}

impl TryFrom<wit::Handle> for Handle {
    type Error = BackendError;
    fn try_from(h: wit::Handle) -> Result<Self, BackendError> {
        Ok(Handle {
            type_name: h.type_name,
            address: h.address,
            read_only: h.read_only,
            fields: json_out(&h.fields, "handle fields")?,
        })
    }
}
