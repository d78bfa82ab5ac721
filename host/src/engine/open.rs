//! `tether open KEY [-r REV] [--read-only | --writable]`: a native handle
//! (an address any client library can open, with typed fields).
//!
//! - Without a revision (`-r`, or `TETHER_REV` through the CLI), a Forkable
//!   object opens writable at this checkout's working ref (`workspace.toml`),
//!   or at its base branch when it has none (on the trunk the upstream branch
//!   *is* the working ref). Everything else opens read-only at its base. A
//!   checkout on no bookmark is read-only. The first writable open of an
//!   object whose fork `new` deferred creates that branch
//!   ([`super::fork::materialize_fork`]); a read-only one reads at the pin.
//!   A stale working copy gets no writable handle.
//! - With a revision, the handle is read-only at what that commit recorded:
//!   its pin (`Target::Pinned`), or its recorded state (`Target::Recorded`)
//!   where the backend is ADDRESSABLE. An Observed object's state is a
//!   digest, not an address, and cannot be opened at a revision.
//! - A pin is never taken on trust: it is verified against the recorded
//!   state first. A pin someone deleted falls back to the recorded state
//!   where the backend can address it (the CLI says so; `tether repair`
//!   recreates the ref); a pin someone moved is refused with
//!   [`TetherError::PinDrift`].
//! - `--writable` is refused with a revision (a commit's state is read-only),
//!   for objects that are not Forkable, and on a read-only checkout.
//!   Connection URLs are printed with their password redacted unless the
//!   caller asks for it (never in `--json`).

use serde::Serialize;
use serde_json::Value;

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::plugin::{PinRef, Target, VerifyStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Writable where the object allows it (Forkable, no revision).
    #[default]
    Default,
    ReadOnly,
    Writable,
}

#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub key: String,
    pub rev: Option<String>,
    pub access: Access,
    /// Keep a connection URL's password in `address`.
    pub with_password: bool,
}

