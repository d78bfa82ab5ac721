//! The REST catalog (Iceberg's REST catalog API) over `wasi:http`.
//!
//! - `GET {uri}/v1/config[?warehouse=W]`: the catalog's `prefix`, if any;
//! - `GET {uri}/v1/{prefix}/namespaces/{ns}/tables/{table}` (`loadTable`):
//!   `metadata-location` and `metadata`;
//! - `POST` to the same path (`updateTable`): `identifier`, `requirements`
//!   and `updates`; 200 is the commit, 409 a failed requirement or a lost
//!   race inside the catalog. A 409 whose requirements still hold on a fresh
//!   read was the latter, and is tried again.
//!
//! The host grants exactly the origin of `catalog.uri` and adds the
//! `catalog.token` bearer itself: this code never sees a credential.

use serde_json::{Map, Value, json};
use tether_sdk::http;
use tether_sdk::{Error, Result};

use crate::catalog::{ATTEMPTS, Catalog, Loaded, Outcome};
use crate::metadata::{Metadata, Requirement, Update};

/// One table of a REST catalog.
pub struct RestCatalog {
    /// `{uri}/v1/{prefix}/namespaces/{ns}/tables/{table}`.
    table_url: String,
    namespace: Vec<String>,
    table: String,
}

/// Percent-encode one path segment (RFC 3986 unreserved characters pass).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A REST namespace in a path: its levels joined by the unit separator.
fn namespace_path(parts: &[String]) -> String {
    parts
        .iter()
        .map(|p| encode_segment(p))
        .collect::<Vec<_>>()
        .join("%1F")
}

/// The `error.message` of a REST error body, or the body itself.
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(500).collect())
}

fn json_body(body: &[u8], what: &str) -> Result<Value> {
    serde_json::from_slice(body)
        .map_err(|e| Error::backend(format!("the REST catalog's {what} is not JSON: {e}")))
}

impl RestCatalog {
    /// The table in the REST catalog `props` describe (`uri`, and
    /// `warehouse`/`prefix` when the catalog needs them).
    pub fn open(props: &Map<String, Value>, namespace: Vec<String>, table: String) -> Result<Self> {
        let base = props
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid("the REST catalog has no `uri`"))?
            .trim_end_matches('/')
            .to_owned();
        let mut config_url = format!("{base}/v1/config");
        if let Some(w) = props.get("warehouse").and_then(Value::as_str) {
            config_url.push_str(&format!("?warehouse={}", encode_segment(w)));
        }
        let response = http::get(&config_url)?;
        let prefix = match response.status {
            200 => {
                let config = json_body(&response.body, "config")?;
                config["overrides"]["prefix"]
                    .as_str()
                    .or(config["defaults"]["prefix"].as_str())
                    .or(props.get("prefix").and_then(Value::as_str))
                    .map(str::to_owned)
            }
            status => {
                return Err(Error::backend(format!(
                    "the REST catalog answered {status} to GET /v1/config: {}",
                    error_message(&response.body)
                )));
            }
        };
        let prefix = prefix
            .filter(|p| !p.is_empty())
            .map(|p| format!("{}/", p.trim_matches('/')))
            .unwrap_or_default();
        Ok(RestCatalog {
            table_url: format!(
                "{base}/v1/{prefix}namespaces/{}/tables/{}",
                namespace_path(&namespace),
                encode_segment(&table)
            ),
            namespace,
            table,
        })
    }

    fn name(&self) -> String {
        format!("{}.{}", self.namespace.join("."), self.table)
    }

    /// Whether `updates` show in `meta` (after a commit whose outcome the
    /// catalog did not say).
    fn landed(meta: &Metadata, updates: &[Update]) -> bool {
        updates.iter().all(|u| match u {
            Update::SetRef {
                ref_name,
                kind,
                snapshot_id,
            } => meta
                .ref_(ref_name)
                .is_some_and(|r| r.kind == *kind && r.snapshot_id == *snapshot_id),
            Update::RemoveRef { ref_name } => meta.ref_(ref_name).is_none(),
            Update::AddSnapshot { snapshot } => snapshot["snapshot-id"]
                .as_i64()
                .is_some_and(|id| meta.has_snapshot(id)),
        })
    }
}

impl Catalog for RestCatalog {
    fn load(&self) -> Result<Loaded> {
        let response = http::get(&self.table_url)?;
        match response.status {
            200 => {
                let body = json_body(&response.body, "loadTable answer")?;
                let location = body["metadata-location"].as_str().unwrap_or("").to_owned();
                let metadata = Metadata::from_value(body["metadata"].clone())?;
                Ok(Loaded { location, metadata })
            }
            404 => Err(Error::not_found(format!(
                "the REST catalog has no table {}: {}",
                self.name(),
                error_message(&response.body)
            ))),
            status => Err(Error::backend(format!(
                "the REST catalog answered {status} loading {}: {}",
                self.name(),
                error_message(&response.body)
            ))),
        }
    }

    fn commit(&self, requirements: &[Requirement], updates: &[Update]) -> Result<Outcome> {
        let body = json!({
            "identifier": { "namespace": self.namespace, "name": self.table },
            "requirements": requirements.iter().map(Requirement::to_json).collect::<Vec<_>>(),
            "updates": updates.iter().map(Update::to_json).collect::<Vec<_>>(),
        });
        for _ in 0..ATTEMPTS {
            let response = http::post_json(&self.table_url, &body)?;
            match response.status {
                200 => {
                    let answer = json_body(&response.body, "commit answer")?;
                    return Ok(Outcome::Committed(Metadata::from_value(
                        answer["metadata"].clone(),
                    )?));
                }
                409 => {
                    // A failed requirement, or the catalog's own race: which
                    // one a fresh read says.
                    let meta = self.load()?.metadata;
                    if requirements.iter().any(|r| meta.violation(r).is_some()) {
                        return Ok(Outcome::Rejected(error_message(&response.body)));
                    }
                }
                // CommitStateUnknown: the metadata says whether it landed.
                500 | 502 | 504 => {
                    let meta = self.load()?.metadata;
                    if Self::landed(&meta, updates) {
                        return Ok(Outcome::Committed(meta));
                    }
                    return Err(Error::backend(format!(
                        "the REST catalog answered {} to a commit on {} and the table does \
                         not show it: {}",
                        response.status,
                        self.name(),
                        error_message(&response.body)
                    )));
                }
                404 => {
                    return Err(Error::not_found(format!(
                        "the REST catalog has no table {}: {}",
                        self.name(),
                        error_message(&response.body)
                    )));
                }
                status => {
                    return Err(Error::backend(format!(
                        "the REST catalog refused a commit on {} ({status}): {}",
                        self.name(),
                        error_message(&response.body)
                    )));
                }
            }
        }
        Err(Error::backend(format!(
            "table {} kept changing; gave up committing after {ATTEMPTS} attempts",
            self.name()
        )))
    }
}