/// The `--json` shape: the spec's `{"key", "read_only", "address", "type"}`,
/// and `fields`, the backend's typed fields (an addition: readers of the
/// four keys are unaffected).
#[derive(Debug, Clone, Serialize)]
pub struct Opened {
    pub key: String,
    pub read_only: bool,
    pub address: String,
    #[serde(rename = "type")]
    pub type_name: String,
    /// The backend's typed fields (DuckLake's `attach_sql`, Neon's URL
    /// parts), every connection URL in them redacted like `address`.
    pub fields: Value,
    /// What the CLI should warn about (a deleted pin fell back to its state).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

pub async fn open(repo: &Repo, opts: &OpenOptions) -> Result<Opened> {
    let rev = opts.rev.as_deref().filter(|r| !r.trim().is_empty());
    let (target, read_only, warnings, client) = match rev {
        Some(rev) => at_revision(repo, &opts.key, rev, opts.access).await?,
        None => at_working_ref(repo, &opts.key, opts.access).await?,
    };
    let handle = client
        .open(&target, read_only)
        .await
        .map_err(|e| TetherError::backend(&opts.key, e))?;
    let (address, fields) = if opts.with_password {
        (handle.address, handle.fields)
    } else {
        (
            redact_password(&handle.address),
            redact_fields(handle.fields),
        )
    };
    Ok(Opened {
        key: opts.key.clone(),
        read_only: handle.read_only,
        address,
        type_name: handle.type_name,
        fields,
        warnings,
    })
}

type Resolved = (Target, bool, Vec<String>, crate::plugin::ObjectClient);

async fn at_working_ref(repo: &Repo, key: &str, access: Access) -> Result<Resolved> {
    let m = repo.manifest(key)?;
    let plugin = repo.plugin(&m.kind).await?;
    let caps = Repo::capabilities(plugin.descriptor(), &m);
    let forkable = caps.iter().any(|c| c == "FORK");
    let ws = repo.workspace()?;
    let writable = match access {
        Access::ReadOnly => false,
        Access::Default => forkable && !ws.is_read_only(),
        Access::Writable if !forkable => {
            return Err(TetherError::refused(format!(
                "{key} is not Forkable ({} tier): it opens read-only, since a write would change \
                 the data in place with no branch to land or discard",
                crate::plugin::Descriptor::tier_of(&caps)
            )));
        }
        Access::Writable if ws.is_read_only() => {
            return Err(
                TetherError::refused("this working copy is on no bookmark (read-only)")
                    .hint("`tether new NAME` to work on one"),
            );
        }
        Access::Writable => true,
    };
    if writable {
        // No writable handle from a stale working copy (read-only ones keep working).
        super::fork::refuse_if_stale(&ws, &repo.manifests()?)?;
    }
    let target = match Repo::working_ref(&ws, key) {
        Some(r) => Target::WorkingRef(r),
        // The first writable open makes the branch `new` deferred.
        None if writable && ws.pending_forks.contains_key(key) => {
            match super::fork::materialize_fork(repo, key).await? {
                Some(r) => Target::WorkingRef(r),
                None => Target::Base,
            }
        }
        // Not forked yet on this bookmark: it reads at its pin.
        None if ws.pending_forks.contains_key(key) => match super::fork::fork_source(&m) {
            Some((source, _)) => source,
            None => Target::Base,
        },
        None => Target::Base,
    };
    let client = repo.client_for(&plugin, &Value::Object(m.locator.clone()));
    Ok((target, !writable, Vec::new(), client))
}

async fn at_revision(repo: &Repo, key: &str, rev: &str, access: Access) -> Result<Resolved> {
    if access == Access::Writable {
        return Err(
            TetherError::refused("a revision's state is read-only").hint(format!(
                "`tether open {key} --writable` without -r (and with \
             TETHER_REV unset) opens the working ref"
            )),
        );
    }
    let commit = repo.vcs.resolve(rev)?;
    let manifests = repo.manifests_at(&commit)?;
    let m = manifests.get(key).ok_or_else(|| {
        TetherError::refused(format!("no object {key:?} at {rev} ({})", commit.short12()))
            .hint(format!("`tether diff {rev}` shows what it had"))
    })?;
    let Some(state) = &m.state else {
        return Err(TetherError::refused(format!(
            "{key} was not committed yet at {rev} ({}): it has no recorded state to open",
            commit.short12()
        )));
    };
    let state = Value::Object(state.clone());
    let plugin = repo.plugin(&m.kind).await?;
    // A backend may make single objects Addressable under their policy (a
    // `file = "versioned"` object): a state recorded recoverable without a
    // pin was recorded as an address.
    let addressable = plugin.descriptor().has("ADDRESSABLE") || (m.recoverable && m.pin.is_none());
    let client = repo.client_for(&plugin, &Value::Object(m.locator.clone()));
    let Some(pin) = PinRef::of(m) else {
        if m.recoverable && addressable {
            return Ok((Target::Recorded(state), true, Vec::new(), client));
        }
        return Err(TetherError::refused(format!(
            "{key} cannot be opened at a revision: it is Observed, and its state at {rev} is a \
             digest, not an address (it was recorded as not recoverable)"
        )));
    };
    let report = client
        .verify(&state, Some(&pin), false)
        .await
        .map_err(|e| TetherError::backend(key, e))?;
    match report.status {
        VerifyStatus::Ok => Ok((Target::Pinned(pin), true, Vec::new(), client)),
        VerifyStatus::Drifted => Err(TetherError::PinDrift {
            key: key.to_string(),
            rev: rev.to_string(),
            pin_ref: pin.ref_name,
            detail: report.message,
        }),
        VerifyStatus::Missing if addressable => {
            let warning = format!(
                "{key}: pin {} is gone ({}); opened the recorded state instead. `tether repair \
                 {key}` recreates the ref",
                pin.ref_name, report.message
            );
            Ok((Target::Recorded(state), true, vec![warning], client))
        }
        VerifyStatus::Missing => Err(TetherError::refused(format!(
            "{key}: pin {} is gone ({}), and the {} backend cannot address a recorded state \
             without it",
            pin.ref_name, report.message, m.kind
        ))
        .hint(format!(
            "`tether repair {key}` recreates the ref while the store still has the state"
        ))),
        VerifyStatus::Unknown => {
            // The cheap check could not tell; ask the store to open it.
            let deep = client
                .verify(&state, Some(&pin), true)
                .await
                .map_err(|e| TetherError::backend(key, e))?;
            match deep.status {
                VerifyStatus::Ok => Ok((Target::Pinned(pin), true, Vec::new(), client)),
                _ => Err(TetherError::refused(format!(
                    "{key}: pin {} could not be confirmed to hold the recorded state ({})",
                    pin.ref_name, deep.message
                ))
                .hint(format!("`tether verify -r {rev} --deep` says more"))),
            }
        }
    }
}

/// `fields` with [`redact_password`] applied to every string in them: a
/// backend may put its connection URL in a field as well as in `address`.
fn redact_fields(fields: Value) -> Value {
    match fields {
        Value::String(s) => Value::String(redact_password(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(redact_fields).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, redact_fields(v))).collect())
        }
        other => other,
    }
}

/// `scheme://user:password@host/...` → `scheme://user:***@host/...`; any
/// other address is returned as it is.
pub fn redact_password(address: &str) -> String {
    let Some((scheme, rest)) = address.split_once("://") else {
        return address.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return address.to_string();
    };
    let Some((user, _password)) = userinfo.split_once(':') else {
        return address.to_string();
    };
    format!("{scheme}://{user}:***@{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::redact_password;

    #[test]
    fn fields_are_redacted_wherever_they_hold_a_url() {
        let fields = serde_json::json!({
            "url": "postgresql://r:pw@h/db",
            "parts": [{"uri": "mysql://u:pw@h:3306/db"}],
            "n": 3,
        });
        let text = super::redact_fields(fields).to_string();
        assert!(!text.contains("pw@"), "{text}");
        assert!(text.contains("postgresql://r:***@h/db") && text.contains("\"n\":3"));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_password("postgresql://runner:s3cret@ep-x.neon.tech/db?sslmode=require"),
            "postgresql://runner:***@ep-x.neon.tech/db?sslmode=require"
        );
        assert_eq!(
            redact_password("/data/store#tether.a.b"),
            "/data/store#tether.a.b"
        );
        assert_eq!(
            redact_password("mysql://user@host:3306/db/main"),
            "mysql://user@host:3306/db/main"
        );
    }
}
